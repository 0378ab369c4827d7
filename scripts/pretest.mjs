#!/usr/bin/env node
// What the tests need built, made once before they run (npm test's `pretest`), so that no test
// file builds while another runs and each file's time is its own:
// - the web pages (build-web.mjs);
// - the generated test models (test/fixtures/generate.ts; kept when already there);
// - the reference programs built from the vendored llama.cpp that tests compare with
//   (llama-simple, llama-server, ggml-rpc-server) and the engine's C++ rule tests
//   (engine_rules_test), in one incremental CMake build of the addon's tree.
// `--unit` (npm run test:unit): only the tiny chat model and engine_rules_test.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const unit = process.argv.includes('--unit');

function run(what, command, args, env = process.env) {
  const started = Date.now();
  const result = spawnSync(command, args, { stdio: 'inherit', cwd: root, env });
  if (result.status !== 0) {
    console.error(`[pretest] ${what} failed`);
    process.exit(result.status ?? 1);
  }
  console.error(`[pretest] ${what}: ${((Date.now() - started) / 1000).toFixed(1)} s`);
}

const loader = join(root, 'scripts', 'ts-loader.mjs');
if (!unit) run('web pages', process.execPath, [join(root, 'scripts', 'build-web.mjs')]);
run('test models', process.execPath, ['--import', loader, join(root, 'test', 'fixtures', 'generate.ts'), ...(unit ? ['--chat-only'] : [])]);
const targets = unit ? ['engine_rules_test'] : ['engine_rules_test', 'llama-simple', 'llama-server', 'ggml-rpc-server'];
run(`native programs (${targets.join(', ')})`, 'cmake', ['--build', join(root, 'build'), '--config', 'Release', '--parallel', '--target', ...targets],
  { ...process.env, CCACHE_BASEDIR: process.env.CCACHE_BASEDIR ?? root });
