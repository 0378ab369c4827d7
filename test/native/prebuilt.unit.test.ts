// Which addon the package loads (src/native/prebuilt.ts): its source build, else a prebuilt
// package for this platform that matches (platform, N-API, versions, CPU, size, sha256), else
// none. A package root is laid out in a temporary directory, with fake addon files: nothing here
// is loaded, only chosen.
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { chooseAddon, prebuiltRefusal, type AddonHost, type PrebuiltManifest } from '../../src/native/prebuilt.js';

const COMMIT = 'de3ff815ea7d559ee917f063901b8986f038abc6';
const HOST: AddonHost = {
  platform: 'linux', arch: 'x64', napiVersion: 9, packageVersion: '1.2.3', llamaCommit: COMMIT, cpuFeatures: () => 'this-cpu',
};
const ADDON_BYTES = Buffer.from('\x7fELF stand-in for llama_addon.node');

const dir = mkdtempSync(join(tmpdir(), 'prebuilt-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

/** A package root named `name` with a package.json, optionally a source build and prebuilt packages. */
function packageRoot(name: string, options: { build?: boolean; prebuilt?: Record<string, Partial<PrebuiltManifest> & { bytes?: Buffer }> }): string {
  const root = join(dir, name);
  mkdirSync(root, { recursive: true });
  writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'llama-auth-suite', version: HOST.packageVersion }));
  if (options.build) {
    mkdirSync(join(root, 'build', 'Release'), { recursive: true });
    writeFileSync(join(root, 'build', 'Release', 'llama_addon.node'), ADDON_BYTES);
  }
  for (const [short, { bytes = ADDON_BYTES, ...fields }] of Object.entries(options.prebuilt ?? {})) {
    const pkg = join(root, 'node_modules', '@llama-auth-suite', short);
    mkdirSync(pkg, { recursive: true });
    writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: `@llama-auth-suite/${short}`, version: HOST.packageVersion }));
    writeFileSync(join(pkg, 'llama_addon.node'), bytes);
    const manifest: PrebuiltManifest = {
      packageVersion: HOST.packageVersion, llamaCommit: COMMIT, platform: 'linux', arch: 'x64', backend: 'CPU', napiVersion: 8,
      size: ADDON_BYTES.length, sha256: createHash('sha256').update(ADDON_BYTES).digest('hex'), cpuFeatures: null, ...fields,
    };
    writeFileSync(join(pkg, 'addon.json'), JSON.stringify(manifest));
  }
  return root;
}

const prebuiltFile = (root: string, short: string): string => join(root, 'node_modules', '@llama-auth-suite', short, 'llama_addon.node');

t.test('a matching prebuilt package and no source build: the prebuilt is chosen', async (t) => {
  const root = packageRoot('matching', { prebuilt: { 'linux-x64': {} } });
  t.same(chooseAddon(root, HOST, { verifyContents: true }), {
    candidates: [{ path: prebuiltFile(root, 'linux-x64'), origin: '@llama-auth-suite/linux-x64' }],
    refused: [],
  });
});

t.test('a prebuilt compiled for this CPU alone (GGML_NATIVE) is chosen on this CPU', async (t) => {
  const root = packageRoot('native-here', { prebuilt: { 'linux-x64': { cpuFeatures: 'this-cpu' } } });
  t.same(chooseAddon(root, HOST, { verifyContents: true }).candidates.map((c) => c.origin), ['@llama-auth-suite/linux-x64']);
});

t.test('no prebuilt package: the source build alone, or nothing at all', async (t) => {
  const built = packageRoot('source-only', { build: true });
  t.same(chooseAddon(built, HOST, { verifyContents: true }), {
    candidates: [{ path: join(built, 'build', 'Release', 'llama_addon.node'), origin: 'build' }],
    refused: [],
  });
  t.same(chooseAddon(packageRoot('nothing', {}), HOST, { verifyContents: true }), { candidates: [], refused: [] });
});

t.test('a source build comes before a matching prebuilt (it was made because one was refused or a build asked for)', async (t) => {
  const root = packageRoot('both', { build: true, prebuilt: { 'linux-x64': {} } });
  t.same(chooseAddon(root, HOST, { verifyContents: true }).candidates.map((c) => c.origin), ['build', '@llama-auth-suite/linux-x64']);
});

t.test('a CUDA prebuilt is tried before the CPU one', async (t) => {
  const root = packageRoot('cuda-and-cpu', { prebuilt: { 'linux-x64': {}, 'linux-x64-cuda': { backend: 'CUDA' } } });
  t.same(chooseAddon(root, HOST, { verifyContents: true }).candidates.map((c) => c.origin), ['@llama-auth-suite/linux-x64-cuda', '@llama-auth-suite/linux-x64']);
});

t.test('a prebuilt for an N-API this Node lacks is refused, and the source build used', async (t) => {
  const root = packageRoot('abi', { build: true, prebuilt: { 'linux-x64': { napiVersion: 10 } } });
  t.same(chooseAddon(root, HOST, { verifyContents: true }), {
    candidates: [{ path: join(root, 'build', 'Release', 'llama_addon.node'), origin: 'build' }],
    refused: [{ name: '@llama-auth-suite/linux-x64', reason: `it needs N-API 10, and this Node (${process.version}) offers 9` }],
  });
});

t.test('a prebuilt for another platform or architecture is refused', async (t) => {
  const platform = packageRoot('platform', { prebuilt: { 'linux-x64': { platform: 'darwin' } } });
  t.same(chooseAddon(platform, HOST, { verifyContents: true }), {
    candidates: [], refused: [{ name: '@llama-auth-suite/linux-x64', reason: 'it is built for darwin-x64, and this is linux-x64' }],
  });
  const arch = packageRoot('arch', { prebuilt: { 'linux-x64': { arch: 'arm64' } } });
  t.same(chooseAddon(arch, HOST, { verifyContents: true }).refused, [{ name: '@llama-auth-suite/linux-x64', reason: 'it is built for linux-arm64, and this is linux-x64' }]);
});

t.test('a prebuilt of another package version or llama.cpp commit is refused', async (t) => {
  const version = packageRoot('version', { prebuilt: { 'linux-x64': { packageVersion: '1.2.2' } } });
  t.same(chooseAddon(version, HOST, { verifyContents: true }).refused, [{
    name: '@llama-auth-suite/linux-x64', reason: 'it is built from llama-auth-suite 1.2.2 with llama.cpp de3ff815ea, and this is 1.2.3 with de3ff815ea',
  }]);
  const commit = packageRoot('commit', { prebuilt: { 'linux-x64': { llamaCommit: '0123456789abcdef' } } });
  t.same(chooseAddon(commit, HOST, { verifyContents: true }).refused, [{
    name: '@llama-auth-suite/linux-x64', reason: 'it is built from llama-auth-suite 1.2.3 with llama.cpp 0123456789, and this is 1.2.3 with de3ff815ea',
  }]);
});

t.test('a prebuilt compiled for another CPU (GGML_NATIVE) is refused', async (t) => {
  const root = packageRoot('other-cpu', { prebuilt: { 'linux-x64': { cpuFeatures: 'another-cpu' } } });
  t.same(chooseAddon(root, HOST, { verifyContents: true }).refused, [{
    name: '@llama-auth-suite/linux-x64',
    reason: 'it is compiled for the CPU of the machine that built it (GGML_NATIVE), whose features this CPU does not have the same',
  }]);
});

t.test('a corrupt prebuilt is refused: a truncated file always, changed bytes when the contents are verified', async (t) => {
  const truncated = packageRoot('truncated', { prebuilt: { 'linux-x64': { bytes: ADDON_BYTES.subarray(0, 10) } } });
  t.same(chooseAddon(truncated, HOST, { verifyContents: false }).refused, [{
    name: '@llama-auth-suite/linux-x64', reason: `its llama_addon.node is 10 bytes where addon.json says ${ADDON_BYTES.length} (corrupt or truncated)`,
  }]);
  const changed = Buffer.from(ADDON_BYTES);
  changed[5] ^= 0xff;
  const flipped = packageRoot('flipped', { prebuilt: { 'linux-x64': { bytes: changed } } });
  const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex').slice(0, 16);
  t.same(chooseAddon(flipped, HOST, { verifyContents: true }).refused, [{
    name: '@llama-auth-suite/linux-x64', reason: `its llama_addon.node has sha256 ${sha(changed)}... where addon.json says ${sha(ADDON_BYTES)}... (corrupt)`,
  }]);
  t.same(chooseAddon(flipped, HOST, { verifyContents: false }).candidates.map((c) => c.origin), ['@llama-auth-suite/linux-x64'],
    'without verifying the contents (every start), a file of the right size passes; the install verified it');
});

t.test('a prebuilt package without a readable addon.json is refused', async (t) => {
  const root = packageRoot('no-manifest', { prebuilt: { 'linux-x64': {} } });
  const pkg = join(root, 'node_modules', '@llama-auth-suite', 'linux-x64');
  writeFileSync(join(pkg, 'addon.json'), '{ not json');
  t.match(prebuiltRefusal(pkg, HOST, true), /^its addon\.json cannot be read \(/);
});
