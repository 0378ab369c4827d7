#!/usr/bin/env node
// Builds the web pages into dist/web/<page>/: the browser TypeScript of src/web/ compiled by tsc
// (tsconfig.web.json: DOM types, no Node types), then each page's HTML and CSS copied beside it.
// The servers read these folders at start (src/http/static-files.ts).
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const tsc = join(root, 'node_modules', 'typescript', 'bin', 'tsc');
// From scratch, so that a page's removed source file leaves no stale built file behind.
rmSync(join(root, 'dist', 'web'), { recursive: true, force: true });
const result = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.web.json')], { stdio: 'inherit', cwd: root });
if (result.status !== 0) {
  console.error('[web] tsc failed on tsconfig.web.json');
  process.exit(result.status ?? 1);
}
const pages = join(root, 'src', 'web');
for (const page of readdirSync(pages, { withFileTypes: true })) {
  if (!page.isDirectory()) continue;
  const out = join(root, 'dist', 'web', page.name);
  mkdirSync(out, { recursive: true });
  for (const file of readdirSync(join(pages, page.name))) {
    if (['.html', '.css', '.svg'].includes(extname(file))) copyFileSync(join(pages, page.name, file), join(out, file));
  }
}
