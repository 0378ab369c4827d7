// Login by one-time code: POST /auth/otp/request and POST /auth/otp/verify.
import t from 'tap';
import { hashOtpCode } from '../../src/auth/service/login.js';
import { startAuthHarness, type TestApp } from './fixtures/harness.js';
import { claimsOf } from './fixtures/tokens.js';

const h = await startAuthHarness({ otpLimits: { appHourly: 12 } });
t.teardown(() => h.close());

let app: TestApp;
t.beforeEach(async () => { ({ app } = await h.startFresh()); });

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const MINUTE = 60_000;

function requestCode(to: { email?: string; phone?: string }, target: TestApp = app) {
  return h.post('/auth/otp/request', { ...h.credentials(target), ...to });
}

function verifyCode(to: { email?: string; phone?: string }, code: string, extra: Record<string, unknown> = {}, target: TestApp = app) {
  return h.post('/auth/otp/verify', { ...h.credentials(target), ...to, code, ...extra });
}

t.test('requesting a code answers 200 {success, expires_in} and delivers six digits', async (t) => {
  const reply = await requestCode({ email: 'ann@example.com' });
  t.equal(reply.status, 200);
  t.same(reply.body, { success: true, expires_in: 600 });
  t.equal(reply.headers.get('cache-control'), 'no-store');
  t.equal(h.outbox.messages.length, 1);
  const [message] = h.outbox.messages;
  t.match(message, { channel: 'email', to: 'ann@example.com', appId: app.id });
  t.match(message!.code, /^[0-9]{6}$/);
});

t.test('requesting a code answers the same whether or not the user exists', async (t) => {
  await h.login(app, 'known@example.com');
  h.clock.advance(2 * MINUTE);
  const known = await requestCode({ email: 'known@example.com' });
  const unknown = await requestCode({ email: 'unknown@example.com' });
  t.equal(known.status, 200);
  t.equal(unknown.status, 200);
  t.same(known.body, unknown.body);
});

t.test('e-mail addresses are trimmed and lower-cased, phone numbers reduced to E.164', async (t) => {
  t.equal((await requestCode({ email: '  Ann.Lee@Example.COM ' })).status, 200);
  t.equal((await requestCode({ phone: '+1 (415) 555-0123' })).status, 200);
  t.same(h.outbox.messages.map((m) => [m.channel, m.to]), [['email', 'ann.lee@example.com'], ['phone', '+14155550123']]);
  const login = await verifyCode({ email: 'ANN.LEE@example.com' }, h.outbox.codeFor('ann.lee@example.com'));
  t.equal(login.status, 200);
  const [user] = await h.sql`select email, phone from users where id = ${login.body.user_id}`;
  t.same(user, { email: 'ann.lee@example.com', phone: null });
});

t.test('a phone login creates a user identified by phone', async (t) => {
  await requestCode({ phone: '+442071838750' });
  const login = await verifyCode({ phone: '+44 20 7183 8750' }, h.outbox.codeFor('+442071838750'));
  t.equal(login.status, 200);
  const [user] = await h.sql`select email, phone from users where id = ${login.body.user_id}`;
  t.same(user, { email: null, phone: '+442071838750' });
});

t.test('both or neither of email and phone is 400 VALIDATION_ERROR', async (t) => {
  for (const to of [{ email: 'a@example.com', phone: '+14155550123' }, {}]) {
    const reply = await requestCode(to);
    t.equal(reply.status, 400);
    t.same(reply.body, { error: { code: 'VALIDATION_ERROR', message: 'Give exactly one of "email" or "phone"' } });
  }
  t.equal(h.outbox.messages.length, 0);
});

t.test('an address that is not an e-mail or E.164 number is 400 VALIDATION_ERROR', async (t) => {
  for (const to of [{ email: 'not-an-email' }, { email: 'a@b' }, { phone: '4155550123' }, { phone: '+0123456789' }, { phone: '+1' }]) {
    const reply = await requestCode(to);
    t.equal(reply.status, 400, JSON.stringify(to));
    t.equal(reply.body.error.code, 'VALIDATION_ERROR');
  }
});

t.test('a second code to the same destination within 60 s is 429 RATE_LIMITED with Retry-After', async (t) => {
  await requestCode({ email: 'ann@example.com' });
  h.clock.advance(59_000);
  const reply = await requestCode({ email: 'ann@example.com' });
  t.equal(reply.status, 429);
  t.equal(reply.body.error.code, 'RATE_LIMITED');
  t.equal(reply.headers.get('retry-after'), '60');
  t.equal(h.outbox.messages.length, 1);
});

t.test('a new code replaces the previous one: only the latest code is valid', async (t) => {
  await requestCode({ email: 'ann@example.com' });
  const first = h.outbox.codeFor('ann@example.com');
  h.clock.advance(MINUTE);
  await requestCode({ email: 'ann@example.com' });
  const second = h.outbox.codeFor('ann@example.com');
  if (first !== second) {
    const old = await verifyCode({ email: 'ann@example.com' }, first);
    t.equal(old.status, 401);
    t.equal(old.body.error.code, 'OTP_INVALID');
  }
  t.equal((await verifyCode({ email: 'ann@example.com' }, second)).status, 200);
});

t.test('a destination gets at most 10 code requests per hour (the rule otp_request_address, the only per-address throttle)', async (t) => {
  for (let i = 0; i < 10; i++) {
    t.equal((await requestCode({ email: 'ann@example.com' })).status, 200);
    h.clock.advance(MINUTE);
  }
  const refused = await requestCode({ email: 'ann@example.com' });
  t.equal(refused.status, 429);
  t.equal(refused.body.error.code, 'RATE_LIMITED');
  t.equal(refused.headers.get('retry-after'), String(60 * 60 - 10 * 60), 'until the rule\'s window ends');
  h.clock.advance(60 * MINUTE);
  t.equal((await requestCode({ email: 'ann@example.com' })).status, 200);
});

t.test('an app gets at most its hourly limit of codes (12 in this file)', async (t) => {
  for (let i = 0; i < 12; i++) t.equal((await requestCode({ email: `user${i}@example.com` })).status, 200);
  const refused = await requestCode({ email: 'user12@example.com' });
  t.equal(refused.status, 429);
  t.equal(refused.body.error.code, 'RATE_LIMITED');
  const other = await h.createApp('app-b');
  t.equal((await requestCode({ email: 'user12@example.com' }, other)).status, 200, 'another app has its own budget');
  h.clock.advance(60 * MINUTE);
  t.equal((await requestCode({ email: 'user12@example.com' })).status, 200);
});

t.test('a delivery failure is 502 OTP_DELIVERY_FAILED and a retry is allowed at once', async (t) => {
  h.outbox.failNext = true;
  const failed = await requestCode({ email: 'ann@example.com' });
  t.equal(failed.status, 502);
  t.same(failed.body, { error: { code: 'OTP_DELIVERY_FAILED', message: 'The code could not be delivered; retry later' } });
  const retried = await requestCode({ email: 'ann@example.com' });
  t.equal(retried.status, 200);
  t.equal(h.outbox.messages.length, 1);
});

t.test('the right code returns the tokens and creates the user and the app membership', async (t) => {
  await requestCode({ email: 'ann@example.com' });
  const reply = await verifyCode({ email: 'ann@example.com' }, h.outbox.codeFor('ann@example.com'));
  t.equal(reply.status, 200);
  t.equal(reply.headers.get('cache-control'), 'no-store');
  t.same(Object.keys(reply.body).sort(), ['access_token', 'expires_in', 'refresh_token', 'token_type', 'user_id']);
  t.match(reply.body, { token_type: 'Bearer', expires_in: 1800, user_id: UUID, refresh_token: /^rt_[A-Za-z0-9_-]{43}$/ });
  const members = await h.sql`select app_id, user_id from app_memberships`;
  t.same(members.map((m) => ({ ...m })), [{ app_id: app.id, user_id: reply.body.user_id }]);
});

t.test('the access token carries the claims of the spec', async (t) => {
  const tokens = await h.login(app, 'ann@example.com');
  const claims = claimsOf(tokens.access_token);
  const now = Math.floor(h.clock.now() / 1000);
  // amr (RFC 8176): how the session signed in, `otp` for a code by e-mail; kept by every refresh.
  t.same(claims, { sub: tokens.user_id, app_id: 'app-a', iss: 'http://auth.test', aud: 'app-a', iat: now, exp: now + 1800, tenant_id: null, roles: [], amr: ['otp'] });
});

t.test('logging in again returns the same user', async (t) => {
  const first = await h.login(app, 'ann@example.com');
  h.clock.advance(MINUTE);
  const second = await h.login(app, 'ann@example.com');
  t.equal(second.user_id, first.user_id);
  t.not(second.refresh_token, first.refresh_token);
});

t.test('the same address in two apps is one user with two memberships', async (t) => {
  const other = await h.createApp('app-b');
  const inA = await h.login(app, 'ann@example.com');
  const inB = await h.login(other, 'ann@example.com');
  t.equal(inB.user_id, inA.user_id);
  t.equal(claimsOf(inB.access_token).aud, 'app-b');
  const [{ count }] = await h.sql`select count(*)::int as count from app_memberships where user_id = ${inA.user_id}`;
  t.equal(count, 2);
});

t.test('a wrong code is 401 OTP_INVALID', async (t) => {
  await requestCode({ email: 'ann@example.com' });
  const right = h.outbox.codeFor('ann@example.com');
  const wrong = right === '000000' ? '000001' : '000000';
  const reply = await verifyCode({ email: 'ann@example.com' }, wrong);
  t.equal(reply.status, 401);
  t.same(reply.body, { error: { code: 'OTP_INVALID', message: 'The code is wrong, expired or used up' } });
});

t.test('a code for a destination that was never sent one is 401 OTP_INVALID', async (t) => {
  const reply = await verifyCode({ email: 'nobody@example.com' }, '123456');
  t.equal(reply.status, 401);
  t.equal(reply.body.error.code, 'OTP_INVALID');
});

t.test('a code expires after 10 minutes', async (t) => {
  await requestCode({ email: 'ann@example.com' });
  h.clock.advance(10 * MINUTE);
  const reply = await verifyCode({ email: 'ann@example.com' }, h.outbox.codeFor('ann@example.com'));
  t.equal(reply.status, 401);
  t.equal(reply.body.error.code, 'OTP_INVALID');
});

t.test('a code is still valid just before 10 minutes', async (t) => {
  await requestCode({ email: 'ann@example.com' });
  h.clock.advance(10 * MINUTE - 1000);
  t.equal((await verifyCode({ email: 'ann@example.com' }, h.outbox.codeFor('ann@example.com'))).status, 200);
});

t.test('a code works only once', async (t) => {
  await requestCode({ email: 'ann@example.com' });
  const code = h.outbox.codeFor('ann@example.com');
  t.equal((await verifyCode({ email: 'ann@example.com' }, code)).status, 200);
  const again = await verifyCode({ email: 'ann@example.com' }, code);
  t.equal(again.status, 401);
  t.equal(again.body.error.code, 'OTP_INVALID');
});

t.test('a code sent to one app does not log in to another', async (t) => {
  const other = await h.createApp('app-b');
  await requestCode({ email: 'ann@example.com' });
  const reply = await verifyCode({ email: 'ann@example.com' }, h.outbox.codeFor('ann@example.com'), {}, other);
  t.equal(reply.status, 401);
  t.equal(reply.body.error.code, 'OTP_INVALID');
});

t.test('five wrong codes burn the code even if the sixth is right', async (t) => {
  await requestCode({ email: 'ann@example.com' });
  const right = h.outbox.codeFor('ann@example.com');
  const wrong = right === '999999' ? '999998' : '999999';
  for (let i = 0; i < 5; i++) t.equal((await verifyCode({ email: 'ann@example.com' }, wrong)).status, 401);
  const sixth = await verifyCode({ email: 'ann@example.com' }, right);
  t.equal(sixth.status, 401);
  t.equal(sixth.body.error.code, 'OTP_INVALID');
});

t.test('four wrong codes and then the right one log in', async (t) => {
  await requestCode({ email: 'ann@example.com' });
  const right = h.outbox.codeFor('ann@example.com');
  const wrong = right === '999999' ? '999998' : '999999';
  for (let i = 0; i < 4; i++) t.equal((await verifyCode({ email: 'ann@example.com' }, wrong)).status, 401);
  t.equal((await verifyCode({ email: 'ann@example.com' }, right)).status, 200);
});

t.test('a code with leading zeros is accepted as a string', async (t) => {
  await requestCode({ email: 'ann@example.com' });
  // Make the stored code 000123 (the delivered one is random).
  const key = (await h.masterKey()).derive('otp-code-hash');
  const hash = hashOtpCode(key, { appId: app.id, channel: 'email', destination: 'ann@example.com' }, '000123');
  await h.sql`update otp_codes set code_hash = ${hash}`;
  const reply = await verifyCode({ email: 'ann@example.com' }, '000123');
  t.equal(reply.status, 200);
});

t.test('a code sent as a JSON number is 400 VALIDATION_ERROR', async (t) => {
  await requestCode({ email: 'ann@example.com' });
  const code = h.outbox.codeFor('ann@example.com');
  const reply = await h.post('/auth/otp/verify', { ...h.credentials(app), email: 'ann@example.com', code: Number(code) });
  t.equal(reply.status, 400);
  t.equal(reply.body.error.code, 'VALIDATION_ERROR');
  t.match(reply.body.error.message, /"code"/);
  const [row] = await h.sql`select attempts from otp_codes`;
  t.equal(row!.attempts, 0, 'a refused body spends no attempt');
});

t.test('a code of other than six digits is 400 VALIDATION_ERROR', async (t) => {
  for (const code of ['12345', '1234567', '12a456', ' 123456', '', '１２３４５６']) {
    const reply = await verifyCode({ email: 'ann@example.com' }, code);
    t.equal(reply.status, 400, JSON.stringify(code));
    t.equal(reply.body.error.code, 'VALIDATION_ERROR');
  }
});

t.test('a soft-deleted user gets 403 USER_DELETED after the right code', async (t) => {
  const tokens = await h.login(app, 'ann@example.com');
  t.equal((await h.admin('DELETE', `/admin/users/${tokens.user_id}`)).status, 200);
  h.clock.advance(MINUTE);
  await requestCode({ email: 'ann@example.com' });
  const reply = await verifyCode({ email: 'ann@example.com' }, h.outbox.codeFor('ann@example.com'));
  t.equal(reply.status, 403);
  t.same(reply.body, { error: { code: 'USER_DELETED', message: 'The user is deleted' } });
});

t.test('a soft-deleted user with a wrong code gets 401 OTP_INVALID, not USER_DELETED', async (t) => {
  const tokens = await h.login(app, 'ann@example.com');
  await h.admin('DELETE', `/admin/users/${tokens.user_id}`);
  h.clock.advance(MINUTE);
  await requestCode({ email: 'ann@example.com' });
  const right = h.outbox.codeFor('ann@example.com');
  const reply = await verifyCode({ email: 'ann@example.com' }, right === '000000' ? '000001' : '000000');
  t.equal(reply.status, 401);
  t.equal(reply.body.error.code, 'OTP_INVALID');
});

t.test('without any role the token has tenant_id null and roles []', async (t) => {
  const tokens = await h.login(app, 'ann@example.com');
  t.match(claimsOf(tokens.access_token), { tenant_id: null, roles: [] });
});

t.test('login without tenant_id picks the tenant of the oldest role', async (t) => {
  const first = await h.login(app, 'ann@example.com');
  const acme = await h.createTenant(app, 'Acme');
  const globex = await h.createTenant(app, 'Globex');
  await h.assignRole(app, first.user_id, acme, 'staff');
  h.clock.advance(1000);
  await h.assignRole(app, first.user_id, globex, 'owner');
  h.clock.advance(MINUTE);
  const tokens = await h.login(app, 'ann@example.com');
  t.match(claimsOf(tokens.access_token), { tenant_id: acme, roles: ['staff'] });
});

t.test('login with tenant_id issues the token for that tenant', async (t) => {
  const first = await h.login(app, 'ann@example.com');
  const acme = await h.createTenant(app, 'Acme');
  const globex = await h.createTenant(app, 'Globex');
  await h.assignRole(app, first.user_id, acme, 'staff');
  await h.assignRole(app, first.user_id, globex, 'owner');
  h.clock.advance(MINUTE);
  const tokens = await h.login(app, 'ann@example.com', { tenant_id: globex });
  t.match(claimsOf(tokens.access_token), { tenant_id: globex, roles: ['owner'] });
  const [family] = await h.sql`select tenant_id from refresh_families where user_id = ${first.user_id} order by created_at desc limit 1`;
  t.equal(family!.tenant_id, globex, 'the session remembers the chosen tenant');
});

t.test('login with a tenant of another app is 404 TENANT_NOT_FOUND and the code stays usable', async (t) => {
  const other = await h.createApp('app-b');
  const foreign = await h.createTenant(other, 'Foreign');
  await requestCode({ email: 'ann@example.com' });
  const code = h.outbox.codeFor('ann@example.com');
  const refused = await verifyCode({ email: 'ann@example.com' }, code, { tenant_id: foreign });
  t.equal(refused.status, 404);
  t.equal(refused.body.error.code, 'TENANT_NOT_FOUND');
  t.equal((await verifyCode({ email: 'ann@example.com' }, code)).status, 200);
});

t.test('login with a tenant where the user has no role is 404 TENANT_NOT_FOUND', async (t) => {
  const acme = await h.createTenant(app, 'Acme');
  await requestCode({ email: 'ann@example.com' });
  const reply = await verifyCode({ email: 'ann@example.com' }, h.outbox.codeFor('ann@example.com'), { tenant_id: acme });
  t.equal(reply.status, 404);
  t.equal(reply.body.error.code, 'TENANT_NOT_FOUND');
});

t.test('tenant_id null is the same as no tenant_id', async (t) => {
  await requestCode({ email: 'ann@example.com' });
  const reply = await verifyCode({ email: 'ann@example.com' }, h.outbox.codeFor('ann@example.com'), { tenant_id: null });
  t.equal(reply.status, 200);
});

t.test('otp request and verify with a wrong app_secret are 401 TOKEN_INVALID', async (t) => {
  const wrong = { app_id: app.id, app_secret: `${app.secret}x` };
  const request = await h.post('/auth/otp/request', { ...wrong, email: 'ann@example.com' });
  const verify = await h.post('/auth/otp/verify', { ...wrong, email: 'ann@example.com', code: '123456' });
  for (const reply of [request, verify]) {
    t.equal(reply.status, 401);
    t.same(reply.body, { error: { code: 'TOKEN_INVALID', message: 'Invalid app credentials' } });
  }
  t.equal(h.outbox.messages.length, 0);
});
