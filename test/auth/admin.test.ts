// Admin routes behind X-Admin-Key: apps and their secrets, tenants (one app's), user
// soft-delete and restore.
import t from 'tap';
import { ADMIN_KEY, startAuthHarness, type TestApp } from './fixtures/harness.js';

// Every admin route is tried with wrong keys from one IP: the per-IP limit on wrong keys
// (rate-limits.test.ts) is set above what this file sends.
const h = await startAuthHarness({ rateLimits: { admin_key_failure_ip: { maxHits: 100_000, windowSeconds: 900 } } });
t.teardown(() => h.close());

let app: TestApp;
t.beforeEach(async () => { ({ app } = await h.startFresh()); });

const ISO_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

t.test('every admin route without X-Admin-Key, or with a wrong one, is 401 ADMIN_KEY_INVALID', async (t) => {
  const routes: Array<[string, string]> = [
    ['POST', '/admin/apps'], ['GET', '/admin/apps'], ['GET', `/admin/apps/${app.id}`], ['POST', `/admin/apps/${app.id}/secret`],
    ['POST', `/admin/apps/${app.id}/tenants`], ['GET', `/admin/apps/${app.id}/tenants`], ['GET', `/admin/apps/${app.id}/tenants/${app.id}`],
    ['GET', `/admin/users/${app.id}`], ['DELETE', `/admin/users/${app.id}`], ['POST', `/admin/users/${app.id}/restore`],
    ['POST', '/admin/signing-keys/rotate'],
  ];
  for (const [method, route] of routes) {
    const headerSets: Record<string, string>[] = [{}, { 'x-admin-key': 'wrong' }, { 'x-admin-key': `x${ADMIN_KEY}` }, { 'x-admin-key': ADMIN_KEY.slice(0, -1) }];
    for (const headers of headerSets) {
      const reply = await h.request(method, route, { json: method === 'GET' ? undefined : { name: 'x', slug: 'x' }, headers });
      t.equal(reply.status, 401, `${method} ${route} ${JSON.stringify(headers)}`);
      t.same(reply.body, { error: { code: 'ADMIN_KEY_INVALID', message: 'The X-Admin-Key header is missing or wrong' } });
    }
  }
  const [{ n }] = await h.sql`select count(*)::int as n from apps`;
  t.equal(n, 1, 'nothing was created');
});

t.test('creating an app answers 201 with its secret, shown only this once', async (t) => {
  const reply = await h.admin('POST', '/admin/apps', { slug: 'shop', name: 'Shop' });
  t.equal(reply.status, 201);
  t.equal(reply.headers.get('cache-control'), 'no-store');
  t.same(Object.keys(reply.body).sort(), ['app_secret', 'created_at', 'id', 'name', 'secret_rotated_at', 'slug']);
  t.match(reply.body, { id: UUID, slug: 'shop', name: 'Shop', created_at: ISO_MS, secret_rotated_at: null, app_secret: /^as_[A-Za-z0-9_-]{43}$/ });
  const fetched = await h.admin('GET', `/admin/apps/${reply.body.id}`);
  t.equal(fetched.status, 200);
  t.same(fetched.body, { id: reply.body.id, slug: 'shop', name: 'Shop', created_at: reply.body.created_at, secret_rotated_at: null });
  const [row] = await h.sql`select octet_length(secret_hash) as length from apps where id = ${reply.body.id}`;
  t.equal(row!.length, 32, 'only a SHA-256 of the secret is stored');
});

t.test('listing apps shows every app, oldest first, without secrets', async (t) => {
  h.clock.advance(1000);
  await h.createApp('app-b');
  const reply = await h.admin('GET', '/admin/apps');
  t.equal(reply.status, 200);
  t.same(reply.body.apps.map((a: { slug: string }) => a.slug), ['app-a', 'app-b']);
  t.notOk(JSON.stringify(reply.body).includes('secret"'), 'no secret field');
});

t.test('a taken slug is 409 APP_SLUG_TAKEN', async (t) => {
  const reply = await h.admin('POST', '/admin/apps', { slug: 'app-a', name: 'Again' });
  t.equal(reply.status, 409);
  t.same(reply.body, { error: { code: 'APP_SLUG_TAKEN', message: 'An app with this slug already exists' } });
});

t.test('an invalid slug or name is 400 VALIDATION_ERROR', async (t) => {
  for (const body of [{ slug: 'Shop', name: 'x' }, { slug: '-shop', name: 'x' }, { slug: 'shop-', name: 'x' }, { slug: 'a'.repeat(64), name: 'x' },
    { slug: 'sh op', name: 'x' }, { slug: 'shop', name: '' }, { slug: 'shop', name: 'x'.repeat(201) }, { slug: 'shop' }, { name: 'x' }]) {
    const reply = await h.admin('POST', '/admin/apps', body);
    t.equal(reply.status, 400, JSON.stringify(body));
    t.equal(reply.body.error.code, 'VALIDATION_ERROR');
  }
});

t.test('an unknown app is 404 APP_NOT_FOUND', async (t) => {
  for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
    const reply = await h.admin('GET', `/admin/apps/${id}`);
    t.equal(reply.status, 404);
    t.same(reply.body, { error: { code: 'APP_NOT_FOUND', message: 'The app does not exist' } });
  }
});

t.test('rotating an app secret: the new secret works and the old one is 401 TOKEN_INVALID at once', async (t) => {
  const tokens = await h.login(app, 'ann@example.com');
  const reply = await h.admin('POST', `/admin/apps/${app.id}/secret`);
  t.equal(reply.status, 200);
  t.match(reply.body, { id: app.id, slug: 'app-a', app_secret: /^as_/, secret_rotated_at: ISO_MS });
  t.not(reply.body.app_secret, app.secret);
  const old = await h.refresh(app, tokens.refresh_token);
  t.equal(old.status, 401);
  t.same(old.body, { error: { code: 'TOKEN_INVALID', message: 'Invalid app credentials' } });
  const renewed = await h.refresh({ ...app, secret: reply.body.app_secret }, tokens.refresh_token);
  t.equal(renewed.status, 200, 'sessions survive a secret rotation');
});

t.test('rotating the secret of an unknown app is 404 APP_NOT_FOUND', async (t) => {
  const reply = await h.admin('POST', '/admin/apps/00000000-0000-4000-8000-000000000000/secret');
  t.equal(reply.status, 404);
  t.equal(reply.body.error.code, 'APP_NOT_FOUND');
});

t.test('POST /admin/apps/{app_id}/tenants answers 201 {id, app_id, name, created_at}', async (t) => {
  const reply = await h.admin('POST', `/admin/apps/${app.id}/tenants`, { name: 'Acme Inc.' });
  t.equal(reply.status, 201);
  t.same(Object.keys(reply.body).sort(), ['app_id', 'created_at', 'id', 'name']);
  t.match(reply.body, { id: UUID, app_id: app.id, name: 'Acme Inc.', created_at: ISO_MS });
  t.equal(reply.body.created_at, new Date(h.clock.now()).toISOString(), 'created_at is the service clock in UTC with milliseconds');
});

t.test('a tenant name keeps its exact text, quotes and non-ASCII included', async (t) => {
  const name = `O'Brien & Søn "AS" 株式会社 — ' ; drop table tenants; --`;
  const reply = await h.admin('POST', `/admin/apps/${app.id}/tenants`, { name });
  t.equal(reply.status, 201);
  t.equal(reply.body.name, name);
  t.equal((await h.admin('GET', `/admin/apps/${app.id}/tenants/${reply.body.id}`)).body.name, name);
});

t.test('creating a tenant in an unknown app is 404 APP_NOT_FOUND', async (t) => {
  for (const id of ['00000000-0000-4000-8000-000000000000', 'nope']) {
    const reply = await h.admin('POST', `/admin/apps/${id}/tenants`, { name: 'Acme' });
    t.equal(reply.status, 404);
    t.equal(reply.body.error.code, 'APP_NOT_FOUND');
  }
});

t.test('creating a tenant without a valid name is 400 VALIDATION_ERROR', async (t) => {
  for (const body of [{}, { name: '' }, { name: 'x'.repeat(201) }, { name: 42 }, { name: ['Acme'] }, { name: 'Ac\u0000me' }, { name: 'Acme', extra: 1 }]) {
    const reply = await h.admin('POST', `/admin/apps/${app.id}/tenants`, body);
    t.equal(reply.status, 400, JSON.stringify(body));
    t.equal(reply.body.error.code, 'VALIDATION_ERROR');
  }
});

t.test('listing tenants: oldest first, with limit and offset', async (t) => {
  const ids: string[] = [];
  for (const name of ['One', 'Two', 'Three']) {
    ids.push(await h.createTenant(app, name));
    h.clock.advance(1000);
  }
  const other = await h.createApp('app-b');
  await h.createTenant(other, 'Elsewhere');
  const all = await h.admin('GET', `/admin/apps/${app.id}/tenants`);
  t.equal(all.status, 200);
  t.same(all.body.tenants.map((x: { id: string }) => x.id), ids);
  t.match(all.body.tenants[0], { id: ids[0], app_id: app.id, name: 'One', created_at: ISO_MS });
  const page = await h.admin('GET', `/admin/apps/${app.id}/tenants?limit=1&offset=1`);
  t.same(page.body.tenants.map((x: { name: string }) => x.name), ['Two']);
});

t.test('listing tenants with a bad limit or offset is 400 VALIDATION_ERROR', async (t) => {
  for (const query of ['limit=0', 'limit=1001', 'limit=abc', 'offset=-1', 'limit=1e2']) {
    const reply = await h.admin('GET', `/admin/apps/${app.id}/tenants?${query}`);
    t.equal(reply.status, 400, query);
    t.equal(reply.body.error.code, 'VALIDATION_ERROR');
  }
});

t.test('getting a tenant; a tenant of another app is 404 TENANT_NOT_FOUND', async (t) => {
  const tenant = await h.createTenant(app, 'Acme');
  const ok = await h.admin('GET', `/admin/apps/${app.id}/tenants/${tenant}`);
  t.equal(ok.status, 200);
  t.match(ok.body, { id: tenant, app_id: app.id, name: 'Acme' });
  const other = await h.createApp('app-b');
  for (const route of [`/admin/apps/${other.id}/tenants/${tenant}`, `/admin/apps/${app.id}/tenants/00000000-0000-4000-8000-000000000000`, `/admin/apps/${app.id}/tenants/nope`]) {
    const reply = await h.admin('GET', route);
    t.equal(reply.status, 404, route);
    t.same(reply.body, { error: { code: 'TENANT_NOT_FOUND', message: 'The tenant does not exist in this app' } });
  }
});

t.test('getting a user shows its identifiers and deletion state', async (t) => {
  const tokens = await h.login(app, 'ann@example.com');
  const reply = await h.admin('GET', `/admin/users/${tokens.user_id}`);
  t.equal(reply.status, 200);
  t.same(reply.body, { id: tokens.user_id, email: 'ann@example.com', phone: null, created_at: new Date(h.clock.now()).toISOString(), deleted_at: null });
});

t.test('soft-deleting a user revokes their sessions in every app and blocks refresh and login', async (t) => {
  const other = await h.createApp('app-b');
  const inA = await h.login(app, 'ann@example.com');
  const inB = await h.login(other, 'ann@example.com');
  const reply = await h.admin('DELETE', `/admin/users/${inA.user_id}`);
  t.equal(reply.status, 200);
  t.match(reply.body, { id: inA.user_id, email: 'ann@example.com', deleted_at: ISO_MS, sessions_revoked: 2 });
  for (const [target, token] of [[app, inA.refresh_token], [other, inB.refresh_token]] as const) {
    const refresh = await h.refresh(target, token);
    t.equal(refresh.status, 403);
    t.equal(refresh.body.error.code, 'USER_DELETED');
  }
  const [families] = await h.sql`select count(*)::int as n from refresh_families where revoked_reason = 'user_deleted'`;
  t.equal(families!.n, 2);
});

t.test('soft-delete is idempotent and keeps the first deletion time', async (t) => {
  const tokens = await h.login(app, 'ann@example.com');
  const first = await h.admin('DELETE', `/admin/users/${tokens.user_id}`);
  h.clock.advance(5000);
  const second = await h.admin('DELETE', `/admin/users/${tokens.user_id}`);
  t.equal(second.status, 200);
  t.equal(second.body.deleted_at, first.body.deleted_at);
  t.equal(second.body.sessions_revoked, 0);
});

t.test('a soft-deleted user keeps their roles and memberships', async (t) => {
  const tokens = await h.login(app, 'ann@example.com');
  const tenant = await h.createTenant(app);
  await h.assignRole(app, tokens.user_id, tenant, 'owner');
  await h.admin('DELETE', `/admin/users/${tokens.user_id}`);
  const [counts] = await h.sql`
    select (select count(*)::int from roles) as roles, (select count(*)::int from app_memberships) as memberships
  `;
  t.same({ ...counts }, { roles: 1, memberships: 1 });
});

t.test('restoring a user lets them log in again; their old sessions stay revoked', async (t) => {
  const tokens = await h.login(app, 'ann@example.com');
  await h.admin('DELETE', `/admin/users/${tokens.user_id}`);
  const restored = await h.admin('POST', `/admin/users/${tokens.user_id}/restore`);
  t.equal(restored.status, 200);
  t.match(restored.body, { id: tokens.user_id, deleted_at: null });
  const old = await h.refresh(app, tokens.refresh_token);
  t.equal(old.status, 401);
  t.equal(old.body.error.code, 'TOKEN_REVOKED');
  h.clock.advance(60_000);
  const again = await h.login(app, 'ann@example.com');
  t.equal(again.user_id, tokens.user_id);
});

t.test('restoring a user who is not deleted is 200 and changes nothing', async (t) => {
  const tokens = await h.login(app, 'ann@example.com');
  const reply = await h.admin('POST', `/admin/users/${tokens.user_id}/restore`);
  t.equal(reply.status, 200);
  t.equal(reply.body.deleted_at, null);
  t.equal((await h.refresh(app, tokens.refresh_token)).status, 200);
});

t.test('deleting, restoring or getting an unknown user is 404 USER_NOT_FOUND', async (t) => {
  for (const [method, route] of [['DELETE', ''], ['POST', '/restore'], ['GET', '']] as const) {
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      const reply = await h.admin(method, `/admin/users/${id}${route}`);
      t.equal(reply.status, 404, `${method} ${id}${route}`);
      t.same(reply.body, { error: { code: 'USER_NOT_FOUND', message: 'The user does not exist' } });
    }
  }
});
