// Auth service throughput next to the raw RS256 rates of the same machine, measured in the same
// run: POST /auth/refresh per second against RSA-2048 signatures per second, and GET /auth/me
// per second against jose verifications per second. Targets (issue 11): refresh >= 0.5x the
// concurrent sign rate, /auth/me >= 0.5x the concurrent verify rate.
//
//   node --import ./scripts/ts-loader.mjs bench/auth.ts      (or: BENCH_SKIP_INFERENCE=1 npm run bench)
//
// The service runs in this process exactly as auth-server does (startAuthWorkers: embedded
// PostgreSQL without fsync, AUTH_BENCH_WORKERS worker threads on one port, default one per
// core, each with auth-server's default pool). The load comes from another worker thread that
// keeps CLIENTS keep-alive HTTP/1.1 connections busy, one request in flight each, over raw
// sockets so that the client costs little CPU; the kernel spreads the connections over the
// service's workers. Each refresh client follows its own session: every answer's refresh token
// is sent next. Each /auth/me client sends its one access token again and again, as an app does
// for a user during the token's life, so the service's token cache answers after the first
// request; the same load is measured again on a server with the cache off (every request
// verifies a signature), for context. Passkeys: each client holds a P-256 passkey registered
// through the API (a software authenticator here: attestation "none", assertions signed with
// node:crypto) and logs in again and again, options then verify on its connection; the rows give
// the rate of whole passkey logins, of the options route alone, and the CPU per login.
// The provider (issue 46): client_credentials tokens per second (each a signature), and code
// flows per second of a signed-in browser: GET /oauth/authorize answered with a code at once,
// then its exchange at POST /oauth/token (PKCE, a new session, an access and an id_token); each
// also per core.
import { createHash, createPrivateKey, generateKeyPairSync, sign, type KeyObject } from 'node:crypto';
import { readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { importJWK, jwtVerify, type JWK } from 'jose';

export interface BenchResult {
  name: string;
  value: number;
  unit: string;
}

const CLIENTS = 32;
const DURATION_MS = Number(process.env.AUTH_BENCH_SECONDS ?? 5) * 1000;
const WARMUP_MS = 1000;
const WORKERS = Number(process.env.AUTH_BENCH_WORKERS || os.availableParallelism());

export async function runAuthBench(): Promise<BenchResult[]> {
  const { startAuthWorkers } = await import('../src/auth/workers/auth-workers.js');
  const { workerPoolSize } = await import('../src/auth/config.js');
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'auth-bench-'));
  await fs.chmod(dataDir, 0o711); // as root, PostgreSQL runs as the postgres user
  const codes = new Map<string, string>();
  const service = {
    dataDir,
    keyDir: path.join(dataDir, 'keys'),
    issuer: 'http://auth.bench',
    adminKey: 'bench-admin-key-0123456789',
    otpDelivery: { name: 'bench', send: async (m: { to: string; code: string }) => { codes.set(m.to, m.code); } },
    otpLimits: { appHourly: 1_000_000 },
    // The rate limits stay on (every refresh counts its app and its session, as in production),
    // with limits the load never reaches: each client refreshes its one session back to back, and
    // every client signs in from this one address.
    rateLimits: {
      refresh_app: { maxHits: 1_000_000_000, windowSeconds: 60 },
      refresh_family: { maxHits: 1_000_000_000, windowSeconds: 60 },
      otp_request_ip: { maxHits: 1_000_000, windowSeconds: 3600 },
      otp_verify_ip: { maxHits: 1_000_000, windowSeconds: 3600 },
      passkey_ceremony_ip: { maxHits: 1_000_000_000, windowSeconds: 60 },
      oauth_authorize_ip: { maxHits: 1_000_000_000, windowSeconds: 60 },
      oauth_token_ip: { maxHits: 1_000_000_000, windowSeconds: 60 },
    },
    disposableDatabase: true,
    databasePoolSize: workerPoolSize(WORKERS),
    log: () => {},
  };
  const server = await startAuthWorkers({ host: '127.0.0.1', port: 0, workers: WORKERS, service });
  try {
    const base = `http://127.0.0.1:${server.port}`;
    const app = await (await fetch(`${base}/admin/apps`, {
      method: 'POST', headers: { 'x-admin-key': 'bench-admin-key-0123456789', 'content-type': 'application/json' },
      body: JSON.stringify({ slug: 'bench', name: 'Bench' }),
    })).json() as { id: string; app_secret: string };
    const sessions: { refresh_token: string; access_token: string }[] = [];
    for (let i = 0; i < CLIENTS; i++) {
      const email = `user${i}@bench.test`;
      const credentials = { app_id: app.id, app_secret: app.app_secret };
      await fetch(`${base}/auth/otp/request`, { method: 'POST', body: JSON.stringify({ ...credentials, email }) });
      sessions.push(await (await fetch(`${base}/auth/otp/verify`, {
        method: 'POST', body: JSON.stringify({ ...credentials, email, code: codes.get(email) }),
      })).json() as { refresh_token: string; access_token: string });
    }
    // Registered before the refresh load rotates the sessions' tokens.
    const passkeys = await registerPasskeys(base, app, sessions.map((s) => s.refresh_token));
    // Each raw rate is measured right before the HTTP figure it is compared with, so that a
    // change in background load during the run skews both alike.
    const rawSign = measureRawSign();
    const rawSignConcurrent = await measureRawSignConcurrent();
    const databasePids = async (): Promise<number[]> => (await server.service.sql`select pid from pg_stat_activity`).map((row) => row.pid as number);
    const refresh = await runLoad({
      port: server.port, kind: 'refresh', appId: app.id, appSecret: app.app_secret, tokens: sessions.map((s) => s.refresh_token),
    }, databasePids);
    const rawVerify = await measureRawVerify(1);
    const rawVerifyConcurrent = await measureRawVerify(CLIENTS);
    const me = await runLoad({ port: server.port, kind: 'me', appId: app.id, appSecret: app.app_secret, tokens: sessions.map((s) => s.access_token) }, databasePids);
    const passkeyLogin = await runLoad({ port: server.port, kind: 'passkey-login', appId: app.id, appSecret: app.app_secret, tokens: passkeys }, databasePids);
    const passkeyOptions = await runLoad({ port: server.port, kind: 'passkey-options', appId: app.id, appSecret: app.app_secret, tokens: passkeys }, databasePids);
    const oauth = await providerClients(base, app.id, codes);
    const clientCredentials = await runLoad({ port: server.port, kind: 'client-credentials', appId: app.id, appSecret: app.app_secret, tokens: oauth.backend }, databasePids);
    const codeFlow = await runLoad({ port: server.port, kind: 'code-flow', appId: app.id, appSecret: app.app_secret, tokens: oauth.browsers }, databasePids);
    // The same load on a second server of the same database without the token cache: every
    // request verifies its signature, as for tokens each seen once.
    const uncached = await startAuthWorkers({ host: '127.0.0.1', port: 0, workers: WORKERS, service: { ...service, databaseUrl: server.service.databaseUrl, verifiedTokenCacheSize: 0 } });
    const meUncached = await runLoad({ port: uncached.port, kind: 'me', appId: app.id, appSecret: app.app_secret, tokens: sessions.map((s) => s.access_token) }, databasePids)
      .finally(() => uncached.close());
    return [
      { name: 'raw RS256 sign (node:crypto, sequential)', value: rawSign, unit: 'ops/s' },
      { name: `raw RS256 sign (node:crypto async, ${CLIENTS} in flight)`, value: rawSignConcurrent, unit: 'ops/s' },
      { name: 'raw RS256 verify (jose, sequential)', value: rawVerify, unit: 'ops/s' },
      { name: `raw RS256 verify (jose, ${CLIENTS} in flight)`, value: rawVerifyConcurrent, unit: 'ops/s' },
      { name: `POST /auth/refresh (${CLIENTS} clients, ${WORKERS} workers)`, value: refresh.rate, unit: 'req/s' },
      { name: `GET /auth/me (${CLIENTS} clients, ${WORKERS} workers)`, value: me.rate, unit: 'req/s' },
      { name: 'GET /auth/me, token cache off (every request verifies)', value: meUncached.rate, unit: 'req/s' },
      { name: 'refresh / raw sign (sequential)', value: refresh.rate / rawSign, unit: 'ratio' },
      { name: 'refresh / raw sign (concurrent; target >= 0.5)', value: refresh.rate / rawSignConcurrent, unit: 'ratio' },
      { name: '/auth/me / raw verify (sequential)', value: me.rate / rawVerify, unit: 'ratio' },
      { name: '/auth/me / raw verify (concurrent; target >= 0.5)', value: me.rate / rawVerifyConcurrent, unit: 'ratio' },
      { name: '/auth/me, token cache off / raw verify (concurrent)', value: meUncached.rate / rawVerifyConcurrent, unit: 'ratio' },
      { name: 'refresh: CPU per request, this process (service workers + load client)', value: refresh.cpu.process, unit: 'ms' },
      { name: 'refresh: CPU per request, PostgreSQL backends', value: refresh.cpu.database, unit: 'ms' },
      { name: `refresh: ceiling on ${os.availableParallelism()} cores at that CPU cost`, value: os.availableParallelism() * 1000 / (refresh.cpu.process + refresh.cpu.database), unit: 'req/s' },
      { name: '/auth/me: CPU per request, this process (service workers + load client)', value: me.cpu.process, unit: 'ms' },
      { name: `/auth/me: ceiling on ${os.availableParallelism()} cores at that CPU cost`, value: os.availableParallelism() * 1000 / (me.cpu.process + me.cpu.database), unit: 'req/s' },
      { name: `passkey login, options + verify (${CLIENTS} clients, ${WORKERS} workers)`, value: passkeyLogin.rate, unit: 'logins/s' },
      { name: 'passkey login: CPU per login, this process (service workers + load client)', value: passkeyLogin.cpu.process, unit: 'ms' },
      { name: 'passkey login: CPU per login, PostgreSQL backends', value: passkeyLogin.cpu.database, unit: 'ms' },
      { name: `POST /auth/passkeys/login/options (${CLIENTS} clients, ${WORKERS} workers)`, value: passkeyOptions.rate, unit: 'req/s' },
      { name: 'passkey login / raw sign (concurrent)', value: passkeyLogin.rate / rawSignConcurrent, unit: 'ratio' },
      { name: `POST /oauth/token client_credentials (${CLIENTS} clients, ${WORKERS} workers)`, value: clientCredentials.rate, unit: 'req/s' },
      { name: `client_credentials per core (${os.availableParallelism()} cores)`, value: clientCredentials.rate / os.availableParallelism(), unit: 'req/s' },
      { name: 'client_credentials / raw sign (concurrent)', value: clientCredentials.rate / rawSignConcurrent, unit: 'ratio' },
      { name: `code flow, signed in: authorize + code exchange (${CLIENTS} clients, ${WORKERS} workers)`, value: codeFlow.rate, unit: 'flows/s' },
      { name: `code flow per core (${os.availableParallelism()} cores)`, value: codeFlow.rate / os.availableParallelism(), unit: 'flows/s' },
      { name: 'code flow: CPU per flow, this process (service workers + load client)', value: codeFlow.cpu.process, unit: 'ms' },
      { name: 'code flow: CPU per flow, PostgreSQL backends', value: codeFlow.cpu.database, unit: 'ms' },
      { name: 'refresh non-200 answers', value: refresh.failures, unit: 'count' },
      { name: 'provider non-2xx answers', value: clientCredentials.failures + codeFlow.failures, unit: 'count' },
      { name: '/auth/me non-200 answers', value: me.failures + meUncached.failures, unit: 'count' },
      { name: 'passkey non-200 answers', value: passkeyLogin.failures + passkeyOptions.failures, unit: 'count' },
    ];
  } finally {
    await server.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// The provider's load: a backend client (client_credentials), and one signed-in browser per
// load client (its auth_browser cookie) with a public client and its PKCE pair.

const REDIRECT = 'https://bench.test/callback';

interface BenchBrowser { cookie: string; clientId: string; verifier: string; challenge: string }

async function providerClients(base: string, appId: string, codes: Map<string, string>): Promise<{ backend: string[]; browsers: string[] }> {
  const admin = { 'x-admin-key': 'bench-admin-key-0123456789', 'content-type': 'application/json' };
  const make = async (body: unknown): Promise<{ client_id: string; client_secret?: string }> => {
    const response = await fetch(`${base}/admin/apps/${appId}/oauth-clients`, { method: 'POST', headers: admin, body: JSON.stringify(body) });
    if (response.status !== 201) throw new Error(`oauth client: ${response.status} ${await response.text()}`);
    return response.json() as Promise<{ client_id: string; client_secret?: string }>;
  };
  const backend = await make({ name: 'Bench backend', grant_types: ['client_credentials'], scopes: ['jobs'] });
  const web = await make({ name: 'Bench SPA', client_type: 'public', redirect_uris: [REDIRECT] });
  const browsers: string[] = [];
  for (let i = 0; i < CLIENTS; i++) {
    const verifier = createHash('sha256').update(`verifier ${i}`).digest('base64url');
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    const page = await fetch(`${base}${authorizePath(web.client_id, challenge)}`, { redirect: 'manual' });
    const cookie = page.headers.get('set-cookie')!.split(';')[0]!;
    const html = await page.text();
    const fields = { request: /name="request" value="([^"]+)"/.exec(html)![1]!, csrf: /name="csrf" value="([^"]+)"/.exec(html)![1]! };
    const form = { 'content-type': 'application/x-www-form-urlencoded', cookie };
    const email = `oauth${i}@bench.test`;
    await fetch(`${base}/oauth/sign-in/email`, { method: 'POST', headers: form, body: new URLSearchParams({ ...fields, email }).toString(), redirect: 'manual' });
    const signedIn = await fetch(`${base}/oauth/sign-in/code`, { method: 'POST', headers: form, body: new URLSearchParams({ ...fields, code: codes.get(email)! }).toString(), redirect: 'manual' });
    if (signedIn.status !== 303) throw new Error(`bench sign-in: ${signedIn.status}`);
    browsers.push(JSON.stringify({ cookie, clientId: web.client_id, verifier, challenge } satisfies BenchBrowser));
  }
  const basic = Buffer.from(`${backend.client_id}:${backend.client_secret}`).toString('base64');
  return { backend: Array.from({ length: CLIENTS }, () => basic), browsers };
}

function authorizePath(clientId: string, challenge: string): string {
  return `/oauth/authorize?${new URLSearchParams({
    client_id: clientId, redirect_uri: REDIRECT, response_type: 'code', scope: 'openid offline_access', code_challenge: challenge, code_challenge_method: 'S256',
  })}`;
}

/** One code flow of a signed-in browser on the connection: the authorize redirect's code, then its exchange. */
async function codeFlowOnce(connection: Connection, browser: BenchBrowser): Promise<boolean> {
  const redirect = await connection.exchange(`GET ${authorizePath(browser.clientId, browser.challenge)} HTTP/1.1\r\nhost: bench\r\ncookie: ${browser.cookie}\r\n\r\n`);
  const location = /\r\nlocation: *([^\r]+)/i.exec(redirect.head)?.[1];
  const code = location ? new URL(location).searchParams.get('code') : null;
  if (redirect.status !== 303 || !code) return false;
  const form = new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: browser.verifier, client_id: browser.clientId }).toString();
  const token = await connection.exchange(`POST /oauth/token HTTP/1.1\r\nhost: bench\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: ${form.length}\r\n\r\n${form}`);
  return token.status === 200;
}

// ---------------------------------------------------------------------------------------------
// A software authenticator for the passkey rows: P-256 keys, attestation "none", and assertions
// with user presence and verification, their counter growing by one each time.

const RP_ID = 'bench.test';
const ORIGIN = 'https://bench.test';

interface BenchPasskey { id: string; privateKeyPem: string; counter: number }

/** Registers one passkey per session through the API; returns each as JSON for the load worker. */
async function registerPasskeys(base: string, app: { id: string; app_secret: string }, refreshTokens: string[]): Promise<string[]> {
  const credentials = { app_id: app.id, app_secret: app.app_secret };
  const post = async (route: string, body: unknown): Promise<any> => {
    const response = await fetch(`${base}${route}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    if (response.status >= 300) throw new Error(`${route}: ${response.status} ${await response.text()}`);
    return response.json();
  };
  const settings = await fetch(`${base}/admin/apps/${app.id}/passkeys`, {
    method: 'PUT', headers: { 'x-admin-key': 'bench-admin-key-0123456789', 'content-type': 'application/json' },
    body: JSON.stringify({ rp_id: RP_ID, rp_name: 'Bench', origins: [ORIGIN] }),
  });
  if (settings.status !== 200) throw new Error(`passkey settings: ${settings.status}`);
  const passkeys: string[] = [];
  for (const refreshToken of refreshTokens) {
    const started = await post('/auth/passkeys/register/options', { ...credentials, refresh_token: refreshToken });
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = publicKey.export({ format: 'jwk' });
    const id = createHash('sha256').update(publicKey.export({ format: 'der', type: 'spki' })).digest().subarray(0, 16);
    // COSE_Key (RFC 9053): kty EC2, alg ES256, crv P-256, x, y.
    const cose = cbor(new Map<number, unknown>([[1, 2], [3, -7], [-1, 1], [-2, Buffer.from(jwk.x!, 'base64url')], [-3, Buffer.from(jwk.y!, 'base64url')]]));
    const authData = Buffer.concat([
      createHash('sha256').update(RP_ID).digest(), Buffer.from([0x45]), Buffer.alloc(4), // UP, UV, AT; counter 0
      Buffer.alloc(16), Buffer.from([0, id.length]), id, cose, // AAGUID, credential id, public key
    ]);
    const attestationObject = cbor(new Map<string, unknown>([['fmt', 'none'], ['attStmt', new Map()], ['authData', authData]]));
    const clientDataJSON = Buffer.from(JSON.stringify({ type: 'webauthn.create', challenge: started.options.challenge, origin: ORIGIN }));
    await post('/auth/passkeys/register/verify', {
      ...credentials, refresh_token: refreshToken, ceremony_id: started.ceremony_id,
      response: {
        id: id.toString('base64url'), rawId: id.toString('base64url'), type: 'public-key', clientExtensionResults: {},
        response: { clientDataJSON: clientDataJSON.toString('base64url'), attestationObject: attestationObject.toString('base64url'), transports: ['internal'] },
      },
    });
    passkeys.push(JSON.stringify({ id: id.toString('base64url'), privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }) as string, counter: 0 } satisfies BenchPasskey));
  }
  return passkeys;
}

const assertionKeys = new Map<string, KeyObject>();

/** An assertion for `challenge`: authenticatorData (UP, UV, next counter) and an ES256 signature over it and the client data's hash. */
function assertion(passkey: BenchPasskey, challenge: string): unknown {
  let key = assertionKeys.get(passkey.id);
  if (!key) assertionKeys.set(passkey.id, key = createPrivateKey(passkey.privateKeyPem));
  const counter = Buffer.alloc(4);
  counter.writeUInt32BE(++passkey.counter);
  const authenticatorData = Buffer.concat([createHash('sha256').update(RP_ID).digest(), Buffer.from([0x05]), counter]);
  const clientDataJSON = Buffer.from(JSON.stringify({ type: 'webauthn.get', challenge, origin: ORIGIN }));
  const signature = sign('sha256', Buffer.concat([authenticatorData, createHash('sha256').update(clientDataJSON).digest()]), key);
  return {
    id: passkey.id, rawId: passkey.id, type: 'public-key', clientExtensionResults: {},
    response: { clientDataJSON: clientDataJSON.toString('base64url'), authenticatorData: authenticatorData.toString('base64url'), signature: signature.toString('base64url') },
  };
}

/** The CBOR (RFC 8949) of small integers, byte and text strings and maps: what an attestation needs. */
function cbor(value: unknown): Buffer {
  const head = (major: number, n: number): Buffer => n < 24 ? Buffer.from([(major << 5) | n])
    : n < 256 ? Buffer.from([(major << 5) | 24, n]) : Buffer.from([(major << 5) | 25, n >> 8, n & 0xff]);
  if (typeof value === 'number') return value >= 0 ? head(0, value) : head(1, -1 - value);
  if (Buffer.isBuffer(value)) return Buffer.concat([head(2, value.length), value]);
  if (typeof value === 'string') return Buffer.concat([head(3, Buffer.byteLength(value)), Buffer.from(value)]);
  const entries = [...(value as Map<unknown, unknown>)];
  return Buffer.concat([head(5, entries.length), ...entries.flatMap(([k, v]) => [cbor(k), cbor(v)])]);
}

// ---------------------------------------------------------------------------------------------
// Raw RS256 rates

/** An RSA-2048 key like the service's, and a signing input of an access token's size. */
let rawKeys: { privateKey: KeyObject; publicKey: KeyObject } | null = null;
function rawKey(): { privateKey: KeyObject; publicKey: KeyObject } {
  rawKeys ??= generateKeyPairSync('rsa', { modulusLength: 2048 });
  return rawKeys;
}
const RAW_INPUT = Buffer.from(`${Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: 'k'.repeat(43) })).toString('base64url')}.${Buffer.from(JSON.stringify({
  sub: '6f1c2d3e-4b5a-4c6d-8e7f-9a0b1c2d3e4f', app_id: 'bench', iss: 'http://auth.bench', aud: 'bench', iat: 1, exp: 1801, tenant_id: null, roles: [],
})).toString('base64url')}`);

function measureRawSign(): number {
  const { privateKey } = rawKey();
  for (const end = Date.now() + WARMUP_MS / 2; Date.now() < end;) sign('sha256', RAW_INPUT, privateKey);
  let count = 0;
  const start = performance.now();
  const end = start + DURATION_MS / 2;
  while (performance.now() < end) {
    sign('sha256', RAW_INPUT, privateKey);
    count++;
  }
  return count / ((performance.now() - start) / 1000);
}

async function measureRawSignConcurrent(): Promise<number> {
  const { privateKey } = rawKey();
  const signOnce = (): Promise<void> => new Promise((resolve, reject) => sign('sha256', RAW_INPUT, privateKey, (e) => (e ? reject(e) : resolve())));
  return measureConcurrent(signOnce, CLIENTS);
}

async function measureRawVerify(inFlight: number): Promise<number> {
  const { privateKey, publicKey } = rawKey();
  const jwk = publicKey.export({ format: 'jwk' }) as JWK;
  const key = await importJWK({ ...jwk, alg: 'RS256' }, 'RS256');
  const now = Math.floor(Date.now() / 1000);
  const payload = Buffer.from(JSON.stringify({ sub: 'u', iss: 'http://auth.bench', aud: 'bench', iat: now, exp: now + 1800 })).toString('base64url');
  const input = `${Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: 'k' })).toString('base64url')}.${payload}`;
  const token = `${input}.${sign('sha256', Buffer.from(input), privateKey).toString('base64url')}`;
  const verifyOnce = async (): Promise<void> => { await jwtVerify(token, key, { algorithms: ['RS256'], issuer: 'http://auth.bench', audience: 'bench' }); };
  return measureConcurrent(verifyOnce, inFlight);
}

async function measureConcurrent(operation: () => Promise<void>, inFlight: number): Promise<number> {
  const runFor = async (ms: number): Promise<number> => {
    let count = 0;
    const end = performance.now() + ms;
    await Promise.all(Array.from({ length: inFlight }, async () => {
      while (performance.now() < end) {
        await operation();
        count++;
      }
    }));
    return count;
  };
  await runFor(WARMUP_MS / 2);
  const start = performance.now();
  const count = await runFor(DURATION_MS / 2);
  return count / ((performance.now() - start) / 1000);
}

// ---------------------------------------------------------------------------------------------
// HTTP load (worker thread)

interface LoadPlan {
  port: number;
  kind: 'refresh' | 'me' | 'passkey-login' | 'passkey-options' | 'client-credentials' | 'code-flow';
  appId: string;
  appSecret: string;
  /** One per client: its refresh token (refresh), access token (me), or passkey (JSON of BenchPasskey). */
  tokens: string[];
}

/** CPU milliseconds used so far: by this process (all its threads) and by the given PostgreSQL backends. */
function cpuMs(databasePids: number[]): { process: number; database: number } {
  const usage = process.cpuUsage();
  let ticks = 0;
  for (const pid of databasePids) {
    try {
      // Fields after the command name: state is [0], utime [11], stime [12], in clock ticks (100 Hz on Linux).
      const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // a backend that ended meanwhile
    }
  }
  return { process: (usage.user + usage.system) / 1000, database: ticks * 10 };
}

/**
 * Runs the load; `cpu` is the CPU time per counted request over the counting window, of this
 * process and of the database's backends (their pids read when the window opens).
 */
function runLoad(plan: LoadPlan, databasePids: () => Promise<number[]>): Promise<{ rate: number; failures: number; cpu: { process: number; database: number } }> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(fileURLToPath(import.meta.url), { workerData: plan });
    let pids: number[] = [];
    let start = { process: 0, database: 0 };
    let end = { process: 0, database: 0 };
    worker.on('message', (message: 'counting' | 'counted' | { rate: number; failures: number; completed: number }) => {
      if (message === 'counting') {
        start = cpuMs(pids);
        void databasePids().then((found) => { pids = found; start = cpuMs(pids); });
      } else if (message === 'counted') {
        end = cpuMs(pids);
      } else {
        const per = (key: 'process' | 'database'): number => (end[key] - start[key]) / message.completed;
        resolve({ rate: message.rate, failures: message.failures, cpu: { process: per('process'), database: per('database') } });
      }
    });
    worker.once('error', reject);
    worker.once('exit', (code) => { if (code !== 0) reject(new Error(`load worker exited with ${code}`)); });
  });
}

async function loadWorker(plan: LoadPlan): Promise<{ rate: number; failures: number; completed: number }> {
  let counting = false;
  let done = false;
  let completed = 0;
  let failures = 0;
  const clients = plan.tokens.map(async (initial) => {
    const connection = await openConnection(plan.port);
    let token = initial;
    const passkey = plan.kind.startsWith('passkey') ? JSON.parse(initial) as BenchPasskey : null;
    while (!done) {
      if (plan.kind === 'code-flow' || plan.kind === 'client-credentials') {
        const ok = plan.kind === 'code-flow'
          ? await codeFlowOnce(connection, JSON.parse(initial) as BenchBrowser)
          : (await connection.exchange(`POST /oauth/token HTTP/1.1\r\nhost: bench\r\nauthorization: Basic ${initial}\r\ncontent-type: application/x-www-form-urlencoded\r\ncontent-length: 29\r\n\r\ngrant_type=client_credentials`)).status === 200;
        if (counting) ok ? completed++ : failures++;
        continue;
      }
      if (passkey) {
        const { status, body } = await connection.exchange(jsonPost('/auth/passkeys/login/options', { app_id: plan.appId, app_secret: plan.appSecret }));
        let ok = status === 200;
        if (ok && plan.kind === 'passkey-login') {
          const started = JSON.parse(body) as { ceremony_id: string; options: { challenge: string } };
          const response = assertion(passkey, started.options.challenge);
          ok = (await connection.exchange(jsonPost('/auth/passkeys/login/verify', { app_id: plan.appId, app_secret: plan.appSecret, ceremony_id: started.ceremony_id, response }))).status === 200;
        }
        if (counting) ok ? completed++ : failures++;
        continue;
      }
      const request = plan.kind === 'refresh'
        ? jsonPost('/auth/refresh', { app_id: plan.appId, app_secret: plan.appSecret, refresh_token: token })
        : `GET /auth/me HTTP/1.1\r\nhost: bench\r\nauthorization: Bearer ${token}\r\n\r\n`;
      const { status, body } = await connection.exchange(request);
      if (status === 200) {
        if (plan.kind === 'refresh') token = (JSON.parse(body) as { refresh_token: string }).refresh_token;
        if (counting) completed++;
      } else if (counting) {
        failures++;
      }
    }
    connection.close();
  });
  await new Promise((r) => setTimeout(r, WARMUP_MS));
  counting = true;
  parentPort!.postMessage('counting');
  const start = performance.now();
  await new Promise((r) => setTimeout(r, DURATION_MS));
  counting = false;
  parentPort!.postMessage('counted');
  const seconds = (performance.now() - start) / 1000;
  done = true;
  await Promise.all(clients);
  return { rate: completed / seconds, failures, completed };
}

function jsonPost(route: string, body: unknown): string {
  const json = JSON.stringify(body);
  return `POST ${route} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(json)}\r\n\r\n${json}`;
}

/** A keep-alive connection with one request in flight; responses must carry Content-Length. */
interface Connection {
  exchange(request: string): Promise<{ status: number; head: string; body: string }>;
  close(): void;
}

async function openConnection(port: number): Promise<Connection> {
  const socket = net.connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  await new Promise<void>((resolve, reject) => { socket.once('connect', resolve); socket.once('error', reject); });
  let buffer: Buffer = Buffer.alloc(0);
  let pending: ((response: { status: number; head: string; body: string }) => void) | null = null;
  socket.on('data', (chunk: Buffer) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
    const headerEnd = buffer.indexOf('\r\n\r\n');
    if (headerEnd < 0) return;
    const head = buffer.subarray(0, headerEnd).toString('latin1');
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? 0);
    if (buffer.length < headerEnd + 4 + length) return;
    const body = buffer.subarray(headerEnd + 4, headerEnd + 4 + length).toString('utf8');
    buffer = buffer.subarray(headerEnd + 4 + length);
    const resolve = pending;
    pending = null;
    resolve?.({ status: Number(head.slice(9, 12)), head, body });
  });
  return {
    exchange(request) {
      return new Promise((resolve) => {
        pending = resolve;
        socket.write(request);
      });
    },
    close: () => socket.destroy(),
  };
}

// ---------------------------------------------------------------------------------------------

function printTable(results: BenchResult[]): void {
  const width = Math.max(...results.map((r) => r.name.length));
  for (const r of results) {
    const value = r.unit === 'ratio' || r.unit === 'ms' ? r.value.toFixed(r.unit === 'ms' ? 3 : 2) : r.unit === 'count' ? String(r.value) : r.value.toFixed(0);
    process.stdout.write(`${r.name.padEnd(width)}  ${value.padStart(9)} ${r.unit}\n`);
  }
}

if (!isMainThread && workerData) {
  parentPort!.postMessage(await loadWorker(workerData as LoadPlan));
} else if (isMainThread && process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const results = await runAuthBench();
  printTable(results);
  const ratio = (name: string): number => results.find((r) => r.name === name)!.value;
  const refreshOk = ratio('refresh / raw sign (concurrent; target >= 0.5)') >= 0.5;
  const meOk = ratio('/auth/me / raw verify (concurrent; target >= 0.5)') >= 0.5;
  process.stdout.write(`\ntargets (>= 0.5 x raw concurrent rate): refresh ${refreshOk ? 'met' : 'NOT met'}, /auth/me ${meOk ? 'met' : 'NOT met'}\n`);
}
