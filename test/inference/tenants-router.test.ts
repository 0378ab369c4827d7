// Tenants in router mode (docs/tenants.md, "Router mode"): the router holds each tenant's limits
// across its model processes, forwards the tenant to them in its own header (a client's value of
// it never passes), and takes the usage they report.
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { native } from '../../src/native/binding.js';
import { startRouterServer } from '../../src/inference/multi-model/server.js';
import { TENANT_HEADER } from '../../src/inference/tenants/forwarded-tenant.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson } from '../helpers/inference-server.js';
import { REPO_ROOT } from '../helpers/reference.js';
import { until } from '../helpers/until.js';

const models = await ensureTestModels();
const dir = mkdtempSync(join(tmpdir(), 'router-tenants-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
mkdirSync(join(dir, 'models'));
copyFileSync(models.chat, join(dir, 'models', 'one.gguf'));
copyFileSync(models.chat, join(dir, 'models', 'two.gguf'));
const CHILD = [process.execPath, '--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), join(REPO_ROOT, 'src', 'inference', 'server-main.ts')];
const KEYS = ['sk-one', 'sk-two', 'sk-three'];
const params = native.ServerParams.parse(['llama-server', '--models-dir', join(dir, 'models'), '-c', '1024', '-np', '2', '-t', '1', '--metrics']);
const router = await startRouterServer({
  host: '127.0.0.1', port: 0, apiKeys: KEYS, maxBodyBytes: 1 << 20, autoload: true, modelsMax: 0, spares: 0, buildInfo: 'b1-test',
  readSpecs: () => params.routerModels(), command: CHILD, childArgs: [], log: () => {},
  tenants: { file: { keys: { 'key-1': { limits: { requestsPerMinute: 3 } }, 'key-2': { name: 'tokens', limits: { tokensPerMinute: 1000 } } } } },
});
t.teardown(() => router.close());
const base = `http://127.0.0.1:${router.port}`;
const auth = (i: number, extra: Record<string, string> = {}): Record<string, string> => ({ authorization: `Bearer ${KEYS[i]}`, ...extra });
const chat = (model: string) => ({ model, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3, ignore_eos: true });

t.test('requestsPerMinute holds across the model processes', async (t) => {
  const remaining: Array<string | null> = [];
  for (const model of ['one', 'two', 'one']) {
    const res = await postJson(`${base}/v1/chat/completions`, chat(model), auth(0));
    t.equal(res.status, 200, model);
    remaining.push(res.headers.get('x-ratelimit-remaining-requests'));
  }
  t.same(remaining, ['2', '1', '0']);
  const refused = await postJson(`${base}/v1/chat/completions`, chat('two'), auth(0));
  t.equal(refused.status, 429, 'the fourth, to the other model, is refused');
  t.same(refused.body, { error: { code: 'rate_limit_exceeded', message: 'Rate limit reached for requests per minute (limit 3) of tenant key-1', type: 'rate_limit_error', param: null } });
});

t.test('tokensPerMinute counts what every model process reports', async (t) => {
  const first = await postJson(`${base}/v1/chat/completions`, chat('one'), auth(1));
  const second = await postJson(`${base}/v1/chat/completions`, chat('two'), auth(1));
  t.equal(first.status, 200);
  t.equal(second.status, 200);
  const used = first.body.usage.total_tokens + second.body.usage.total_tokens;
  const reported = () => router.tenancy.usage.metricsText().match(/^llamacpp:tenant_requests_total\{tenant="tokens"\} (\d+)$/m)?.[1];
  const deadline = AbortSignal.timeout(30_000);
  while (reported() !== '2') {
    await once(router.tenancy, 'report', { signal: deadline }).catch(() => {
      throw new Error(`the model processes' reports of both requests did not arrive within 30 s (tenant_requests_total ${reported() ?? 'absent'})`);
    });
  }
  const third = await postJson(`${base}/v1/chat/completions`, chat('one'), auth(1));
  // The router counts a model process's tokens when it reports them (at most 200 ms after): the
  // third's own tokens are in its headers if their report came before the answer left.
  const after = [String(1000 - used), String(1000 - used - (third.body.usage.total_tokens as number))];
  t.ok(after.includes(third.headers.get('x-ratelimit-remaining-tokens')!), `the limit less both answers' usage, and the third's once reported (${third.headers.get('x-ratelimit-remaining-tokens')} of ${after})`);
  t.match(router.tenancy.usage.metricsText(), `llamacpp:tenant_completion_tokens_total{tenant="tokens"} ${first.body.usage.completion_tokens + second.body.usage.completion_tokens}`);
});

t.test('the model process gets the tenant from the router, never from the client', async (t) => {
  const forged = encodeURIComponent(JSON.stringify({ id: 'key-1', key: 'key-1', appSlug: null, weight: 100, priorityClass: 'interactive' }));
  const res = await postJson(`${base}/v1/chat/completions`, chat('two'), auth(2, { [TENANT_HEADER]: forged }));
  t.equal(res.status, 200);
  const metrics = await (await fetch(`${base}/metrics?model=two`, { headers: auth(2) })).text();
  t.match(metrics, /\nllamacpp:tenant_requests_total\{tenant="key-3"\} 1\n/, 'counted as the key\'s own tenant in the model process');
});

t.test('fair share holds across the model processes: a tenant\'s tokens on one model count against its share on the other', async (t) => {
  // One slot per model, each tenant's queue in arrival order.
  const oneSlot = native.ServerParams.parse(['llama-server', '--models-dir', join(dir, 'models'), '-c', '2048', '-np', '1', '-t', '1', '--metrics']);
  const shared = await startRouterServer({
    host: '127.0.0.1', port: 0, apiKeys: KEYS, maxBodyBytes: 1 << 20, autoload: true, modelsMax: 0, spares: 0, buildInfo: 'b1-test',
    readSpecs: () => oneSlot.routerModels(), command: CHILD, childArgs: ['--overload-lifo-ms', '0'], log: () => {},
  });
  t.teardown(() => shared.close());
  const url = `http://127.0.0.1:${shared.port}`;
  const post = (key: number, body: unknown, signal?: AbortSignal) => fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth(key) }, body: JSON.stringify(body), ...(signal ? { signal } : {}) });
  // A metric the model process does not report fails the test, naming it.
  const metric = async (model: string, name: string): Promise<number> => {
    const text = await (await fetch(`${url}/metrics?model=${model}`, { headers: auth(2) })).text();
    const value = new RegExp(`^llamacpp:${name} (\\d+)$`, 'm').exec(text)?.[1];
    if (value === undefined) throw new Error(`model ${model}'s /metrics has no llamacpp:${name}`);
    return Number(value);
  };
  t.equal((await postJson(`${url}/v1/chat/completions`, chat('one'), auth(2))).status, 200, 'model one loaded');
  // key-3 holds model two's slot while key-1's and then key-2's request queue there.
  const holding = new AbortController();
  const blocker = await post(2, { ...chat('two'), max_tokens: 1900, stream: true }, holding.signal);
  const reader = blocker.body!.getReader();
  await reader.read();
  const order: string[] = [];
  const a1 = post(0, chat('two')).then((r) => r.text()).then(() => order.push('key-1'));
  await until('key-1\'s request queued on model two', async () => (await metric('two', 'requests_deferred')) >= 1);
  const b1 = post(1, chat('two')).then((r) => r.text()).then(() => order.push('key-2'));
  await until('key-2\'s request queued on model two', async () => (await metric('two', 'requests_deferred')) >= 2);
  // key-1 uses model one meanwhile; its usage reaches model two's fair share through the router.
  const elsewhere = await postJson(`${url}/v1/chat/completions`, { ...chat('one'), max_tokens: 40 }, auth(0));
  t.equal(elsewhere.status, 200);
  await until('model two charged key-1\'s tokens on model one', async () => (await metric('two', 'fair_share_tokens_elsewhere_total')) >= elsewhere.body.usage.total_tokens);
  t.equal(await metric('two', 'fair_share_tokens_elsewhere_total'), elsewhere.body.usage.total_tokens, 'model two was told exactly key-1\'s tokens on model one');
  holding.abort();
  await reader.closed.catch(() => {});
  await Promise.all([a1, b1]);
  t.same(order, ['key-2', 'key-1'], 'key-2\'s later request took the free slot first: key-1 had used model one');
});
