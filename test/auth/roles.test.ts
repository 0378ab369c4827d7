// POST /auth/roles/assign and POST /auth/roles/revoke: roles per (user, tenant, app), visible
// in the next login or refresh and never in a token already issued.
import t from 'tap';
import { startAuthHarness, type TestApp, type Tokens } from './fixtures/harness.js';
import { claimsOf } from './fixtures/tokens.js';

const h = await startAuthHarness();
t.teardown(() => h.close());

let app: TestApp;
let tokens: Tokens;
let tenant: string;
t.beforeEach(async () => { ({ app, tokens, tenant } = await h.startFresh({ session: true, tenant: true })); });

function revokeRole(userId: string, tenantId: string, target: TestApp = app) {
  return h.post('/auth/roles/revoke', { ...h.credentials(target), user_id: userId, tenant_id: tenantId });
}

t.test('assign answers 200 {user_id, tenant_id, role} and writes the role at once', async (t) => {
  const reply = await h.assignRole(app, tokens.user_id, tenant, 'admin');
  t.equal(reply.status, 200);
  t.same(reply.body, { user_id: tokens.user_id, tenant_id: tenant, role: 'admin' });
  t.equal(reply.headers.get('cache-control'), 'no-store');
  const rows = await h.sql`select user_id, tenant_id, app_id, role from roles`;
  t.same(rows.map((r) => ({ ...r })), [{ user_id: tokens.user_id, tenant_id: tenant, app_id: app.id, role: 'admin' }]);
});

t.test('an assigned role appears at the next refresh, never in the token already issued', async (t) => {
  await h.assignRole(app, tokens.user_id, tenant, 'owner');
  const before = await h.me(tokens.access_token);
  t.same(before.body, { user_id: tokens.user_id, app_id: 'app-a', tenant_id: null, roles: [] });
  const refreshed = await h.refresh(app, tokens.refresh_token);
  t.match(claimsOf(refreshed.body.access_token), { tenant_id: tenant, roles: ['owner'] });
  const after = await h.me(refreshed.body.access_token);
  t.same(after.body, { user_id: tokens.user_id, app_id: 'app-a', tenant_id: tenant, roles: ['owner'] });
});

t.test('an assigned role appears at the next login', async (t) => {
  await h.assignRole(app, tokens.user_id, tenant, 'staff');
  h.clock.advance(60_000);
  const login = await h.login(app, 'ann@example.com');
  t.match(claimsOf(login.access_token), { tenant_id: tenant, roles: ['staff'] });
});

t.test('assigning again replaces the user\'s role in that tenant', async (t) => {
  await h.assignRole(app, tokens.user_id, tenant, 'admin');
  const reply = await h.assignRole(app, tokens.user_id, tenant, 'viewer');
  t.same(reply.body, { user_id: tokens.user_id, tenant_id: tenant, role: 'viewer' });
  const rows = await h.sql`select role from roles`;
  t.same(rows.map((r) => r.role), ['viewer']);
});

t.test('a user has one role per tenant and can have different roles in different tenants', async (t) => {
  const globex = await h.createTenant(app, 'Globex');
  await h.assignRole(app, tokens.user_id, tenant, 'owner');
  await h.assignRole(app, tokens.user_id, globex, 'viewer');
  const rows = await h.sql`select tenant_id, role from roles order by role`;
  t.same(rows.map((r) => ({ ...r })), [{ tenant_id: tenant, role: 'owner' }, { tenant_id: globex, role: 'viewer' }]);
});

t.test('revoke answers 200 {user_id, tenant_id, role: null, previous_role} and keeps the identity', async (t) => {
  await h.assignRole(app, tokens.user_id, tenant, 'staff');
  const granted = await h.refresh(app, tokens.refresh_token);
  const reply = await revokeRole(tokens.user_id, tenant);
  t.equal(reply.status, 200);
  t.same(reply.body, { user_id: tokens.user_id, tenant_id: tenant, role: null, previous_role: 'staff' });
  t.match(claimsOf(granted.body.access_token), { roles: ['staff'] }, 'the issued token keeps its role');
  const refreshed = await h.refresh(app, granted.body.refresh_token);
  t.match(claimsOf(refreshed.body.access_token), { sub: tokens.user_id, tenant_id: null, roles: [] });
});

t.test('revoking a role the user does not have is 200 with previous_role null', async (t) => {
  const reply = await revokeRole(tokens.user_id, tenant);
  t.equal(reply.status, 200);
  t.same(reply.body, { user_id: tokens.user_id, tenant_id: tenant, role: null, previous_role: null });
});

t.test('revoke-user after a role change forces the new claims into the next login', async (t) => {
  await h.assignRole(app, tokens.user_id, tenant, 'admin');
  t.same((await h.post('/auth/revoke-user', { ...h.credentials(app), user_id: tokens.user_id })).body, { sessions_revoked: 1 });
  t.equal((await h.refresh(app, tokens.refresh_token)).body.error.code, 'TOKEN_REVOKED');
  h.clock.advance(60_000);
  const login = await h.login(app, 'ann@example.com');
  t.match(claimsOf(login.access_token), { tenant_id: tenant, roles: ['admin'] });
});

t.test('a role outside owner, admin, staff, viewer is 400 VALIDATION_ERROR', async (t) => {
  for (const role of ['superuser', 'OWNER', 'Owner', ' owner', 'owner ', 'root', 'owner,admin']) {
    const reply = await h.assignRole(app, tokens.user_id, tenant, role);
    t.equal(reply.status, 400, role);
    t.same(reply.body, { error: { code: 'VALIDATION_ERROR', message: 'Invalid field "role": expected one of owner, admin, staff, viewer' } });
  }
  const empty = await h.assignRole(app, tokens.user_id, tenant, '');
  t.equal(empty.status, 400);
  t.equal(empty.body.error.code, 'VALIDATION_ERROR');
  const [{ n }] = await h.sql`select count(*)::int as n from roles`;
  t.equal(n, 0);
});

t.test('the database refuses a role outside the four', async (t) => {
  await t.rejects(
    h.sql`insert into roles (user_id, tenant_id, app_id, role, assigned_at) values (${tokens.user_id}, ${tenant}, ${app.id}, 'superuser', now())`,
    { code: '23514', constraint_name: 'roles_role_name' },
  );
});

t.test('the database refuses a second role for the same user and tenant', async (t) => {
  await h.assignRole(app, tokens.user_id, tenant, 'owner');
  await t.rejects(
    h.sql`insert into roles (user_id, tenant_id, app_id, role, assigned_at) values (${tokens.user_id}, ${tenant}, ${app.id}, 'viewer', now())`,
    { code: '23505' },
  );
});

t.test('the database refuses a role whose tenant belongs to another app', async (t) => {
  const other = await h.createApp('app-b');
  const foreign = await h.createTenant(other, 'Foreign');
  await t.rejects(
    h.sql`insert into roles (user_id, tenant_id, app_id, role, assigned_at) values (${tokens.user_id}, ${foreign}, ${app.id}, 'owner', now())`,
    { code: '23503' },
  );
});

t.test('a missing field is 400 VALIDATION_ERROR naming it', async (t) => {
  const base = { ...h.credentials(app), user_id: tokens.user_id, tenant_id: tenant, role: 'owner' };
  for (const field of ['user_id', 'tenant_id', 'role', 'app_id', 'app_secret'] as const) {
    const body: Record<string, unknown> = { ...base };
    delete body[field];
    const reply = await h.post('/auth/roles/assign', body);
    t.equal(reply.status, 400, field);
    t.equal(reply.body.error.code, 'VALIDATION_ERROR');
    t.match(reply.body.error.message, new RegExp(`"${field}"`));
  }
});

t.test('user_id or tenant_id that is not a UUID is 400 VALIDATION_ERROR', async (t) => {
  for (const [userId, tenantId] of [['nope', tenant], [tokens.user_id, 'nope'], [tokens.user_id, `${tenant}0`]]) {
    const reply = await h.assignRole(app, userId!, tenantId!, 'owner');
    t.equal(reply.status, 400);
    t.equal(reply.body.error.code, 'VALIDATION_ERROR');
  }
});

t.test('assigning to a user who is not in this app is 404 USER_NOT_FOUND', async (t) => {
  const other = await h.createApp('app-b');
  const stranger = await h.login(other, 'bob@example.com');
  for (const userId of [stranger.user_id, '00000000-0000-4000-8000-000000000000']) {
    const reply = await h.assignRole(app, userId, tenant, 'owner');
    t.equal(reply.status, 404);
    t.same(reply.body, { error: { code: 'USER_NOT_FOUND', message: 'The user does not exist in this app' } });
  }
});

t.test('assigning in a tenant of another app, or an unknown tenant, is 404 TENANT_NOT_FOUND', async (t) => {
  const other = await h.createApp('app-b');
  const foreign = await h.createTenant(other, 'Foreign');
  for (const tenantId of [foreign, '00000000-0000-4000-8000-000000000000']) {
    const reply = await h.assignRole(app, tokens.user_id, tenantId, 'owner');
    t.equal(reply.status, 404);
    t.same(reply.body, { error: { code: 'TENANT_NOT_FOUND', message: 'The tenant does not exist in this app' } });
  }
});

t.test('assigning to a soft-deleted user is 403 USER_DELETED', async (t) => {
  await h.admin('DELETE', `/admin/users/${tokens.user_id}`);
  const reply = await h.assignRole(app, tokens.user_id, tenant, 'owner');
  t.equal(reply.status, 403);
  t.same(reply.body, { error: { code: 'USER_DELETED', message: 'The user is deleted' } });
});

t.test('revoking a soft-deleted user\'s role is allowed', async (t) => {
  await h.assignRole(app, tokens.user_id, tenant, 'owner');
  await h.admin('DELETE', `/admin/users/${tokens.user_id}`);
  const reply = await revokeRole(tokens.user_id, tenant);
  t.equal(reply.status, 200);
  t.equal(reply.body.previous_role, 'owner');
});

t.test('assign and revoke with a wrong app_secret are 401 TOKEN_INVALID', async (t) => {
  const wrong = { app_id: app.id, app_secret: 'as_not-the-secret' };
  const assign = await h.post('/auth/roles/assign', { ...wrong, user_id: tokens.user_id, tenant_id: tenant, role: 'owner' });
  const revoke = await h.post('/auth/roles/revoke', { ...wrong, user_id: tokens.user_id, tenant_id: tenant });
  for (const reply of [assign, revoke]) {
    t.equal(reply.status, 401);
    t.same(reply.body, { error: { code: 'TOKEN_INVALID', message: 'Invalid app credentials' } });
  }
});

t.test('revoke errors: user not in app 404 USER_NOT_FOUND, foreign tenant 404 TENANT_NOT_FOUND', async (t) => {
  const other = await h.createApp('app-b');
  const foreign = await h.createTenant(other, 'Foreign');
  const stranger = await h.login(other, 'bob@example.com');
  const noUser = await revokeRole(stranger.user_id, tenant);
  t.equal(noUser.status, 404);
  t.equal(noUser.body.error.code, 'USER_NOT_FOUND');
  const noTenant = await revokeRole(tokens.user_id, foreign);
  t.equal(noTenant.status, 404);
  t.equal(noTenant.body.error.code, 'TENANT_NOT_FOUND');
});

t.test('another app cannot assign roles in this app\'s tenants', async (t) => {
  const other = await h.createApp('app-b');
  await h.login(other, 'ann@example.com');
  const reply = await h.assignRole(other, tokens.user_id, tenant, 'owner');
  t.equal(reply.status, 404);
  t.equal(reply.body.error.code, 'TENANT_NOT_FOUND');
});
