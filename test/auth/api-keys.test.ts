// API keys an app issues to its inference callers: created with their settings and shown once,
// stored as a SHA-256, listed without secrets, rotated (same id and settings, the old key dead)
// and revoked; audited and sent as webhooks without the key; verified for the inference server
// in-process and through POST /api-keys/introspect, with a bounded cache.
import { createHash } from 'node:crypto';
import t, { type Test } from 'tap';
import { AUTH_API_KEY_PREFIX, createApiKeyVerifier, type ApiKeyIdentity, type ApiKeyVerifier, type AuthService } from '../../src/auth/mount.js';
import { ADMIN_KEY, startAuthHarness, TEST_WORKERS, type TestApp } from './fixtures/harness.js';
import { startWebhookReceiver, until } from './fixtures/webhook-receiver.js';

const h = await startAuthHarness({
  webhookPollMs: 20,
  rateLimits: { api_key_introspect_ip: { maxHits: 40, windowSeconds: 60 }, admin_key_failure_ip: { maxHits: 100_000, windowSeconds: 900 } },
});
t.teardown(() => h.close());

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const KEY = /^lak_[A-Za-z0-9_-]{43}$/;

let app: TestApp;
let tenant: string;
t.beforeEach(async () => { ({ app, tenant } = await h.startFresh({ session: true, tenant: true })); });

async function createKey(body: Record<string, unknown> = { name: 'ci' }, target: TestApp = app): Promise<any> {
  const reply = await h.admin('POST', `/admin/apps/${target.id}/api-keys`, body);
  if (reply.status !== 201) throw new Error(`create key: ${reply.status} ${JSON.stringify(reply.body)}`);
  return reply.body;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest();

/** An in-process verifier of the test's service, listening for other threads' changes. */
async function inProcessVerifier(t: Test): Promise<ApiKeyVerifier> {
  const verifier = createApiKeyVerifier({ service: h.service });
  t.teardown(() => verifier.close());
  await h.service.apiKeys.listening();
  return verifier;
}

/**
 * Whether the verifier refuses the key right after a change made through the admin API: at
 * once when the routes run in the test's thread (the service's own change), as soon as the
 * NOTIFY arrives when worker threads answered them.
 */
async function refusedAfterChange(verifier: ApiKeyVerifier, key: string): Promise<boolean> {
  if (TEST_WORKERS === 0) return (await verifier.verify(key)) === null;
  return until(async () => (await verifier.verify(key)) === null);
}

t.test('creating a key answers 201 with its settings and the key, shown only this once', async (t) => {
  const expires = new Date(h.clock.now() + 24 * 3600 * 1000).toISOString();
  const reply = await h.admin('POST', `/admin/apps/${app.id}/api-keys`, {
    name: 'batch jobs', tenant_id: tenant, role: 'staff', limits: { concurrent_requests: 4, requests_per_minute: 600, tokens_per_minute: 100000 },
    weight: 2.5, priority_class: 'batch', expires_at: expires,
  });
  t.equal(reply.status, 201);
  t.equal(reply.headers.get('cache-control'), 'no-store');
  t.equal(AUTH_API_KEY_PREFIX, 'lak_');
  t.match(reply.body.key, KEY);
  t.same(reply.body, {
    id: reply.body.id, app_id: app.id, tenant_id: tenant, name: 'batch jobs', role: 'staff', display_prefix: reply.body.key.slice(0, 12),
    limits: { concurrent_requests: 4, requests_per_minute: 600, tokens_per_minute: 100000 }, weight: 2.5, priority_class: 'batch',
    created_at: new Date(h.clock.now()).toISOString(), expires_at: expires, rotated_at: null, revoked_at: null, last_used_at: null, key: reply.body.key,
  });
  t.match(reply.body.id, UUID);
  const [row] = await h.sql<{ key_hash: Buffer }[]>`select key_hash from api_keys where id = ${reply.body.id}`;
  t.same(row!.key_hash, sha256(reply.body.key), 'only the SHA-256 of the key is stored');
  const dump = JSON.stringify(await h.sql`select * from api_keys`);
  t.notOk(dump.includes(reply.body.key.slice(12)), 'nothing past the display prefix is stored in clear');
});

t.test('the defaults: role viewer, no tenant, no limits, weight 1, interactive, no expiry', async (t) => {
  const key = await createKey({ name: 'plain' });
  t.match(key, {
    tenant_id: null, role: 'viewer', limits: { concurrent_requests: null, requests_per_minute: null, tokens_per_minute: null },
    weight: 1, priority_class: 'interactive', expires_at: null, created_at: ISO_MS,
  });
});

t.test('listing shows every key of the app, oldest first, revoked ones too, without secrets', async (t) => {
  const first = await createKey({ name: 'first' });
  h.clock.advance(1000);
  const second = await createKey({ name: 'second' });
  await h.admin('DELETE', `/admin/apps/${app.id}/api-keys/${first.id}`);
  const other = await h.createApp('app-b');
  await createKey({ name: 'elsewhere' }, other);
  const reply = await h.admin('GET', `/admin/apps/${app.id}/api-keys`);
  t.equal(reply.status, 200);
  t.same(reply.body.api_keys.map((k: any) => [k.name, k.revoked_at === null]), [['first', false], ['second', true]]);
  const { key: _secret, ...withoutKey } = second;
  t.same(reply.body.api_keys[1], withoutKey);
  t.notOk(JSON.stringify(reply.body).includes(first.key), 'no key in the list');
  t.notOk(JSON.stringify(reply.body).includes(second.key));
  t.notOk(reply.body.api_keys.some((k: any) => 'key' in k || 'key_hash' in k));
});

t.test('bad input is 400 VALIDATION_ERROR naming the field; unknown app, tenant and key are 404', async (t) => {
  const past = new Date(h.clock.now() - 1000).toISOString();
  const cases: Array<[unknown, string]> = [
    [{}, 'Invalid field "name": Expected required property'],
    [{ name: '' }, 'Invalid field "name"'],
    [{ name: 'x', role: 'root' }, 'Invalid field "role"'],
    [{ name: 'x', weight: 0 }, 'Invalid field "weight"'],
    [{ name: 'x', weight: 101 }, 'Invalid field "weight"'],
    [{ name: 'x', limits: { requests_per_minute: 0 } }, 'Invalid field "limits.requests_per_minute"'],
    [{ name: 'x', limits: { tokens_per_minute: 1.5 } }, 'Invalid field "limits.tokens_per_minute"'],
    [{ name: 'x', limits: { per_day: 5 } }, 'Invalid field "limits'],
    [{ name: 'x', priority_class: 'urgent' }, 'Invalid field "priority_class"'],
    [{ name: 'x', expires_at: 'tomorrow' }, 'Invalid field "expires_at"'],
    [{ name: 'x', expires_at: past }, 'Invalid field "expires_at": expected an instant in the future'],
    [{ name: 'x', key: 'lak_mine' }, 'Invalid field "key": Unexpected property'],
  ];
  for (const [body, message] of cases) {
    const reply = await h.admin('POST', `/admin/apps/${app.id}/api-keys`, body);
    t.equal(reply.status, 400, JSON.stringify(body));
    t.equal(reply.body.error.code, 'VALIDATION_ERROR');
    t.ok(reply.body.error.message.startsWith(message), `${reply.body.error.message} starts with ${message}`);
  }
  const missingApp = await h.admin('POST', '/admin/apps/00000000-0000-4000-8000-000000000000/api-keys', { name: 'x' });
  t.same([missingApp.status, missingApp.body], [404, { error: { code: 'APP_NOT_FOUND', message: 'The app does not exist' } }]);
  const notUuid = await h.admin('GET', '/admin/apps/app-a/api-keys');
  t.same([notUuid.status, notUuid.body.error.code], [404, 'APP_NOT_FOUND']);
  const other = await h.createApp('app-b');
  const otherTenant = await h.createTenant(other, 'Other');
  const foreign = await h.admin('POST', `/admin/apps/${app.id}/api-keys`, { name: 'x', tenant_id: otherTenant });
  t.same([foreign.status, foreign.body], [404, { error: { code: 'TENANT_NOT_FOUND', message: 'The tenant does not exist in this app' } }]);
  const key = await createKey();
  for (const [method, route] of [['POST', `/admin/apps/${app.id}/api-keys/00000000-0000-4000-8000-000000000000/rotate`], ['DELETE', `/admin/apps/${app.id}/api-keys/nope`], ['DELETE', `/admin/apps/${other.id}/api-keys/${key.id}`]] as const) {
    const reply = await h.admin(method, route);
    t.same([reply.status, reply.body], [404, { error: { code: 'API_KEY_NOT_FOUND', message: 'The app has no such API key' } }], route);
  }
  const [{ n }] = await h.sql`select count(*)::int as n from api_keys`;
  t.equal(n, 1, 'only the one good key was created');
});

t.test('every API key route needs the admin key', async (t) => {
  const key = await createKey();
  for (const [method, route] of [
    ['POST', `/admin/apps/${app.id}/api-keys`], ['GET', `/admin/apps/${app.id}/api-keys`],
    ['POST', `/admin/apps/${app.id}/api-keys/${key.id}/rotate`], ['DELETE', `/admin/apps/${app.id}/api-keys/${key.id}`], ['GET', '/admin/usage'],
  ]) {
    const reply = await h.request(method!, route!, { json: method === 'POST' ? { name: 'x' } : undefined, headers: { 'x-admin-key': 'wrong-admin-key-0123456789' } });
    t.same([reply.status, reply.body.error.code], [401, 'ADMIN_KEY_INVALID'], `${method} ${route}`);
  }
  t.equal((await h.admin('GET', `/admin/apps/${app.id}/api-keys`)).body.api_keys[0].revoked_at, null);
});

t.test('rotating gives a new key with the same id and settings; the old key stops working at once', async (t) => {
  const created = await createKey({ name: 'rotating', role: 'admin', weight: 3, limits: { requests_per_minute: 10 } });
  const verifier = await inProcessVerifier(t);
  t.equal((await verifier.verify(created.key))?.keyId, created.id);
  h.clock.advance(1000);
  const reply = await h.admin('POST', `/admin/apps/${app.id}/api-keys/${created.id}/rotate`);
  t.equal(reply.status, 200);
  t.match(reply.body.key, KEY);
  t.not(reply.body.key, created.key);
  const { key: _old, ...settings } = created;
  // last_used_at: the verify above (written in the background).
  t.same(reply.body, { ...settings, display_prefix: reply.body.key.slice(0, 12), rotated_at: new Date(h.clock.now()).toISOString(), last_used_at: reply.body.last_used_at, key: reply.body.key });
  t.ok(await refusedAfterChange(verifier, created.key), 'the old key is refused without waiting for the cache');
  t.match(await verifier.verify(reply.body.key), { keyId: created.id, role: 'admin', weight: 3, limits: { requestsPerMinute: 10 } });
  await h.admin('DELETE', `/admin/apps/${app.id}/api-keys/${created.id}`);
  const again = await h.admin('POST', `/admin/apps/${app.id}/api-keys/${created.id}/rotate`);
  t.same([again.status, again.body], [409, { error: { code: 'API_KEY_REVOKED', message: 'The API key is revoked; create a new one' } }]);
});

t.test('revoking sets revoked_at once; revoking again answers the same key', async (t) => {
  const created = await createKey();
  h.clock.advance(1000);
  const revoked = await h.admin('DELETE', `/admin/apps/${app.id}/api-keys/${created.id}`);
  t.equal(revoked.status, 200);
  const { key: _key, ...settings } = created;
  t.same(revoked.body, { ...settings, revoked_at: new Date(h.clock.now()).toISOString() });
  h.clock.advance(1000);
  const again = await h.admin('DELETE', `/admin/apps/${app.id}/api-keys/${created.id}`);
  t.same([again.status, again.body], [200, revoked.body]);
  const events = await h.sql`select type from audit_events where type = 'api_key.revoked'`;
  t.equal(events.length, 1, 'audited once');
});

t.test('create, rotate and revoke are audited and sent as webhooks, never with the key', async (t) => {
  const receiver = await startWebhookReceiver();
  t.teardown(() => receiver.close());
  const endpoint = await h.admin('POST', `/admin/apps/${app.id}/webhooks`, { url: receiver.url, event_types: ['api_key.created', 'api_key.rotated', 'api_key.revoked'] });
  t.equal(endpoint.status, 201);
  const created = await h.request('POST', `/admin/apps/${app.id}/api-keys`, { json: { name: 'ci', tenant_id: tenant }, headers: { 'x-admin-key': ADMIN_KEY, 'user-agent': 'ops/1' } });
  const rotated = await h.admin('POST', `/admin/apps/${app.id}/api-keys/${created.body.id}/rotate`);
  await h.admin('DELETE', `/admin/apps/${app.id}/api-keys/${created.body.id}`);
  const audit = await h.admin('GET', `/admin/audit-events?app_id=${app.id}`);
  const keyEvents = audit.body.events.filter((e: any) => e.type.startsWith('api_key.')).reverse();
  t.same(keyEvents.map((e: any) => [e.type, e.actor, e.app_id, e.details]), [
    ['api_key.created', 'admin', app.id, { key_id: created.body.id, name: 'ci', tenant_id: tenant, role: 'viewer', display_prefix: created.body.display_prefix }],
    ['api_key.rotated', 'admin', app.id, { key_id: created.body.id, name: 'ci', display_prefix: rotated.body.display_prefix }],
    ['api_key.revoked', 'admin', app.id, { key_id: created.body.id, name: 'ci' }],
  ]);
  t.equal(keyEvents[0].user_agent, 'ops/1');
  t.ok(await until(() => receiver.received.length === 3), 'three webhooks arrive');
  t.same(receiver.received.map((m) => m.json.type).sort(), ['api_key.created', 'api_key.revoked', 'api_key.rotated']);
  for (const message of receiver.received) {
    t.notOk(message.body.includes(created.body.key) || message.body.includes(rotated.body.key), `${message.json.type} carries no key`);
    t.equal(message.json.data.details.key_id, created.body.id);
  }
});

t.test('verify() gives the identity of a live key, null for unknown, malformed, revoked, expired and other apps\' keys', async (t) => {
  const expires = new Date(h.clock.now() + 3600 * 1000).toISOString();
  const key = await createKey({ name: 'inference', tenant_id: tenant, role: 'staff', limits: { concurrent_requests: 2 }, weight: 4, priority_class: 'batch', expires_at: expires });
  const verifier = await inProcessVerifier(t);
  const identity = await verifier.verify(key.key);
  t.same(identity, {
    keyId: key.id, appId: app.id, appSlug: 'app-a', name: 'inference', tenantId: tenant, role: 'staff',
    limits: { concurrentRequests: 2 }, weight: 4, priorityClass: 'batch', expiresAt: expires,
  } satisfies ApiKeyIdentity);
  t.equal(await verifier.verify(`lak_${'A'.repeat(43)}`), null, 'unknown');
  t.equal(await verifier.verify('lak_short'), null, 'malformed');
  t.equal(await verifier.verify(''), null, 'empty');
  const forApp = createApiKeyVerifier({ service: h.service }, { appSlug: 'app-a' });
  const forOther = createApiKeyVerifier({ service: h.service }, { appSlug: 'app-b' });
  t.teardown(() => { forApp.close(); forOther.close(); });
  t.equal((await forApp.verify(key.key))?.keyId, key.id);
  t.equal(await forOther.verify(key.key), null, 'another app\'s verifier refuses it');
  h.clock.advance(3600 * 1000);
  t.equal(await verifier.verify(key.key), null, 'expired, though still cached');
  const fresh = createApiKeyVerifier({ service: h.service });
  t.teardown(() => fresh.close());
  t.equal(await fresh.verify(key.key), null, 'expired, looked up');
  const second = await createKey({ name: 'other' });
  t.equal((await verifier.verify(second.key))?.keyId, second.id);
  await h.admin('DELETE', `/admin/apps/${app.id}/api-keys/${second.id}`);
  t.ok(await refusedAfterChange(verifier, second.key), 'revoked through the service: refused at once');
});

t.test('a revocation by another instance on the database reaches the in-process verifiers by NOTIFY', async (t) => {
  const key = await createKey();
  const verifier = await inProcessVerifier(t);
  t.equal((await verifier.verify(key.key))?.keyId, key.id);
  await h.sql.begin(async (tx) => {
    await tx`update api_keys set revoked_at = ${new Date(h.clock.now())} where id = ${key.id}`;
    await tx`select pg_notify('auth_api_key_changes', ${key.id})`;
  });
  t.ok(await until(async () => (await verifier.verify(key.key)) === null), 'refused well within the cache TTL (the clock does not move)');
});

t.test('answers are cached for the TTL: a key revoked behind the service\'s back works until then', async (t) => {
  const key = await createKey();
  let lookups = 0;
  const service = { ...h.service, apiKeys: { ...h.service.apiKeys, find: (k: string) => { lookups += 1; return h.service.apiKeys.find(k); } } } as AuthService;
  const verifier = createApiKeyVerifier({ service }, { ttlMs: 30_000 });
  t.teardown(() => verifier.close());
  t.equal((await verifier.verify(key.key))?.keyId, key.id);
  t.equal((await verifier.verify(key.key))?.keyId, key.id);
  t.equal(lookups, 1, 'one lookup for two verifies');
  // Another instance revokes it (no event reaches this process).
  await h.sql`update api_keys set revoked_at = ${new Date(h.clock.now())} where id = ${key.id}`;
  h.clock.advance(29_999);
  t.equal((await verifier.verify(key.key))?.keyId, key.id, 'within the TTL the cached answer stands');
  h.clock.advance(1);
  t.equal(await verifier.verify(key.key), null, 'at the TTL it is looked up again and refused');
  t.equal(lookups, 2);
  const unknown = `lak_${'B'.repeat(43)}`;
  t.equal(await verifier.verify(unknown), null);
  t.equal(await verifier.verify(unknown), null);
  t.equal(lookups, 3, 'a refusal is cached too');
  h.clock.advance(5_000);
  t.equal(await verifier.verify(unknown), null);
  t.equal(lookups, 4, 'for 5 s');
});

t.test('concurrent verifies of one key share one lookup', async (t) => {
  const key = await createKey();
  let lookups = 0;
  const service = { ...h.service, apiKeys: { ...h.service.apiKeys, find: (k: string) => { lookups += 1; return h.service.apiKeys.find(k); } } } as AuthService;
  const verifier = createApiKeyVerifier({ service });
  t.teardown(() => verifier.close());
  const answers = await Promise.all(Array.from({ length: 20 }, () => verifier.verify(key.key)));
  t.same(answers.map((a) => a?.keyId), Array(20).fill(key.id));
  t.equal(lookups, 1);
});

t.test('the cache holds at most maxEntries keys, the least recently used dropped first', async (t) => {
  const keys = [await createKey({ name: 'a' }), await createKey({ name: 'b' }), await createKey({ name: 'c' })];
  let lookups = 0;
  const service = { ...h.service, apiKeys: { ...h.service.apiKeys, find: (k: string) => { lookups += 1; return h.service.apiKeys.find(k); } } } as AuthService;
  const verifier = createApiKeyVerifier({ service }, { maxEntries: 2 });
  t.teardown(() => verifier.close());
  await verifier.verify(keys[0].key);
  await verifier.verify(keys[1].key);
  await verifier.verify(keys[0].key); // a is now the most recent
  await verifier.verify(keys[2].key); // drops b
  t.equal(lookups, 3);
  await verifier.verify(keys[0].key);
  t.equal(lookups, 3, 'a is still cached');
  await verifier.verify(keys[1].key);
  t.equal(lookups, 4, 'b was dropped');
});

t.test('last_used_at is written on the first use and then at most once a minute', async (t) => {
  const key = await createKey();
  const verifier = createApiKeyVerifier({ service: h.service });
  t.teardown(() => verifier.close());
  const lastUsed = async () => (await h.admin('GET', `/admin/apps/${app.id}/api-keys`)).body.api_keys[0].last_used_at;
  const first = new Date(h.clock.now()).toISOString();
  await verifier.verify(key.key);
  t.ok(await until(async () => (await lastUsed()) === first), 'written on first use');
  h.clock.advance(59_000);
  for (let i = 0; i < 5; i++) await verifier.verify(key.key);
  // A later write would be seen after this one: wait for a statement issued after the verifies.
  await h.sql`select pg_sleep(0.05)`;
  t.equal(await lastUsed(), first, 'not within the minute');
  h.clock.advance(1_000);
  await verifier.verify(key.key);
  const second = new Date(h.clock.now()).toISOString();
  t.ok(await until(async () => (await lastUsed()) === second), 'written again after a minute');
});

t.test('POST /api-keys/introspect answers the identity for a live key and 401 API_KEY_INVALID otherwise', async (t) => {
  const key = await createKey({ name: 'remote', tenant_id: tenant, limits: { tokens_per_minute: 5000 } });
  const reply = await h.post('/api-keys/introspect', undefined, { authorization: `Bearer ${key.key}` });
  t.equal(reply.status, 200);
  t.equal(reply.headers.get('cache-control'), 'no-store');
  t.same(reply.body, {
    key_id: key.id, app_id: app.id, app_slug: 'app-a', name: 'remote', tenant_id: tenant, role: 'viewer',
    limits: { tokens_per_minute: 5000 }, weight: 1, priority_class: 'interactive', expires_at: null,
  });
  const refused = { error: { code: 'API_KEY_INVALID', message: 'The API key is unknown, revoked or expired' } };
  for (const headers of [{}, { authorization: 'Bearer' }, { authorization: `Basic ${key.key}` }, { authorization: `Bearer lak_${'C'.repeat(43)}` }]) {
    const denied = await h.post('/api-keys/introspect', undefined, headers);
    t.same([denied.status, denied.body], [401, refused], JSON.stringify(headers));
  }
  await h.admin('DELETE', `/admin/apps/${app.id}/api-keys/${key.id}`);
  const revoked = await h.post('/api-keys/introspect', undefined, { authorization: `Bearer ${key.key}` });
  t.same([revoked.status, revoked.body], [401, refused]);
});

t.test('POST /api-keys/introspect is rate-limited per client IP', async (t) => {
  const key = await createKey();
  const statuses: number[] = [];
  for (let i = 0; i < 41; i++) statuses.push((await h.post('/api-keys/introspect', undefined, { authorization: `Bearer ${key.key}` })).status);
  t.same(statuses, [...Array(40).fill(200), 429]);
  const limited = await h.post('/api-keys/introspect', undefined, { authorization: `Bearer ${key.key}` });
  t.same(limited.body, { error: { code: 'RATE_LIMITED', message: 'Too many requests; retry later' } });
  t.ok(Number(limited.headers.get('retry-after')) >= 1);
});

t.test('the remote verifier asks the auth-server and caches the answer for the TTL', async (t) => {
  const key = await createKey({ name: 'remote', role: 'owner' });
  const verifier = createApiKeyVerifier({ issuer: h.base }, { clock: h.clock, appSlug: 'app-a' });
  t.teardown(() => verifier.close());
  t.match(await verifier.verify(key.key), { keyId: key.id, appSlug: 'app-a', role: 'owner', tenantId: null, limits: {}, weight: 1, priorityClass: 'interactive', expiresAt: null });
  t.equal(await verifier.verify(`lak_${'D'.repeat(43)}`), null);
  const other = createApiKeyVerifier({ issuer: h.base }, { clock: h.clock, appSlug: 'app-b' });
  t.teardown(() => other.close());
  t.equal(await other.verify(key.key), null, 'another app');
  const counted = async () => (await h.sql<{ hits: number }[]>`select hits from rate_limit_counters where rule = 'api_key_introspect_ip'`)[0]?.hits ?? 0;
  const before = await counted();
  await Promise.all([verifier.verify(key.key), verifier.verify(key.key)]);
  t.equal(await counted(), before, 'answered from the cache');
  await h.admin('DELETE', `/admin/apps/${app.id}/api-keys/${key.id}`);
  t.equal((await verifier.verify(key.key))?.keyId, key.id, 'revoked elsewhere: works until the TTL');
  h.clock.advance(30_000);
  t.equal(await verifier.verify(key.key), null, 'refused once the TTL has passed');
  const down = createApiKeyVerifier({ issuer: 'http://127.0.0.1:1' }, { clock: h.clock });
  await t.rejects(down.verify(key.key), 'an unreachable auth-server rejects instead of refusing the key');
});
