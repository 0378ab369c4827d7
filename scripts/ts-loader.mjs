// `node --import ./scripts/ts-loader.mjs file.ts` runs TypeScript directly with the same
// transpile-only ts-node hook that tap uses for the tests (scripts, fixtures, benchmarks).
process.env.TS_NODE_TRANSPILE_ONLY ??= '1';
await import('@tapjs/typescript/import');
