// The auth routes mounted in another server (as inference-server --auth does): they answer in
// the auth error format whatever the host's ErrorFormatter, and the host protects its own
// routes with createAccessTokenGuard.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { HttpError, type ErrorFormatter } from '../../src/http/errors.js';
import { startHttpServer } from '../../src/http/server.js';
import { AUTH_MAX_BODY_BYTES, createAccessTokenGuard, createAuthService } from '../../src/auth/mount.js';
import { ADMIN_KEY, Outbox, TestClock } from './fixtures/harness.js';

const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'auth-mount-'));
await fs.chmod(dataDir, 0o711);
const outbox = new Outbox();
const clock = new TestClock();
const service = await createAuthService({
  dataDir, keyDir: path.join(dataDir, 'keys'), issuer: 'http://host.test', adminKey: ADMIN_KEY,
  otpDelivery: outbox, disposableDatabase: true, clock, log: () => {},
});
// A host with its own error format (OpenAI style) and a larger body cap, like inference-server.
const hostFormat: ErrorFormatter = (e) => ({ status: e.status, body: { error: { message: e.message, type: 'invalid_request_error', code: e.code } } });
const guard = createAccessTokenGuard({ appSlug: 'chat', role: 'viewer', issuer: service.issuer, keys: service.accessTokenKeys, clock });
const server = await startHttpServer({
  host: '127.0.0.1',
  port: 0,
  maxBodyBytes: 1024 * 1024,
  formatError: hostFormat,
  routes: [
    ...service.routes,
    {
      method: 'GET', path: '/v1/models', handler: async (req) => {
        try {
          const claims = await guard(req.headers.authorization);
          return { body: { object: 'list', data: [], user: claims.sub } };
        } catch (error) {
          if (error instanceof HttpError) return { status: error.status, body: hostFormat(error).body };
          throw error;
        }
      },
    },
  ],
});
t.teardown(async () => {
  server.close();
  await service.close();
  await fs.rm(dataDir, { recursive: true, force: true });
});
const base = `http://127.0.0.1:${server.port}`;

async function call(method: string, route: string, body?: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${base}${route}`, { method, headers: { 'content-type': 'application/json', ...headers }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: response.status, headers: response.headers, body: await response.json() as any };
}

t.test('auth routes answer in the auth error format inside another host', async (t) => {
  const reply = await call('POST', '/auth/refresh', { app_id: 'x', app_secret: 'y', refresh_token: 'z' });
  t.equal(reply.status, 401);
  t.same(reply.body, { error: { code: 'TOKEN_INVALID', message: 'Invalid app credentials' } });
  t.equal(reply.headers.get('cache-control'), 'no-store');
});

t.test('auth routes cap their bodies at 16 KiB even when the host accepts more', async (t) => {
  const reply = await call('POST', '/auth/refresh', { app_id: 'x', app_secret: 'y', refresh_token: 'z'.repeat(20_000) });
  t.equal(reply.status, 413);
  t.same(reply.body, { error: { code: 'BODY_TOO_LARGE', message: `The request body exceeds ${AUTH_MAX_BODY_BYTES} bytes` } });
});

t.test('an auth validation error keeps the auth format inside another host', async (t) => {
  const reply = await call('POST', '/auth/roles/assign', { app_id: 'x' });
  t.equal(reply.status, 400);
  t.equal(reply.body.error.code, 'VALIDATION_ERROR');
  t.same(Object.keys(reply.body.error).sort(), ['code', 'message']);
});

t.test('a host route protected by the guard admits a user of its app with a role', async (t) => {
  const app = (await call('POST', '/admin/apps', { slug: 'chat', name: 'Chat' }, { 'x-admin-key': ADMIN_KEY })).body;
  const credentials = { app_id: app.id, app_secret: app.app_secret };
  await call('POST', '/auth/otp/request', { ...credentials, email: 'ann@example.com' });
  const login = (await call('POST', '/auth/otp/verify', { ...credentials, email: 'ann@example.com', code: outbox.codeFor('ann@example.com') })).body;
  const denied = await call('GET', '/v1/models', undefined, { authorization: `Bearer ${login.access_token}` });
  t.equal(denied.status, 403);
  t.same(denied.body, { error: { message: 'This route requires the role "viewer" or higher', type: 'invalid_request_error', code: 'INSUFFICIENT_ROLE' } });
  const tenant = (await call('POST', `/admin/apps/${app.id}/tenants`, { name: 'Team' }, { 'x-admin-key': ADMIN_KEY })).body;
  await call('POST', '/auth/roles/assign', { ...credentials, user_id: login.user_id, tenant_id: tenant.id, role: 'viewer' });
  const refreshed = (await call('POST', '/auth/refresh', { ...credentials, refresh_token: login.refresh_token })).body;
  const admitted = await call('GET', '/v1/models', undefined, { authorization: `Bearer ${refreshed.access_token}` });
  t.equal(admitted.status, 200);
  t.same(admitted.body, { object: 'list', data: [], user: login.user_id });
  const anonymous = await call('GET', '/v1/models');
  t.equal(anonymous.status, 401);
  t.equal(anonymous.body.error.code, 'TOKEN_INVALID');
});

t.test('unknown paths are the host\'s to answer, in its format', async (t) => {
  const reply = await call('GET', '/nowhere');
  t.equal(reply.status, 404);
  t.same(reply.body, { error: { message: 'No route for GET /nowhere', type: 'invalid_request_error', code: 'NOT_FOUND' } });
});
