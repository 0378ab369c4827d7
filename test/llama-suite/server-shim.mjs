#!/usr/bin/env node
// The executable llama.cpp's server test suite starts as its server (LLAMA_SERVER_BIN_PATH) when
// it runs against inference-server: it runs inference-server's entry point
// (dist/inference/inference-server.cjs, so the bundle as the bin does) in this process with the
// suite's command line. Nothing here uses libuv's thread pool before the entry sizes it.
//
// LLAMA_SUITE_MODE=strict passes every argument unchanged. LLAMA_SUITE_MODE=lenient rewrites each
// llama-server flag that inference-server knows under another of its spellings (from
// LLAMA_SUITE_FLAGS, the flag table run.ts reads from both --help texts) and drops the flags it
// does not know, with their values. Each start appends one JSON line
// {test, argv, passed, rewritten, dropped} to LLAMA_SUITE_SHIM_LOG when that is set.
import { appendFileSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = process.argv.slice(2);
const mode = process.env.LLAMA_SUITE_MODE ?? 'strict';

/** @returns {{ passed: string[], rewritten: string[], dropped: string[] }} */
function lenient(argv, table) {
  const passed = [];
  const rewritten = [];
  const dropped = [];
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    let inline;
    if (arg.startsWith('--') && arg.includes('=')) [arg, inline] = [arg.slice(0, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)];
    const ours = table.ours[arg];
    // llama-server reads '_' in a flag name as '-' (the suite passes --backend_sampling).
    const llama = table.llama[arg] ?? table.llama[arg.replaceAll('_', '-')];
    const takesValue = ours ? ours.takesValue : llama ? llama.takesValue : false;
    const value = inline ?? (takesValue ? argv[++i] : undefined);
    const withValue = (name) => (value === undefined ? [name] : [name, value]);
    if (ours) {
      passed.push(...withValue(arg));
    } else if (llama) {
      const alias = [arg.replaceAll('_', '-'), ...llama.aliases].find((name) => table.ours[name]);
      if (alias) {
        passed.push(...withValue(alias));
        rewritten.push(`${arg}->${alias}`);
      } else {
        dropped.push(value === undefined ? arg : `${arg} ${value}`);
      }
    } else {
      // Known to neither: passed on, so inference-server names it in its refusal.
      passed.push(...withValue(arg));
    }
  }
  return { passed, rewritten, dropped };
}

let result = { passed: args, rewritten: [], dropped: [] };
if (mode === 'lenient') {
  const table = JSON.parse(readFileSync(process.env.LLAMA_SUITE_FLAGS, 'utf8'));
  result = lenient(args, table);
}
if (process.env.LLAMA_SUITE_SHIM_LOG) {
  const line = { test: process.env.LLAMA_SUITE_TEST_ID ?? null, mode, argv: args, ...result };
  appendFileSync(process.env.LLAMA_SUITE_SHIM_LOG, `${JSON.stringify(line)}\n`);
}
const entry = join(root, 'dist', 'inference', 'inference-server.cjs');
process.argv = [process.argv[0], entry, ...result.passed];
await import(pathToFileURL(entry).href);
