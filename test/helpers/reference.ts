// Reference binaries built from the vendored llama.cpp (llama-simple, llama-server, ...), in the
// same CMake tree as the addon so they reuse its libraries. Built once, on first use, and kept
// in build/bin (git-ignored). A lock directory serialises concurrent test processes.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, rmdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const BUILD_DIR = join(REPO_ROOT, 'build');

async function withLock<T>(name: string, fn: () => T): Promise<T> {
  const lock = join(BUILD_DIR, `.${name}.lock`);
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${lock}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  try {
    return fn();
  } finally {
    rmdirSync(lock);
  }
}

/** Path of a vendored llama.cpp tool, building it first when missing. */
export async function referenceTool(target: 'llama-simple' | 'llama-server' | 'llama-bench' | 'llama-embedding' | 'ggml-rpc-server'): Promise<string> {
  const path = join(BUILD_DIR, 'bin', target);
  if (existsSync(path)) return path;
  return withLock('reference-build', () => {
    if (!existsSync(path)) {
      execFileSync('cmake', ['--build', BUILD_DIR, '--config', 'Release', '--target', target, '--parallel'], { stdio: 'inherit' });
    }
    return path;
  });
}

/** Greedy text of llama-simple for `prompt`, without the echoed prompt. */
export async function llamaSimpleGreedy(model: string, prompt: string, nPredict: number): Promise<string> {
  const tool = await referenceTool('llama-simple');
  const out = execFileSync(tool, ['-m', model, '-n', String(nPredict), prompt], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  // llama-simple prints the prompt, then each generated piece, then a newline.
  const text = out.endsWith('\n') ? out.slice(0, -1) : out;
  if (!text.startsWith(prompt)) throw new Error(`unexpected llama-simple output: ${JSON.stringify(text.slice(0, 80))}`);
  return text.slice(prompt.length);
}

/**
 * Path of one of the project's own C++ test programs (CMakeLists.txt, EXCLUDE_FROM_ALL), built
 * incrementally every time (it links the engine core, which changes with the addon).
 */
export async function nativeTestProgram(target: 'engine_rules_test'): Promise<string> {
  return withLock('native-test-build', () => {
    execFileSync('cmake', ['--build', BUILD_DIR, '--config', 'Release', '--target', target, '--parallel'], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, CCACHE_BASEDIR: process.env.CCACHE_BASEDIR ?? REPO_ROOT },
    });
    return join(BUILD_DIR, 'bin', target);
  });
}
