#!/usr/bin/env node
// `npm run prebuilt [-- --out DIR]`: packs this checkout's built addon (build/Release, after
// `npm ci` or `npm run build:addon`) as the prebuilt package for this platform and backend,
// `@llama-auth-suite/<platform>-<arch>[-cuda]`: llama_addon.node and addon.json (what it was
// built from and for; src/native/prebuilt.ts reads it). Writes DIR/<name>/ and its npm tarball
// in DIR (default build/prebuilt) and prints the tarball's path as its last line.
//
// The build's own switches are recorded: GGML_CUDA or GGML_METAL in build/CMakeCache.txt give
// the backend, and GGML_NATIVE (llama.cpp's default) a digest of this CPU's features, since such
// an addon may use instructions other CPUs lack: it is then refused on a CPU that differs.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const outIndex = process.argv.indexOf('--out');
const outDir = resolve(outIndex > 0 ? process.argv[outIndex + 1] : join(root, 'build', 'prebuilt'));

function fail(message) {
  console.error(`[prebuilt] ${message}`);
  process.exit(1);
}

const compiled = join(root, 'dist', 'native', 'prebuilt.js');
if (!existsSync(compiled)) fail('dist/native/prebuilt.js is missing: run `npm run build` first');
const { ADDON_FILE, MANIFEST_FILE, PREBUILT_SCOPE, cpuFeatureDigest, currentHost, sourceBuildPath } = await import(pathToFileURL(compiled).href);

const addon = sourceBuildPath(root);
if (!existsSync(addon)) fail(`${addon} is missing: build the addon first (npm ci, or npm run build:addon)`);
const cache = readFileSync(join(root, 'build', 'CMakeCache.txt'), 'utf8');
const cacheFlag = (name) => new RegExp(`^${name}:BOOL=(ON|TRUE|1)$`, 'mi').test(cache);
const backend = cacheFlag('GGML_CUDA') ? 'CUDA' : cacheFlag('GGML_METAL') ? 'Metal' : 'CPU';

const host = currentHost(root);
const { binary } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
const bytes = readFileSync(addon);
const manifest = {
  packageVersion: host.packageVersion,
  llamaCommit: host.llamaCommit,
  platform: host.platform,
  arch: host.arch,
  backend,
  napiVersion: Math.max(...binary.napi_versions),
  size: bytes.length,
  sha256: createHash('sha256').update(bytes).digest('hex'),
  cpuFeatures: cacheFlag('GGML_NATIVE') ? cpuFeatureDigest() : null,
};

const shortName = `${host.platform}-${host.arch}${backend === 'CUDA' ? '-cuda' : ''}`;
const name = `${PREBUILT_SCOPE}/${shortName}`;
const dir = join(outDir, shortName);
rmSync(dir, { recursive: true, force: true });
mkdirSync(dir, { recursive: true });
copyFileSync(addon, join(dir, ADDON_FILE));
writeFileSync(join(dir, MANIFEST_FILE), `${JSON.stringify(manifest, null, 2)}\n`);
writeFileSync(join(dir, 'package.json'), `${JSON.stringify({
  name,
  version: host.packageVersion,
  description: `llama-auth-suite's native addon (llama.cpp ${host.llamaCommit.slice(0, 10)}), built for ${shortName} (${backend})`,
  license: 'MIT',
  os: [host.platform],
  cpu: [host.arch],
  files: [ADDON_FILE, MANIFEST_FILE],
}, null, 2)}\n`);
writeFileSync(join(dir, 'README.md'), `# ${name}\n\nThe native addon of llama-auth-suite ${host.packageVersion}, prebuilt for ${shortName} ` +
  `(${backend}${manifest.cpuFeatures ? ', compiled for the CPU of the machine that built it' : ''}). ` +
  'Installed beside llama-auth-suite, it spares the install its source build; see addon.json for what it was built from.\n');
const tarball = execFileSync('npm', ['pack', '--silent', '--pack-destination', outDir], { cwd: dir, encoding: 'utf8' }).trim().split('\n').pop();
console.log(`[prebuilt] ${name}@${host.packageVersion}: ${backend}, ${(bytes.length / 1e6).toFixed(1)} MB${manifest.cpuFeatures ? ', this CPU only (GGML_NATIVE)' : ''}`);
console.log(join(outDir, tarball));
