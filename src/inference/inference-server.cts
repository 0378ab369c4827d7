#!/usr/bin/env node
// inference-server's entry point: sizes libuv's thread pool, then runs server-main.
//
// The pool tokenizes (/tokenize, prompts) and reads files. Its size is read once, when it is first
// used, and an ES module's loading already uses it, so it is set here, in CommonJS, before any
// import: one thread per CPU (libuv's default is 4): the JS thread is saturated either way, and
// fewer pool threads contend less with it (figures: docs/benchmarks.md, "Figures moved from code
// comments"). UV_THREADPOOL_SIZE, when set, wins.
process.env.UV_THREADPOOL_SIZE ??= String(require('node:os').availableParallelism());

/**
 * server-main as one bundle (dist/bundle/server-main.js, scripts/bundle.mjs) when it was built
 * after the compiled dist/inference/server-main.js, else the compiled modules themselves (from
 * src/ under ts-node, or after a `tsc` run without the bundle step). The bundle starts the server
 * sooner: one file instead of ~320 for Node's module loader (docs/benchmarks.md, "Figures moved
 * from code comments").
 */
function mainModule(): string {
  const { statSync } = require('node:fs') as typeof import('node:fs');
  const { join } = require('node:path') as typeof import('node:path');
  const bundled = join(__dirname, '..', 'bundle', 'server-main.js');
  try {
    if (statSync(bundled).mtimeMs >= statSync(join(__dirname, 'server-main.js')).mtimeMs) {
      return (require('node:url') as typeof import('node:url')).pathToFileURL(bundled).href;
    }
  } catch {
    // no bundle, or no compiled server-main.js beside this file (running from src/)
  }
  return './server-main.js';
}

import(mainModule()).catch((err: Error) => {
  // A failure before main runs (the addon cannot load): its message alone, as main's own errors.
  console.error(`inference-server: ${err.message}`);
  process.exit(1);
});
