// Module hooks that run TypeScript directly: each .ts/.mts/.cts file is transpiled on load by
// esbuild (types removed, nothing checked; `npx tsc --noEmit` checks types), with an inline
// source map so stack traces name the .ts lines. Imports are written as the compiled code names
// them (`./x.js`); a `.js` specifier that does not exist resolves to the `.ts` file beside it.
// Registered by ts-loader.mjs; runs on the loader's own thread.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { transformSync } from 'esbuild';

const TYPESCRIPT = /\.[cm]?ts$/;
const COMPILED_NAME = /\.([cm]?)js$/;

export async function resolve(specifier, context, nextResolve) {
  try {
    return await nextResolve(specifier, context);
  } catch (error) {
    const local = specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('file:');
    if (error?.code !== 'ERR_MODULE_NOT_FOUND' || !local || !COMPILED_NAME.test(specifier)) throw error;
    return nextResolve(specifier.replace(COMPILED_NAME, '.$1ts'), context);
  }
}

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !TYPESCRIPT.test(url)) return nextLoad(url, context);
  const file = fileURLToPath(url);
  const commonjs = url.endsWith('.cts');
  return { format: commonjs ? 'commonjs' : 'module', source: transpile(file, commonjs ? 'cjs' : 'esm'), shortCircuit: true };
}

/** The file as JavaScript of the given module format. */
export function transpile(file, format) {
  const { code } = transformSync(readFileSync(file, 'utf8'), { loader: 'ts', format, target: 'node20', sourcemap: 'inline', sourcefile: file });
  return code;
}
