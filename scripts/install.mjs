#!/usr/bin/env node
// `npm install` / `npm ci` for this package: fetch the pinned llama.cpp, build the addon,
// compile the TypeScript, bundle inference-server and build the web pages. Each step is skipped
// or incremental when its inputs are unchanged.
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const steps = [
  ['vendor', [join(root, 'vendor', 'fetch-llama.mjs')]],
  ['addon', [join(root, 'scripts', 'build-addon.mjs')]],
  ['typescript', [join(root, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', join(root, 'tsconfig.json')]],
  ['bundle', [join(root, 'scripts', 'bundle.mjs')]],
  ['web', [join(root, 'scripts', 'build-web.mjs')]],
  ['bins', [join(root, 'scripts', 'chmod-bins.mjs')]],
];
for (const [name, args] of steps) {
  const result = spawnSync(process.execPath, args, { stdio: 'inherit', cwd: root });
  if (result.status !== 0) {
    console.error(`[install] step "${name}" failed`);
    process.exit(result.status ?? 1);
  }
}
