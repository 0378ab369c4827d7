// The sessions API: a user (through the app's backend, with the session's refresh token) lists
// their live sessions with the current one marked, ends one, or ends all others; the admin does
// the same for any user. Ending a session is a revocation: audit events and webhooks as such.
import t from 'tap';
import { ADMIN_KEY, startAuthHarness, type TestApp, type Tokens } from './fixtures/harness.js';
import { startWebhookReceiver, until } from './fixtures/webhook-receiver.js';

const h = await startAuthHarness();
t.teardown(() => h.close());
const receiver = await startWebhookReceiver();
t.teardown(() => receiver.close());

let app: TestApp;
let ann: Tokens;
t.beforeEach(async () => {
  ({ app, tokens: ann } = await h.startFresh({ session: true }));
  receiver.received.length = 0;
});

/** Logs in with a User-Agent of its own, a minute after the previous login. */
async function loginFrom(target: TestApp, email: string, userAgent: string): Promise<Tokens> {
  h.clock.advance(60_000);
  const requested = await h.post('/auth/otp/request', { ...h.credentials(target), email }, { 'user-agent': userAgent });
  if (requested.status !== 200) throw new Error(`otp request: ${requested.status}`);
  const verified = await h.post('/auth/otp/verify', { ...h.credentials(target), email, code: h.outbox.codeFor(email) }, { 'user-agent': userAgent });
  if (verified.status !== 200) throw new Error(`otp verify: ${verified.status}`);
  return verified.body;
}

async function familyOf(refreshToken: string): Promise<string> {
  const { createHash } = await import('node:crypto');
  const [row] = await h.sql<{ family_id: string }[]>`select family_id from refresh_tokens where token_hash = ${createHash('sha256').update(refreshToken).digest()}`;
  return row!.family_id;
}

const list = (target: TestApp, refreshToken: string) => h.post('/auth/sessions', { ...h.credentials(target), refresh_token: refreshToken });

t.test('a user lists their live sessions in the app, most recently used first, the current one marked', async (t) => {
  const phone = await loginFrom(app, 'ann@example.com', 'Phone/1.0');
  const laptop = await loginFrom(app, 'ann@example.com', 'Laptop/2.0');
  h.clock.advance(60_000);
  const refreshed = await h.post('/auth/refresh', { ...h.credentials(app), refresh_token: phone.refresh_token }, { 'user-agent': 'Phone/1.1' });
  t.equal(refreshed.status, 200);
  await loginFrom(app, 'bob@example.com', 'Bob/1.0');
  const other = await h.createApp('app-b');
  await loginFrom(other, 'ann@example.com', 'Other/1.0');
  const ended = await loginFrom(app, 'ann@example.com', 'Ended/1.0');
  t.equal((await h.post('/auth/revoke', { ...h.credentials(app), refresh_token: ended.refresh_token })).status, 200);

  const reply = await list(app, laptop.refresh_token);
  t.equal(reply.status, 200);
  const start = h.clock.now() - 6 * 60_000; // ann's first login
  const iso = (ms: number) => new Date(ms).toISOString();
  const expires = (ms: number) => iso(ms + 30 * 24 * 3600 * 1000);
  t.same(reply.body, {
    sessions: [
      { id: await familyOf(refreshed.body.refresh_token), app_id: app.id, app_slug: 'app-a', created_at: iso(start + 60_000), last_used_at: iso(start + 180_000), expires_at: expires(start + 180_000), ip: '127.0.0.1', user_agent: 'Phone/1.1', current: false },
      { id: await familyOf(laptop.refresh_token), app_id: app.id, app_slug: 'app-a', created_at: iso(start + 120_000), last_used_at: iso(start + 120_000), expires_at: expires(start + 120_000), ip: '127.0.0.1', user_agent: 'Laptop/2.0', current: true },
      { id: await familyOf(ann.refresh_token), app_id: app.id, app_slug: 'app-a', created_at: iso(start), last_used_at: iso(start), expires_at: expires(start), ip: '127.0.0.1', user_agent: 'node', current: false },
    ],
  }, 'ann\'s three live sessions of app-a: not bob\'s, not app-b\'s, not the revoked one');
});

t.test('ending one session revokes it, with its audit event and webhook', async (t) => {
  const endpoint = await h.admin('POST', `/admin/apps/${app.id}/webhooks`, { url: receiver.url, event_types: ['session.revoked'] });
  t.equal(endpoint.status, 201);
  const phone = await loginFrom(app, 'ann@example.com', 'Phone/1.0');
  const phoneSession = await familyOf(phone.refresh_token);
  const reply = await h.post('/auth/sessions/revoke', { ...h.credentials(app), refresh_token: ann.refresh_token, session_id: phoneSession });
  t.equal(reply.status, 200);
  t.same(reply.body, { success: true });
  const refreshed = await h.refresh(app, phone.refresh_token);
  t.equal(refreshed.status, 401);
  t.equal(refreshed.body.error.code, 'TOKEN_REVOKED');
  const live = await h.refresh(app, ann.refresh_token);
  t.equal(live.status, 200, 'the current session lives on');
  const [event] = await h.sql`select type, actor, app_id, user_id, family_id, details from audit_events where type = 'session.revoked'`;
  t.same(event, { type: 'session.revoked', actor: 'app', app_id: app.id, user_id: ann.user_id, family_id: phoneSession, details: { ended_by: 'user' } });
  t.ok(await until(() => receiver.received.length === 1), 'the webhook is sent');
  t.equal(receiver.received[0]!.json.type, 'session.revoked');
  t.equal(receiver.received[0]!.json.data.session_id, phoneSession);
  const again = await h.post('/auth/sessions/revoke', { ...h.credentials(app), refresh_token: live.body.refresh_token, session_id: phoneSession });
  t.equal(again.status, 200, 'ending an ended session is idempotent');
  t.equal((await h.sql`select 1 from audit_events where type = 'session.revoked'`).length, 1, 'and records nothing');
});

t.test('another user\'s session is refused with 404 SESSION_NOT_FOUND and stays live', async (t) => {
  const bob = await loginFrom(app, 'bob@example.com', 'Bob/1.0');
  const reply = await h.post('/auth/sessions/revoke', { ...h.credentials(app), refresh_token: ann.refresh_token, session_id: await familyOf(bob.refresh_token) });
  t.equal(reply.status, 404);
  t.same(reply.body, { error: { code: 'SESSION_NOT_FOUND', message: 'The user has no such session' } });
  t.equal((await h.refresh(app, bob.refresh_token)).status, 200);
  const unknown = await h.post('/auth/sessions/revoke', { ...h.credentials(app), refresh_token: ann.refresh_token, session_id: '00000000-0000-4000-8000-000000000000' });
  t.equal(unknown.status, 404);
  t.equal(unknown.body.error.code, 'SESSION_NOT_FOUND');
});

t.test('ending all others keeps the current session, with user.sessions_revoked and its webhook', async (t) => {
  const endpoint = await h.admin('POST', `/admin/apps/${app.id}/webhooks`, { url: receiver.url, event_types: ['user.sessions_revoked'] });
  t.equal(endpoint.status, 201);
  const phone = await loginFrom(app, 'ann@example.com', 'Phone/1.0');
  const laptop = await loginFrom(app, 'ann@example.com', 'Laptop/1.0');
  const bob = await loginFrom(app, 'bob@example.com', 'Bob/1.0');
  const reply = await h.post('/auth/sessions/revoke-others', { ...h.credentials(app), refresh_token: laptop.refresh_token });
  t.equal(reply.status, 200);
  t.same(reply.body, { sessions_revoked: 2 });
  t.equal((await h.refresh(app, ann.refresh_token)).body.error.code, 'TOKEN_REVOKED');
  t.equal((await h.refresh(app, phone.refresh_token)).body.error.code, 'TOKEN_REVOKED');
  t.equal((await h.refresh(app, bob.refresh_token)).status, 200, 'another user is untouched');
  const sessions = (await list(app, laptop.refresh_token)).body.sessions;
  t.same(sessions.map((s: { current: boolean }) => s.current), [true], 'only the current one is left');
  const [event] = await h.sql`select actor, user_id, family_id, details from audit_events where type = 'user.sessions_revoked'`;
  t.same(event, { actor: 'app', user_id: ann.user_id, family_id: sessions[0].id, details: { sessions_revoked: 2, kept_session_id: sessions[0].id } });
  t.ok(await until(() => receiver.received.length === 1));
  t.equal(receiver.received[0]!.json.type, 'user.sessions_revoked');
});

t.test('the refresh token must be the live token of a live session of this app', async (t) => {
  const refreshed = await h.refresh(app, ann.refresh_token);
  const rotated = await list(app, ann.refresh_token);
  t.equal(rotated.status, 401);
  t.same(rotated.body, { error: { code: 'TOKEN_INVALID', message: 'The refresh token was rotated; present the live one' } });
  const other = await h.createApp('app-b');
  const wrongApp = await list(other, refreshed.body.refresh_token);
  t.equal(wrongApp.status, 401);
  t.same(wrongApp.body, { error: { code: 'TOKEN_INVALID', message: 'Invalid refresh token' } });
  t.equal((await h.post('/auth/revoke', { ...h.credentials(app), refresh_token: refreshed.body.refresh_token })).status, 200);
  const revoked = await list(app, refreshed.body.refresh_token);
  t.equal(revoked.status, 401);
  t.equal(revoked.body.error.code, 'TOKEN_REVOKED');
  const badSecret = await h.post('/auth/sessions', { app_id: app.id, app_secret: 'wrong', refresh_token: refreshed.body.refresh_token });
  t.equal(badSecret.status, 401);
  t.equal(badSecret.body.error.code, 'TOKEN_INVALID');
  const missing = await h.post('/auth/sessions/revoke', { ...h.credentials(app), refresh_token: refreshed.body.refresh_token });
  t.equal(missing.status, 400);
  t.equal(missing.body.error.code, 'VALIDATION_ERROR');
});

t.test('the admin lists any user\'s sessions in every app and ends one', async (t) => {
  const other = await h.createApp('app-b');
  const elsewhere = await loginFrom(other, 'ann@example.com', 'Other/1.0');
  const listed = await h.admin('GET', `/admin/users/${ann.user_id}/sessions`);
  t.equal(listed.status, 200);
  t.equal(listed.body.user_id, ann.user_id);
  t.same(listed.body.sessions.map((s: { app_slug: string; user_agent: string | null }) => [s.app_slug, s.user_agent]), [['app-b', 'Other/1.0'], ['app-a', 'node']]);
  t.notOk('current' in listed.body.sessions[0], 'no session is current for the admin');
  const session = await familyOf(elsewhere.refresh_token);
  const ended = await h.admin('DELETE', `/admin/users/${ann.user_id}/sessions/${session}`);
  t.equal(ended.status, 200);
  t.same(ended.body, { success: true });
  t.equal((await h.refresh(other, elsewhere.refresh_token)).body.error.code, 'TOKEN_REVOKED');
  const [event] = await h.sql`select actor, app_id, family_id, details from audit_events where type = 'session.revoked'`;
  t.same(event, { actor: 'admin', app_id: other.id, family_id: session, details: { ended_by: 'admin' } });
  const bob = await loginFrom(app, 'bob@example.com', 'Bob/1.0');
  const notHis = await h.admin('DELETE', `/admin/users/${bob.user_id}/sessions/${await familyOf(ann.refresh_token)}`);
  t.equal(notHis.status, 404);
  t.equal(notHis.body.error.code, 'SESSION_NOT_FOUND');
  const nobody = await h.admin('GET', '/admin/users/00000000-0000-4000-8000-000000000000/sessions');
  t.equal(nobody.status, 404);
  t.equal(nobody.body.error.code, 'USER_NOT_FOUND');
  const noKey = await h.request('GET', `/admin/users/${ann.user_id}/sessions`, { headers: { 'x-admin-key': `${ADMIN_KEY}x` } });
  t.equal(noKey.status, 401);
});
