// Tenants from the auth service mounted in the process (--auth --auth-app): an auth-server API key
// is its own tenant (its tenant id, else key:<id>) with the limits, weight and class it carries;
// the hourly usage is written to the service's usage table when the server closes (and every
// minute), as the answers' usage counted it.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { formatAuthError } from '../../src/auth/mount.js';
import { startHttpServer } from '../../src/http/server.js';
import { createInferenceAuth } from '../../src/inference/access/auth-bridge.js';
import { ADMIN_KEY, Outbox } from '../auth/fixtures/harness.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';

const models = await ensureTestModels();

t.test('an auth-server API key: its tenant, its limits, and its usage in the service\'s table', async (t) => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'inference-tenants-auth-'));
  await fs.chmod(dataDir, 0o711);
  t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
  const bridge = await createInferenceAuth({
    mount: true, appSlug: 'chat', selfUrl: 'http://inference.test', env: {},
    config: { dataDir, keyDir: path.join(dataDir, 'keys'), issuer: 'http://inference.test', adminKey: ADMIN_KEY, otpDelivery: new Outbox(), disposableDatabase: true, log: () => {} },
  });
  t.teardown(() => bridge.close());
  t.ok(bridge.usage, 'the mounted service takes usage');
  const admin = await startHttpServer({ host: '127.0.0.1', port: 0, routes: bridge.routes, formatError: formatAuthError, maxBodyBytes: 1 << 20 });
  t.teardown(() => admin.close());
  const adminBase = `http://127.0.0.1:${admin.port}`;
  const app = await postJson(`${adminBase}/admin/apps`, { slug: 'chat', name: 'Chat' }, { 'x-admin-key': ADMIN_KEY });
  t.equal(app.status, 201);
  const created = await postJson(`${adminBase}/admin/apps/${app.body.id}/api-keys`, { name: 'batch', limits: { requests_per_minute: 1 }, priority_class: 'batch', weight: 2 }, { 'x-admin-key': ADMIN_KEY });
  t.equal(created.status, 201);
  const keyId = created.body.id as string;

  const inference = await startTestServer(models.chat, { parallel: 1, ctxSize: 512, acceptBearer: bridge.acceptBearer!, usageRecorder: bridge.usage! });
  let closed = false;
  t.teardown(() => (closed ? undefined : inference.close()));
  const url = `${inference.base}/v1/chat/completions`;
  const body = { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, ignore_eos: true };
  const first = await postJson(url, body, { authorization: `Bearer ${created.body.key}` });
  t.equal(first.status, 200);
  t.equal(first.headers.get('x-ratelimit-limit-requests'), '1', 'the key\'s own limit');
  t.equal(first.headers.get('x-ratelimit-remaining-requests'), '0');
  const second = await postJson(url, body, { 'x-api-key': created.body.key });
  t.equal(second.status, 429, 'X-Api-Key too; the second in the minute is refused');
  t.equal(second.body.error.message, `Rate limit reached for requests per minute (limit 1) of tenant key:${keyId}`);
  const unknown = await postJson(url, body, { authorization: `Bearer lak_${'A'.repeat(43)}` });
  t.equal(unknown.status, 401);
  t.same(unknown.body, { error: { code: 401, message: 'Invalid API Key', type: 'authentication_error' } });
  const metrics = await (await fetch(`${inference.base}/metrics`, { headers: { authorization: `Bearer ${created.body.key}` } })).text();
  t.match(metrics, `\nllamacpp:tenant_completion_tokens_total{tenant="key:${keyId}"} 3\n`);

  await inference.close();
  closed = true;
  const usage = await (await fetch(`${adminBase}/admin/usage?app=${app.body.id}`, { headers: { 'x-admin-key': ADMIN_KEY } })).json();
  t.equal(usage.rows.length, 1, 'one row: the hour in progress, written at close');
  t.match(usage.rows[0], {
    app_slug: 'chat', tenant: `key:${keyId}`, key: keyId, model: 'tiny-chat.gguf',
    requests: 1, prompt_tokens: first.body.usage.prompt_tokens, cached_prompt_tokens: first.body.usage.prompt_tokens_details.cached_tokens, completion_tokens: 3,
  });
});
