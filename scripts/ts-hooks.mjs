// Module hooks that run TypeScript directly: each .ts/.mts/.cts file is transpiled on load by
// esbuild (types removed, nothing checked; `npx tsc --noEmit` checks types), with an inline
// source map so stack traces name the .ts lines. Imports are written as the compiled code names
// them (`./x.js`); a `.js` specifier that does not exist resolves to the `.ts` file beside it.
// Registered by ts-loader.mjs; runs on the loader's own thread.
//
// Transpiled files are kept in node_modules/.cache/ts-loader/, named by a hash of the source,
// its path and the options: a process whose files are all there never starts esbuild (its
// service process and the transforms were about 0.2 s of CPU per process, ~40 s a test run).
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const TYPESCRIPT = /\.[cm]?ts$/;
const COMPILED_NAME = /\.([cm]?)js$/;
const CACHE = join(dirname(fileURLToPath(import.meta.url)), '..', 'node_modules', '.cache', 'ts-loader');
const ESBUILD = createRequire(import.meta.url).resolve('esbuild/package.json');
/** Part of every file's key: another esbuild or other options never serve an older output. */
const OPTIONS_KEY = `esbuild ${JSON.parse(readFileSync(ESBUILD, 'utf8')).version}, target node20, inline source map`;

export async function resolve(specifier, context, nextResolve) {
  // `./x.js` naming a TypeScript file: resolved to `./x.ts` directly when only that exists
  // (asking Node first costs a thrown ERR_MODULE_NOT_FOUND per import).
  const parent = context.parentURL;
  if (COMPILED_NAME.test(specifier) && (specifier.startsWith('.') || specifier.startsWith('file:')) && parent?.startsWith('file:') && !parent.includes('/node_modules/')) {
    const compiled = new URL(specifier, parent);
    const typescript = new URL(compiled.href.replace(COMPILED_NAME, '.$1ts'));
    if (!existsSync(compiled) && existsSync(typescript)) return nextResolve(typescript.href, context);
  }
  return nextResolve(specifier, context);
}

export async function load(url, context, nextLoad) {
  if (!url.startsWith('file:') || !TYPESCRIPT.test(url)) return nextLoad(url, context);
  const file = fileURLToPath(url);
  const commonjs = url.endsWith('.cts');
  return { format: commonjs ? 'commonjs' : 'module', source: transpile(file, commonjs ? 'cjs' : 'esm'), shortCircuit: true };
}

/** esbuild, loaded on the first file not in the cache (it starts its service process on first use). */
let esbuild = null;

/** The file as JavaScript of the given module format. */
export function transpile(file, format) {
  const source = readFileSync(file, 'utf8');
  const key = createHash('sha256').update(`${OPTIONS_KEY}\0${format}\0${file}\0`).update(source).digest('hex');
  const cached = join(CACHE, `${key}.js`);
  try {
    return readFileSync(cached, 'utf8');
  } catch {
    // not transpiled yet
  }
  esbuild ??= createRequire(import.meta.url)('esbuild');
  const { code } = esbuild.transformSync(source, { loader: 'ts', format, target: 'node20', sourcemap: 'inline', sourcefile: file });
  try {
    mkdirSync(CACHE, { recursive: true });
    // Written beside and renamed: a process reading the cache never sees half a file.
    const temporary = `${cached}.${process.pid}.${Math.random().toString(36).slice(2)}`;
    writeFileSync(temporary, code);
    renameSync(temporary, cached);
  } catch {
    // a read-only tree: transpile again next time
  }
  return code;
}
