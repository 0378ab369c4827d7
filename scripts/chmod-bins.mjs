#!/usr/bin/env node
// Makes the package's bin entry points (compiled by tsc, which writes plain files) executable,
// so `npx inference-server`, `npx inference-cli` and `npx auth-server` run from a checkout.
import { chmodSync, existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const { bin } = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
for (const [name, path] of Object.entries(bin)) {
  const file = join(root, path);
  if (!existsSync(file)) {
    console.error(`[bins] ${name}: ${path} is missing (did tsc run?)`);
    process.exit(1);
  }
  chmodSync(file, 0o755);
}
