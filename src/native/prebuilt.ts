// Where the native addon comes from: this package's own source build (build/Release), or a
// prebuilt package for this platform (`@llama-auth-suite/<platform>-<arch>[-cuda]`, holding
// llama_addon.node and addon.json), the way esbuild and node-llama-cpp ship theirs. Choices over
// files only, loading nothing: binding.ts asks on every start (cheap checks), and
// scripts/install.mjs asks whether it must compile (the file's sha256 checked too).
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

export const PREBUILT_SCOPE = '@llama-auth-suite';
export const ADDON_FILE = 'llama_addon.node';
export const MANIFEST_FILE = 'addon.json';

/** addon.json of a prebuilt package: what its llama_addon.node was built from, and for. */
export interface PrebuiltManifest {
  /** The llama-auth-suite version whose native/ it was built from; only that version loads it. */
  packageVersion: string;
  /** The llama.cpp commit it was built from (vendor/llama.cpp.pin.json). */
  llamaCommit: string;
  /** process.platform and process.arch of the machines it runs on. */
  platform: string;
  arch: string;
  backend: 'CPU' | 'CUDA' | 'Metal';
  /** The N-API version it was compiled against (NAPI_VERSION); Node must offer at least that. */
  napiVersion: number;
  /** Size in bytes and sha256 (hex) of llama_addon.node. */
  size: number;
  sha256: string;
  /**
   * Digest of the building CPU's feature flags (cpuFeatureDigest) when it was compiled for that
   * CPU alone (GGML_NATIVE); it may then use instructions another CPU lacks. null: portable.
   */
  cpuFeatures: string | null;
}

/** What a prebuilt must match here. */
export interface AddonHost {
  platform: string;
  arch: string;
  /** process.versions.napi */
  napiVersion: number;
  /** This package's version and pinned llama.cpp commit. */
  packageVersion: string;
  llamaCommit: string;
  /** This CPU's cpuFeatureDigest(); called only for a prebuilt compiled for one CPU. */
  cpuFeatures: () => string | null;
}

export interface AddonCandidate {
  path: string;
  /** 'build': the source build; otherwise the prebuilt package's name. */
  origin: string;
}

export interface AddonChoice {
  /** Addons to try, in order: the source build when there is one, then accepted prebuilts. */
  candidates: AddonCandidate[];
  /** Prebuilt packages present here but refused, each with why. */
  refused: { name: string; reason: string }[];
}

/** The source build's file (scripts/build-addon.mjs), relative to the package root. */
export function sourceBuildPath(root: string): string {
  return join(root, 'build', 'Release', ADDON_FILE);
}

/** Names of the prebuilt packages for a platform, in the order they are tried (a GPU build first). */
export function prebuiltPackageNames(platform: string, arch: string): string[] {
  return [`${PREBUILT_SCOPE}/${platform}-${arch}-cuda`, `${PREBUILT_SCOPE}/${platform}-${arch}`];
}

/** sha256 of this CPU's feature flags (Linux's /proc/cpuinfo), or null where they cannot be read. */
export function cpuFeatureDigest(): string | null {
  let cpuinfo: string;
  try {
    cpuinfo = readFileSync('/proc/cpuinfo', 'utf8');
  } catch {
    return null;
  }
  const flags = /^(?:flags|Features)\s*:(.*)$/m.exec(cpuinfo)?.[1];
  return flags === undefined ? null : createHash('sha256').update(flags.trim().split(/\s+/).sort().join(' ')).digest('hex');
}

/** This process, for a package rooted at `root` (its package.json and vendor/llama.cpp.pin.json). */
export function currentHost(root: string): AddonHost {
  const readJson = (file: string): Record<string, unknown> => JSON.parse(readFileSync(join(root, file), 'utf8'));
  let digest: string | null | undefined;
  return {
    platform: process.platform,
    arch: process.arch,
    napiVersion: Number(process.versions.napi),
    packageVersion: String(readJson('package.json').version),
    llamaCommit: String(readJson(join('vendor', 'llama.cpp.pin.json')).commit),
    cpuFeatures: () => (digest === undefined ? (digest = cpuFeatureDigest()) : digest),
  };
}

/**
 * Why the prebuilt package in `dir` cannot serve this host, or null when it can. The file's
 * size is always checked; its sha256 only with `verifyContents` (it costs a read of the whole
 * file, 225 MB for a CUDA build).
 */
export function prebuiltRefusal(dir: string, host: AddonHost, verifyContents: boolean): string | null {
  let manifest: PrebuiltManifest;
  try {
    manifest = JSON.parse(readFileSync(join(dir, MANIFEST_FILE), 'utf8')) as PrebuiltManifest;
  } catch (err) {
    return `its ${MANIFEST_FILE} cannot be read (${(err as Error).message})`;
  }
  if (manifest.platform !== host.platform || manifest.arch !== host.arch) {
    return `it is built for ${manifest.platform}-${manifest.arch}, and this is ${host.platform}-${host.arch}`;
  }
  if (!(manifest.napiVersion <= host.napiVersion)) {
    return `it needs N-API ${manifest.napiVersion}, and this Node (${process.version}) offers ${host.napiVersion}`;
  }
  if (manifest.packageVersion !== host.packageVersion || manifest.llamaCommit !== host.llamaCommit) {
    return `it is built from llama-auth-suite ${manifest.packageVersion} with llama.cpp ${String(manifest.llamaCommit).slice(0, 10)}, ` +
      `and this is ${host.packageVersion} with ${host.llamaCommit.slice(0, 10)}`;
  }
  if (manifest.cpuFeatures !== null && manifest.cpuFeatures !== host.cpuFeatures()) {
    return 'it is compiled for the CPU of the machine that built it (GGML_NATIVE), whose features this CPU does not have the same';
  }
  const file = join(dir, ADDON_FILE);
  if (!existsSync(file)) return `its ${ADDON_FILE} is missing`;
  const size = statSync(file).size;
  if (size !== manifest.size) return `its ${ADDON_FILE} is ${size} bytes where ${MANIFEST_FILE} says ${manifest.size} (corrupt or truncated)`;
  if (verifyContents) {
    const sha256 = createHash('sha256').update(readFileSync(file)).digest('hex');
    if (sha256 !== manifest.sha256) return `its ${ADDON_FILE} has sha256 ${sha256.slice(0, 16)}... where ${MANIFEST_FILE} says ${String(manifest.sha256).slice(0, 16)}... (corrupt)`;
  }
  return null;
}

/**
 * The addons this package may load, in order. The source build comes first when it exists: it
 * is only there because a prebuilt was missing or refused at install, or a build was asked for.
 * Prebuilt packages are found as Node resolves packages from the package root (its own
 * node_modules, or beside it).
 */
export function chooseAddon(root: string, host: AddonHost, options: { verifyContents: boolean }): AddonChoice {
  const choice: AddonChoice = { candidates: [], refused: [] };
  const built = sourceBuildPath(root);
  if (existsSync(built)) choice.candidates.push({ path: built, origin: 'build' });
  const resolve = createRequire(join(root, 'package.json')).resolve;
  for (const name of prebuiltPackageNames(host.platform, host.arch)) {
    let dir: string;
    try {
      dir = dirname(resolve(`${name}/package.json`));
    } catch {
      continue; // not installed
    }
    const reason = prebuiltRefusal(dir, host, options.verifyContents);
    if (reason === null) choice.candidates.push({ path: join(dir, ADDON_FILE), origin: name });
    else choice.refused.push({ name, reason });
  }
  return choice;
}
