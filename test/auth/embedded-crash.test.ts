// auth-server on its embedded PostgreSQL survives SIGKILL: the same command, run again at once,
// is healthy within 10 s, every time. The server is killed at random points (during its first
// migrations, in the middle of concurrent refresh races, while webhook deliveries are pending or
// in flight), three ways: the server alone (its PostgreSQL then shuts down through the
// watchdog), the server and the watchdog (PostgreSQL is left an orphan, which the next start
// recognises and stops), and once the server and PostgreSQL itself (power loss: PostgreSQL's own
// crash recovery). inference-server --auth, which mounts the same service on the same data
// directory, is killed and restarted the same way. At the end, every rotation, revocation and
// login that was answered 200 is in the database with its audit row, and every outbox event was
// delivered at least once, and delivered again only by a later process (an attempt killed after
// the receiver had it).
//
// The commands run from JavaScript, as installed (`auth-server` is dist/auth/server-main.js):
// src/ is transpiled once with esbuild (the project's bundler, scripts/bundle.mjs) into a
// directory laid out like the package (node_modules, build/ and vendor/ linked). The 10 s then
// measure what a user's restart takes, not ts-node transpiling every module in the process and
// again in its worker thread (7-10 s on its own on the 2-core VM under load).
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import t from 'tap';
import { build } from 'esbuild';
import { ensureTestModels } from '../fixtures/models.js';
import { until } from './fixtures/webhook-receiver.js';

const ADMIN_KEY = 'embedded-crash-admin-key-0123';
const ROUNDS = 20;
const INFERENCE_ROUNDS = 3;
const HEALTHY_WITHIN_MS = 10_000;
const root = await fs.mkdtemp(path.join(os.tmpdir(), 'auth-embedded-crash-'));
await fs.chmod(root, 0o711); // as root, PostgreSQL runs as the postgres user, which must enter it
const dataDir = path.join(root, 'data');
t.teardown(() => fs.rm(root, { recursive: true, force: true }));
const models = await ensureTestModels();
const pkg = await compiledPackage(path.join(root, 'pkg'));

/** src/ transpiled to `<dir>/dist/` beside links to the checkout's node_modules, build/, vendor/, package.json and built pages (dist/web: `npm test` builds them first). */
async function compiledPackage(dir: string): Promise<string> {
  const repo = path.resolve('.');
  const sources = (await fs.readdir('src', { recursive: true }))
    .filter((file) => file.endsWith('.ts') && !file.startsWith(`web${path.sep}`))
    .map((file) => path.join('src', file));
  await build({ entryPoints: sources, outbase: 'src', outdir: path.join(dir, 'dist'), format: 'esm', platform: 'node', target: 'node20', logLevel: 'warning' });
  await fs.cp('src/auth/migrations', path.join(dir, 'dist', 'auth', 'migrations'), { recursive: true });
  for (const name of ['node_modules', 'build', 'vendor', 'package.json', 'dist/web']) await fs.symlink(path.join(repo, name), path.join(dir, name));
  return dir;
}

// A webhook receiver that records when each message id arrived; `holdMs` delays the answers, so
// that a kill can land while a delivery is in flight (then the receiver has it and the outbox does
// not know).
const receipts = new Map<string, number[]>();
let holdMs = 0;
const receiver = http.createServer((req, res) => {
  req.resume().on('end', () => {
    const id = String(req.headers['webhook-id']);
    receipts.set(id, [...(receipts.get(id) ?? []), Date.now()]);
    setTimeout(() => res.writeHead(200).end(), holdMs);
  });
});
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
t.teardown(() => new Promise<void>((resolve) => { receiver.closeAllConnections(); receiver.close(() => resolve()); }));
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;

type Command = 'auth-server' | 'inference-server';
const COMMANDS: Record<Command, { args: string[]; ready: RegExp }> = {
  'auth-server': { args: [path.join(pkg, 'dist/auth/server-main.js'), '--port', '0', '--data-dir', dataDir, '--workers', '1'], ready: /\[auth-server\] listening on (http:\/\/[\d.]+:\d+)/ },
  'inference-server': { args: [path.join(pkg, 'dist/inference/server-main.js'), '-m', models.chat, '-c', '256', '-np', '1', '--port', '0', '--auth'], ready: /inference-server: listening on (http:\/\/[\d.]+:\d+)/ },
};

interface Running {
  command: Command;
  child: ChildProcessWithoutNullStreams;
  base: string;
  sql: postgres.Sql;
  output: () => string;
  /** Resolves with the first match of `pattern` in the output, now or later. */
  waitFor: (pattern: RegExp) => Promise<RegExpExecArray>;
  exited: Promise<void>;
}

function launch(command: Command): { child: ChildProcessWithoutNullStreams; output: () => string; waitFor: Running['waitFor']; exited: Promise<void> } {
  const env: NodeJS.ProcessEnv = {
    ...process.env, AUTH_ADMIN_KEY: ADMIN_KEY, AUTH_DATA_DIR: dataDir, AUTH_ISSUER: 'http://auth.test',
    // Every round logs in new users from this one address, and its sessions rotate as fast as they
    // can (an answer other than 200 before the kill fails the test, so no 429 may come).
    AUTH_RATE_LIMITS: 'otp_request_ip=100000/3600,otp_verify_ip=100000/3600,refresh_family=100000/60',
    // One HTTP worker: what is killed and recovered (the embedded PostgreSQL and its watchdog) and
    // the outbox's one dispatcher are the same whatever the number of workers, and each of the ~25
    // starts then loads the service once less. Races between workers are the worker-thread files'
    // (test/auth/fixtures/on-workers.ts).
    AUTH_WORKERS: '1',
  };
  delete env.DATABASE_URL;
  delete env.NODE_ENV;
  spawnTimes.push(Date.now());
  const child = spawn(process.execPath, COMMANDS[command].args, { env });
  let output = '';
  const spawnedAt = Date.now();
  const waiters = new Set<() => void>();
  // Each line is prefixed with the milliseconds since the spawn, to tell where a slow start spent its time.
  const onData = (chunk: Buffer): void => {
    output += String(chunk).replace(/^(?=\[auth-server\]|inference-server:)/gm, () => `+${Date.now() - spawnedAt}ms `);
    for (const check of waiters) check();
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const waitFor = (pattern: RegExp): Promise<RegExpExecArray> => new Promise((resolve, reject) => {
    const check = (): void => {
      const match = pattern.exec(output);
      if (match) { waiters.delete(check); resolve(match); }
    };
    waiters.add(check);
    check();
    void exited.then(() => { if (waiters.delete(check)) reject(new Error(`${command} exited before ${pattern}: ${output}`)); });
  });
  return { child, output: () => output, waitFor, exited };
}

/** Starts the command and asserts it is healthy (JWKS served) within HEALTHY_WITHIN_MS of the spawn. */
async function start(t: { equal: (a: unknown, b: unknown, m: string) => void; ok: (v: unknown, m: string) => void }, command: Command): Promise<Running> {
  const startedAt = Date.now();
  const launched = launch(command);
  const [, base] = await launched.waitFor(COMMANDS[command].ready);
  const jwks = await fetch(`${base}/.well-known/jwks.json`);
  const elapsed = Date.now() - startedAt;
  t.equal(jwks.status, 200, `${command} serves its keys`);
  const phases = launched.output().split('\n').filter((line) => /^\+\d+ms (\[auth-server\] (stopping|embedded|applied)|inference-server: listening)/.test(line)).map((line) => line.slice(0, 60));
  t.ok(elapsed < HEALTHY_WITHIN_MS, `${command} healthy in ${elapsed} ms`, { phases });
  const [, port] = await launched.waitFor(/embedded PostgreSQL listening on 127\.0\.0\.1:(\d+)/);
  const password = (await fs.readFile(path.join(dataDir, 'postgres', 'password'), 'utf8')).trim();
  const sql = postgres(`postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/postgres`, { max: 2, onnotice: () => {} });
  return { command, ...launched, base: base!, sql };
}

async function pidsOf(parent: number): Promise<number[]> {
  const text = await fs.readFile(`/proc/${parent}/task/${parent}/children`, 'utf8');
  return text.trim().split(/\s+/).filter(Boolean).map(Number);
}

async function postmasterPid(): Promise<number> {
  return Number.parseInt(await fs.readFile(path.join(dataDir, 'postgres', 'pgdata', 'postmaster.pid'), 'utf8'), 10);
}

/** True while the process exists and is not a zombie. */
async function alive(pid: number): Promise<boolean> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  return stat !== null && stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
}

type KillMode = 'server' | 'server and watchdog' | 'server and postgres';

/** The kill in progress (null between kills): requests may go unanswered only then. */
let killing: KillMode | null = null;
/** When each server process was spawned (ms): a webhook message may arrive again only from a later one. */
const spawnTimes: number[] = [];

/** SIGKILL as `mode` says; resolves once the server process is gone. */
async function kill(running: Running, mode: KillMode): Promise<void> {
  killing = mode;
  await running.sql.end({ timeout: 0 });
  if (mode === 'server and watchdog') {
    // The watchdog shell and its reader first (everything of the process tree but postgres):
    // a server alive a moment longer cannot have them stop postgres.
    const postmaster = await postmasterPid();
    for (const watchdog of await pidsOf(running.child.pid!)) {
      for (const pid of await pidsOf(watchdog)) if (pid !== postmaster) process.kill(pid, 'SIGKILL');
      process.kill(watchdog, 'SIGKILL');
    }
  }
  if (mode === 'server and postgres') process.kill(await postmasterPid(), 'SIGKILL');
  running.child.kill('SIGKILL');
  await running.exited;
}

async function json(method: string, url: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const response = await fetch(url, { method, headers: { 'content-type': 'application/json', ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: response.status, body: await response.json() };
}

const sha256 = (text: string): Buffer => createHash('sha256').update(text).digest();

// What the clients were told was done: each must be in the database at the end.
const committed = { rotations: [] as string[], revocations: [] as string[], logins: [] as string[] };
let credentials: { app_id: string; app_secret: string };
let users = 0;

async function login(running: Running): Promise<string> {
  const email = `user-${++users}@example.com`;
  const requested = await json('POST', `${running.base}/auth/otp/request`, { ...credentials, email });
  if (requested.status !== 200) throw new Error(`code request: ${requested.status} ${JSON.stringify(requested.body)}`);
  const [, code] = await running.waitFor(new RegExp(`one-time code for email ${email.replace('.', '\\.')} \\(app [0-9a-f-]+\\): (\\d{6})`));
  const verified = await json('POST', `${running.base}/auth/otp/verify`, { ...credentials, email, code });
  if (verified.status !== 200) throw new Error(`verify: ${verified.status} ${JSON.stringify(verified.body)}`);
  committed.logins.push(verified.body.user_id);
  return verified.body.refresh_token;
}

type RefreshOutcome = { status: number; body: any } | 'cut by the kill';

/** POST /auth/refresh; a request without an answer is 'cut by the kill', and throws when no kill had begun. */
async function refresh(running: Running, token: string): Promise<RefreshOutcome> {
  try {
    return await json('POST', `${running.base}/auth/refresh`, { ...credentials, refresh_token: token });
  } catch (error) {
    if (killing === null) throw new Error(`a refresh went unanswered before the kill: ${String(error)}`);
    return 'cut by the kill';
  }
}

/**
 * Rotates the session as fast as it can until the kill cuts a request; records every rotation
 * answered 200 and calls `rotated` after each. Every other answer is pushed to `unexpected`: until
 * the kill the server rotates every time, and the only other answer allowed is a 5xx while the
 * server is about to die after its PostgreSQL was killed (the request then repeats, and the next
 * one is cut).
 */
async function refreshChain(running: Running, token: string, rotated: () => void, unexpected: string[]): Promise<number> {
  let rotations = 0;
  for (;;) {
    const outcome = await refresh(running, token);
    if (outcome === 'cut by the kill') return rotations;
    if (outcome.status === 200) {
      token = outcome.body.refresh_token;
      committed.rotations.push(token);
      rotations++;
      rotated();
    } else if (!(killing === 'server and postgres' && outcome.status >= 500)) {
      unexpected.push(`${outcome.status} ${JSON.stringify(outcome.body)} (${killing === null ? 'before the kill' : `during the kill of the ${killing}`})`);
      return rotations;
    }
  }
}

/** Resolves with `promise`, or rejects naming `what` after `ms`. */
function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => { timer = setTimeout(() => reject(new Error(`not within ${ms} ms: ${what}`)), ms); });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const RECOVERY = /database system was not properly shut down; automatic recovery in progress/g;

const randomMs = (max: number): number => Math.floor(Math.random() * max);

/** Occurrences of PostgreSQL's crash recovery in its log (appended to by every start). */
async function recoveries(): Promise<number> {
  return ((await fs.readFile(path.join(dataDir, 'postgres', 'postgres.log'), 'utf8')).match(RECOVERY) ?? []).length;
}

/** Whether the next start must find the killed server's PostgreSQL still running. */
const modeLeavesOrphan: Record<KillMode, boolean> = { server: false, 'server and watchdog': true, 'server and postgres': false };
let lastPostmaster = 0;

/**
 * What each kill left: the server alone, its watchdog shuts PostgreSQL down cleanly (no
 * postmaster.pid left); the watchdog killed too, PostgreSQL keeps running (an orphan for the next
 * start); PostgreSQL killed too, it is gone and its postmaster.pid stays behind.
 */
async function checkKilled(t: { ok: (v: unknown, m: string) => unknown; equal: (a: unknown, b: unknown, m: string) => unknown }, round: number, mode: KillMode, postmaster: number): Promise<void> {
  lastPostmaster = postmaster;
  const pidFile = path.join(dataDir, 'postgres', 'pgdata', 'postmaster.pid');
  if (mode === 'server and watchdog') {
    t.ok(await alive(postmaster), `round ${round}: PostgreSQL (PID ${postmaster}) runs on without its watchdog`);
    return;
  }
  t.ok(await until(async () => !(await alive(postmaster)), 10_000), `round ${round}: PostgreSQL (PID ${postmaster}) is gone after the kill of the ${mode}`);
  const pidFileLeft = await fs.access(pidFile).then(() => true, () => false);
  t.equal(pidFileLeft, mode === 'server and postgres', mode === 'server' ? `round ${round}: the watchdog shut it down cleanly` : `round ${round}: killed, it left its postmaster.pid`);
}

t.test('killed at random points, the same command comes back healthy and nothing committed is lost', async (t) => {
  // Round 0: killed during its first migrations.
  const first = launch('auth-server');
  await first.waitFor(/embedded PostgreSQL listening/);
  first.child.kill('SIGKILL');
  await first.exited;
  t.notMatch(first.output(), /applied migrations/, 'killed before the migrations committed');

  let running = await start(t, 'auth-server');
  t.match(running.output(), /applied migrations: 0001_create_apps\.sql/, 'the restart applies them');
  const app = await json('POST', `${running.base}/admin/apps`, { slug: 'crash', name: 'Crash' }, { 'x-admin-key': ADMIN_KEY });
  t.equal(app.status, 201);
  credentials = { app_id: app.body.id, app_secret: app.body.app_secret };
  const hook = await json('POST', `${running.base}/admin/apps/${app.body.id}/webhooks`, {
    url: receiverUrl, event_types: ['login.succeeded', 'token.refreshed', 'token.reuse_detected', 'session.revoked'],
  }, { 'x-admin-key': ADMIN_KEY });
  t.equal(hook.status, 201);

  const modes: KillMode[] = [];
  const spentTwice: string[] = [];
  for (let round = 1; round <= ROUNDS + INFERENCE_ROUNDS; round++) {
    const mode: KillMode = round === 7 ? 'server and postgres' : round % 2 === 0 ? 'server and watchdog' : 'server';
    modes.push(mode);
    const tokens = await Promise.all([login(running), login(running), login(running)]);
    if (round % 2 === 1) {
      // A refresh race: two sessions rotate as fast as they can, and a third one's token is spent
      // twice at once (one rotation wins, the other request is a replay that revokes the family).
      // The kill lands at a random point once both sessions have rotated at least once.
      holdMs = 0;
      const unexpected: string[] = [];
      const rotatedOnce: Array<() => void> = [];
      const firstRotations = tokens.slice(0, 2).map(() => new Promise<void>((resolve) => rotatedOnce.push(resolve)));
      const chains = tokens.slice(0, 2).map((token, i) => refreshChain(running, token, rotatedOnce[i]!, unexpected));
      const spent = tokens[2]!;
      const race = await Promise.all([0, 1].map(() => refresh(running, spent)));
      for (const outcome of race) if (outcome !== 'cut by the kill' && outcome.status === 200) committed.rotations.push(outcome.body.refresh_token);
      t.same(race.map((o) => (o === 'cut by the kill' ? o : o.status === 200 ? '200' : `${o.status} ${o.body?.error?.code}`)).sort(), ['200', '401 TOKEN_REUSE'],
        `round ${round}: a token spent twice at once rotates once, and the other request is TOKEN_REUSE`);
      spentTwice.push(spent);
      await within(Promise.all(firstRotations), 10_000, `round ${round}: both sessions rotated once (unexpected answers: ${unexpected.join('; ')})`);
      await new Promise((resolve) => setTimeout(resolve, randomMs(250)));
      const postmaster = await postmasterPid();
      await kill(running, mode);
      const rotations = await within(Promise.all(chains), 10_000, `round ${round}: the kill ends both refresh loops`);
      t.same(unexpected, [], `round ${round}: every refresh answered before the kill was a rotation (${rotations.join(' and ')})`);
      await checkKilled(t, round, mode, postmaster);
    } else {
      // Webhooks pending: revocations commit their deliveries; the receiver answers slowly, so
      // the kill finds some deliveries pending and some in flight.
      holdMs = 150;
      for (const token of tokens) {
        const revoked = await json('POST', `${running.base}/auth/revoke`, { ...credentials, refresh_token: token });
        t.equal(revoked.status, 200);
        committed.revocations.push(token);
      }
      await new Promise((resolve) => setTimeout(resolve, randomMs(400)));
      const postmaster = await postmasterPid();
      await kill(running, mode);
      await checkKilled(t, round, mode, postmaster);
    }
    const recoveriesBefore = await recoveries();
    const command: Command = round > ROUNDS ? 'inference-server' : 'auth-server';
    running = await start(t, command);
    killing = null;
    const orphan = /stopping the embedded PostgreSQL \(PID (\d+)\) left running on .* by a process that is gone/.exec(running.output());
    t.equal(orphan ? Number(orphan[1]) : null, modeLeavesOrphan[mode] ? lastPostmaster : null,
      modeLeavesOrphan[mode] ? `round ${round}: the orphan PostgreSQL was recognised by its PID and stopped` : `round ${round}: no orphan was left`);
    t.equal(await recoveries(), recoveriesBefore + (mode === 'server and postgres' ? 1 : 0),
      mode === 'server and postgres' ? `round ${round}: after the power loss PostgreSQL recovered from its WAL` : `round ${round}: PostgreSQL had shut down cleanly`);
  }

  holdMs = 0;
  const sql = running.sql;
  const tokenRows = await sql<{ hash: Buffer; family_id: string }[]>`select token_hash as hash, family_id from refresh_tokens`;
  const familyOf = new Map(tokenRows.map((row) => [row.hash.toString('hex'), row.family_id]));
  const missingRotations = committed.rotations.filter((token) => !familyOf.has(sha256(token).toString('hex')));
  t.same(missingRotations, [], `all ${committed.rotations.length} rotations answered 200 are stored`);
  const refreshedAudit = new Map((await sql<{ family_id: string; n: number }[]>`
    select family_id, count(*)::int as n from audit_events where type = 'token.refreshed' group by family_id
  `).map((row) => [row.family_id, row.n]));
  const rotationsPerFamily = new Map<string, number>();
  for (const token of committed.rotations) {
    const family = familyOf.get(sha256(token).toString('hex'))!;
    rotationsPerFamily.set(family, (rotationsPerFamily.get(family) ?? 0) + 1);
  }
  t.same([...rotationsPerFamily].filter(([family, n]) => (refreshedAudit.get(family) ?? 0) < n), [], 'each has its token.refreshed audit row');
  const revokedFamilies = new Set((await sql<{ family_id: string }[]>`
    select f.id as family_id from refresh_families f
    where f.revoked_at is not null and exists (select 1 from audit_events a where a.type = 'session.revoked' and a.family_id = f.id)
  `).map((row) => row.family_id));
  t.same(committed.revocations.filter((token) => !revokedFamilies.has(familyOf.get(sha256(token).toString('hex'))!)), [],
    `all ${committed.revocations.length} revocations answered 200 are stored with their audit row`);
  const reused = new Set((await sql<{ family_id: string }[]>`
    select f.id as family_id from refresh_families f
    where f.revoked_at is not null and exists (select 1 from audit_events a where a.type = 'token.reuse_detected' and a.family_id = f.id)
  `).map((row) => row.family_id));
  t.same(spentTwice.filter((token) => !reused.has(familyOf.get(sha256(token).toString('hex'))!)), [],
    `all ${spentTwice.length} sessions whose token was spent twice are revoked with their token.reuse_detected row`);
  const loggedIn = new Set((await sql<{ user_id: string }[]>`select user_id from audit_events where type = 'login.succeeded'`).map((row) => row.user_id));
  t.same(committed.logins.filter((user) => !loggedIn.has(user)), [], `all ${committed.logins.length} logins have their audit row`);

  // The outbox: one delivery per subscribed event, each received at least once.
  const [events] = await sql<{ n: number }[]>`
    select count(*)::int as n from audit_events
    where app_id = ${credentials.app_id} and type in ('login.succeeded', 'token.refreshed', 'token.reuse_detected', 'session.revoked')
  `;
  const [deliveries] = await sql<{ n: number }[]>`select count(*)::int as n from webhook_deliveries`;
  t.equal(deliveries!.n, events!.n, 'every subscribed event has its delivery');
  t.ok(await until(async () => (await sql`select 1 from webhook_deliveries where state <> 'delivered'`).length === 0, 30_000), 'every delivery is delivered after the last restart');
  const ids = (await sql<{ id: string }[]>`select id::text from webhook_deliveries`).map((row) => `msg_${row.id}`);
  t.same(ids.filter((id) => !receipts.has(id)), [], `all ${ids.length} outbox events were received`);
  t.same([...receipts.keys()].filter((id) => !ids.includes(id)), [], 'and nothing else');
  // A message arrives again only when the process that sent it was killed before it could record
  // the delivery: between any two arrivals of one message, a new server process was spawned.
  // (Not "a kill began": a dying server's last request can reach the receiver after the kill's start.)
  const unexplained = [...receipts].filter(([, times]) => times.slice(1).some((time, i) => !spawnTimes.some((spawned) => spawned > times[i]! && spawned < time)));
  t.same(unexplained, [], 'no message arrived twice from one server process');
  const duplicates = [...receipts.values()].filter((times) => times.length > 1).length;
  t.comment(`${ids.length} outbox events, ${duplicates} received more than once (a kill between the receiver's answer and the commit of "delivered")`);

  await sql.end({ timeout: 0 });
  running.child.kill('SIGTERM');
  await running.exited;
  t.equal(running.child.exitCode, 0, 'the last one stops cleanly', { output: running.output().slice(-3000) });
  await t.rejects(fs.access(path.join(dataDir, 'postgres', 'pgdata', 'postmaster.pid')), 'and its PostgreSQL with it');
});

t.test('a second instance on a data directory in use is refused, and the first one is untouched', async (t) => {
  const running = await start(t, 'auth-server');
  t.teardown(async () => { await running.sql.end({ timeout: 0 }); running.child.kill('SIGTERM'); await running.exited; });
  const second = launch('auth-server');
  await second.exited;
  t.equal(second.child.exitCode, 1);
  t.match(second.output(), /failed to start: the embedded PostgreSQL in .*pgdata is in use by the running process \d+ \(its PostgreSQL is PID \d+\); stop it or choose another data directory/);
  t.equal((await json('GET', `${running.base}/admin/apps`, undefined, { 'x-admin-key': ADMIN_KEY })).status, 200, 'the first still serves');
  const [row] = await running.sql<{ one: number }[]>`select 1 as one`;
  t.equal(row!.one, 1, 'on its database');
});
