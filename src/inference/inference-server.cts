#!/usr/bin/env node
// inference-server's entry point: sizes libuv's thread pool, then runs server-main.
//
// The pool tokenizes (/tokenize, prompts) and reads files. Its size is read once, when it is first
// used, and an ES module's loading already uses it, so it is set here, in CommonJS, before any
// import: one thread per CPU (libuv's default is 4). On 2 cores, POST /tokenize of 111 characters
// under 64 connections: 15.6-16.7k req/s with 2 threads, 12.9-14.2k with 4 (the JS thread is
// saturated either way; fewer pool threads contend less with it). UV_THREADPOOL_SIZE, when set,
// wins.
process.env.UV_THREADPOOL_SIZE ??= String(require('node:os').availableParallelism());
import('./server-main.js').catch((err: Error) => {
  // A failure before main runs (the addon cannot load): its message alone, as main's own errors.
  console.error(`inference-server: ${err.message}`);
  process.exit(1);
});
