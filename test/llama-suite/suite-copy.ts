// A patched copy of llama.cpp's server test suite, laid out as in the llama.cpp tree so that
// its relative paths (../../../models/templates/..., media path ../../../tools) still resolve:
//
//   <dir>/llama.cpp/tools/server/tests/   copy of vendor/llama.cpp/tools/server/tests, utils.py patched
//   <dir>/llama.cpp/models                -> vendor/llama.cpp/models (chat templates, vocabularies)
//   <dir>/llama.cpp/tools/mtmd/test-1.jpeg  copy (a real file: a media path must not reach through a link)
//
// The vendored tree is never written.
import { execFileSync } from 'node:child_process';
import { cpSync, copyFileSync, mkdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** One textual patch of the suite; `anchor` must occur exactly once, so a changed suite fails loudly. */
interface Patch {
  file: string;
  anchor: string;
  replacement: string;
  why: string;
}

const PATCHES: Patch[] = [
  {
    file: 'utils.py',
    anchor: '        if self.no_mmproj:\n',
    replacement:
      '        if getattr(self, "mmproj_file", None):\n' +
      '            server_args.extend(["--mmproj", self.mmproj_file])\n' +
      '        if self.no_mmproj:\n',
    why: 'tinygemma3 gets its projector from the hub with the model; the local stand-in passes it with --mmproj',
  },
];

/** Python modules the suite imports that may be missing here; stubs live in python/stubs. */
export const STUBBABLE_MODULES = ['openai', 'wget', 'filelock'] as const;

export function missingPythonModules(): string[] {
  return STUBBABLE_MODULES.filter((name) => {
    try {
      execFileSync('python3', ['-c', `import ${name}`], { stdio: 'ignore' });
      return false;
    } catch {
      return true;
    }
  });
}

/** Copies the suite under `dir` and returns the tests directory of the copy. */
export function copySuite(vendorRoot: string, dir: string): string {
  rmSync(dir, { recursive: true, force: true });
  const tests = join(dir, 'llama.cpp', 'tools', 'server', 'tests');
  mkdirSync(tests, { recursive: true });
  cpSync(join(vendorRoot, 'tools', 'server', 'tests'), tests, { recursive: true });
  rmSync(join(tests, 'tmp'), { recursive: true, force: true });
  for (const patch of PATCHES) {
    const path = join(tests, patch.file);
    const text = readFileSync(path, 'utf8');
    const count = text.split(patch.anchor).length - 1;
    if (count !== 1) throw new Error(`llama-suite: cannot patch ${patch.file} (${patch.why}): anchor found ${count} times`);
    writeFileSync(path, text.replace(patch.anchor, patch.replacement));
  }
  symlinkSync(join(vendorRoot, 'models'), join(dir, 'llama.cpp', 'models'));
  mkdirSync(join(dir, 'llama.cpp', 'tools', 'mtmd'));
  copyFileSync(join(vendorRoot, 'tools', 'mtmd', 'test-1.jpeg'), join(dir, 'llama.cpp', 'tools', 'mtmd', 'test-1.jpeg'));
  mkdirSync(join(tests, 'tmp'));
  return tests;
}

/** The PYTHONPATH directory: the plugin, plus a stub for each module that is not installed. */
export function preparePythonPath(sourceDir: string, dir: string, missing: readonly string[]): string {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  copyFileSync(join(sourceDir, 'llama_suite_plugin.py'), join(dir, 'llama_suite_plugin.py'));
  for (const name of missing) {
    const pkg = join(sourceDir, 'stubs', name);
    if (name === 'openai') cpSync(pkg, join(dir, name), { recursive: true });
    else copyFileSync(`${pkg}.py`, join(dir, `${name}.py`));
  }
  return dir;
}
