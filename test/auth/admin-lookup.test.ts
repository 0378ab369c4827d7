// Admin routes the admin console needs beside tenant creation: user lookup by e-mail or phone,
// revoking a user's sessions without deleting the user, and the list of signing keys.
import t from 'tap';
import { OTP_DEFAULT_LIMITS } from '../../src/auth/limits.js';
import { ADMIN_KEY, startAuthHarness, type TestApp } from './fixtures/harness.js';

const h = await startAuthHarness();
t.teardown(() => h.close());

let app: TestApp;
t.beforeEach(async () => {
  await h.reset();
  app = await h.createApp('app-a');
});

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const RESEND_INTERVAL_MS = OTP_DEFAULT_LIMITS.resendIntervalMs;
const UNKNOWN_USER = '00000000-0000-4000-8000-000000000000';

async function loginByPhone(target: TestApp, phone: string): Promise<string> {
  const credentials = h.credentials(target);
  const requested = await h.post('/auth/otp/request', { ...credentials, phone });
  if (requested.status !== 200) throw new Error(`otp request: ${requested.status}`);
  const verified = await h.post('/auth/otp/verify', { ...credentials, phone, code: h.outbox.codeFor(phone.replace(/[\s().-]/g, '')) });
  if (verified.status !== 200) throw new Error(`otp verify: ${verified.status}`);
  return verified.body.user_id;
}

t.test('the new admin routes without X-Admin-Key, or with a wrong one, are 401 ADMIN_KEY_INVALID', async (t) => {
  const routes: Array<[string, string]> = [
    ['GET', '/admin/users?email=a@example.com'], ['POST', `/admin/users/${UNKNOWN_USER}/revoke-sessions`], ['GET', '/admin/signing-keys'],
  ];
  for (const [method, route] of routes) {
    for (const headers of [{}, { 'x-admin-key': `${ADMIN_KEY}x` }]) {
      const reply = await h.request(method, route, { headers });
      t.equal(reply.status, 401, `${method} ${route} ${JSON.stringify(headers)}`);
      t.same(reply.body, { error: { code: 'ADMIN_KEY_INVALID', message: 'The X-Admin-Key header is missing or wrong' } });
    }
  }
});

t.test('GET /admin/users?email= finds the user by the address as normalised at login', async (t) => {
  const tokens = await h.login(app, 'Ann.Lee@Example.com');
  const reply = await h.admin('GET', `/admin/users?email=${encodeURIComponent('  ANN.LEE@example.COM ')}`);
  t.equal(reply.status, 200);
  t.equal(reply.headers.get('cache-control'), 'no-store');
  t.same(reply.body, { users: [{ id: tokens.user_id, email: 'ann.lee@example.com', phone: null, created_at: reply.body.users[0].created_at, deleted_at: null }] });
  t.match(reply.body.users[0].created_at, ISO_MS);
});

t.test('GET /admin/users?phone= finds the user by the E.164 number', async (t) => {
  const userId = await loginByPhone(app, '+1 (415) 555-0123');
  const reply = await h.admin('GET', `/admin/users?phone=${encodeURIComponent('+1 415 555 0123')}`);
  t.equal(reply.status, 200);
  t.same(reply.body.users.map((u: { id: string; phone: string }) => [u.id, u.phone]), [[userId, '+14155550123']]);
});

t.test('an address or number nobody has is an empty list, not an error', async (t) => {
  await h.login(app, 'ann@example.com');
  for (const query of ['email=bob@example.com', 'phone=%2B14155550199']) {
    const reply = await h.admin('GET', `/admin/users?${query}`);
    t.equal(reply.status, 200, query);
    t.same(reply.body, { users: [] }, query);
  }
});

t.test('the lookup takes exactly one valid e-mail address or phone number (400 VALIDATION_ERROR)', async (t) => {
  for (const query of ['', 'email=a@example.com&phone=%2B14155550123', 'email=not-an-address', 'phone=0415', 'email=']) {
    const reply = await h.admin('GET', `/admin/users?${query}`);
    t.equal(reply.status, 400, query);
    t.equal(reply.body.error.code, 'VALIDATION_ERROR', query);
  }
});

t.test('revoke-sessions revokes every live session of the user in every app and keeps the user active', async (t) => {
  const other = await h.createApp('app-b');
  const first = await h.login(app, 'ann@example.com');
  h.clock.advance(RESEND_INTERVAL_MS);
  const second = await h.login(app, 'ann@example.com');
  h.clock.advance(RESEND_INTERVAL_MS);
  const third = await h.login(other, 'ann@example.com');
  const reply = await h.admin('POST', `/admin/users/${first.user_id}/revoke-sessions`);
  t.equal(reply.status, 200);
  t.same(reply.body, { user_id: first.user_id, sessions_revoked: 3 });
  for (const [target, tokens] of [[app, first], [app, second], [other, third]] as const) {
    const refreshed = await h.refresh(target, tokens.refresh_token);
    t.equal(refreshed.status, 401);
    t.equal(refreshed.body.error.code, 'TOKEN_REVOKED');
  }
  const user = await h.admin('GET', `/admin/users/${first.user_id}`);
  t.equal(user.body.deleted_at, null, 'the user is not deleted');
  h.clock.advance(RESEND_INTERVAL_MS);
  const again = await h.login(app, 'ann@example.com');
  t.equal(again.user_id, first.user_id, 'the user can log in again');
  const repeat = await h.admin('POST', `/admin/users/${first.user_id}/revoke-sessions`);
  t.same(repeat.body, { user_id: first.user_id, sessions_revoked: 1 }, 'only the new session was live');
});

t.test('revoke-sessions of an unknown user is 404 USER_NOT_FOUND', async (t) => {
  for (const id of [UNKNOWN_USER, 'not-a-uuid']) {
    const reply = await h.admin('POST', `/admin/users/${id}/revoke-sessions`);
    t.equal(reply.status, 404, id);
    t.same(reply.body, { error: { code: 'USER_NOT_FOUND', message: 'The user does not exist' } });
  }
});

t.test('GET /admin/signing-keys lists the keys with their status and no key material; a rotation shows in it', async (t) => {
  const before = await h.admin('GET', '/admin/signing-keys');
  t.equal(before.status, 200);
  const current = before.body.keys.filter((k: { status: string }) => k.status !== 'retired');
  t.same(current.map((k: { status: string }) => k.status), ['active', 'next']);
  for (const key of before.body.keys) {
    t.same(Object.keys(key).sort(), ['created_at', 'kid', 'retired_at', 'status']);
    t.match(key.created_at, ISO_MS);
  }
  const rotated = await h.admin('POST', '/admin/signing-keys/rotate');
  t.equal(rotated.status, 200);
  t.same(rotated.body, { kid: current[1].kid, retired_kid: current[0].kid });
  const after = await h.admin('GET', '/admin/signing-keys');
  const byKid = new Map(after.body.keys.map((k: { kid: string }) => [k.kid, k]));
  t.match(byKid.get(current[0].kid), { status: 'retired', retired_at: ISO_MS });
  t.match(byKid.get(current[1].kid), { status: 'active', retired_at: null });
  t.equal(after.body.keys[0].kid, current[1].kid, 'the active key comes first');
  t.equal(after.body.keys[1].status, 'next', 'then the new next key');
});
