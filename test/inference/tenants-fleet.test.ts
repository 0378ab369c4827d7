// Three inference-server replicas on one auth-server database (--auth with a shared DATABASE_URL):
// an auth-server API key's requests-per-minute limit holds for the fleet. Requests go round robin;
// the fleet admits the limit and at most the stated overshoot past it (fleet-limits.ts), and the
// usage rows the three replicas write add up to exactly what their answers said was used. The
// same with three replicas that reach auth-server over HTTP (--auth-issuer, with the app's
// credentials: its POST /fleet/exchange and POST /fleet/usage), and that route's refusals.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createInferenceAuth, type InferenceAuth } from '../../src/inference/access/auth-bridge.js';
import { FleetLimits } from '../../src/inference/tenants/fleet-limits.js';
import { remoteFleetStore } from '../../src/inference/tenants/remote-fleet-store.js';
import { remoteUsageRecorder } from '../../src/inference/tenants/remote-usage-recorder.js';
import { startUsageFlush } from '../../src/inference/tenants/usage-flush.js';
import { UsageMeter } from '../../src/inference/tenants/usage-meter.js';
import { fleetOvershoot } from '../../src/inference/tenants/fleet-limits.js';
import { ADMIN_KEY, Outbox, startAuthHarness } from '../auth/fixtures/harness.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer, type TestServer } from '../helpers/inference-server.js';

const models = await ensureTestModels();
const harness = await startAuthHarness();
t.teardown(() => harness.close());

interface Used {
  requests: number;
  prompt_tokens: number;
  completion_tokens: number;
}

/**
 * Sends 3 x limit two-token chats with `key` round robin over the replicas; checks each was
 * answered or refused (nothing else) and that the admitted count is within the fleet's bound.
 * Returns what the answers' `usage` said, summed.
 */
async function roundRobinAtLimit(t: Tap.Test, servers: Array<{ base: string }>, key: string, limit: number): Promise<Used> {
  const statuses: number[] = [];
  const used: Used = { requests: 0, prompt_tokens: 0, completion_tokens: 0 };
  for (let i = 0; i < 3 * limit; i++) {
    const body = { messages: [{ role: 'user', content: `Hi ${'there '.repeat(i % 4)}` }], max_tokens: 2 };
    const res = await postJson(`${servers[i % servers.length]!.base}/v1/chat/completions`, body, { authorization: `Bearer ${key}` });
    statuses.push(res.status);
    if (res.status !== 200) continue;
    used.requests++;
    used.prompt_tokens += res.body.usage.prompt_tokens;
    used.completion_tokens += res.body.usage.completion_tokens;
  }
  const admitted = used.requests;
  t.same([...new Set(statuses)].sort(), [200, 429], 'answered or refused, nothing else');
  const bound = limit + fleetOvershoot(limit, servers.length);
  t.comment(`admitted ${admitted} of ${statuses.length} against ${limit} over ${servers.length} replicas (bound ${bound})`);
  t.ok(admitted >= limit && admitted <= bound, `${admitted} admitted`);
  return used;
}

/** GET /admin/usage's totals of a key (the rows the replicas wrote), over the hours around now (`app`: of that app only). */
async function usageOf(keyId: string, app?: string): Promise<Used> {
  const hour = 3_600_000;
  const around = (offset: number): string => new Date((Math.floor(Date.now() / hour) + offset) * hour).toISOString();
  const reply = await harness.request('GET', `/admin/usage?key=${keyId}&from=${around(-2)}&to=${around(2)}${app ? `&app=${app}` : ''}`, { headers: { 'x-admin-key': ADMIN_KEY } });
  t.equal(reply.status, 200);
  const { requests, prompt_tokens, completion_tokens } = (reply.body as { totals: Used }).totals;
  return { requests, prompt_tokens, completion_tokens };
}

/** A replica's auth bridge on the harness's database (--auth --auth-app `appSlug`). */
async function mountedBridge(t: Tap.Test, appSlug: string, name: string): Promise<InferenceAuth> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), `fleet-${name}-`));
  await fs.chmod(dataDir, 0o711);
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  const bridge = await createInferenceAuth({
    mount: true, appSlug, selfUrl: harness.issuer, env: {},
    config: { dataDir, keyDir: path.join(harness.dataDir, 'keys'), issuer: harness.issuer, adminKey: ADMIN_KEY, otpDelivery: new Outbox(), databaseUrl: harness.service.databaseUrl, log: () => {} },
  });
  t.teardown(() => bridge.close());
  t.ok(bridge.fleetStore, 'a mounted service offers its database to the fleet');
  return bridge;
}

/** Closes `servers` once: when the test calls it (their shutdown flush writes the usage rows) or at its end. */
function closer(t: Tap.Test, servers: TestServer[]): () => Promise<void> {
  let open = true;
  const closeAll = async (): Promise<void> => {
    if (!open) return;
    open = false;
    for (const s of servers) await s.close();
  };
  t.teardown(closeAll);
  return closeAll;
}

t.test('a key limited to 40 requests a minute, 3 replicas round robin: the fleet admits 40 to 40 + the bound, and the usage rows add up', async (t) => {
  const app = await harness.request('POST', '/admin/apps', { json: { slug: 'chat', name: 'Chat' }, headers: { 'x-admin-key': ADMIN_KEY } });
  t.equal(app.status, 201);
  const appId = (app.body as { id: string }).id;
  const limit = 40;
  const created = await harness.request('POST', `/admin/apps/${appId}/api-keys`, { json: { name: 'fleet', limits: { requests_per_minute: limit } }, headers: { 'x-admin-key': ADMIN_KEY } });
  t.equal(created.status, 201);
  const { key, id: keyId } = created.body as { key: string; id: string };

  const servers: TestServer[] = [];
  for (let i = 0; i < 3; i++) {
    const bridge = await mountedBridge(t, 'chat', `replica-${i}`);
    servers.push(await startTestServer(models.chat, {
      parallel: 1, ctxSize: 512, acceptBearer: bridge.acceptBearer!, usageRecorder: bridge.usage!, fleetStore: bridge.fleetStore!, replicaName: `replica-${i}`,
    }));
  }
  const closeAll = closer(t, servers);

  const used = await roundRobinAtLimit(t, servers, key, limit);

  await closeAll();
  t.same(await usageOf(keyId), used, 'the three replicas\' usage rows add up to what the answers said they used');
});

t.test('3 replicas through --auth-issuer with the app\'s credentials and 1 on the database count as one fleet: it admits 40 to 40 + the bound, and their usage rows add up', async (t) => {
  const app = await harness.request('POST', '/admin/apps', { json: { slug: 'remote', name: 'Remote' }, headers: { 'x-admin-key': ADMIN_KEY } });
  t.equal(app.status, 201);
  const { id: appId, app_secret: appSecret } = app.body as { id: string; app_secret: string };
  const limit = 40;
  const created = await harness.request('POST', `/admin/apps/${appId}/api-keys`, { json: { name: 'fleet', limits: { requests_per_minute: limit } }, headers: { 'x-admin-key': ADMIN_KEY } });
  t.equal(created.status, 201);
  const { key, id: keyId } = created.body as { key: string; id: string };

  const servers: TestServer[] = [];
  const closeAll = closer(t, servers);
  for (let i = 0; i < 3; i++) {
    const bridge = await createInferenceAuth({ mount: false, appSlug: 'remote', issuer: harness.base, selfUrl: 'http://127.0.0.1', env: { AUTH_APP_ID: appId, AUTH_APP_SECRET: appSecret } });
    t.teardown(() => bridge.close());
    t.ok(bridge.fleetStore, 'the remote auth-server holds the fleet\'s counts');
    t.ok(bridge.usage, 'usage rows go to the remote auth-server too');
    servers.push(await startTestServer(models.chat, {
      parallel: 1, ctxSize: 512, acceptBearer: bridge.acceptBearer!, fleetStore: bridge.fleetStore!, usageRecorder: bridge.usage!, replicaName: `remote-${i}`,
    }));
  }
  // One replica of the same app on the database (--auth --auth-app remote): the same fleet.
  const onDatabase = await mountedBridge(t, 'remote', 'database-replica');
  servers.push(await startTestServer(models.chat, {
    parallel: 1, ctxSize: 512, acceptBearer: onDatabase.acceptBearer!, usageRecorder: onDatabase.usage!, fleetStore: onDatabase.fleetStore!, replicaName: 'database-0',
  }));
  const used = await roundRobinAtLimit(t, servers, key, limit);
  const admitted = used.requests;
  await closeAll();
  t.same(await usageOf(keyId, 'remote'), used, 'the rows the replicas sent (or wrote) at shutdown add up to what the answers said they used, stored under the app');
  const [row] = await harness.sql<Array<{ requests: string }>>`
    select coalesce(sum(requests), 0) as requests from tenant_rate_counts where tenant like ${'app:remote/%'}
  `;
  t.equal(Number(row!.requests), admitted, 'the counts the service holds for the app are the requests admitted');

  const exchange = (json: Record<string, unknown>) => harness.request('POST', '/fleet/exchange', { json });
  const valid = { app_id: appId, app_secret: appSecret, replica: 'r', now_ms: Date.now(), window_start_second: Math.floor(Date.now() / 1000) - 60, reports: [], tenants: [] };
  const other = await harness.request('POST', '/admin/apps', { json: { slug: 'other', name: 'Other' }, headers: { 'x-admin-key': ADMIN_KEY } });
  const otherApp = other.body as { id: string; app_secret: string };
  const seen = await exchange({ ...valid, app_id: otherApp.id, app_secret: otherApp.app_secret, replica: 'x', tenants: [`key:${(created.body as { id: string }).id}`] });
  t.equal(seen.status, 200);
  t.same((seen.body as { others: unknown[] }).others, [{ tenant: `key:${(created.body as { id: string }).id}`, requests: 0, tokens: 0, in_flight: 0 }], 'another app sees none of this app\'s counts');
  t.match(await exchange({ ...valid, app_secret: 'as_wrong' }), { status: 401, body: { error: { code: 'TOKEN_INVALID' } } }, 'wrong credentials: 401');
  t.match(await exchange({ ...valid, reports: [{ tenant: 't', requests: [[1, -1]], tokens: [], in_flight: 0 }] }), { status: 400, body: { error: { code: 'VALIDATION_ERROR' } } }, 'a negative count: 400');
  t.match(await exchange({ ...valid, extra: 1 }), { status: 400, body: { error: { code: 'VALIDATION_ERROR' } } }, 'an unknown field: 400');

  // A batch past the service's 16 KiB body limit goes as several requests, and every count arrives.
  const tenants = Array.from({ length: 300 }, (_, i) => `key:00000000-0000-4000-8000-${String(i).padStart(12, '0')}`);
  const second = Math.floor(Date.now() / 1000);
  const store = remoteFleetStore(harness.base, { appId, appSecret });
  const reports = new Map(tenants.map((tenant, i) => [tenant, { requests: [[second, i + 1]] as Array<[number, number]>, tokens: [[second, 10 * (i + 1)]] as Array<[number, number]>, inFlight: 1 }]));
  t.ok(JSON.stringify([...reports]).length > 16 * 1024, 'the batch is larger than one request body may be');
  await store.exchange('big', Date.now(), second - 60, reports, tenants);
  const view = await store.exchange('reader', Date.now(), second - 60, new Map(), tenants);
  t.same(tenants.map((tenant) => view.others.get(tenant)), tenants.map((_, i) => ({ requests: i + 1, tokens: 10 * (i + 1), inFlight: 1 })), 'another replica reads every tenant\'s counts');

  // Usage rows past one body go as several batches, each with its id; credentials refused at a
  // flush (401) are logged and the batch kept, and written (all of it, once) when they are right.
  const meter = new UsageMeter();
  for (let i = 0; i < 150; i++) meter.add({ appSlug: 'remote', tenant: `tenant-${i}`, key: 'big-usage', model: 'm', requests: 1, promptTokens: i });
  const right = remoteUsageRecorder(harness.base, { appId, appSecret });
  let recorder = remoteUsageRecorder(harness.base, { appId, appSecret: 'as_wrong' });
  const ids = new Set<string>();
  const lines: string[] = [];
  const flush = startUsageFlush(meter, { split: right.split, record: (rows, id) => { ids.add(id); return recorder.record(rows, id); } }, { intervalMs: 3_600_000, log: (l) => lines.push(l) });
  await flush.flush();
  t.equal(lines.length, 1);
  t.match(lines[0], /^usage: writing \d+ rows \(batch [0-9a-f-]{36}\) failed, kept for the next write: .*refused the app's credentials.*401$/);
  recorder = right;
  await flush.stop();
  t.ok(ids.size > 1, `split into ${ids.size} batches`);
  t.match(await usageOf('big-usage', 'remote'), { requests: 150, prompt_tokens: (149 * 150) / 2 }, 'every row arrived, once');

  // A replica whose credentials are refused fails its start instead of holding limits alone.
  const refused = new FleetLimits(remoteFleetStore(harness.base, { appId, appSecret: 'as_wrong' }), 'refused');
  await t.rejects(refused.start(), /refused the app's credentials/);
  await refused.stop();
  await t.rejects(createInferenceAuth({ mount: false, appSlug: 'remote', issuer: harness.base, selfUrl: 'http://127.0.0.1', env: { AUTH_APP_ID: appId } }), /AUTH_APP_ID and AUTH_APP_SECRET go together/);
});
