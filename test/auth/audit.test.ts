// The audit trail: each security event is recorded with actor, app, user, IP, user agent and
// time, in the transaction of its change; the admin query API (filters, cursor paging); the
// table is append-only; retention deletes old events.
import t from 'tap';
import { startAuthHarness, ADMIN_KEY, type TestApp, type Tokens } from './fixtures/harness.js';
import { purgeExpiredAuditEvents } from '../../src/auth/service/audit.js';

const h = await startAuthHarness();
t.teardown(() => h.close());

const DAY = 24 * 3600 * 1000;
const UA = 'audit-test/1.0';
let app: TestApp;
let tokens: Tokens;
t.beforeEach(async () => { ({ app, tokens } = await h.startFresh({ session: true })); });

interface AuditEvent {
  id: string; occurred_at: string; type: string; actor: string; app_id: string | null; user_id: string | null;
  family_id: string | null; ip: string | null; user_agent: string | null; details: Record<string, unknown>;
}

async function events(query = ''): Promise<AuditEvent[]> {
  const reply = await h.admin('GET', `/admin/audit-events${query}`);
  if (reply.status !== 200) throw new Error(`audit query: ${reply.status} ${JSON.stringify(reply.body)}`);
  return reply.body.events;
}

async function eventsOfType(type: string): Promise<AuditEvent[]> {
  return events(`?type=${type}`);
}

function post(route: string, json: unknown) {
  return h.post(route, json, { 'user-agent': UA });
}

async function familyOf(userId: string): Promise<string> {
  const [row] = await h.sql<{ id: string }[]>`select id from refresh_families where user_id = ${userId} order by created_at desc limit 1`;
  return row!.id;
}

t.test('a login records otp.sent and login.succeeded with app, user, family, IP, user agent and time', async (t) => {
  await post('/auth/otp/request', { ...h.credentials(app), email: 'Bob@Example.com' });
  const verified = await post('/auth/otp/verify', { ...h.credentials(app), email: 'bob@example.com', code: h.outbox.codeFor('bob@example.com') });
  t.equal(verified.status, 200);
  const [sent] = await eventsOfType('otp.sent');
  t.match(sent, { type: 'otp.sent', actor: 'app', app_id: app.id, user_id: null, ip: '127.0.0.1', user_agent: UA, details: { channel: 'email', destination: 'bob@example.com' } });
  t.equal(sent!.occurred_at, new Date(h.clock.now()).toISOString());
  const [login] = await eventsOfType('login.succeeded');
  t.match(login, { actor: 'app', app_id: app.id, user_id: verified.body.user_id, family_id: await familyOf(verified.body.user_id), ip: '127.0.0.1', user_agent: UA });
});

t.test('a wrong code records login.failed with the reason; a deleted user\'s correct code too', async (t) => {
  await post('/auth/otp/request', { ...h.credentials(app), email: 'bob@example.com' });
  const code = h.outbox.codeFor('bob@example.com');
  const wrong = await post('/auth/otp/verify', { ...h.credentials(app), email: 'bob@example.com', code: code === '000000' ? '000001' : '000000' });
  t.equal(wrong.status, 401);
  t.match(await eventsOfType('login.failed'), [{ actor: 'app', app_id: app.id, user_id: null, details: { reason: 'OTP_INVALID', destination: 'bob@example.com' } }]);
  await h.admin('DELETE', `/admin/users/${tokens.user_id}`);
  h.clock.advance(61_000);
  await post('/auth/otp/request', { ...h.credentials(app), email: 'ann@example.com' });
  const deleted = await post('/auth/otp/verify', { ...h.credentials(app), email: 'ann@example.com', code: h.outbox.codeFor('ann@example.com') });
  t.equal(deleted.status, 403);
  const failures = await eventsOfType('login.failed');
  t.equal(failures.length, 2);
  t.match(failures[0], { details: { reason: 'USER_DELETED', destination: 'ann@example.com' } });
  t.equal((await eventsOfType('login.succeeded')).length, 1, 'only the harness\'s own login succeeded');
});

t.test('a failed delivery records otp.delivery_failed', async (t) => {
  h.outbox.failNext = true;
  t.equal((await post('/auth/otp/request', { ...h.credentials(app), email: 'bob@example.com' })).status, 502);
  t.match(await eventsOfType('otp.delivery_failed'), [{ app_id: app.id, details: { destination: 'bob@example.com' } }]);
});

t.test('a refresh records token.refreshed with the family; a replay records token.reuse_detected with it', async (t) => {
  const family = await familyOf(tokens.user_id);
  await post('/auth/refresh', { ...h.credentials(app), refresh_token: tokens.refresh_token });
  t.match(await eventsOfType('token.refreshed'), [{ actor: 'app', app_id: app.id, user_id: tokens.user_id, family_id: family, ip: '127.0.0.1', user_agent: UA }]);
  const replay = await post('/auth/refresh', { ...h.credentials(app), refresh_token: tokens.refresh_token });
  t.equal(replay.body.error.code, 'TOKEN_REUSE');
  t.match(await eventsOfType('token.reuse_detected'), [{ app_id: app.id, user_id: tokens.user_id, family_id: family, user_agent: UA }]);
  await post('/auth/refresh', { ...h.credentials(app), refresh_token: tokens.refresh_token });
  t.equal((await eventsOfType('token.reuse_detected')).length, 1, 'a replay into a revoked family records nothing more');
  t.equal((await eventsOfType('token.refreshed')).length, 1);
});

t.test('logout (both revoke routes) records session.revoked once; revoke-user records the count', async (t) => {
  const family = await familyOf(tokens.user_id);
  await post('/auth/revoke', { ...h.credentials(app), refresh_token: tokens.refresh_token });
  await post('/auth/revoke', { ...h.credentials(app), refresh_token: tokens.refresh_token });
  t.match(await eventsOfType('session.revoked'), [{ app_id: app.id, user_id: tokens.user_id, family_id: family }]);
  h.clock.advance(61_000); // the resend interval
  const second = await h.login(app, 'ann@example.com');
  const form = new URLSearchParams({ token: second.refresh_token, client_id: app.id, client_secret: app.secret }).toString();
  await h.request('POST', '/oauth/revoke', { raw: form, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
  t.equal((await eventsOfType('session.revoked')).length, 2);
  h.clock.advance(61_000);
  await h.login(app, 'ann@example.com');
  await post('/auth/revoke-user', { ...h.credentials(app), user_id: tokens.user_id });
  t.match(await eventsOfType('user.sessions_revoked'), [{ actor: 'app', app_id: app.id, user_id: tokens.user_id, details: { sessions_revoked: 1 } }]);
});

t.test('role assign and revoke are recorded; a refused assignment records nothing', async (t) => {
  const tenant = await h.createTenant(app, 'Acme');
  await post('/auth/roles/assign', { ...h.credentials(app), user_id: tokens.user_id, tenant_id: tenant, role: 'admin' });
  const missing = await post('/auth/roles/assign', { ...h.credentials(app), user_id: tokens.user_id, tenant_id: '00000000-0000-4000-8000-000000000000', role: 'admin' });
  t.equal(missing.status, 404);
  t.match(await eventsOfType('role.assigned'), [{ app_id: app.id, user_id: tokens.user_id, details: { tenant_id: tenant, role: 'admin' } }]);
  await post('/auth/roles/revoke', { ...h.credentials(app), user_id: tokens.user_id, tenant_id: tenant });
  await post('/auth/roles/revoke', { ...h.credentials(app), user_id: tokens.user_id, tenant_id: tenant });
  t.match(await eventsOfType('role.revoked'), [{ user_id: tokens.user_id, details: { tenant_id: tenant, previous_role: 'admin' } }]);
});

t.test('admin actions are recorded with actor admin: delete, restore, revoke-sessions, app secret and key rotation', async (t) => {
  await h.admin('DELETE', `/admin/users/${tokens.user_id}`);
  await h.admin('DELETE', `/admin/users/${tokens.user_id}`);
  await h.admin('POST', `/admin/users/${tokens.user_id}/restore`);
  await h.admin('POST', `/admin/users/${tokens.user_id}/revoke-sessions`);
  await h.admin('POST', `/admin/apps/${app.id}/secret`);
  const rotated = await h.admin('POST', '/admin/signing-keys/rotate');
  const all = await events('?limit=1000');
  t.same(all.filter((e) => e.actor === 'admin').map((e) => e.type), [
    'signing_key.rotated', 'app.secret_rotated', 'user.sessions_revoked', 'user.restored', 'user.deleted', 'app.created',
  ], 'newest first; the second delete changed nothing and is not recorded');
  t.match(all.find((e) => e.type === 'user.deleted'), { user_id: tokens.user_id, details: { sessions_revoked: 1 } });
  t.match(all.find((e) => e.type === 'app.secret_rotated'), { app_id: app.id });
  t.match(all.find((e) => e.type === 'signing_key.rotated'), { details: { kid: rotated.body.kid, retired_kid: rotated.body.retired_kid } });
});

t.test('a missing or wrong admin key is recorded as admin.key_rejected', async (t) => {
  await h.request('GET', '/admin/apps', { headers: { 'x-admin-key': 'wrong-key-0123456789', 'user-agent': UA } });
  await h.request('GET', '/admin/users/x');
  const rejected = await eventsOfType('admin.key_rejected');
  t.equal(rejected.length, 2);
  t.match(rejected[1], { actor: 'anonymous', app_id: null, ip: '127.0.0.1', user_agent: UA, details: { method: 'GET', path: '/admin/apps' } });
  t.match(rejected[0], { details: { method: 'GET', path: '/admin/users/x' } });
});

t.test('the query filters by app, user, type and time, and pages with a cursor', async (t) => {
  const appB = await h.createApp('app-b');
  const bob = await h.login(appB, 'bob@example.com');
  for (let i = 0; i < 5; i++) {
    h.clock.advance(60_000);
    const reply = await h.refresh(app, tokens.refresh_token);
    tokens = { ...tokens, refresh_token: reply.body.refresh_token };
  }
  t.ok((await events(`?app_id=${appB.id}`)).every((e) => e.app_id === appB.id));
  t.same((await events(`?user_id=${bob.user_id}`)).map((e) => e.type), ['login.succeeded']);
  t.same((await events(`?app_id=${app.id}&type=token.refreshed`)).length, 5);
  const since = new Date(h.clock.now() - 2 * 60_000).toISOString();
  const until = new Date(h.clock.now()).toISOString();
  t.equal((await events(`?type=token.refreshed&since=${since}&until=${until}`)).length, 2, 'since inclusive, until exclusive');

  const all = await events('?limit=1000');
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const reply = await h.admin('GET', `/admin/audit-events?limit=3${cursor ? `&cursor=${cursor}` : ''}`);
    t.equal(reply.status, 200);
    seen.push(...reply.body.events.map((e: AuditEvent) => e.id));
    cursor = reply.body.next_cursor;
    pages++;
  } while (cursor !== null);
  t.same(seen, all.map((e) => e.id), 'every event once, newest first');
  t.equal(pages, Math.ceil(all.length / 3));
  t.ok(all.every((e, i) => i === 0 || BigInt(all[i - 1]!.id) > BigInt(e.id)));
});

t.test('bad query parameters are 400 VALIDATION_ERROR', async (t) => {
  for (const query of ['?app_id=nope', '?user_id=1', '?type=made.up', '?since=yesterday', '?until=2026-13-01T00:00:00Z', '?limit=0', '?limit=1001', '?cursor=abc', '?cursor=MA']) {
    const reply = await h.admin('GET', `/admin/audit-events${query}`);
    t.equal(reply.status, 400, query);
    t.equal(reply.body.error.code, 'VALIDATION_ERROR', query);
  }
  const denied = await h.request('GET', '/admin/audit-events', { headers: { 'x-admin-key': `${ADMIN_KEY}x` } });
  t.equal(denied.status, 401);
});

t.test('the table is append-only: updates and deletes are refused by PostgreSQL', async (t) => {
  await t.rejects(h.sql`update audit_events set type = 'login.failed'`, { code: '55000' });
  await t.rejects(h.sql`delete from audit_events`, { code: '55000' });
  t.ok((await events()).length > 0);
});

t.test('retention deletes the events older than the period and keeps the rest', async (t) => {
  h.clock.advance(10 * DAY);
  await h.refresh(app, tokens.refresh_token);
  const before = await events('?limit=1000');
  const deleted = await purgeExpiredAuditEvents(h.sql, h.clock.now(), 5 * DAY);
  const after = await events('?limit=1000');
  t.equal(deleted, before.length - 1);
  t.same(after.map((e) => e.type), ['token.refreshed']);
});
