// Three inference-server replicas on one auth-server database (--auth with a shared DATABASE_URL):
// an auth-server API key's requests-per-minute limit holds for the fleet. Requests go round robin;
// the fleet admits the limit and at most the stated overshoot past it (fleet-limits.ts), and the
// usage rows the three replicas write add up to exactly the requests they answered.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { createInferenceAuth } from '../../src/inference/access/auth-bridge.js';
import { fleetOvershoot } from '../../src/inference/tenants/fleet-limits.js';
import { ADMIN_KEY, Outbox, startAuthHarness } from '../auth/fixtures/harness.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer, type TestServer } from '../helpers/inference-server.js';

const models = await ensureTestModels();
const harness = await startAuthHarness();
t.teardown(() => harness.close());

t.test('a key limited to 40 requests a minute, 3 replicas round robin: the fleet admits 40 to 40 + the bound, and the usage rows add up', async (t) => {
  const app = await harness.request('POST', '/admin/apps', { json: { slug: 'chat', name: 'Chat' }, headers: { 'x-admin-key': ADMIN_KEY } });
  t.equal(app.status, 201);
  const appId = (app.body as { id: string }).id;
  const limit = 40;
  const created = await harness.request('POST', `/admin/apps/${appId}/api-keys`, { json: { name: 'fleet', limits: { requests_per_minute: limit } }, headers: { 'x-admin-key': ADMIN_KEY } });
  t.equal(created.status, 201);
  const { key, id: keyId } = created.body as { key: string; id: string };

  const servers: TestServer[] = [];
  for (let i = 0; i < 3; i++) {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), `fleet-replica-${i}-`));
    await fs.chmod(dataDir, 0o711);
    t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));
    const bridge = await createInferenceAuth({
      mount: true, appSlug: 'chat', selfUrl: harness.issuer, env: {},
      config: { dataDir, keyDir: path.join(harness.dataDir, 'keys'), issuer: harness.issuer, adminKey: ADMIN_KEY, otpDelivery: new Outbox(), databaseUrl: harness.service.databaseUrl, log: () => {} },
    });
    t.teardown(() => bridge.close());
    t.ok(bridge.fleetStore, 'a mounted service offers its database to the fleet');
    servers.push(await startTestServer(models.chat, {
      parallel: 1, ctxSize: 512, acceptBearer: bridge.acceptBearer!, usageRecorder: bridge.usage!, fleetStore: bridge.fleetStore!, replicaName: `replica-${i}`,
    }));
  }
  let open = true;
  const closeAll = async (): Promise<void> => {
    if (!open) return;
    open = false;
    for (const s of servers) await s.close();
  };
  t.teardown(closeAll);

  const body = { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1 };
  const statuses: number[] = [];
  for (let i = 0; i < 3 * limit; i++) {
    const res = await postJson(`${servers[i % 3]!.base}/v1/chat/completions`, body, { authorization: `Bearer ${key}` });
    statuses.push(res.status);
  }
  const admitted = statuses.filter((s) => s === 200).length;
  t.same([...new Set(statuses)].sort(), [200, 429], 'answered or refused, nothing else');
  t.comment(`admitted ${admitted} of ${statuses.length} against ${limit} (bound ${limit + fleetOvershoot(limit, 3)})`);
  t.ok(admitted >= limit && admitted <= limit + fleetOvershoot(limit, 3), `${admitted} admitted`);

  await closeAll();
  const [row] = await harness.sql<Array<{ requests: string }>>`
    select coalesce(sum(requests), 0) as requests from usage_hourly where key_label = ${keyId}
  `;
  t.equal(Number(row!.requests), admitted, 'the three replicas\' usage rows add up to the requests answered');
});
