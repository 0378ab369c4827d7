// The auth-server command: one command runs the whole service on a fresh machine (embedded
// PostgreSQL when DATABASE_URL is unset, data kept in its data directory across restarts).
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { parseAuthServerArgs } from '../../src/auth/config.js';
import { createAuthService } from '../../src/auth/mount.js';

const ADMIN_KEY = 'server-main-admin-key-0123';
const root = await fs.mkdtemp(path.join(os.tmpdir(), 'auth-server-main-'));
await fs.chmod(root, 0o711);
t.teardown(() => fs.rm(root, { recursive: true, force: true }));

interface Running {
  child: ChildProcessWithoutNullStreams;
  base: string;
  stderr: () => string;
}

function launch(args: string[], env: Record<string, string | undefined>): ChildProcessWithoutNullStreams {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, DATABASE_URL: undefined, NODE_ENV: undefined, ...env };
  for (const key of Object.keys(childEnv)) if (childEnv[key] === undefined) delete childEnv[key];
  return spawn(process.execPath, ['--import', './scripts/ts-loader.mjs', 'src/auth/server-main.ts', ...args], { env: childEnv });
}

/** Starts auth-server and waits for its "listening on" line. */
async function start(dataDir: string): Promise<Running> {
  const child = launch(['--port', '0', '--data-dir', dataDir, '--workers', '2'], { AUTH_ADMIN_KEY: ADMIN_KEY });
  let stderr = '';
  child.stderr.on('data', (chunk) => { stderr += chunk; });
  const base = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`auth-server did not start: ${stderr}`)), 60_000);
    child.stderr.on('data', () => {
      const match = /listening on (http:\/\/[\d.]+:\d+)/.exec(stderr);
      if (match) { clearTimeout(timer); resolve(match[1]!); }
    });
    child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`auth-server exited with ${code}: ${stderr}`)); });
  });
  return { child, base, stderr: () => stderr };
}

async function stop(running: Running): Promise<number | null> {
  const exited = new Promise<number | null>((resolve) => running.child.on('exit', resolve));
  running.child.kill('SIGTERM');
  return exited;
}

async function exitOf(child: ChildProcessWithoutNullStreams): Promise<{ code: number | null; output: string }> {
  let output = '';
  child.stdout.on('data', (chunk) => { output += chunk; });
  child.stderr.on('data', (chunk) => { output += chunk; });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { code, output };
}

async function json(method: string, url: string, body?: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(url, { method, headers: { 'content-type': 'application/json', ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: response.status, body: await response.json() as any };
}

t.test('without DATABASE_URL it starts an embedded PostgreSQL, serves a login with the log delivery, and keeps data across restarts', async (t) => {
  const dataDir = path.join(root, 'data');
  const first = await start(dataDir);
  t.match(first.stderr(), /embedded PostgreSQL listening on 127\.0\.0\.1:\d+ \(data in .*data\/postgres\/pgdata\)/);
  t.match(first.stderr(), /applied migrations: 0001_create_apps\.sql/);
  t.match(first.stderr(), /2 worker threads, 10 database connections each/);
  t.not(new URL(first.base).port, '0');
  t.equal((await json('GET', `${first.base}/.well-known/openid-configuration`)).body.issuer, first.base, 'with --port 0 and no --issuer, the issuer names the port chosen');
  const kids = (await json('GET', `${first.base}/.well-known/jwks.json`)).body.keys.map((k: { kid: string }) => k.kid);
  const app = await json('POST', `${first.base}/admin/apps`, { slug: 'demo', name: 'Demo' }, { 'x-admin-key': ADMIN_KEY });
  t.equal(app.status, 201);
  const credentials = { app_id: app.body.id, app_secret: app.body.app_secret };
  t.equal((await json('POST', `${first.base}/auth/otp/request`, { ...credentials, email: 'ann@example.com' })).status, 200);
  const printed = /one-time code for email ann@example\.com \(app [0-9a-f-]+\): (\d{6})/;
  for (let i = 0; i < 200 && !printed.test(first.stderr()); i++) await new Promise((r) => setTimeout(r, 50));
  const code = printed.exec(first.stderr())?.[1];
  t.match(code, /^\d{6}$/, 'the log delivery printed the code');
  const login = await json('POST', `${first.base}/auth/otp/verify`, { ...credentials, email: 'ann@example.com', code });
  t.equal(login.status, 200);
  t.equal(await stop(first), 0, 'SIGTERM stops it cleanly');
  await t.rejects(fs.access(path.join(dataDir, 'postgres', 'pgdata', 'postmaster.pid')), 'the embedded PostgreSQL stopped with it');

  const second = await start(dataDir);
  t.teardown(() => { second.child.kill('SIGKILL'); });
  t.notMatch(second.stderr(), /initialising|applied migrations/, 'the cluster and schema are reused');
  const apps = await json('GET', `${second.base}/admin/apps`, undefined, { 'x-admin-key': ADMIN_KEY });
  t.same(apps.body.apps.map((a: { slug: string }) => a.slug), ['demo']);
  t.same((await json('GET', `${second.base}/.well-known/jwks.json`)).body.keys.map((k: { kid: string }) => k.kid), kids, 'the active and the next signing key survive the restart');
  const refreshed = await json('POST', `${second.base}/auth/refresh`, { ...credentials, refresh_token: login.body.refresh_token });
  t.equal(refreshed.status, 200, 'sessions survive the restart');
  t.equal(await stop(second), 0);
});

t.test('it refuses to start without an admin key', async (t) => {
  const { code, output } = await exitOf(launch(['--data-dir', path.join(root, 'none')], {}));
  t.equal(code, 2);
  t.match(output, /an admin key is required: set AUTH_ADMIN_KEY or --admin-key/);
  t.match(output, /usage: auth-server/);
});

t.test('it refuses the log delivery when NODE_ENV=production', async (t) => {
  const { code, output } = await exitOf(launch(['--data-dir', path.join(root, 'prod')], { AUTH_ADMIN_KEY: ADMIN_KEY, NODE_ENV: 'production' }));
  t.equal(code, 1);
  t.match(output, /failed to start: OTP delivery "log" prints codes and is refused when NODE_ENV=production/);
});

t.test('it refuses an admin key shorter than 16 characters', async (t) => {
  // In this process: auth-server's options from its command line and environment, and the service
  // start that checks them before anything starts. auth-server prints its refusal as "failed to
  // start: <message>" and exits 1, as the NODE_ENV=production test above shows in a process.
  const options = parseAuthServerArgs(['--data-dir', path.join(root, 'short')], { AUTH_ADMIN_KEY: 'short' });
  if (options === 'help') throw new Error('not a start');
  const refused = await createAuthService(options.service).then(async (service) => { await service.close(); return null; }, (error: unknown) => error as Error);
  t.ok(refused, 'the start fails: exit 1');
  t.match(refused?.message, /the admin key must be at least 16 characters/);
});

t.test('--help prints the options and their environment variables', async (t) => {
  const { code, output } = await exitOf(launch(['--help'], {}));
  t.equal(code, 0);
  for (const text of ['--database-url', 'DATABASE_URL', '--admin-key', 'AUTH_ADMIN_KEY', '--otp-delivery', '--key-dir', '--issuer', '--port', '--workers', 'AUTH_WORKERS']) {
    t.match(output, text);
  }
});
