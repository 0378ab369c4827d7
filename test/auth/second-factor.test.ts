// TOTP as a second factor: enrolment from a session, the policy per app and per tenant, the
// login's second step (TOTP or a recovery code), the `amr` of the tokens, bounded guessing,
// time-step reuse, enrolment during a login that requires it, removal, the admin's reset.
// Codes are computed with otpauth at the service's clock (the test moves it).
import { decodeJwt } from 'jose';
import { Secret, TOTP } from 'otpauth';
import t from 'tap';
import { startAuthHarness, type TestApp, type Tokens } from './fixtures/harness.js';

// Many code logins of one address: no resend interval, per-address limits out of the way.
const h = await startAuthHarness({
  otpLimits: { resendIntervalMs: 0 },
  rateLimits: { otp_request_address: { maxHits: 1000, windowSeconds: 3600 }, otp_verify_address: { maxHits: 1000, windowSeconds: 3600 } },
});
t.teardown(() => h.close());
let app: TestApp;
let ann: Tokens;
t.beforeEach(async () => { ({ app, tokens: ann } = await h.startFresh({ session: true })); });

const codeAt = (secret: string, offsetSteps = 0) =>
  new TOTP({ secret: Secret.fromBase32(secret), algorithm: 'SHA1', digits: 6, period: 30 }).generate({ timestamp: h.clock.now() + offsetSteps * 30_000 });
const amrOf = (accessToken: string) => decodeJwt(accessToken).amr;
const setPolicy = (policy: string) => h.admin('PUT', `/admin/apps/${app.id}/second-factor-policy`, { policy });
const post = (route: string, body: Record<string, unknown>) => h.post(route, { ...h.credentials(app), ...body });
/** A code login that stops at its second factor; returns the challenge. */
async function codeLoginChallenge(email: string): Promise<any> {
  await post('/auth/otp/request', { email });
  const reply = await post('/auth/otp/verify', { email, code: h.outbox.codeFor(email) });
  if (reply.status !== 200 || !reply.body.second_factor) throw new Error(`expected a challenge: ${reply.status} ${JSON.stringify(reply.body)}`);
  return reply.body.second_factor;
}
/** Enrols a TOTP key for the session's user; returns the secret and the recovery codes. */
async function enrol(tokens: Tokens): Promise<{ secret: string; recoveryCodes: string[] }> {
  const started = await post('/auth/second-factor/totp/enroll', { refresh_token: tokens.refresh_token });
  const confirmed = await post('/auth/second-factor/totp/confirm', { refresh_token: tokens.refresh_token, code: codeAt(started.body.secret) });
  if (confirmed.status !== 200) throw new Error(`confirm: ${confirmed.status} ${JSON.stringify(confirmed.body)}`);
  h.clock.advance(30_000); // the confirming code's step is used
  return { secret: started.body.secret, recoveryCodes: confirmed.body.recovery_codes };
}

t.test('enrolment from a session: a key, then a first code confirms it and returns ten recovery codes', async (t) => {
  const started = await post('/auth/second-factor/totp/enroll', { refresh_token: ann.refresh_token });
  t.equal(started.status, 200);
  t.match(started.body.secret, /^[A-Z2-7]{32}$/);
  const uri = new URL(started.body.otpauth_uri);
  t.equal(uri.protocol, 'otpauth:');
  t.equal(uri.host, 'totp');
  t.equal(decodeURIComponent(uri.pathname), '/app-a:ann@example.com');
  t.match(Object.fromEntries(uri.searchParams), { secret: started.body.secret, issuer: 'app-a', algorithm: 'SHA1', digits: '6', period: '30' });
  const [stored] = await h.sql<{ secret_sealed: Buffer; confirmed_at: Date | null }[]>`select secret_sealed, confirmed_at from totp_factors`;
  t.notOk(stored!.secret_sealed.includes(Buffer.from(started.body.secret)), 'the key is sealed at rest');
  t.equal(stored!.confirmed_at, null);

  const wrong = await post('/auth/second-factor/totp/confirm', { refresh_token: ann.refresh_token, code: codeAt(started.body.secret, 5) });
  t.equal(wrong.status, 401);
  t.equal(wrong.body.error.code, 'SECOND_FACTOR_INVALID');
  const confirmed = await post('/auth/second-factor/totp/confirm', { refresh_token: ann.refresh_token, code: codeAt(started.body.secret) });
  t.equal(confirmed.status, 200);
  t.equal(confirmed.body.recovery_codes.length, 10);
  t.ok(confirmed.body.recovery_codes.every((c: string) => /^[a-z2-7]{5}-[a-z2-7]{5}$/.test(c)));
  t.equal(new Set(confirmed.body.recovery_codes).size, 10);
  const again = await post('/auth/second-factor/totp/enroll', { refresh_token: ann.refresh_token });
  t.equal(again.status, 409);
  t.equal(again.body.error.code, 'SECOND_FACTOR_ALREADY_ENROLLED');
  const events = await h.sql<{ type: string }[]>`select type from audit_events where type like 'second_factor.%' or (type = 'login.failed' and details->>'method' = 'second_factor') order by id`;
  t.same(events.map((e) => e.type), ['login.failed', 'second_factor.enrolled']);
});

t.test('policy off: no second step even for an enrolled user; the amr of a code login is otp', async (t) => {
  await enrol(ann);
  const tokens = await h.login(app, 'ann@example.com');
  t.same(amrOf(tokens.access_token), ['otp']);
  t.same(amrOf((await h.refresh(app, tokens.refresh_token)).body.access_token), ['otp'], 'the refreshed token keeps it');
});

t.test('policy optional: an enrolled user answers a challenge, then gets tokens whose amr says otp and mfa', async (t) => {
  const { secret } = await enrol(ann);
  t.equal((await setPolicy('optional')).status, 200);
  const sessionsBefore = (await h.sql`select 1 from refresh_families`).length;
  const challenge = await codeLoginChallenge('ann@example.com');
  t.same(Object.keys(challenge).sort(), ['enrollment_required', 'expires_in', 'methods', 'token']);
  t.match(challenge, { methods: ['totp', 'recovery_code'], enrollment_required: false, expires_in: 300, token: /^sfa_[A-Za-z0-9_-]{43}$/ });
  t.equal((await h.sql`select 1 from refresh_families`).length, sessionsBefore, 'no session before the second factor');
  const verified = await post('/auth/second-factor/verify', { second_factor_token: challenge.token, code: codeAt(secret) });
  t.equal(verified.status, 200);
  t.same(Object.keys(verified.body).sort(), ['access_token', 'expires_in', 'refresh_token', 'token_type', 'user_id']);
  t.equal(verified.body.user_id, ann.user_id);
  t.same(amrOf(verified.body.access_token), ['otp', 'mfa']);
  t.same(amrOf((await h.refresh(app, verified.body.refresh_token)).body.access_token), ['otp', 'mfa']);
  const used = await post('/auth/second-factor/verify', { second_factor_token: challenge.token, code: codeAt(secret) });
  t.equal(used.status, 401, 'a challenge completes once');
  const bob = await h.login(app, 'bob@example.com');
  t.same(amrOf(bob.access_token), ['otp'], 'optional: a user without a factor is not asked');
  const events = await h.sql<{ type: string }[]>`select type from audit_events where user_id = ${ann.user_id} and type like 'login.%' order by id`;
  t.same(events.map((e) => e.type).slice(-2), ['login.second_factor_required', 'login.succeeded']);
});

t.test('a code is accepted once: the same step is refused, the next one works', async (t) => {
  const { secret } = await enrol(ann);
  await setPolicy('optional');
  const code = codeAt(secret);
  t.equal((await post('/auth/second-factor/verify', { second_factor_token: (await codeLoginChallenge('ann@example.com')).token, code })).status, 200);
  const replay = await post('/auth/second-factor/verify', { second_factor_token: (await codeLoginChallenge('ann@example.com')).token, code });
  t.equal(replay.status, 401, 'the same code in the same step');
  t.equal(replay.body.error.code, 'SECOND_FACTOR_INVALID');
  const previous = await post('/auth/second-factor/verify', { second_factor_token: (await codeLoginChallenge('ann@example.com')).token, code: codeAt(secret, -1) });
  t.equal(previous.status, 401, 'an earlier step than the last accepted one');
  h.clock.advance(30_000);
  t.equal((await post('/auth/second-factor/verify', { second_factor_token: (await codeLoginChallenge('ann@example.com')).token, code: codeAt(secret) })).status, 200);
});

t.test('guessing is bounded: five codes per challenge, ten wrong in a row lock the factor', async (t) => {
  const { secret } = await enrol(ann);
  await setPolicy('optional');
  const challenge = await codeLoginChallenge('ann@example.com');
  for (let i = 0; i < 5; i++) {
    t.equal((await post('/auth/second-factor/verify', { second_factor_token: challenge.token, code: '000000' === codeAt(secret) ? '111111' : '000000' })).status, 401);
  }
  const sixth = await post('/auth/second-factor/verify', { second_factor_token: challenge.token, code: codeAt(secret) });
  t.equal(sixth.status, 401, 'the right code after five attempts is refused too');
  const second = await codeLoginChallenge('ann@example.com');
  for (let i = 0; i < 5; i++) await post('/auth/second-factor/verify', { second_factor_token: second.token, code: '000000' === codeAt(secret) ? '111111' : '000000' });
  const locked = await post('/auth/second-factor/verify', { second_factor_token: (await codeLoginChallenge('ann@example.com')).token, code: codeAt(secret) });
  t.equal(locked.status, 429, 'ten wrong codes in a row lock the factor');
  t.equal(locked.body.error.code, 'RATE_LIMITED');
  t.ok(Number(locked.headers.get('retry-after')) > 0);
  h.clock.advance(15 * 60 * 1000);
  t.equal((await post('/auth/second-factor/verify', { second_factor_token: (await codeLoginChallenge('ann@example.com')).token, code: codeAt(secret) })).status, 200, 'unlocked after 15 minutes');
});

t.test('a recovery code works once', async (t) => {
  const { recoveryCodes } = await enrol(ann);
  await setPolicy('optional');
  const used = await post('/auth/second-factor/verify', { second_factor_token: (await codeLoginChallenge('ann@example.com')).token, recovery_code: recoveryCodes[0]!.toUpperCase() });
  t.equal(used.status, 200);
  t.same(amrOf(used.body.access_token), ['otp', 'mfa']);
  const again = await post('/auth/second-factor/verify', { second_factor_token: (await codeLoginChallenge('ann@example.com')).token, recovery_code: recoveryCodes[0] });
  t.equal(again.status, 401);
  t.equal(again.body.error.code, 'SECOND_FACTOR_INVALID');
});

t.test('a tenant that requires it: a member without a factor enrolls during the login; others are not asked', async (t) => {
  const tenant = await h.createTenant(app, 'Acme');
  const cy = await h.login(app, 'cy@example.com');
  await h.assignRole(app, cy.user_id, tenant, 'staff');
  const put = await h.admin('PUT', `/admin/apps/${app.id}/tenants/${tenant}/second-factor-policy`, { policy: 'required' });
  t.same(put.body, { policy: 'off', tenants: [{ tenant_id: tenant, policy: 'required' }] });
  t.same(amrOf((await h.login(app, 'ann@example.com')).access_token), ['otp'], 'ann has no role in the tenant: the app\'s off applies');

  const challenge = await codeLoginChallenge('cy@example.com');
  t.match(challenge, { methods: [], enrollment_required: true });
  const noFactor = await post('/auth/second-factor/verify', { second_factor_token: challenge.token, code: '123456' });
  t.equal(noFactor.status, 401, 'nothing to verify before enrolment');
  const started = await post('/auth/second-factor/totp/enroll', { second_factor_token: challenge.token });
  t.equal(started.status, 200);
  const confirmed = await post('/auth/second-factor/totp/confirm', { second_factor_token: challenge.token, code: codeAt(started.body.secret) });
  t.equal(confirmed.status, 200);
  t.equal(confirmed.body.recovery_codes.length, 10);
  t.equal(confirmed.body.user_id, cy.user_id);
  const claims = decodeJwt(confirmed.body.access_token);
  t.same([claims.tenant_id, claims.roles, claims.amr], [tenant, ['staff'], ['otp', 'mfa']]);
  h.clock.advance(30_000);
  const next = await codeLoginChallenge('cy@example.com');
  t.match(next, { methods: ['totp', 'recovery_code'], enrollment_required: false });
  t.equal((await h.admin('PUT', `/admin/apps/${app.id}/tenants/${tenant}/second-factor-policy`, { policy: null })).status, 200);
  t.same((await h.admin('GET', `/admin/apps/${app.id}/second-factor-policy`)).body, { policy: 'off', tenants: [] });
});

t.test('the user removes the factor with a code; the admin resets it, audited', async (t) => {
  const { secret } = await enrol(ann);
  const removed = await post('/auth/second-factor/totp/remove', { refresh_token: ann.refresh_token, code: codeAt(secret) });
  t.same(removed.body, { success: true });
  t.equal((await post('/auth/second-factor/totp/remove', { refresh_token: ann.refresh_token, code: codeAt(secret) })).body.error.code, 'SECOND_FACTOR_NOT_ENROLLED');
  h.clock.advance(30_000);
  await enrol(ann);
  await setPolicy('optional');
  const reset = await h.admin('DELETE', `/admin/users/${ann.user_id}/second-factor`);
  t.same(reset.body, { reset: true });
  t.same((await h.admin('DELETE', `/admin/users/${ann.user_id}/second-factor`)).body, { reset: false });
  t.same(amrOf((await h.login(app, 'ann@example.com')).access_token), ['otp'], 'no factor: no second step');
  const events = await h.sql<{ type: string; actor: string; user_id: string }[]>`select type, actor, user_id from audit_events where type in ('second_factor.removed', 'second_factor.reset') order by id`;
  t.same(events, [{ type: 'second_factor.removed', actor: 'app', user_id: ann.user_id }, { type: 'second_factor.reset', actor: 'admin', user_id: ann.user_id }]);
});

t.test('bad input is a 4xx with a stable code', async (t) => {
  const token = `sfa_${'A'.repeat(43)}`;
  const cases: [string, Promise<any>, number, string][] = [
    ['an unknown challenge', post('/auth/second-factor/verify', { second_factor_token: token, code: '123456' }), 401, 'SECOND_FACTOR_INVALID'],
    ['both a code and a recovery code', post('/auth/second-factor/verify', { second_factor_token: token, code: '123456', recovery_code: 'abcde-fghij' }), 400, 'VALIDATION_ERROR'],
    ['neither', post('/auth/second-factor/verify', { second_factor_token: token }), 400, 'VALIDATION_ERROR'],
    ['a code that is not six digits', post('/auth/second-factor/verify', { second_factor_token: token, code: '12345' }), 400, 'VALIDATION_ERROR'],
    ['a malformed challenge token', post('/auth/second-factor/verify', { second_factor_token: 'sfa_x', code: '123456' }), 400, 'VALIDATION_ERROR'],
    ['enrolment with neither session nor challenge', post('/auth/second-factor/totp/enroll', {}), 400, 'VALIDATION_ERROR'],
    ['confirming with nothing pending', post('/auth/second-factor/totp/confirm', { refresh_token: ann.refresh_token, code: '123456' }), 404, 'SECOND_FACTOR_NOT_ENROLLED'],
    ['an unknown policy', setPolicy('sometimes'), 400, 'VALIDATION_ERROR'],
    ['a policy for a tenant of no app', h.admin('PUT', `/admin/apps/${app.id}/tenants/00000000-0000-0000-0000-000000000000/second-factor-policy`, { policy: 'required' }), 404, 'TENANT_NOT_FOUND'],
    ['a reset of no user', h.admin('DELETE', '/admin/users/nobody/second-factor'), 404, 'USER_NOT_FOUND'],
  ];
  for (const [name, reply, status, code] of cases) {
    const answer = await reply;
    t.equal(answer.status, status, name);
    t.equal(answer.body.error?.code, code, name);
  }
});
