// Tenants' limits across replicas (issue 48, docs/tenants.md "Across replicas"), measured as part
// of the `fleet` scenario: 3 replicas of ours (-t 1 -np 1 each, the tiny test chat model: what is
// measured is admission, not generation) hold one auth-server API key's limit for the fleet, first
// on the service's database (--auth --auth-app, one DATABASE_URL), then through auth-server over
// HTTP (--auth-app --auth-issuer with the app's AUTH_APP_ID and AUTH_APP_SECRET). For each, a key
// at its requests-per-minute limit and a key at its tokens-per-minute limit take short chats round
// robin over the replicas from CLIENTS clients at once until every replica refuses for the limit
// itself (not while it waits for the others' counts, which is passing); the figures are what the fleet
// admitted against the stated bound, limit + max(10% of it, 2 x (replicas - 1)), and how far the
// usage rows the replicas wrote (at shutdown, through the same paths) are from what the clients'
// answers said they used (0: exact).
//
// auth-server runs in this process as in bench/auth.ts (startAuthWorkers, embedded PostgreSQL
// without fsync, one worker); the replicas are the built server's processes (bench/servers.ts).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ensureTestModels } from '../test/fixtures/models.js';
import { fleetOvershoot } from '../src/inference/tenants/fleet-limits.js';
import { BenchError } from './load.js';
import type { MetricDef } from './scenario.js';
import { startServer, type RunningServer } from './servers.js';

const REPLICAS = 3;
const CLIENTS = 6;
const RPM_LIMIT = 100;
const TPM_LIMIT = 3000;
/** Tokens one request uses at most (its prompt and 2 generated); checked on every answer. */
const REQUEST_TOKENS_MAX = 40;
const ADMIN_KEY = 'bench-admin-key-0123456789';

const rpmBound = RPM_LIMIT + fleetOvershoot(RPM_LIMIT, REPLICAS);
const tpmBound = TPM_LIMIT + fleetOvershoot(TPM_LIMIT, REPLICAS);
/** Tokens are counted as they are used: requests admitted below the limit and still running add theirs (at most one per client). */
const tpmBoundRunning = tpmBound + CLIENTS * REQUEST_TOKENS_MAX;

type Fleet = 'db' | 'http';
const FLEET_WORDS: Record<Fleet, string> = { db: 'on the database', http: 'over HTTP' };

export const FLEET_LIMITS_DESCRIPTION = `Limits across replicas: ${REPLICAS} replicas of ours (-t 1 -np 1, the tiny test chat model) on one auth-server database (--auth --auth-app), then ${REPLICAS} through auth-server over HTTP (--auth-issuer, the app's credentials); a key limited to ${RPM_LIMIT} requests/min and one limited to ${TPM_LIMIT} tokens/min each take two-token chats round robin over the replicas from ${CLIENTS} clients at once until every replica refuses for the limit itself (a refusal while a replica waits for the others' counts is passing). Stated bound: limit + max(10%, 2 x (replicas - 1)) = ${rpmBound} requests, ${tpmBound} tokens (plus the tokens of requests admitted below it and still running: at most ${CLIENTS} x ${REQUEST_TOKENS_MAX}); admitted / limit is the overshoot. Usage rows: |rows - the clients' count| over requests, prompt and completion tokens, summed over both keys, after the replicas stopped (their shutdown flush).`;

export const FLEET_LIMIT_METRICS: MetricDef[] = (['db', 'http'] as const).flatMap((fleet): MetricDef[] => [
  { key: `${fleet}RpmAdmitted`, label: `limits ${FLEET_WORDS[fleet]}: requests admitted (limit ${RPM_LIMIT}/min, bound ${rpmBound})`, unit: 'requests', kind: 'info' },
  { key: `${fleet}RpmRatio`, label: `limits ${FLEET_WORDS[fleet]}: requests admitted / limit`, unit: 'x', kind: 'info', oursMax: rpmBound / RPM_LIMIT },
  { key: `${fleet}TpmAdmitted`, label: `limits ${FLEET_WORDS[fleet]}: tokens admitted (limit ${TPM_LIMIT}/min, bound ${tpmBound} + running)`, unit: 'tokens', kind: 'info' },
  { key: `${fleet}TpmRatio`, label: `limits ${FLEET_WORDS[fleet]}: tokens admitted / limit`, unit: 'x', kind: 'info', oursMax: Math.round((tpmBoundRunning / TPM_LIMIT) * 1000) / 1000 },
  { key: `${fleet}UsageDiff`, label: `limits ${FLEET_WORDS[fleet]}: usage rows' difference from the clients' count`, unit: 'requests+tokens', kind: 'info', oursMax: 0 },
]);

interface Used {
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
}

interface ApiKey {
  key: string;
  id: string;
}

async function call(url: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    headers: { 'content-type': 'application/json', ...init.headers },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, body };
}

/** A 429 for the limit itself; a replica waiting for the others' counts (its budget used up) refuses otherwise. */
const LIMIT_REFUSAL = /^Rate limit reached for (requests|tokens) per minute/;

/**
 * Chats with `key` round robin over `bases` (request n to replica n mod R) from CLIENTS clients at
 * once, until each replica's latest answer is a refusal for the limit itself (the fleet knows the
 * limit is reached everywhere) or `most` requests were sent; what the admitted answers' `usage`
 * said, summed, and the requests sent. Refusals while a replica waits for the others' counts
 * (Retry-After 1 s) are passing: the clients go on, as a client retrying does.
 */
async function atLimit(bases: readonly string[], key: string, most: number): Promise<Used & { sent: number }> {
  const used: Used = { requests: 0, prompt_tokens: 0, completion_tokens: 0 };
  const atLimitNow = bases.map(() => false);
  let next = 0;
  const client = async (): Promise<void> => {
    for (let n = next++; n < most && !atLimitNow.every(Boolean); n = next++) {
      const replica = n % bases.length;
      const res = await call(`${bases[replica]}/v1/chat/completions`, {
        body: { messages: [{ role: 'user', content: `Hi ${n % 7}` }], max_tokens: 2 },
        headers: { authorization: `Bearer ${key}` },
      });
      atLimitNow[replica] = res.status === 429 && LIMIT_REFUSAL.test(String(res.body?.error?.message));
      if (res.status === 429) continue;
      if (res.status !== 200) throw new BenchError(`fleet limits: a chat was answered ${res.status}`, JSON.stringify(res.body).slice(0, 300));
      const u = res.body.usage as { prompt_tokens: number; completion_tokens: number };
      if (u.prompt_tokens + u.completion_tokens > REQUEST_TOKENS_MAX) throw new BenchError(`fleet limits: a chat used ${u.prompt_tokens + u.completion_tokens} tokens, more than the ${REQUEST_TOKENS_MAX} the bound allows for`);
      used.requests++;
      used.prompt_tokens += u.prompt_tokens;
      used.completion_tokens += u.completion_tokens;
    }
  };
  await Promise.all(Array.from({ length: CLIENTS }, client));
  if (!atLimitNow.every(Boolean)) throw new BenchError(`fleet limits: after ${most} requests the replicas did not all refuse for the limit`);
  return { ...used, sent: Math.min(next, most) };
}

/** Measures both fleets; `progress` prints a line. Everything it starts is stopped before it returns. */
export async function measureFleetLimits(serverMain: string, logDir: string, progress: (line: string) => void): Promise<Record<string, number>> {
  const { startAuthWorkers } = await import('../src/auth/workers/auth-workers.js');
  const models = await ensureTestModels();
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'bench-fleet-limits-'));
  await fs.chmod(dataDir, 0o711); // as root, PostgreSQL runs as the postgres user
  const auth = await startAuthWorkers({
    host: '127.0.0.1', port: 0, workers: 1, issuerForPort: (port) => `http://127.0.0.1:${port}`,
    service: {
      dataDir, keyDir: path.join(dataDir, 'keys'), issuer: 'http://127.0.0.1', adminKey: ADMIN_KEY,
      otpDelivery: { name: 'bench', send: async () => {} },
      // The HTTP replicas introspect the keys (cached); nothing here is meant to be rate limited.
      rateLimits: { api_key_introspect_ip: { maxHits: 1_000_000_000, windowSeconds: 60 } },
      disposableDatabase: true, webhookDispatch: false, log: () => {},
    },
  });
  const issuer = auth.service.issuer;
  const replicas: RunningServer[] = [];
  try {
    const admin = { 'x-admin-key': ADMIN_KEY };
    const out: Record<string, number> = {};
    for (const fleet of ['db', 'http'] as const) {
      // An app per fleet: an app's replicas count together (the other fleet's, stopped less than
      // 10 s before, would still count as live and shrink each replica's budget).
      const slug = `fleet-${fleet}`;
      const app = await call(`${issuer}/admin/apps`, { body: { slug, name: `Fleet ${fleet}` }, headers: admin });
      if (app.status !== 201) throw new BenchError(`fleet limits: creating the app answered ${app.status}`);
      const { id: appId, app_secret: appSecret } = app.body as { id: string; app_secret: string };
      const newKey = async (name: string, limits: Record<string, number>): Promise<ApiKey> => {
        const created = await call(`${issuer}/admin/apps/${appId}/api-keys`, { body: { name, limits }, headers: admin });
        if (created.status !== 201) throw new BenchError(`fleet limits: creating a key answered ${created.status}`);
        return created.body as ApiKey;
      };
      const keys = { warm: await newKey(`${fleet}-warm`, {}), rpm: await newKey(`${fleet}-rpm`, { requests_per_minute: RPM_LIMIT }), tpm: await newKey(`${fleet}-tpm`, { tokens_per_minute: TPM_LIMIT }) };
      const bases: string[] = [];
      for (let r = 0; r < REPLICAS; r++) {
        const own = path.join(dataDir, `${fleet}-replica-${r}`);
        const env: Record<string, string> = fleet === 'db'
          ? { DATABASE_URL: auth.service.databaseUrl, AUTH_ADMIN_KEY: ADMIN_KEY, AUTH_DATA_DIR: own, AUTH_KEY_DIR: path.join(dataDir, 'keys'), AUTH_ISSUER: issuer, AUTH_WEBHOOK_DISPATCH: '0' }
          : { AUTH_APP_ID: appId, AUTH_APP_SECRET: appSecret };
        const authFlags = fleet === 'db' ? ['--auth', '--auth-app', slug] : ['--auth-app', slug, '--auth-issuer', issuer];
        const server = await startServer({
          id: `fleet-limits-${fleet}`, label: `inference-server (${FLEET_WORDS[fleet]}, replica ${r})`, command: process.execPath,
          args: [serverMain, '-m', models.chat, '-t', '1', '-tb', '1', '-np', '1', '-c', '512', ...authFlags], env,
        }, logDir, `fleet-limits-${fleet}-${r}`);
        replicas.push(server);
        bases.push(server.base);
      }
      // Each replica has verified a key and answered once before the keys at their limits start.
      for (const base of bases) {
        const warm = await call(`${base}/v1/chat/completions`, { body: { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 }, headers: { authorization: `Bearer ${keys.warm.key}` } });
        if (warm.status !== 200) throw new BenchError(`fleet limits: a replica answered ${warm.status} to its first chat`);
      }
      const rpm = await atLimit(bases, keys.rpm.key, 20 * RPM_LIMIT);
      const tpm = await atLimit(bases, keys.tpm.key, TPM_LIMIT);
      // The replicas' last usage rows go at shutdown.
      for (const server of replicas.splice(0)) await server.stop();
      let diff = 0;
      for (const [key, used] of [[keys.rpm, rpm], [keys.tpm, tpm]] as const) {
        const hour = 3_600_000;
        const around = (offset: number): string => new Date((Math.floor(Date.now() / hour) + offset) * hour).toISOString();
        const rows = await call(`${issuer}/admin/usage?app=${slug}&key=${key.id}&from=${around(-2)}&to=${around(2)}`, { headers: admin });
        if (rows.status !== 200) throw new BenchError(`fleet limits: GET /admin/usage answered ${rows.status}`);
        const totals = rows.body.totals as Used;
        diff += Math.abs(totals.requests - used.requests) + Math.abs(totals.prompt_tokens - used.prompt_tokens) + Math.abs(totals.completion_tokens - used.completion_tokens);
      }
      const tokens = tpm.prompt_tokens + tpm.completion_tokens;
      out[`${fleet}RpmAdmitted`] = rpm.requests;
      out[`${fleet}RpmRatio`] = rpm.requests / RPM_LIMIT;
      out[`${fleet}TpmAdmitted`] = tokens;
      out[`${fleet}TpmRatio`] = tokens / TPM_LIMIT;
      out[`${fleet}UsageDiff`] = diff;
      progress(`ours: fleet limits ${FLEET_WORDS[fleet]}: ${rpm.requests} requests admitted of ${rpm.sent} (limit ${RPM_LIMIT}, bound ${rpmBound}); ${tokens} tokens admitted in ${tpm.sent} requests (limit ${TPM_LIMIT}, bound ${tpmBound} + running); usage rows differ by ${diff}`);
    }
    return out;
  } finally {
    for (const server of replicas) await server.stop();
    await auth.close();
    await fs.rm(dataDir, { recursive: true, force: true });
  }
}
