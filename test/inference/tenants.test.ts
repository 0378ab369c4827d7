// Tenants on one server (docs/tenants.md): each key of --api-key is a tenant; its limits answer
// 429 with OpenAI's body and headers; every answer of a limited tenant carries the rate-limit
// headers; what each tenant used is on /metrics, exactly the usage its answers carried; and a
// tenant's backlog does not hold another tenant's request behind it.
import t from 'tap';
import { ensureTestModels } from '../fixtures/models.js';
import { parseSse, postJson, startLoadingServer, startTestServer } from '../helpers/inference-server.js';
import { until } from '../helpers/until.js';

const models = await ensureTestModels();
const KEYS = ['sk-alpha', 'sk-bravo', 'sk-charlie', 'sk-delta'];
const server = await startTestServer(models.chat, {
  ctxSize: 2048,
  parallel: 2,
  apiKeys: KEYS,
  tenants: {
    file: {
      keys: {
        'key-2': { name: 'bravo', limits: { requestsPerMinute: 2 } },
        'key-3': { limits: { tokensPerMinute: 30 } },
        'key-4': { limits: { concurrentRequests: 1 } },
      },
    },
  },
});
t.teardown(() => server.close());
const auth = (i: number): Record<string, string> => ({ authorization: `Bearer ${KEYS[i]}` });
const RATE_HEADERS = ['x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests', 'x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens'];
const rateHeaders = (h: Headers): Record<string, string> => Object.fromEntries(RATE_HEADERS.flatMap((n) => (h.get(n) === null ? [] : [[n, h.get(n)!]])));
const chat = (content: string, extra: Record<string, unknown> = {}) => ({ messages: [{ role: 'user', content }], max_tokens: 4, ignore_eos: true, temperature: 0, ...extra });

async function metrics(): Promise<string> {
  const res = await fetch(`${server.base}/metrics`, { headers: auth(0) });
  return res.text();
}
const series = (text: string, name: string, tenant: string): number | undefined => {
  const line = text.split('\n').find((l) => l.startsWith(`llamacpp:${name}{tenant="${tenant}"} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
};

t.test('a tenant without limits gets no rate-limit headers', async (t) => {
  const res = await postJson(`${server.base}/v1/chat/completions`, chat('Hi'), auth(0));
  t.equal(res.status, 200);
  t.same(rateHeaders(res.headers), {});
});

t.test('requestsPerMinute: the n+1-th request is refused with 429, OpenAI\'s body and Retry-After; every answer carries the headers', async (t) => {
  const sent = Date.now();
  const first = await postJson(`${server.base}/v1/chat/completions`, chat('one'), auth(1));
  t.equal(first.status, 200);
  t.equal(first.headers.get('x-ratelimit-limit-requests'), '2');
  t.equal(first.headers.get('x-ratelimit-remaining-requests'), '1');
  t.match(first.headers.get('x-ratelimit-reset-requests'), /^(59(\.\d+)?s|1m0s)$/);
  const models = await fetch(`${server.base}/v1/models`, { headers: auth(1) });
  t.equal(models.status, 200);
  t.equal(models.headers.get('x-ratelimit-remaining-requests'), '1', 'a read-only answer carries them and counts nothing');
  const second = await postJson(`${server.base}/completion`, { prompt: 'two', n_predict: 2 }, auth(1));
  t.equal(second.status, 200);
  t.equal(second.headers.get('x-ratelimit-remaining-requests'), '0');
  const third = await postJson(`${server.base}/v1/chat/completions`, chat('three', { stream: true }), auth(1));
  t.equal(third.status, 429);
  t.same(third.body, { error: { code: 'rate_limit_exceeded', message: 'Rate limit reached for requests per minute (limit 2) of tenant bravo', type: 'rate_limit_error', param: null } });
  t.equal(third.headers.get('x-ratelimit-remaining-requests'), '0');
  const retry = Number(third.headers.get('retry-after'));
  // The first was admitted after `sent`: it leaves the minute at most 60 s after it, less the time the three took.
  const earliest = Math.floor(60 - (Date.now() - sent) / 1000);
  t.ok(Number.isInteger(retry) && retry >= earliest && retry <= 60, `Retry-After ${retry} (${earliest} to 60): until the first leaves the minute`);
  const other = await postJson(`${server.base}/v1/chat/completions`, chat('other key'), auth(0));
  t.equal(other.status, 200, 'another tenant is not affected');
});

t.test('tokensPerMinute: checked at admission against the tokens used in the window, which a running request may exceed', async (t) => {
  const first = await postJson(`${server.base}/v1/chat/completions`, chat('Hello there', { max_tokens: 8 }), auth(2));
  t.equal(first.status, 200);
  const used = first.body.usage.total_tokens as number;
  t.ok(used < 30, `the first used ${used} tokens`);
  t.equal(first.headers.get('x-ratelimit-remaining-tokens'), String(30 - used), 'after this request: the limit less what it used, as its usage said');
  t.match(first.headers.get('x-ratelimit-reset-tokens'), /^(59\.\d+s|1m0s)$/, 'the window is whole again a minute after its tokens');
  const second = await postJson(`${server.base}/v1/chat/completions`, chat('Hello there', { max_tokens: 8 }), auth(2));
  t.equal(second.status, 200, 'admitted below the limit');
  const total = used + (second.body.usage.total_tokens as number);
  t.equal(second.headers.get('x-ratelimit-remaining-tokens'), String(Math.max(0, 30 - total)), 'the limit less both requests\' usage');
  t.ok(total >= 30, `${total} tokens used: past the limit`);
  const third = await postJson(`${server.base}/v1/chat/completions`, chat('Hello there'), auth(2));
  t.equal(third.status, 429);
  t.same(third.body, { error: { code: 'rate_limit_exceeded', message: `Rate limit reached for tokens per minute (limit 30, used ${total}) of tenant key-3`, type: 'rate_limit_error', param: null } });
  t.equal(third.headers.get('x-ratelimit-remaining-tokens'), '0');
});

t.test('concurrentRequests: refused while the tenant\'s other request runs, admitted once it has ended', async (t) => {
  const controller = new AbortController();
  const streaming = await fetch(`${server.base}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', ...auth(3) }, body: JSON.stringify(chat('long', { max_tokens: 64, stream: true })), signal: controller.signal,
  });
  t.equal(streaming.status, 200);
  const reader = streaming.body!.getReader();
  await reader.read();
  const refused = await postJson(`${server.base}/v1/chat/completions`, chat('second'), auth(3));
  t.equal(refused.status, 429);
  t.same(refused.body, { error: { code: 'rate_limit_exceeded', message: 'Concurrent request limit reached (limit 1) of tenant key-4', type: 'rate_limit_error', param: null } });
  t.equal(refused.headers.get('retry-after'), '1');
  while (!(await reader.read()).done);
  const admitted = await postJson(`${server.base}/v1/chat/completions`, chat('third'), auth(3));
  t.equal(admitted.status, 200);
});

t.test('while the model loads: the 503 comes before the key check, with a limited tenant\'s headers', async (t) => {
  const loading = await startLoadingServer({ apiKeys: KEYS, tenants: { file: { keys: { 'key-2': { limits: { requestsPerMinute: 2 } } } } } });
  t.teardown(() => loading.failLoad());
  const url = `${loading.base}/v1/chat/completions`;
  const limited = await postJson(url, chat('x'), auth(1));
  t.equal(limited.status, 503);
  t.same(limited.body, { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } });
  t.same(rateHeaders(limited.headers), {
    'x-ratelimit-limit-requests': '2', 'x-ratelimit-remaining-requests': '2', 'x-ratelimit-reset-requests': '0ms',
  }, 'the limited tenant\'s headers; the refused request is not counted');
  const unlimited = await postJson(url, chat('x'), auth(0));
  t.same([unlimited.status, rateHeaders(unlimited.headers)], [503, {}], 'a tenant without limits: no headers');
  const wrong = await postJson(url, chat('x'), { authorization: 'Bearer sk-wrong' });
  t.same([wrong.status, rateHeaders(wrong.headers)], [503, {}], 'a wrong key: still the 503, with no headers');
});

t.test('a wrong key is still a 401, with no tenant', async (t) => {
  const res = await postJson(`${server.base}/v1/chat/completions`, chat('Hi'), { authorization: 'Bearer sk-nobody' });
  t.equal(res.status, 401);
  t.same(rateHeaders(res.headers), {});
});

t.test('usage on /metrics: per tenant, exactly the sum of the usage the answers carried, streamed or not', async (t) => {
  const before = await metrics();
  const plain = await postJson(`${server.base}/v1/chat/completions`, chat('count me', { max_tokens: 5 }), auth(0));
  const streamed = await postJson(`${server.base}/v1/chat/completions`, chat('count me too', { max_tokens: 3, stream: true, stream_options: { include_usage: true } }), auth(0));
  const text = await postJson(`${server.base}/v1/completions`, { prompt: 'and me', max_tokens: 2, n: 2 }, auth(0));
  // A request naming its conversation runs in a stream session, with its request's tenant all the same.
  const resumed = await postJson(`${server.base}/v1/chat/completions`, chat('a conversation', { max_tokens: 2, stream: true, stream_options: { include_usage: true } }), { ...auth(0), 'x-conversation-id': 'tenants-usage' });
  t.equal(plain.status, 200);
  t.equal(streamed.status, 200);
  t.equal(text.status, 200);
  t.equal(resumed.status, 200);
  const streamUsage = (body: string): any => (parseSse(body).find((e: any) => e !== '[DONE]' && e.usage) as any).usage;
  const usages = [plain.body.usage, streamUsage(streamed.body as string), text.body.usage, streamUsage(resumed.body as string)];
  const after = await metrics();
  const delta = (name: string) => (series(after, name, 'key-1') ?? 0) - (series(before, name, 'key-1') ?? 0);
  t.equal(delta('tenant_requests_total'), 4);
  t.equal(delta('tenant_prompt_tokens_total'), usages.reduce((n, u) => n + u.prompt_tokens, 0));
  t.equal(delta('tenant_prompt_tokens_cached_total'), usages.reduce((n, u) => n + u.prompt_tokens_details.cached_tokens, 0));
  t.equal(delta('tenant_completion_tokens_total'), usages.reduce((n, u) => n + u.completion_tokens, 0));
  t.ok(delta('tenant_compute_seconds_total') > 0, 'compute time');
  t.equal(series(after, 'tenant_requests_total', 'bravo'), 2, 'bravo: its two admitted requests; the refused one is not counted');
});

t.test('one tenant\'s backlog does not hold another tenant\'s request behind it; a request\'s priority orders its own tenant\'s queue', async (t) => {
  // overloadLifoMs 0: each tenant's queue in arrival order (the adaptive LIFO would serve A's newest first).
  const one = await startTestServer(models.chat, { ctxSize: 2048, parallel: 1, apiKeys: KEYS, engine: { overloadLifoMs: 0 } });
  t.teardown(() => one.close());
  const post = (key: number, body: unknown, signal?: AbortSignal) => fetch(`${one.base}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', ...auth(key) }, body: JSON.stringify(body), ...(signal ? { signal } : {}) });
  const deferred = async (): Promise<number> => {
    const text = await (await fetch(`${one.base}/metrics`, { headers: auth(0) })).text();
    return Number(/^llamacpp:requests_deferred (\d+)$/m.exec(text)![1]);
  };
  // A long blocker holds the only slot until every request is queued; it is then cancelled.
  const holding = new AbortController();
  const blocker = await post(0, chat('block', { max_tokens: 1900, stream: true }), holding.signal);
  const reader = blocker.body!.getReader();
  await reader.read();
  const order: string[] = [];
  // The backlog is queued in the engine, one request after the other (sent together, they would
  // reach the engine in the order their preparation ends), before the other tenant's request is sent.
  const backlog: Array<Promise<number>> = [];
  for (const [i, name] of ['a1', 'a2', 'a3'].entries()) {
    backlog.push(post(0, chat(name)).then((r) => r.text()).then(() => order.push(name)));
    await until(`request ${name} queued in the engine (requests_deferred ${i + 1})`, async () => (await deferred()) >= i + 1);
  }
  const other = post(1, chat('b1')).then((r) => r.text()).then(() => order.push('b1'));
  await until('the other tenant\'s request queued (requests_deferred 4)', async () => (await deferred()) >= 4);
  holding.abort();
  await reader.closed.catch(() => {});
  await Promise.all([...backlog, other]);
  t.same(order, ['b1', 'a1', 'a2', 'a3'], 'the other tenant\'s request took the first free slot');

  // A request's priority (vLLM's field) orders its tenant's queue: lower first.
  const holding2 = new AbortController();
  const blocker2 = await post(0, chat('block', { max_tokens: 1900, stream: true }), holding2.signal);
  const reader2 = blocker2.body!.getReader();
  await reader2.read();
  const ranked: string[] = [];
  const later = post(0, chat('later', { priority: 5 })).then((r) => r.text()).then(() => ranked.push('priority 5'));
  await until('the priority 5 request queued (requests_deferred 1)', async () => (await deferred()) >= 1);
  const sooner = post(0, chat('sooner', { priority: 0 })).then((r) => r.text()).then(() => ranked.push('priority 0'));
  await until('the priority 0 request queued (requests_deferred 2)', async () => (await deferred()) >= 2);
  holding2.abort();
  await reader2.closed.catch(() => {});
  await Promise.all([later, sooner]);
  t.same(ranked, ['priority 0', 'priority 5'], 'the later request with the lower priority went first');
});

t.test('embeddings: metered as their usage counts them, on the tenant\'s tasks', async (t) => {
  const embed = await startTestServer(models.embedding, { embedding: true, ctxSize: 512, apiKeys: ['sk-embed'] });
  t.teardown(() => embed.close());
  const res = await postJson(`${embed.base}/v1/embeddings`, { input: ['one text', 'and another one'] }, { authorization: 'Bearer sk-embed' });
  t.equal(res.status, 200);
  const text = await (await fetch(`${embed.base}/metrics`, { headers: { authorization: 'Bearer sk-embed' } })).text();
  t.equal(series(text, 'tenant_prompt_tokens_total', 'key-1'), res.body.usage.prompt_tokens);
  t.equal(series(text, 'tenant_requests_total', 'key-1'), 1);
});
