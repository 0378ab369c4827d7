#!/usr/bin/env node
// Installs this checkout the way a user installs the package, and starts what it installed:
// `npm pack`, the prebuilt addon package of this checkout's build (`npm run prebuilt`), both
// installed with `npm install -g` into a temporary prefix (dependencies from the registry, none
// from this checkout), then inference-server (/health, one completion) and auth-server (its
// JWKS, one admin request) started from that prefix's bin/, and `npm uninstall -g`, which must
// leave the prefix empty. A file missing from package.json's `files` fails here.
//
// `node scripts/packed-install.mjs` is .ci/run's check (it runs prepack, as `npm publish`
// would); test/package-install.test.ts uses the functions. Needs a built checkout (npm ci) and
// models/tiny-chat.gguf (npm run models).
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const PACKAGE_NAME = 'llama-auth-suite';
export const PREBUILT_NAME = `@llama-auth-suite/${process.platform}-${process.arch}`;

const npm = (args, options = {}) => execFileSync('npm', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], ...options });

/** `npm pack` of this checkout into `outDir`; `runPrepack: false` packs the dist/ already built. Returns the tarball's path. */
export function packProject(outDir, { runPrepack }) {
  const out = npm(['pack', '--silent', '--pack-destination', outDir, ...(runPrepack ? [] : ['--ignore-scripts'])], { cwd: ROOT });
  return join(outDir, out.trim().split('\n').pop());
}

/** The prebuilt addon package of this checkout's build (scripts/prebuilt.mjs), packed into `outDir`. */
export function packPrebuilt(outDir) {
  const out = execFileSync(process.execPath, [join(ROOT, 'scripts', 'prebuilt.mjs'), '--out', outDir], { encoding: 'utf8' });
  return out.trim().split('\n').pop();
}

/** `npm install -g --prefix` of the tarballs; returns its output (the install scripts' lines included) and its duration. */
export function installGlobal(prefix, tarballs) {
  const started = Date.now();
  const output = npm(['install', '-g', '--prefix', prefix, '--foreground-scripts', '--prefer-offline', '--no-audit', '--no-fund', ...tarballs],
    { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, npm_config_loglevel: 'warn' } });
  return { output, seconds: (Date.now() - started) / 1000 };
}

/** `npm uninstall -g --prefix` of the names; returns the paths left under the prefix. */
export function uninstallGlobal(prefix, names) {
  npm(['uninstall', '-g', '--prefix', prefix, ...names]);
  // npm keeps the prefix's own folders, and a scope folder it emptied: those may stay, empty.
  const kept = new Set(['bin', 'lib', join('lib', 'node_modules'), join('lib', 'node_modules', '@llama-auth-suite')]);
  return readdirSync(prefix, { recursive: true }).filter((path) => !kept.has(path));
}

/**
 * Starts an installed bin. `waitFor(pattern)` resolves with its next stderr line that matches
 * (throwing, with what it printed, when it ends first); `stop()` ends it and waits for it.
 */
export function startBin(file, args, { env = process.env, cwd = ROOT } = {}) {
  const child = spawn(file, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  };
  const seen = [];
  child.stdout.on('data', (chunk) => seen.push(String(chunk).trimEnd()));
  const lines = createInterface({ input: child.stderr })[Symbol.asyncIterator]();
  const waitFor = async (pattern) => {
    for (let next = await lines.next(); !next.done; next = await lines.next()) {
      seen.push(next.value);
      if (pattern.test(next.value)) return next.value;
    }
    await stop();
    throw new Error(`${file} ended before "${pattern}":\n${seen.join('\n')}`);
  };
  return { waitFor, stop };
}

const baseUrl = (line) => /https?:\/\/[\w.]+:\d+/.exec(line)[0];

async function json(res) {
  return { status: res.status, body: await res.json() };
}

/** inference-server from the prefix: the health check once it says the model is ready, then one completion. */
export async function probeInferenceServer(prefix, model) {
  const server = startBin(join(prefix, 'bin', 'inference-server'), ['-m', model, '--port', '0', '-c', '512', '-np', '1']);
  try {
    const base = baseUrl(await server.waitFor(/^inference-server: listening on/));
    await server.waitFor(/^inference-server: model ready/);
    const health = await json(await fetch(`${base}/health`));
    const completion = await json(await fetch(`${base}/completion`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'Hello', n_predict: 4 }),
    }));
    return { health, completion };
  } finally {
    await server.stop();
  }
}

/** auth-server from the prefix, on an embedded PostgreSQL in `dataDir`: its JWKS, then one admin request (an app created). */
export async function probeAuthServer(prefix, dataDir) {
  mkdirSync(dataDir, { recursive: true });
  // As root, the embedded PostgreSQL runs as the postgres user, which must be able to enter it.
  chmodSync(dataDir, 0o711);
  const adminKey = 'packed-install-admin-key-0123456789';
  const server = startBin(join(prefix, 'bin', 'auth-server'), ['--port', '0', '--workers', '1'],
    { cwd: dataDir, env: { ...process.env, AUTH_ADMIN_KEY: adminKey, AUTH_DATA_DIR: join(dataDir, 'data') } });
  try {
    const base = baseUrl(await server.waitFor(/\[auth-server\] listening on/));
    const jwks = await json(await fetch(`${base}/.well-known/jwks.json`));
    const app = await json(await fetch(`${base}/admin/apps`, {
      method: 'POST', headers: { 'content-type': 'application/json', 'x-admin-key': adminKey }, body: JSON.stringify({ slug: 'shop', name: 'Shop' }),
    }));
    return { jwks, app };
  } finally {
    await server.stop();
  }
}

/** The CI check: every step, printed; throws at the first that fails. */
async function main() {
  const model = join(ROOT, 'models', 'tiny-chat.gguf');
  if (!existsSync(model)) throw new Error(`${model} is missing: run npm run models`);
  const work = mkdtempSync(join(tmpdir(), 'packed-install-'));
  chmodSync(work, 0o711);
  try {
    const tarball = packProject(work, { runPrepack: true });
    const files = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).trim().split('\n').length;
    console.log(`packed-install: ${tarball}: ${(statSync(tarball).size / 1e3).toFixed(0)} kB, ${files} files`);
    const prebuilt = packPrebuilt(work);
    const prefix = join(work, 'prefix');
    const install = installGlobal(prefix, [tarball, prebuilt]);
    if (!install.output.includes(`[install] using the prebuilt addon ${PREBUILT_NAME}: nothing to compile`)) {
      throw new Error(`the install did not take the prebuilt addon:\n${install.output}`);
    }
    console.log(`packed-install: installed with ${PREBUILT_NAME} in ${install.seconds.toFixed(1)} s, nothing compiled`);
    const inference = await probeInferenceServer(prefix, model);
    if (inference.health.status !== 200 || inference.completion.status !== 200 || inference.completion.body.tokens_predicted !== 4) {
      throw new Error(`inference-server from the prefix: ${JSON.stringify(inference)}`);
    }
    console.log('packed-install: inference-server: /health 200, /completion 200 with 4 tokens');
    const auth = await probeAuthServer(prefix, join(work, 'auth'));
    if (auth.jwks.status !== 200 || auth.jwks.body.keys?.length !== 2 || auth.app.status !== 201 || !auth.app.body.app_secret) {
      throw new Error(`auth-server from the prefix: ${JSON.stringify(auth)}`);
    }
    console.log('packed-install: auth-server: JWKS 200 with 2 keys, POST /admin/apps 201');
    const left = uninstallGlobal(prefix, [PACKAGE_NAME, PREBUILT_NAME]);
    if (left.length > 0) throw new Error(`npm uninstall -g left ${left.join(', ')}`);
    console.log('packed-install: npm uninstall -g left nothing');
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((err) => {
    console.error(`packed-install: FAILED: ${err.message}`);
    process.exit(1);
  });
}
