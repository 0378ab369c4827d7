// Usage metered by the inference server: batches added up exactly however they interleave,
// rows of unknown apps kept under a null app, the admin query with its filters and bad
// parameters, and one usage.hourly event per app and closed hour, sent through the outbox.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createAuthService, type UsageHourRow } from '../../src/auth/mount.js';
import { ADMIN_KEY, startAuthHarness, type TestApp } from './fixtures/harness.js';
import { startWebhookReceiver, until } from './fixtures/webhook-receiver.js';

// No background usage.hourly run: the tests move the clock past an hour's grace period and count
// which of their own emitClosedHours calls wrote each event.
const h = await startAuthHarness({ webhookPollMs: 20, usageEventsIntervalMs: 0 });
t.teardown(() => h.close());

const HOUR = 3600 * 1000;
let app: TestApp;
t.beforeEach(async () => { ({ app } = await h.startFresh()); });

/** The start of the UTC hour `offset` hours from the clock's. */
const hourAt = (offset: number): string => new Date((Math.floor(h.clock.now() / HOUR) + offset) * HOUR).toISOString();

function row(fields: Partial<UsageHourRow>): UsageHourRow {
  return {
    appSlug: 'app-a', tenant: 't1', key: 'k1', model: 'tiny', hour: hourAt(0),
    requests: 1, promptTokens: 10, cachedPromptTokens: 4, completionTokens: 20, queueMs: 3, computeMs: 50, ...fields,
  };
}

const stored = () => h.sql<any[]>`
  select app_id, tenant, key_label, model, hour, requests::int, prompt_tokens::int, cached_prompt_tokens::int, completion_tokens::int, queue_ms::int, compute_ms::int
  from usage_hourly order by app_id nulls first, tenant, key_label, model, hour`;

t.test('concurrent batches (each on its own connection) add up exactly', async (t) => {
  // 8 batches at once, each adding to the same two rows (in opposite orders) and one of its own.
  const batches = Array.from({ length: 8 }, (_, i) => {
    const shared = [row({ requests: 1, promptTokens: i }), row({ tenant: 't2', requests: 2, completionTokens: 1 })];
    return [...(i % 2 ? shared.reverse() : shared), row({ key: `own-${i}`, requests: 5 })];
  });
  await Promise.all(batches.map((batch) => h.service.usage.record(batch)));
  const rows = await stored();
  t.equal(rows.length, 10);
  t.match(rows.find((r) => r.tenant === 't1' && r.key_label === 'k1'), {
    app_id: app.id, requests: 8, prompt_tokens: 0 + 1 + 2 + 3 + 4 + 5 + 6 + 7, cached_prompt_tokens: 32, completion_tokens: 160, queue_ms: 24, compute_ms: 400,
  });
  t.match(rows.find((r) => r.tenant === 't2'), { requests: 16, prompt_tokens: 80, completion_tokens: 8 });
  t.same(rows.filter((r) => r.key_label.startsWith('own-')).map((r) => r.requests), Array(8).fill(5));
  t.same(rows[0].hour, new Date(hourAt(0)));
});

t.test('rows of one batch meeting on one row are summed; any instant of the hour is its start', async (t) => {
  const mid = new Date(Date.parse(hourAt(0)) + 25 * 60 * 1000).toISOString();
  await h.service.usage.record([row({}), row({ hour: mid, requests: 2 }), row({ appSlug: 'no-such-app' }), row({ appSlug: null, requests: 3 })]);
  await h.service.usage.record([row({ appSlug: null })]);
  const rows = await stored();
  t.same(rows.map((r) => [r.app_id, r.requests, r.hour.toISOString()]), [
    [null, 5, hourAt(0)],
    [app.id, 3, hourAt(0)],
  ], 'an unknown app slug and no app are one null app, counted once per hour');
});

t.test('a malformed row is a RangeError and nothing of its batch is stored', async (t) => {
  await t.rejects(h.service.usage.record([row({}), row({ requests: -1 })]), RangeError);
  await t.rejects(h.service.usage.record([row({ promptTokens: 1.5 })]), RangeError);
  await t.rejects(h.service.usage.record([row({ hour: 'yesterday' })]), RangeError);
  t.same(await stored(), []);
  await h.service.usage.record([]);
});

/** A row as POST /fleet/usage takes it. */
function wire(fields: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    app_slug: 'app-a', tenant: 't1', key: 'k1', model: 'tiny', hour: hourAt(0),
    requests: 1, prompt_tokens: 10, cached_prompt_tokens: 4, completion_tokens: 20, queue_ms: 3, compute_ms: 50, ...fields,
  };
}
const BATCH = '6f1c2a52-8a0e-4c1e-9a43-0d6c1f0e2b11';
const sendUsage = (json: Record<string, unknown>) => h.request('POST', '/fleet/usage', { json: { app_id: app.id, app_secret: app.secret, batch_id: BATCH, rows: [wire()], ...json } });

t.test('POST /fleet/usage stores a replica\'s batch under its app; the same batch id again adds nothing and is answered the same', async (t) => {
  const first = await sendUsage({ rows: [wire(), wire({ app_slug: null, key: 'plain', requests: 2 })] });
  t.same([first.status, first.body], [200, { batch_id: BATCH, rows: 2 }]);
  const again = await sendUsage({ rows: [wire(), wire({ app_slug: null, key: 'plain', requests: 2 })] });
  t.same([again.status, again.body], [200, { batch_id: BATCH, rows: 2 }], 'a retried batch (its answer lost) is answered as the first time');
  // Four sends of one new batch at once (each on its own connection): one adds it.
  const racing = '0b7d0f7e-3f5c-4d2b-8d8e-7a9a3e1c5d20';
  const replies = await Promise.all(Array.from({ length: 4 }, () => sendUsage({ batch_id: racing, rows: [wire({ requests: 5 })] })));
  t.same(replies.map((r) => r.status), [200, 200, 200, 200]);
  t.same((await stored()).map((r) => [r.app_id, r.key_label, r.requests, r.prompt_tokens]), [
    [app.id, 'k1', 6, 20],
    [app.id, 'plain', 2, 10],
  ], 'each batch counted once; a row of no app is the app\'s (its replica served it)');
  // Batch ids are the app's own: another app's batch with the same id is its own batch.
  const other = await h.createApp('app-b');
  const theirs = await h.request('POST', '/fleet/usage', { json: { app_id: other.id, app_secret: other.secret, batch_id: BATCH, rows: [wire({ app_slug: 'app-b', requests: 7 })] } });
  t.equal(theirs.status, 200);
  t.equal((await h.admin('GET', '/admin/usage?app=app-b')).body.totals.requests, 7);
  // Ids are remembered for a day: each batch forgets the older ones.
  h.clock.advance(24 * HOUR + 1);
  await sendUsage({ batch_id: '11111111-2222-4333-8444-555555555555', rows: [wire({ hour: hourAt(0) })] });
  t.same((await h.sql<any[]>`select batch_id from usage_batches where app_id = ${app.id}`).map((r) => r.batch_id), ['11111111-2222-4333-8444-555555555555']);
});

t.test('POST /fleet/usage refuses a malformed batch with 400 VALIDATION_ERROR (nothing stored) and wrong credentials with 401', async (t) => {
  await h.createApp('app-b');
  const refused: Array<[string, Record<string, unknown>]> = [
    ['a row of another app', { rows: [wire(), wire({ app_slug: 'app-b' })] }],
    ['a negative counter', { rows: [wire({ requests: -1 })] }],
    ['a fractional counter', { rows: [wire({ completion_tokens: 1.5 })] }],
    ['a counter past the safe integers', { rows: [wire({ queue_ms: 2 ** 53 })] }],
    ['an hour that is not an instant', { rows: [wire({ hour: 'yesterday' })] }],
    ['an hour that does not exist', { rows: [wire({ hour: '2026-13-45T00:00:00Z' })] }],
    ['a label over 200 characters', { rows: [wire({ model: 'm'.repeat(201) })] }],
    ['a control character', { rows: [wire({ tenant: 'a\u0000b' })] }],
    ['a batch id that is not a UUID', { batch_id: 'batch-1' }],
    ['an unknown field', { rows: [wire({ extra: 1 })] }],
    ['a missing field', { rows: [{ ...wire(), compute_ms: undefined }] }],
  ];
  for (const [what, json] of refused) {
    const reply = await sendUsage(json);
    t.same([reply.status, reply.body.error?.code], [400, 'VALIDATION_ERROR'], what);
  }
  const foreign = await sendUsage({ rows: [wire(), wire({ app_slug: 'app-b' })] });
  t.equal(foreign.body.error.message, 'Invalid usage batch: usage row 1 names the app "app-b", not the app of these credentials ("app-a")');
  const impossible = await sendUsage({ rows: [wire({ hour: '2026-13-45T00:00:00Z' })] });
  t.equal(impossible.body.error.message, 'Invalid usage batch: usage row 0: hour must be an ISO 8601 instant, got 2026-13-45T00:00:00Z');
  t.same(await stored(), []);
  t.same(await h.sql`select * from usage_batches`, [], 'a refused batch is not claimed: sent again mended, it counts');
  t.match(await sendUsage({ app_secret: 'as_wrong' }), { status: 401, body: { error: { code: 'TOKEN_INVALID' } } });
  const big = await sendUsage({ rows: Array.from({ length: 100 }, (_, i) => wire({ key: `k${i}` })) });
  t.same([big.status, big.body.error.code], [413, 'BODY_TOO_LARGE'], 'past the 16 KiB body limit (a replica splits its batches below it)');
  t.same(await stored(), []);
});

t.test('GET /admin/usage names the tenant of a row whose label is the id of a tenant of its app', async (t) => {
  await h.createApp('app-b');
  const acme = await h.admin('POST', `/admin/apps/${app.id}/tenants`, { name: 'Acme Corp' });
  t.equal(acme.status, 201);
  await h.service.usage.record([
    row({ tenant: acme.body.id }), row({ appSlug: 'app-b', tenant: acme.body.id }), row({ tenant: 'Acme Corp', key: 'k2' }), row({ appSlug: null, tenant: acme.body.id, key: 'k3' }),
  ]);
  const reply = await h.admin('GET', '/admin/usage');
  t.equal(reply.status, 200);
  t.same(reply.body.rows.map((r: any) => [r.app_slug, r.tenant, r.key, r.tenant_name]).sort(), [
    [null, acme.body.id, 'k3', null],
    ['app-a', acme.body.id, 'k1', 'Acme Corp'],
    ['app-a', 'Acme Corp', 'k2', null],
    ['app-b', acme.body.id, 'k1', null],
  ].sort(), 'only the app\'s own tenant is named; another app\'s row with the same id and a label that is a name are not');
});

t.test('GET /admin/usage lists rows and totals, filtered by app (id or slug), tenant, key and range', async (t) => {
  const other = await h.createApp('app-b');
  await h.service.usage.record([
    row({ hour: hourAt(-1) }), row({ tenant: 't2', hour: hourAt(-1), requests: 2 }), row({ key: 'k2', requests: 4 }),
    row({ appSlug: 'app-b', requests: 7 }), row({ appSlug: null, tenant: '', key: 'plain-key', requests: 9 }),
    row({ hour: hourAt(-30), requests: 100 }),
  ]);
  const all = await h.admin('GET', '/admin/usage');
  t.equal(all.status, 200);
  t.same(all.body.to, new Date(h.clock.now()).toISOString());
  t.same(all.body.from, new Date(h.clock.now() - 24 * HOUR).toISOString());
  t.same(all.body.totals, { requests: 23, prompt_tokens: 50, cached_prompt_tokens: 20, completion_tokens: 100, queue_ms: 15, compute_ms: 250 });
  t.equal(all.body.truncated, false);
  t.same(all.body.rows[0], {
    app_id: app.id, app_slug: 'app-a', tenant: 't1', tenant_name: null, key: 'k1', model: 'tiny', hour: hourAt(-1),
    requests: 1, prompt_tokens: 10, cached_prompt_tokens: 4, completion_tokens: 20, queue_ms: 3, compute_ms: 50,
  });
  const requests = async (query: string) => {
    const reply = await h.admin('GET', `/admin/usage?${query}`);
    t.equal(reply.status, 200, query);
    return [reply.body.totals.requests, reply.body.rows.length];
  };
  t.same(await requests(`app=${app.id}`), [7, 3]);
  t.same(await requests('app=app-a'), [7, 3]);
  t.same(await requests(`app=${other.id}`), [7, 1]);
  t.same(await requests('app=app-a&tenant=t2'), [2, 1]);
  t.same(await requests('key=k2'), [4, 1]);
  t.same(await requests('tenant=&key=plain-key'), [9, 1]);
  t.same(await requests(`from=${hourAt(0)}`), [20, 3]);
  t.same(await requests(`from=${hourAt(-1)}&to=${hourAt(0)}`), [3, 2]);
  t.same(await requests(`from=${encodeURIComponent(hourAt(-40))}&app=app-a`), [107, 4]);
});

t.test('GET /admin/usage refuses bad parameters with 400 VALIDATION_ERROR and an unknown app with 404', async (t) => {
  const cases: Array<[string, number, string, string]> = [
    ['from=yesterday', 400, 'VALIDATION_ERROR', 'Invalid query parameter "from": expected an ISO 8601 instant such as 2026-11-25T06:00:00Z'],
    ['to=2026-13-45T00:00:00Z', 400, 'VALIDATION_ERROR', 'Invalid query parameter "to": expected an ISO 8601 instant such as 2026-11-25T06:00:00Z'],
    ['from=2026-11-02T00:00:00Z&to=2026-11-01T00:00:00Z', 400, 'VALIDATION_ERROR', 'Invalid query parameters "from" and "to": "from" must be before "to"'],
    ['from=2026-01-01T00:00:00Z&to=2026-06-01T00:00:00Z', 400, 'VALIDATION_ERROR', 'Invalid query parameters "from" and "to": the range is longer than 93 days'],
    [`tenant=${'x'.repeat(201)}`, 400, 'VALIDATION_ERROR', 'Invalid query parameter "tenant": expected a label of at most 200 characters'],
    ['app=no-such-app', 404, 'APP_NOT_FOUND', 'The app does not exist'],
    ['app=00000000-0000-4000-8000-000000000000', 404, 'APP_NOT_FOUND', 'The app does not exist'],
  ];
  for (const [query, status, code, message] of cases) {
    const reply = await h.admin('GET', `/admin/usage?${query}`);
    t.same([reply.status, reply.body], [status, { error: { code, message } }], query);
  }
  const longest = await h.admin('GET', '/admin/usage?from=2026-01-01T00:00:00Z&to=2026-04-04T00:00:00Z');
  t.equal(longest.status, 200, '93 days is allowed');
});

t.test('usage.hourly: one event per app and closed hour, after the grace period, once however many workers try', async (t) => {
  const receiver = await startWebhookReceiver();
  t.teardown(() => receiver.close());
  await h.admin('POST', `/admin/apps/${app.id}/webhooks`, { url: receiver.url, event_types: ['usage.hourly'] });
  const other = await h.createApp('app-b');
  // Usage of the next hour: the clock is moved to its end and through its grace period below.
  const hour = hourAt(1);
  await h.service.usage.record([
    row({ hour }), row({ hour, tenant: 't2', model: 'big', requests: 2 }), row({ hour, appSlug: 'app-b' }), row({ hour, appSlug: null }),
  ]);
  h.clock.advance(Date.parse(hour) + HOUR + 5 * 60 * 1000 - 1 - h.clock.now());
  t.equal(await h.service.usage.emitClosedHours(), 0, 'not within 5 minutes of the hour\'s end');
  // The rows of a late flush within the grace period are in the event.
  await h.service.usage.record([row({ hour, requests: 10 })]);
  h.clock.advance(1);
  const emitted = await Promise.all(Array.from({ length: 4 }, () => h.service.usage.emitClosedHours()));
  t.equal(emitted.reduce((a, b) => a + b, 0), 2, 'two events (app-a and app-b; none for the null app), each written by one of the four');
  t.equal(await h.service.usage.emitClosedHours(), 0, 'and never again');
  const events = await h.sql<any[]>`select app_id, actor, details from audit_events where type = 'usage.hourly' order by app_id = ${app.id} desc`;
  t.same(events.map((e) => e.app_id), [app.id, other.id]);
  t.same(events[0], {
    app_id: app.id, actor: 'service',
    details: {
      hour,
      rows: [
        { tenant: 't1', key: 'k1', model: 'tiny', requests: 11, prompt_tokens: 20, cached_prompt_tokens: 8, completion_tokens: 40, queue_ms: 6, compute_ms: 100 },
        { tenant: 't2', key: 'k1', model: 'big', requests: 2, prompt_tokens: 10, cached_prompt_tokens: 4, completion_tokens: 20, queue_ms: 3, compute_ms: 50 },
      ],
      totals: { requests: 13, prompt_tokens: 30, cached_prompt_tokens: 12, completion_tokens: 60, queue_ms: 9, compute_ms: 150 },
    },
  });
  t.ok(await until(() => receiver.received.length === 1), 'the subscribed endpoint gets its app\'s event');
  t.match(receiver.received[0]!.json, { type: 'usage.hourly', data: { app_id: app.id, user_id: null, details: events[0].details } });
  // A row arriving after the event is stored and queried, but not sent again.
  await h.service.usage.record([row({ hour, requests: 1 })]);
  t.equal(await h.service.usage.emitClosedHours(), 0);
  t.equal((await h.admin('GET', `/admin/usage?app=app-a&from=${hour}&to=${hourAt(2)}`)).body.totals.requests, 14);
});

t.test('two instances on one database: their batches sum exactly and each hour\'s event is written once', async (t) => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'auth-second-'));
  const second = await createAuthService({
    databaseUrl: h.service.databaseUrl, dataDir, keyDir: path.join(h.dataDir, 'keys'), issuer: 'http://auth.test', adminKey: ADMIN_KEY,
    otpDelivery: h.outbox, clock: h.clock, webhookDispatch: false, usageEventsIntervalMs: 0, log: () => {},
  });
  t.teardown(async () => { await second.close(); await fs.rm(dataDir, { recursive: true, force: true }); });
  const hour = hourAt(1);
  const batch = (i: number) => [row({ hour, requests: 1, completionTokens: i }), row({ hour, tenant: 't2', requests: 1 })];
  await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? second : h.service).usage.record(batch(i))));
  t.same((await stored()).map((r) => [r.tenant, r.requests, r.completion_tokens]), [['t1', 10, 45], ['t2', 10, 200]]);
  h.clock.advance(Date.parse(hour) + HOUR + 5 * 60 * 1000 - h.clock.now());
  const emitted = await Promise.all([h.service, second, h.service, second].map((service) => service.usage.emitClosedHours()));
  t.equal(emitted.reduce((a, b) => a + b, 0), 1, 'one of the four wrote it');
  const [{ n }] = await h.sql`select count(*)::int as n from audit_events where type = 'usage.hourly'`;
  t.equal(n, 1);
});

t.test('the background run writes the usage.hourly event of an hour closed past its grace period, by itself', async (t) => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'auth-background-'));
  const hour = hourAt(1);
  await h.service.usage.record([row({ hour, requests: 3 })]);
  h.clock.advance(Date.parse(hour) + HOUR + 5 * 60 * 1000 - h.clock.now());
  const background = await createAuthService({
    databaseUrl: h.service.databaseUrl, dataDir, keyDir: path.join(h.dataDir, 'keys'), issuer: 'http://auth.test', adminKey: ADMIN_KEY,
    otpDelivery: h.outbox, clock: h.clock, webhookDispatch: false, usageEventsIntervalMs: 20, log: () => {},
  });
  t.teardown(async () => { await background.close(); await fs.rm(dataDir, { recursive: true, force: true }); });
  const written = () => h.sql<any[]>`select app_id, details from audit_events where type = 'usage.hourly'`;
  t.ok(await until(async () => (await written()).length === 1), 'the event was written without a call to emitClosedHours');
  const [event] = await written();
  t.same([event.app_id, event.details.hour, event.details.totals.requests], [app.id, hour, 3]);
  t.equal(await background.usage.emitClosedHours(), 0, 'and is not written again');
});
