// Webhooks for app backends: endpoints per app for chosen event types, messages signed as
// Standard Webhooks says, written to the outbox in the change's transaction, retried with
// backoff, dead after the last retry, redelivered by the admin.
import { Webhook } from 'standardwebhooks';
import t from 'tap';
import { insertAuditEvent } from '../../src/auth/queries/audit-events.js';
import { purgeExpiredAuditEvents } from '../../src/auth/service/audit.js';
import { startAuthHarness, type TestApp, type Tokens } from './fixtures/harness.js';
import { hasValidSignature, startWebhookReceiver, until, type WebhookReceiver } from './fixtures/webhook-receiver.js';

const h = await startAuthHarness({ webhookPollMs: 20, webhookRetryDelaysSeconds: [10, 60], webhookTimeoutMs: 5000 });
t.teardown(() => h.close());

let app: TestApp;
let tokens: Tokens;
let receiver: WebhookReceiver;
t.beforeEach(async () => {
  ({ app, tokens } = await h.startFresh({ session: true }));
  receiver = await startWebhookReceiver();
});
t.afterEach(() => receiver.close());

async function subscribe(eventTypes: string[], target: TestApp = app): Promise<{ id: string; secret: string }> {
  const reply = await h.admin('POST', `/admin/apps/${target.id}/webhooks`, { url: receiver.url, event_types: eventTypes });
  if (reply.status !== 201) throw new Error(`create webhook: ${reply.status} ${JSON.stringify(reply.body)}`);
  return reply.body;
}

async function deliveries(state?: string): Promise<any[]> {
  return (await h.admin('GET', `/admin/apps/${app.id}/webhook-deliveries${state ? `?state=${state}` : ''}`)).body.deliveries;
}

async function deliveryState(): Promise<{ state: string; attempts: number }> {
  const [row] = await h.sql<{ state: string; attempts: number }[]>`select state, attempts from webhook_deliveries`;
  return { ...row! };
}

t.test('an endpoint gets each subscribed event once, signed as Standard Webhooks says', async (t) => {
  const created = await h.admin('POST', `/admin/apps/${app.id}/webhooks`, { url: receiver.url, event_types: ['session.revoked', 'user.sessions_revoked'] });
  t.equal(created.status, 201);
  t.match(created.body, { app_id: app.id, url: receiver.url, event_types: ['session.revoked', 'user.sessions_revoked'], secret: /^whsec_[A-Za-z0-9+/]{43}=$/ });
  const listed = await h.admin('GET', `/admin/apps/${app.id}/webhooks`);
  t.same(listed.body.webhooks, [{ id: created.body.id, app_id: app.id, url: receiver.url, event_types: ['session.revoked', 'user.sessions_revoked'], created_at: created.body.created_at }], 'no secret in the list');

  await h.refresh(app, tokens.refresh_token); // token.refreshed: not subscribed
  await h.post('/auth/revoke-user', { ...h.credentials(app), user_id: tokens.user_id }, { 'user-agent': 'backend/2' });
  t.ok(await until(() => receiver.received.length === 1), 'one message arrives');
  t.ok(await until(async () => (await deliveryState()).state === 'delivered'));
  const [message] = receiver.received;
  t.ok(hasValidSignature(created.body.secret, message!), 'the signature verifies with the secret');
  const headers = { 'webhook-id': String(message!.headers['webhook-id']), 'webhook-timestamp': String(message!.headers['webhook-timestamp']), 'webhook-signature': String(message!.headers['webhook-signature']) };
  t.same(new Webhook(created.body.secret).verify(message!.body, headers), message!.json, 'the standardwebhooks reference library verifies it');
  t.throws(() => new Webhook(created.body.secret).verify(message!.body.replace('1', '2'), headers), 'and refuses an altered body');
  t.match(message!.headers['webhook-id'], /^msg_[0-9a-f-]{36}$/);
  t.equal(message!.headers['webhook-timestamp'], String(Math.floor(h.clock.now() / 1000)));
  t.equal(message!.headers['content-type'], 'application/json');
  t.same(message!.json, {
    type: 'user.sessions_revoked',
    timestamp: new Date(h.clock.now()).toISOString(),
    data: {
      event_id: message!.json.data.event_id, app_id: app.id, user_id: tokens.user_id, session_id: null,
      ip: '127.0.0.1', user_agent: 'backend/2', details: { sessions_revoked: 1 },
    },
  });
  t.same((await deliveries()).map((d) => ({ state: d.state, attempts: d.attempts, last_status: d.last_status, message_id: d.message_id })), [
    { state: 'delivered', attempts: 1, last_status: 200, message_id: message!.headers['webhook-id'] },
  ]);
  t.notOk(hasValidSignature(`whsec_${Buffer.alloc(32).toString('base64')}`, message!), 'another secret does not verify it');
});

t.test('a soft-deleted user\'s event reaches the endpoints of every app the user is a member of', async (t) => {
  const appB = await h.createApp('app-b');
  await h.login(appB, 'ann@example.com');
  const appC = await h.createApp('app-c');
  await subscribe(['user.deleted']);
  await subscribe(['user.deleted'], appB);
  await subscribe(['user.deleted'], appC);
  await h.admin('DELETE', `/admin/users/${tokens.user_id}`);
  t.ok(await until(() => receiver.received.length === 2));
  t.same(receiver.received.map((m) => m.json.data.app_id).sort(), [app.id, appB.id].sort(), 'app-c has no such member');
  t.ok(receiver.received.every((m) => m.json.type === 'user.deleted' && m.json.data.user_id === tokens.user_id));
});

t.test('a change that rolls back leaves no delivery: the outbox row is written in its transaction', async (t) => {
  await subscribe(['session.revoked']);
  await t.rejects(h.sql.begin(async (tx) => {
    await insertAuditEvent(tx, { type: 'session.revoked', actor: 'app', appId: app.id, userId: tokens.user_id, ip: '127.0.0.1', userAgent: null, now: new Date(h.clock.now()) });
    const [pending] = await tx`select count(*)::int as n from webhook_deliveries`;
    t.equal(pending!.n, 1, 'the delivery exists inside the transaction');
    throw new Error('roll back');
  }), /roll back/);
  const [after] = await h.sql`select count(*)::int as n from webhook_deliveries`;
  t.equal(after!.n, 0);
  await h.post('/auth/revoke', { ...h.credentials(app), refresh_token: tokens.refresh_token });
  t.ok(await until(() => receiver.received.length === 1), 'the next committed change is delivered');
  t.equal(receiver.received[0]!.json.type, 'session.revoked');
});

t.test('failures are retried after the configured delays, then dead; the admin redelivers', async (t) => {
  receiver.status = 500;
  await subscribe(['session.revoked']);
  await h.post('/auth/revoke', { ...h.credentials(app), refresh_token: tokens.refresh_token });
  t.ok(await until(async () => (await deliveryState()).attempts === 1));
  let [pending] = await deliveries('pending');
  t.match(pending, { state: 'pending', attempts: 1, last_status: 500, last_error: 'the endpoint answered 500', next_attempt_at: new Date(h.clock.now() + 10_000).toISOString() });
  h.clock.advance(10_000);
  t.ok(await until(async () => (await deliveryState()).attempts === 2), 'the second attempt 10 s later');
  [pending] = await deliveries('pending');
  t.equal(pending.next_attempt_at, new Date(h.clock.now() + 60_000).toISOString(), 'the third 60 s after the second');
  h.clock.advance(60_000);
  t.ok(await until(async () => (await deliveryState()).state === 'dead'), 'dead after the last retry');
  t.equal(receiver.received.length, 3);
  t.equal(new Set(receiver.received.map((m) => m.headers['webhook-id'])).size, 1, 'every attempt carries the same webhook-id');
  const [dead] = await deliveries('dead');
  t.match(dead, { state: 'dead', attempts: 3, last_status: 500, next_attempt_at: null, delivered_at: null });
  t.same(await deliveries('delivered'), []);

  receiver.status = 204;
  const redelivered = await h.admin('POST', `/admin/apps/${app.id}/webhook-deliveries/${dead.id}/redeliver`);
  t.equal(redelivered.status, 200);
  t.match(redelivered.body, { id: dead.id, state: 'pending', attempts: 0 });
  t.ok(await until(async () => (await deliveryState()).state === 'delivered'));
  t.equal(receiver.received.length, 4);
  t.equal(receiver.received[3]!.headers['webhook-id'], `msg_${dead.id}`);
  t.match((await deliveries())[0], { state: 'delivered', attempts: 1, last_status: 204, last_error: null });
});

t.test('an unreachable endpoint is a failed attempt with the error kept', async (t) => {
  const url = receiver.url;
  await receiver.close();
  await h.admin('POST', `/admin/apps/${app.id}/webhooks`, { url, event_types: ['session.revoked'] });
  await h.post('/auth/revoke', { ...h.credentials(app), refresh_token: tokens.refresh_token });
  t.ok(await until(async () => (await deliveryState()).attempts === 1));
  const [pending] = await deliveries('pending');
  t.match(pending, { last_status: null, last_error: 'TypeError: fetch failed (ECONNREFUSED)' });
  receiver = await startWebhookReceiver(); // for afterEach
});

t.test('bad webhook requests are 400, unknown ids 404; deleting an endpoint drops its deliveries', async (t) => {
  for (const body of [
    { url: 'ftp://example.com/x', event_types: ['session.revoked'] },
    { url: 'https://user:pass@example.com/x', event_types: ['session.revoked'] },
    { url: receiver.url, event_types: ['admin.key_rejected'] },
    { url: receiver.url, event_types: [] },
    { url: receiver.url, event_types: ['session.revoked'], extra: 1 },
  ]) {
    const reply = await h.admin('POST', `/admin/apps/${app.id}/webhooks`, body);
    t.equal(reply.status, 400, JSON.stringify(body));
    t.equal(reply.body.error.code, 'VALIDATION_ERROR');
  }
  t.equal((await h.admin('POST', '/admin/apps/00000000-0000-4000-8000-000000000000/webhooks', { url: receiver.url, event_types: ['session.revoked'] })).body.error.code, 'APP_NOT_FOUND');
  t.equal((await h.admin('GET', `/admin/apps/${app.id}/webhook-deliveries?state=lost`)).status, 400);
  const missing = await h.admin('POST', `/admin/apps/${app.id}/webhook-deliveries/00000000-0000-4000-8000-000000000000/redeliver`);
  t.same([missing.status, missing.body.error.code], [404, 'WEBHOOK_DELIVERY_NOT_FOUND']);
  receiver.status = 500;
  const endpoint = await subscribe(['session.revoked']);
  await h.post('/auth/revoke', { ...h.credentials(app), refresh_token: tokens.refresh_token });
  t.ok(await until(async () => (await deliveryState()).attempts === 1));
  const deleted = await h.admin('DELETE', `/admin/apps/${app.id}/webhooks/${endpoint.id}`);
  t.same(deleted.body, { id: endpoint.id, deleted: true });
  t.same(await deliveries(), []);
  const again = await h.admin('DELETE', `/admin/apps/${app.id}/webhooks/${endpoint.id}`);
  t.same([again.status, again.body.error.code], [404, 'WEBHOOK_NOT_FOUND']);
});

t.test('the audit retention also deletes finished deliveries of that age, never pending ones', async (t) => {
  await subscribe(['session.revoked', 'user.sessions_revoked']);
  await h.post('/auth/revoke', { ...h.credentials(app), refresh_token: tokens.refresh_token });
  t.ok(await until(async () => (await deliveryState()).state === 'delivered'));
  h.clock.advance(60_000);
  receiver.status = 500;
  await h.post('/auth/revoke-user', { ...h.credentials(app), user_id: tokens.user_id });
  t.ok(await until(async () => (await h.sql`select 1 from webhook_deliveries where state = 'pending' and attempts >= 1`).length === 1), 'a failing one, pending');
  h.clock.advance(30_000);
  await purgeExpiredAuditEvents(h.sql, h.clock.now(), 10_000);
  const left = await h.sql`select event_type, state from webhook_deliveries`;
  t.same(left.map((r) => [r.event_type, r.state]), [['user.sessions_revoked', 'pending']], 'both were older than 10 s: the delivered one went, the pending one stays');
});
