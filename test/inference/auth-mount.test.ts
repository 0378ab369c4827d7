// inference-server --auth (the auth routes on the inference port) and --auth-app (the service's
// access tokens admitted on the inference endpoints, with an optional least role).
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createInferenceAuth } from '../../src/inference/access/auth-bridge.js';
import { ADMIN_KEY, Outbox, startAuthHarness } from '../auth/fixtures/harness.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';

const models = await ensureTestModels();
const prompt = { prompt: 'Hello', n_predict: 2 };

t.test('--auth-app with --auth-issuer: tokens of that app are admitted, others are not', async (t) => {
  const auth = await startAuthHarness();
  t.teardown(() => auth.close());
  const app = await auth.createApp('chat');
  const other = await auth.createApp('other');
  const tenant = await auth.createTenant(app);
  const bridge = await createInferenceAuth({ mount: false, appSlug: 'chat', role: 'staff', issuer: auth.issuer, jwksUrl: `${auth.base}/.well-known/jwks.json`, selfUrl: 'http://unused', env: {} });
  const inference = await startTestServer(models.chat, { parallel: 1, ctxSize: 512, apiKeys: ['k1'], acceptBearer: bridge.acceptBearer });
  t.teardown(inference.close);
  const url = `${inference.base}/completion`;

  const noRole = await auth.login(app, 'a@example.com');
  const denied = await postJson(url, prompt, { authorization: `Bearer ${noRole.access_token}` });
  t.equal(denied.status, 403, 'a user without the role');
  t.equal(denied.body.error.type, 'permission_error');

  await auth.assignRole(app, noRole.user_id, tenant, 'staff');
  const refreshed = (await auth.refresh(app, noRole.refresh_token, { tenant_id: tenant })).body;
  const ok = await postJson(url, prompt, { authorization: `Bearer ${refreshed.access_token}` });
  t.equal(ok.status, 200, 'staff in the tenant is admitted');
  t.equal(ok.body.tokens_predicted, 2);

  const foreign = await auth.login(other, 'b@example.com');
  const wrongApp = await postJson(url, prompt, { authorization: `Bearer ${foreign.access_token}` });
  t.equal(wrongApp.status, 401, 'a token of another app');
  t.equal(wrongApp.body.error.type, 'authentication_error');

  const tampered = refreshed.access_token.slice(0, -4) + 'AAAA';
  t.equal((await postJson(url, prompt, { authorization: `Bearer ${tampered}` })).status, 401);
  t.equal((await postJson(url, prompt, { authorization: `Bearer ${refreshed.refresh_token}` })).status, 401, 'a refresh token is no bearer token');
  t.equal((await postJson(url, prompt, { authorization: 'Bearer k1' })).status, 200, 'the API key still works');
  t.equal((await postJson(url, prompt)).status, 401);

  const metrics = await (await fetch(`${inference.base}/metrics`, { headers: { authorization: 'Bearer k1' } })).text();
  t.match(metrics, `\nllamacpp:tenant_requests_total{tenant="${tenant}"} 1\n`, 'the token\'s request is its tenant_id claim\'s (docs/tenants.md)');
  t.match(metrics, '\nllamacpp:tenant_requests_total{tenant="key-1"} 1\n', 'the API key\'s is its own tenant\'s');
});

t.test('--auth mounts the service on the inference port; --auth-app uses it in process', async (t) => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'inference-auth-'));
  await fs.chmod(dataDir, 0o711);
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  const outbox = new Outbox();
  const bridge = await createInferenceAuth({
    mount: true, appSlug: 'chat', selfUrl: 'http://inference.test', env: {},
    config: { dataDir, keyDir: path.join(dataDir, 'keys'), issuer: 'http://inference.test', adminKey: ADMIN_KEY, otpDelivery: outbox, disposableDatabase: true, log: () => {} },
  });
  t.teardown(() => bridge.close());
  const inference = await startTestServer(models.chat, { parallel: 1, ctxSize: 512, extraRoutes: bridge.routes, acceptBearer: bridge.acceptBearer });
  t.teardown(inference.close);
  const base = inference.base;
  const jwks = await (await fetch(`${base}/.well-known/jwks.json`)).json();
  t.ok(jwks.keys.length >= 1, 'the JWKS is served on the inference port');
  const created = await postJson(`${base}/admin/apps`, { slug: 'chat', name: 'Chat' }, { 'x-admin-key': ADMIN_KEY });
  t.equal(created.status, 201);
  const creds = { app_id: created.body.id, app_secret: created.body.app_secret };
  t.equal((await postJson(`${base}/auth/otp/request`, { ...creds, email: 'u@example.com' })).status, 200);
  const tokens = (await postJson(`${base}/auth/otp/verify`, { ...creds, email: 'u@example.com', code: outbox.codeFor('u@example.com') })).body;
  t.type(tokens.access_token, 'string');
  const res = await postJson(`${base}/completion`, prompt, { authorization: `Bearer ${tokens.access_token}` });
  t.equal(res.status, 200, 'the token opens the inference endpoints');
  t.equal((await postJson(`${base}/completion`, prompt)).status, 401);
  const authError = await postJson(`${base}/auth/refresh`, { ...creds, refresh_token: 'nope' });
  t.equal(authError.status, 401);
  t.equal(authError.body.error.code, 'TOKEN_INVALID', 'auth routes keep the auth error format');
});
