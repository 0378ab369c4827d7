// `node --import ./scripts/ts-loader.mjs file.ts` runs TypeScript directly (tests, scripts,
// fixtures, benchmarks): ES modules through the hooks of ts-hooks.mjs, and CommonJS `.cts`/`.ts`
// files reached by require() through the same transpiler. esbuild strips the types of a file in
// about a millisecond, where a full TypeScript compile per process took seconds per test file.
import { register } from 'node:module';
import Module from 'node:module';
import { transpile } from './ts-hooks.mjs';

register('./ts-hooks.mjs', import.meta.url);

for (const extension of ['.cts', '.ts']) {
  Module._extensions[extension] = (module, file) => module._compile(transpile(file, 'cjs'), file);
}
