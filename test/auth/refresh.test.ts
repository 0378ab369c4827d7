// Refresh-token states and transitions (active, rotated, revoked; reuse revokes the family): POST /auth/refresh, /auth/revoke and
// /auth/revoke-user, token and session lifetimes.
import t from 'tap';
import { startAuthHarness, type TestApp, type Tokens } from './fixtures/harness.js';
import type { AuthContext } from '../../src/auth/context.js';
import type { RotationResult } from '../../src/auth/queries/refresh-tokens.js';
import { rateLimitsWith } from '../../src/auth/rate-limit-rules.js';
import { presentedCredentials } from '../../src/auth/service/credentials.js';
import { refreshSession } from '../../src/auth/service/sessions.js';
import { claimsOf, serviceSigningKey } from './fixtures/tokens.js';

const h = await startAuthHarness();
t.teardown(() => h.close());

const DAY = 24 * 3600 * 1000;
let app: TestApp;
let tokens: Tokens;
t.beforeEach(async () => { ({ app, tokens } = await h.startFresh({ session: true })); });

function revoke(refreshToken: string, target: TestApp = app) {
  return h.post('/auth/revoke', { ...h.credentials(target), refresh_token: refreshToken });
}

function revokeUser(userId: string, target: TestApp = app) {
  return h.post('/auth/revoke-user', { ...h.credentials(target), user_id: userId });
}

async function tokenStates(userId: string): Promise<string[]> {
  const rows = await h.sql<{ state: string }[]>`
    select t.state from refresh_tokens t join refresh_families f on f.id = t.family_id
    where f.user_id = ${userId} order by t.issued_at, t.parent_id nulls first
  `;
  return rows.map((r) => r.state);
}

t.test('active token + refresh: new access and refresh tokens, the old token is rotated', async (t) => {
  h.clock.advance(1000);
  const reply = await h.refresh(app, tokens.refresh_token);
  t.equal(reply.status, 200);
  t.equal(reply.headers.get('cache-control'), 'no-store');
  t.same(Object.keys(reply.body).sort(), ['access_token', 'expires_in', 'refresh_token', 'token_type', 'user_id']);
  t.match(reply.body, { user_id: tokens.user_id, expires_in: 1800, token_type: 'Bearer' });
  t.not(reply.body.refresh_token, tokens.refresh_token);
  t.not(reply.body.access_token, tokens.access_token);
  t.same(await tokenStates(tokens.user_id), ['rotated', 'active']);
  const [child] = await h.sql`select parent_id is not null as has_parent from refresh_tokens where state = 'active'`;
  t.equal(child!.has_parent, true, 'the new token records its parent');
});

t.test('the refreshed access token is a fresh 30-minute token for the same user and app', async (t) => {
  h.clock.advance(10 * 60_000);
  const reply = await h.refresh(app, tokens.refresh_token);
  const claims = claimsOf(reply.body.access_token);
  const now = Math.floor(h.clock.now() / 1000);
  // amr (RFC 8176): how the session signed in, `otp` for a code by e-mail; kept by every refresh.
  t.same(claims, { sub: tokens.user_id, app_id: 'app-a', iss: 'http://auth.test', aud: 'app-a', iat: now, exp: now + 1800, tenant_id: null, roles: [], amr: ['otp'] });
});

t.test('the old token is invalid at once: replaying it is 401 TOKEN_REUSE and revokes the whole family', async (t) => {
  const next = await h.refresh(app, tokens.refresh_token);
  const replay = await h.refresh(app, tokens.refresh_token);
  t.equal(replay.status, 401);
  t.same(replay.body, { error: { code: 'TOKEN_REUSE', message: 'The refresh token was already used; the whole session is revoked' } });
  t.same(await tokenStates(tokens.user_id), ['rotated', 'revoked']);
  const [family] = await h.sql`select revoked_at is not null as revoked, revoked_reason from refresh_families`;
  t.same({ ...family }, { revoked: true, revoked_reason: 'reuse' });
  const newest = await h.refresh(app, next.body.refresh_token);
  t.equal(newest.status, 401);
  t.equal(newest.body.error.code, 'TOKEN_REVOKED', 'the newest token of the family is revoked too');
});

t.test('after a reuse, rotated tokens keep answering TOKEN_REUSE and the revoked one TOKEN_REVOKED', async (t) => {
  const second = await h.refresh(app, tokens.refresh_token);
  const third = await h.refresh(app, second.body.refresh_token);
  t.equal((await h.refresh(app, tokens.refresh_token)).body.error.code, 'TOKEN_REUSE');
  t.equal((await h.refresh(app, second.body.refresh_token)).body.error.code, 'TOKEN_REUSE');
  t.equal((await h.refresh(app, tokens.refresh_token)).body.error.code, 'TOKEN_REUSE');
  t.equal((await h.refresh(app, third.body.refresh_token)).body.error.code, 'TOKEN_REVOKED');
});

t.test('a reuse revokes only its own family, not the user\'s other sessions', async (t) => {
  h.clock.advance(60_000);
  const other = await h.login(app, 'ann@example.com');
  await h.refresh(app, tokens.refresh_token);
  await h.refresh(app, tokens.refresh_token);
  t.equal((await h.refresh(app, other.refresh_token)).status, 200);
});

t.test('active token + revoke: 200 {success: true}, the family is revoked', async (t) => {
  const reply = await revoke(tokens.refresh_token);
  t.equal(reply.status, 200);
  t.same(reply.body, { success: true });
  t.equal(reply.headers.get('cache-control'), 'no-store');
  const [family] = await h.sql`select revoked_reason from refresh_families`;
  t.equal(family!.revoked_reason, 'logout');
  const refresh = await h.refresh(app, tokens.refresh_token);
  t.equal(refresh.status, 401);
  t.same(refresh.body, { error: { code: 'TOKEN_REVOKED', message: 'The refresh token was revoked; log in again' } });
});

t.test('revoked token + revoke again: still 200 {success: true}, unchanged', async (t) => {
  await revoke(tokens.refresh_token);
  const [before] = await h.sql`select revoked_at from refresh_families`;
  h.clock.advance(1000);
  const again = await revoke(tokens.refresh_token);
  t.equal(again.status, 200);
  t.same(again.body, { success: true });
  const [after] = await h.sql`select revoked_at, revoked_reason from refresh_families`;
  t.same(after!.revoked_at, before!.revoked_at);
  t.equal(after!.revoked_reason, 'logout');
});

t.test('revoking with an already rotated token revokes the family', async (t) => {
  const next = await h.refresh(app, tokens.refresh_token);
  t.same((await revoke(tokens.refresh_token)).body, { success: true });
  t.equal((await h.refresh(app, next.body.refresh_token)).body.error.code, 'TOKEN_REVOKED');
});

t.test('revoking a token this app never issued is 401 TOKEN_INVALID', async (t) => {
  const other = await h.createApp('app-b');
  for (const [target, token] of [[app, 'rt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA'], [app, 'garbage'], [other, tokens.refresh_token]] as const) {
    const reply = await revoke(token, target);
    t.equal(reply.status, 401);
    t.same(reply.body, { error: { code: 'TOKEN_INVALID', message: 'Invalid refresh token' } });
  }
  t.equal((await h.refresh(app, tokens.refresh_token)).status, 200, 'app B cannot revoke app A\'s session');
});

t.test('revoke-user: all active families of the user in the app are revoked and counted', async (t) => {
  const other = await h.createApp('app-b');
  h.clock.advance(60_000);
  const second = await h.login(app, 'ann@example.com');
  const inB = await h.login(other, 'ann@example.com');
  const reply = await revokeUser(tokens.user_id);
  t.equal(reply.status, 200);
  t.same(reply.body, { sessions_revoked: 2 });
  t.equal(reply.headers.get('cache-control'), 'no-store');
  for (const token of [tokens.refresh_token, second.refresh_token]) {
    const refresh = await h.refresh(app, token);
    t.equal(refresh.status, 401);
    t.equal(refresh.body.error.code, 'TOKEN_REVOKED');
  }
  t.equal((await h.refresh(other, inB.refresh_token)).status, 200, 'sessions in other apps are untouched');
});

t.test('revoke-user counts only families that were still active', async (t) => {
  h.clock.advance(60_000);
  await h.login(app, 'ann@example.com');
  await revoke(tokens.refresh_token);
  t.same((await revokeUser(tokens.user_id)).body, { sessions_revoked: 1 });
  t.same((await revokeUser(tokens.user_id)).body, { sessions_revoked: 0 });
});

t.test('revoke-user does not count expired sessions, but revokes them too: their refresh is then TOKEN_REVOKED', async (t) => {
  h.clock.advance(31 * DAY);
  const current = await h.login(app, 'ann@example.com');
  const expired = await h.refresh(app, tokens.refresh_token);
  t.equal(expired.body.error.code, 'TOKEN_INVALID', 'the first session has expired');
  const reply = await revokeUser(tokens.user_id);
  t.equal(reply.status, 200);
  t.same(reply.body, { sessions_revoked: 1 }, 'only the active session is counted');
  for (const token of [tokens.refresh_token, current.refresh_token]) {
    const refresh = await h.refresh(app, token);
    t.equal(refresh.status, 401);
    t.equal(refresh.body.error.code, 'TOKEN_REVOKED');
  }
  const [live] = await h.sql`select count(*)::int as n from refresh_families where revoked_at is null`;
  t.equal(live!.n, 0);
});

t.test('after revoke-user the next refresh is TOKEN_REVOKED until the user logs in again', async (t) => {
  await revokeUser(tokens.user_id);
  t.equal((await h.refresh(app, tokens.refresh_token)).body.error.code, 'TOKEN_REVOKED');
  h.clock.advance(60_000);
  const again = await h.login(app, 'ann@example.com');
  t.equal((await h.refresh(app, again.refresh_token)).status, 200);
});

t.test('revoke-user of a user who is not in the app is 404 USER_NOT_FOUND', async (t) => {
  const other = await h.createApp('app-b');
  const stranger = await h.login(other, 'bob@example.com');
  for (const userId of [stranger.user_id, '00000000-0000-4000-8000-000000000000']) {
    const reply = await revokeUser(userId);
    t.equal(reply.status, 404);
    t.same(reply.body, { error: { code: 'USER_NOT_FOUND', message: 'The user does not exist in this app' } });
  }
});

t.test('revoke-user with a user_id that is not a UUID is 400 VALIDATION_ERROR', async (t) => {
  const reply = await revokeUser('not-a-uuid');
  t.equal(reply.status, 400);
  t.equal(reply.body.error.code, 'VALIDATION_ERROR');
});

t.test('a refresh token is valid for 30 days', async (t) => {
  h.clock.advance(30 * DAY - 1000);
  t.equal((await h.refresh(app, tokens.refresh_token)).status, 200);
});

t.test('a refresh token older than 30 days is 401 TOKEN_INVALID', async (t) => {
  h.clock.advance(30 * DAY);
  const reply = await h.refresh(app, tokens.refresh_token);
  t.equal(reply.status, 401);
  t.same(reply.body, { error: { code: 'TOKEN_INVALID', message: 'The refresh token has expired; log in again' } });
});

t.test('each rotation gives the new token 30 more days', async (t) => {
  h.clock.advance(20 * DAY);
  const next = await h.refresh(app, tokens.refresh_token);
  h.clock.advance(20 * DAY);
  t.equal((await h.refresh(app, next.body.refresh_token)).status, 200);
});

t.test('no rotation extends a session past one year', async (t) => {
  let current = tokens.refresh_token;
  for (let day = 29; day < 365; day += 29) {
    h.clock.advance(29 * DAY);
    const reply = await h.refresh(app, current);
    t.equal(reply.status, 200, `refresh on day ${day}`);
    current = reply.body.refresh_token;
  }
  const [row] = await h.sql`
    select t.expires_at = f.expires_at as capped, f.expires_at - f.created_at as lifetime
    from refresh_tokens t join refresh_families f on f.id = t.family_id
    where t.state = 'active'
  `;
  t.equal(row!.capped, true, 'the last token expires with the session, not 30 days after its issue');
  // Day 348 now; the session ends on day 365.
  h.clock.advance(17 * DAY - 1000);
  const lastSecond = await h.refresh(app, current);
  t.equal(lastSecond.status, 200);
  h.clock.advance(1000);
  const expired = await h.refresh(app, lastSecond.body.refresh_token);
  t.equal(expired.status, 401);
  t.equal(expired.body.error.code, 'TOKEN_INVALID');
});

t.test('a refresh token of app A used at app B is 401 TOKEN_INVALID and leaves the session alone', async (t) => {
  const other = await h.createApp('app-b');
  const reply = await h.refresh(other, tokens.refresh_token);
  t.equal(reply.status, 401);
  t.same(reply.body, { error: { code: 'TOKEN_INVALID', message: 'Invalid refresh token' } });
  t.equal((await h.refresh(app, tokens.refresh_token)).status, 200);
});

t.test('an access token used as a refresh token is 401 TOKEN_INVALID', async (t) => {
  const reply = await h.refresh(app, tokens.access_token);
  t.equal(reply.status, 401);
  t.equal(reply.body.error.code, 'TOKEN_INVALID');
});

t.test('an unknown refresh token is 401 TOKEN_INVALID', async (t) => {
  const reply = await h.refresh(app, `rt_${'A'.repeat(43)}`);
  t.equal(reply.status, 401);
  t.equal(reply.body.error.code, 'TOKEN_INVALID');
});

t.test('refresh with a wrong app_secret is 401 TOKEN_INVALID and does not rotate', async (t) => {
  const reply = await h.post('/auth/refresh', { app_id: app.id, app_secret: 'as_wrong', refresh_token: tokens.refresh_token });
  t.equal(reply.status, 401);
  t.same(reply.body, { error: { code: 'TOKEN_INVALID', message: 'Invalid app credentials' } });
  t.same(await tokenStates(tokens.user_id), ['active']);
});

t.test('a soft-deleted user\'s refresh is 403 USER_DELETED', async (t) => {
  h.clock.advance(60_000);
  const second = await h.login(app, 'ann@example.com');
  await h.sql`update users set deleted_at = now()`; // deleted without the admin route's revocation
  const reply = await h.refresh(app, second.refresh_token);
  t.equal(reply.status, 403);
  t.same(reply.body, { error: { code: 'USER_DELETED', message: 'The user is deleted' } });
});

t.test('refresh with tenant_id switches the token to that tenant and the session remembers it', async (t) => {
  const acme = await h.createTenant(app, 'Acme');
  const globex = await h.createTenant(app, 'Globex');
  await h.assignRole(app, tokens.user_id, acme, 'owner');
  h.clock.advance(1000);
  await h.assignRole(app, tokens.user_id, globex, 'viewer');
  const first = await h.refresh(app, tokens.refresh_token);
  t.match(claimsOf(first.body.access_token), { tenant_id: acme, roles: ['owner'] }, 'default: oldest role');
  const switched = await h.refresh(app, first.body.refresh_token, { tenant_id: globex });
  t.match(claimsOf(switched.body.access_token), { tenant_id: globex, roles: ['viewer'] });
  const remembered = await h.refresh(app, switched.body.refresh_token);
  t.match(claimsOf(remembered.body.access_token), { tenant_id: globex, roles: ['viewer'] });
});

t.test('refresh with a tenant where the user has no role is 404 TENANT_NOT_FOUND and keeps the token live', async (t) => {
  const acme = await h.createTenant(app, 'Acme');
  const other = await h.createApp('app-b');
  const foreign = await h.createTenant(other, 'Foreign');
  for (const tenantId of [acme, foreign, '00000000-0000-4000-8000-000000000000']) {
    const reply = await h.refresh(app, tokens.refresh_token, { tenant_id: tenantId });
    t.equal(reply.status, 404);
    t.equal(reply.body.error.code, 'TENANT_NOT_FOUND');
  }
  t.equal((await h.refresh(app, tokens.refresh_token)).status, 200);
});

t.test('a role revoked between the tenant check and the roles read of a committed rotation still answers the new tokens', async (t) => {
  // rotate_refresh_token checks the requested tenant, rotates, then reads the roles in a later
  // statement; a concurrent role revoke can land in between. Replay what it returns then.
  const requested = await h.createTenant(app, 'Requested');
  const other = await h.createTenant(app, 'Other');
  const rotated: RotationResult = {
    outcome: 'rotated', app_slug: app.slug, user_id: tokens.user_id, remembered_tenant_id: requested,
    roles: [{ tenant_id: other, role: 'viewer' }],
  };
  const key = await serviceSigningKey(h);
  const ctx = { sql: async () => [rotated], clock: h.clock, issuer: h.issuer, keys: { signingKey: () => key }, rateLimits: rateLimitsWith() } as unknown as AuthContext;
  const session = await refreshSession(ctx, presentedCredentials(app.id, app.secret), tokens.refresh_token, requested, { ip: '127.0.0.1', userAgent: null });
  t.match(session, { refresh_token: /^rt_/, user_id: tokens.user_id, token_type: 'Bearer' }, 'the rotated child is handed out, not lost to an error');
  t.match(claimsOf(session.access_token), { sub: tokens.user_id, tenant_id: other, roles: ['viewer'] }, 'the claims are those of the roles read');
});

t.test('when the remembered tenant loses the role, the token falls back to another role or null', async (t) => {
  const acme = await h.createTenant(app, 'Acme');
  const globex = await h.createTenant(app, 'Globex');
  await h.assignRole(app, tokens.user_id, acme, 'owner');
  h.clock.advance(1000);
  await h.assignRole(app, tokens.user_id, globex, 'staff');
  const chosen = await h.refresh(app, tokens.refresh_token, { tenant_id: globex });
  await h.post('/auth/roles/revoke', { ...h.credentials(app), user_id: tokens.user_id, tenant_id: globex });
  const fallback = await h.refresh(app, chosen.body.refresh_token);
  t.match(claimsOf(fallback.body.access_token), { tenant_id: acme, roles: ['owner'] });
  await h.post('/auth/roles/revoke', { ...h.credentials(app), user_id: tokens.user_id, tenant_id: acme });
  const none = await h.refresh(app, fallback.body.refresh_token);
  t.match(claimsOf(none.body.access_token), { tenant_id: null, roles: [] });
});

t.test('access tokens stay valid after their session is revoked, until they expire', async (t) => {
  await revoke(tokens.refresh_token);
  const me = await h.me(tokens.access_token);
  t.equal(me.status, 200);
  t.equal(me.body.user_id, tokens.user_id);
});
