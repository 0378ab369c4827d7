// inference-server's bundle (scripts/bundle.mjs): the dist entry point runs server-main from
// dist/bundle/ when the bundle is at least as new as the compiled module, else the compiled
// module; the build leaves a fresh bundle; and the bundled server works in each of its parts:
// a model, router mode (its own chunk, and children started through the same entry), --auth
// (the auth chunk: migrations found from the bundle's place, keys made, tokens refused by jose)
// and --kv-events (zeromq, external); no chunk requires a module at run time, which an ES module
// bundle cannot do.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import t from 'tap';
import { ensureTestModels } from '../fixtures/models.js';
import { REPO_ROOT } from '../helpers/reference.js';
import { freePort } from '../helpers/ports.js';
import { TestSubscriber } from './kv-events/subscriber.js';

const ENTRY = join(REPO_ROOT, 'dist', 'inference', 'inference-server.cjs');
const models = await ensureTestModels();
const dir = mkdtempSync(join(tmpdir(), 'bundle-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

t.test('the entry point runs the bundle when it is as new as the compiled server-main, else the compiled one', async (t) => {
  // The entry's own layout, with server-main stand-ins that say which one ran.
  const root = join(dir, 'layout');
  mkdirSync(join(root, 'inference'), { recursive: true });
  mkdirSync(join(root, 'bundle'));
  writeFileSync(join(root, 'package.json'), '{"type":"module"}');
  copyFileSync(ENTRY, join(root, 'inference', 'inference-server.cjs'));
  const compiled = join(root, 'inference', 'server-main.js');
  const bundled = join(root, 'bundle', 'server-main.js');
  writeFileSync(compiled, 'console.log("compiled");');
  writeFileSync(bundled, 'console.log("bundle");');
  const run = (): string => execFileSync(process.execPath, [join(root, 'inference', 'inference-server.cjs')], { encoding: 'utf8' }).trim();

  const at = (file: string, seconds: number): void => utimesSync(file, seconds, seconds);
  at(compiled, 1_000_000);
  at(bundled, 1_000_001);
  t.equal(run(), 'bundle', 'newer bundle');
  at(bundled, 1_000_000);
  t.equal(run(), 'bundle', 'same age');
  at(bundled, 999_999);
  t.equal(run(), 'compiled', 'a bundle older than the compiled module is stale');
  rmSync(bundled);
  t.equal(run(), 'compiled', 'no bundle');
});

t.test('the build leaves a bundle newer than the compiled server-main, so the bins use it', async (t) => {
  const bundled = statSync(join(REPO_ROOT, 'dist', 'bundle', 'server-main.js')).mtimeMs;
  t.ok(bundled >= statSync(join(REPO_ROOT, 'dist', 'inference', 'server-main.js')).mtimeMs, 'run "npm run build" after tsc');
});

t.test('no chunk of the bundle requires a module at run time (esbuild\'s "Dynamic require of ... is not supported")', async (t) => {
  // A CommonJS package bundled into ES modules keeps its require() calls as __require(), which
  // throws when reached: such a package must stay external (scripts/bundle.mjs).
  const bundle = join(REPO_ROOT, 'dist', 'bundle');
  const requiring = readdirSync(bundle).filter((file) => file.endsWith('.js'))
    .flatMap((file) => [...readFileSync(join(bundle, file), 'utf8').matchAll(/__require\("([^"]+)"\)/g)].map((m) => `${file}: ${m[1]}`));
  t.same(requiring, []);
});

/** Starts the dist entry point; resolves with its first stderr line matching `ready`. */
async function start(t: { teardown(fn: () => Promise<void>): void }, args: string[], ready: RegExp, env: NodeJS.ProcessEnv = process.env): Promise<{ child: ChildProcess; line: string }> {
  const child = spawn(process.execPath, [ENTRY, '--host', '127.0.0.1', '--port', '0', ...args], { cwd: REPO_ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] });
  // Waits for the exit: the server stops its embedded PostgreSQL before the data goes.
  t.teardown(() => new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
  }));
  const seen: string[] = [];
  for await (const line of createInterface({ input: child.stderr! })) {
    seen.push(line);
    if (ready.test(line)) return { child, line };
  }
  throw new Error(`the server ended before "${ready}":\n${seen.join('\n')}`);
}

const portOf = (line: string): number => Number(/:(\d+)\b/.exec(line.slice(line.indexOf('http')))![1]);

async function completion(base: string, body: Record<string, unknown> = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(`${base}/completion`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'Hello', n_predict: 2, ...body }) });
  return { status: res.status, body: await res.json() };
}

t.test('the bundled server answers a completion', async (t) => {
  const { line } = await start(t, ['-m', models.chat, '-c', '512', '-np', '1'], /^inference-server: listening on/);
  const base = `http://127.0.0.1:${portOf(line)}`;
  for (let i = 0; (await fetch(`${base}/health`)).status !== 200; i++) await new Promise((r) => setTimeout(r, 20));
  const res = await completion(base);
  t.equal(res.status, 200);
  t.equal(res.body.tokens_predicted, 2);
});

t.test('the bundled router lists its models and loads one in a child started through the same entry', async (t) => {
  const preset = join(dir, 'preset.ini');
  writeFileSync(preset, `[chat]\nmodel = ${models.chat}\n`);
  const { line } = await start(t, ['--models-preset', preset, '--models-spare', '0'], /router listening/);
  const base = `http://127.0.0.1:${portOf(line)}`;
  const listed = await (await fetch(`${base}/models`)).json();
  t.same(listed.data.map((m: { id: string }) => m.id), ['chat']);
  const res = await completion(base, { model: 'chat' });
  t.equal(res.status, 200);
  t.equal(res.body.tokens_predicted, 2);
});

t.test('the bundled server mounts the auth service (--auth): migrations applied, keys published, tokens checked', async (t) => {
  const dataDir = join(dir, 'auth');
  mkdirSync(dataDir);
  // As root, PostgreSQL runs as the postgres user, which must be able to enter both.
  await chmod(dir, 0o711);
  await chmod(dataDir, 0o711);
  const { line } = await start(t, ['-m', models.chat, '-c', '512', '-np', '1', '--auth'], /^inference-server: listening on/,
    { ...process.env, AUTH_ADMIN_KEY: 'bundle-admin-key-0123456789', AUTH_DATA_DIR: dataDir });
  const base = `http://127.0.0.1:${portOf(line)}`;
  const jwks = await (await fetch(`${base}/.well-known/jwks.json`)).json();
  t.equal(jwks.keys.length, 2, 'the active and the next key');
  const created = await fetch(`${base}/admin/apps`, {
    method: 'POST', headers: { 'content-type': 'application/json', 'x-admin-key': 'bundle-admin-key-0123456789' }, body: JSON.stringify({ slug: 'chat', name: 'Chat' }),
  });
  t.equal(created.status, 201);
  const me = await fetch(`${base}/auth/me`, { headers: { authorization: 'Bearer a.b.c' } });
  t.equal(me.status, 401);
  t.equal((await me.json()).error.code, 'TOKEN_INVALID');
});

t.test('the bundled server publishes KV-cache events (--kv-events: zeromq loads from outside the bundle)', async (t) => {
  const sub = new TestSubscriber();
  t.teardown(() => sub.close());
  const port = await freePort();
  await sub.sub.bind(`tcp://127.0.0.1:${port}`);
  await start(t, ['-m', models.chat, '-c', '512', '-np', '1', '--kv-events', `tcp://127.0.0.1:${port}`, '--kv-events-pod', 'bundle'], /model ready/);
  const first = await sub.next();
  t.equal(first.topic, `kv@bundle@${models.chat.split('/').pop()}`);
  t.same(first.events, [['AllBlocksCleared']], 'a new process announces an empty cache first');
});
