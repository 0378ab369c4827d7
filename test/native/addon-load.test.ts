// Loading the addon on a machine that lacks a library it was linked with (a CUDA build where
// the CUDA runtime is not installed): a clear error naming the library and what to do, not the
// dynamic loader's bare message. The stand-in addon is a shared object linked against a
// libcudart that is removed before it is loaded.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadAddon } from '../../src/native/binding.js';

const dir = mkdtempSync(join(tmpdir(), 'addon-load-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

function sharedObject(name: string, soname: string, links: string[] = []): string {
  const source = join(dir, `${name}.c`);
  writeFileSync(source, `int ${name.replace(/\W/g, '_')}_marker(void) { return 1; }\n`);
  const out = join(dir, soname);
  execFileSync('cc', ['-shared', '-fPIC', '-o', out, source, `-Wl,-soname,${soname}`, '-Wl,--no-as-needed', ...links]);
  return out;
}

t.test('a missing CUDA runtime library: the error names it and says how to get a CPU build', async (t) => {
  const runtime = sharedObject('cudart', 'libcudart.so.99');
  const addon = sharedObject('addon', 'fake_addon.node', [runtime]);
  rmSync(runtime);
  let error: Error | undefined;
  try {
    loadAddon(addon);
  } catch (err) {
    error = err as Error;
  }
  t.ok(error, 'loading fails');
  t.equal(error!.message, `cannot load the native addon ${addon}: it needs libcudart.so.99, which this machine does not have. The addon was built for NVIDIA GPUs (GGML_CUDA=ON): install the CUDA runtime it was built with (libcudart, libcublas), or rebuild it for the CPU with \`npm run build:addon\`.`);
  t.match((error!.cause as Error).message, /libcudart\.so\.99: cannot open shared object file/, 'the loader\'s own message is kept as the cause');
});

t.test('another missing library: the error names it without the GPU advice', async (t) => {
  const lib = sharedObject('other', 'libother.so.1');
  const addon = sharedObject('addon2', 'fake_addon2.node', [lib]);
  rmSync(lib);
  t.throws(() => loadAddon(addon), { message: `cannot load the native addon ${addon}: it needs libother.so.1, which this machine does not have.` });
});

t.test('a file that is not a shared object keeps the loader\'s error', async (t) => {
  const bogus = join(dir, 'bogus.node');
  writeFileSync(bogus, 'not an ELF file');
  t.throws(() => loadAddon(bogus), /invalid ELF header|file too short/);
});
