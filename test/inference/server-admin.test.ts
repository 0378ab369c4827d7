import t from 'tap';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';

const models = await ensureTestModels();
const { base, close } = await startTestServer(models.chat, { apiKeys: ['secret-one', 'secret-two'], alias: 'chatty', parallel: 3, ctxSize: 2048 });
t.teardown(close);
const auth = { authorization: 'Bearer secret-one' };

t.test('with --api-key every endpoint but health needs a key', async (t) => {
  t.equal((await fetch(`${base}/health`)).status, 200, 'health is public');
  t.equal((await fetch(`${base}/v1/health`)).status, 200);
  for (const [method, path] of [['GET', '/v1/models'], ['GET', '/props'], ['GET', '/slots'], ['GET', '/metrics'], ['POST', '/completion'], ['POST', '/tokenize'], ['POST', '/v1/chat/completions']]) {
    const res = await fetch(base + path, { method, body: method === 'POST' ? '{}' : undefined });
    t.equal(res.status, 401, `${method} ${path}`);
    t.same(await res.json(), { error: { code: 401, message: 'Invalid API Key', type: 'authentication_error' } });
  }
});

t.test('with --api-key a path that is not served answers 401 before routing, as llama-server (no 404 or 405 tells which routes exist)', async (t) => {
  for (const [method, path] of [['GET', '/no/such/route'], ['POST', '/v1/nothing'], ['DELETE', '/completion'], ['GET', '/tokenize'], ['PUT', '/v1/models']]) {
    const res = await fetch(base + path, { method, body: method === 'GET' ? undefined : '{}' });
    t.equal(res.status, 401, `${method} ${path} without a key`);
    t.same(await res.json(), { error: { code: 401, message: 'Invalid API Key', type: 'authentication_error' } });
  }
  const missing = await fetch(`${base}/no/such/route`, { headers: auth });
  t.equal(missing.status, 404, 'with the key, an unknown path is 404');
  t.same(await missing.json(), { error: { code: 404, message: 'No route for GET /no/such/route', type: 'not_found_error' } });
  t.equal((await fetch(`${base}/tokenize`, { headers: auth })).status, 405, 'with the key, a wrong method is 405');
});

t.test('a key is accepted as Bearer or X-Api-Key; a wrong or malformed one is not', async (t) => {
  t.equal((await fetch(`${base}/v1/models`, { headers: auth })).status, 200);
  t.equal((await fetch(`${base}/v1/models`, { headers: { authorization: 'Bearer secret-two' } })).status, 200, 'any configured key');
  t.equal((await fetch(`${base}/v1/models`, { headers: { 'x-api-key': 'secret-two' } })).status, 200);
  t.equal((await fetch(`${base}/v1/models`, { headers: { authorization: 'Bearer secret-on' } })).status, 401, 'a prefix is not the key');
  t.equal((await fetch(`${base}/v1/models`, { headers: { authorization: 'Bearer secret-one-and-more' } })).status, 401);
  t.equal((await fetch(`${base}/v1/models`, { headers: { authorization: 'Basic secret-one' } })).status, 401);
  t.equal((await fetch(`${base}/v1/models`, { headers: { authorization: 'secret-one' } })).status, 401);
  t.equal((await fetch(`${base}/v1/models`, { headers: { authorization: 'Bearer ' } })).status, 401);
});

t.test('a CORS preflight (OPTIONS) is 200 with the CORS headers and needs no key, as in llama-server', async (t) => {
  const res = await fetch(`${base}/v1/chat/completions`, { method: 'OPTIONS', headers: { origin: 'http://example.test', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' } });
  t.equal(res.status, 200);
  t.equal(res.headers.get('access-control-allow-origin'), 'http://example.test', 'any origin, with credentials: the origin is echoed');
  t.equal(res.headers.get('access-control-allow-credentials'), 'true');
  t.equal(res.headers.get('access-control-allow-methods'), 'GET, POST, DELETE, OPTIONS');
  t.equal(res.headers.get('access-control-allow-headers'), '*');
  t.equal(await res.text(), '');
});

t.test('HEAD of a GET endpoint is answered as GET without the body; it needs the key as GET does', async (t) => {
  const health = await fetch(`${base}/health`, { method: 'HEAD' });
  t.equal(health.status, 200);
  const props = await fetch(`${base}/props`, { method: 'HEAD' });
  t.equal(props.status, 401);
  const keyed = await fetch(`${base}/props`, { method: 'HEAD', headers: { authorization: 'Bearer secret-one' } });
  t.equal(keyed.status, 200);
  t.equal(await keyed.text(), '');
});

t.test('GET /v1/models lists the loaded model with its metadata', async (t) => {
  const body = await (await fetch(`${base}/v1/models`, { headers: auth })).json();
  t.equal(body.object, 'list');
  t.equal(body.data.length, 1);
  const m = body.data[0];
  t.equal(m.id, 'chatty');
  t.equal(m.object, 'model');
  t.equal(m.owned_by, 'llamacpp');
  t.same(m.meta, { vocab_type: 'bpe', n_vocab: 49154, n_ctx: 2048, n_ctx_train: 4096, n_embd: 64, n_params: 6365760, size: m.meta.size, architecture: 'llama' });
  t.same([m.aliases, m.tags], [['chatty'], []], 'as the vendored llama-server: the -a names and --tags');
  t.ok(m.meta.size > 0);
  t.same(body.models, [{
    name: 'chatty', model: 'chatty', modified_at: '', size: '', digest: '', type: 'model', description: '', tags: [''],
    capabilities: ['completion'], parameters: '',
    details: { parent_model: '', format: 'gguf', family: '', families: [''], parameter_size: '', quantization_level: '' },
  }], 'the Ollama-style half, as llama-server; no projector, so no multimodal capability');
});

t.test('GET /props: model path, chat template, defaults, modalities, slots', async (t) => {
  const p = await (await fetch(`${base}/props`, { headers: auth })).json();
  t.equal(p.model_path, models.chat);
  t.equal(p.model_alias, 'chatty');
  t.equal(p.total_slots, 3);
  t.same(p.modalities, { vision: false, video: false, audio: false });
  t.match(p.chat_template, /im_start/);
  t.equal(p.bos_token, '<|endoftext|>');
  t.equal(p.eos_token, '<|im_end|>');
  t.equal(p.default_generation_settings.n_ctx, 2048);
  const params = p.default_generation_settings.params;
  t.equal(params.temperature, 0.8);
  t.equal(params.top_k, 40);
  t.equal(params.top_p, 0.95);
  t.equal(params.min_p, 0.05);
  t.equal(params.n_predict, -1);
  t.same(params.samplers, ['penalties', 'dry', 'top_n_sigma', 'top_k', 'typ_p', 'top_p', 'min_p', 'xtc', 'temperature']);
  t.equal(params.post_sampling_probs, false);
  t.same(params.lora, []);
});

t.test('GET /slots reports each slot', async (t) => {
  await postJson(`${base}/completion`, { prompt: 'warm', n_predict: 2, id_slot: 2 }, auth);
  const slots = await (await fetch(`${base}/slots`, { headers: auth })).json();
  t.equal(slots.length, 3);
  t.same(slots.map((s: any) => s.id), [0, 1, 2]);
  t.ok(slots.every((s: any) => s.is_processing === false && s.n_ctx === 2048));
  t.ok(slots[2].n_cached_tokens > 0, 'slot 2 holds the last prompt');
});

t.test('GET /metrics is Prometheus text with requests, tokens, throughput, busy slots, queue', async (t) => {
  await postJson(`${base}/completion`, { prompt: 'count me', n_predict: 3 }, auth);
  const res = await fetch(`${base}/metrics`, { headers: auth });
  t.match(res.headers.get('content-type'), /^text\/plain/);
  const started = Number(res.headers.get('process-start-time-unix'));
  t.ok(started > 1.7e9 && started <= Date.now() / 1000, 'Process-Start-Time-Unix: when this process started, in seconds');
  const text = await res.text();
  for (const name of ['prompt_tokens_total', 'tokens_predicted_total', 'prompt_tokens_seconds', 'predicted_tokens_seconds', 'requests_total', 'requests_processing', 'requests_deferred', 'prompt_cache_saves_total', 'prompt_cache_buffer_reuses_total', 'prompt_cache_bytes']) {
    t.match(text, new RegExp(`^# TYPE llamacpp:${name} (counter|gauge)$`, 'm'), name);
    t.match(text, new RegExp(`^llamacpp:${name} [0-9.e+-]+$`, 'm'), name);
  }
  const predicted = Number(/^llamacpp:tokens_predicted_total (\S+)$/m.exec(text)![1]);
  t.ok(predicted >= 5);
});

t.test('/metrics is absent without --metrics', async (t) => {
  const plain = await startTestServer(models.chat, { metrics: false, parallel: 1, ctxSize: 512 });
  t.teardown(plain.close);
  const metrics = await fetch(`${plain.base}/metrics`);
  t.equal(metrics.status, 501, 'as llama-server without --metrics');
  t.same(await metrics.json(), { error: { code: 501, message: 'This server does not support metrics endpoint. Start it with `--metrics`', type: 'not_supported_error' } });
});

t.test('POST /apply-template renders messages with the model template', async (t) => {
  const res = await postJson(`${base}/apply-template`, { messages: [{ role: 'user', content: 'Hi' }, { role: 'assistant', content: 'Hello' }, { role: 'user', content: [{ type: 'text', text: 'How' }, { type: 'text', text: 'are you' }] }] }, auth);
  t.equal(res.status, 200);
  t.same(res.body, { prompt: '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nHow\nare you<|im_end|>\n<|im_start|>assistant\n' });
  const bad = await postJson(`${base}/apply-template`, { messages: 'nope' }, auth);
  t.equal(bad.status, 400);
});

t.test('--no-slots and POST /props without --props answer 501 naming the flag, after the key check', async (t) => {
  const plain = await startTestServer(models.chat, { slots: false, parallel: 1, ctxSize: 512, apiKeys: ['k'] });
  t.teardown(plain.close);
  t.equal((await fetch(`${plain.base}/slots`)).status, 401, 'the key comes first');
  const slots = await fetch(`${plain.base}/slots`, { headers: { authorization: 'Bearer k' } });
  t.equal(slots.status, 501);
  t.same(await slots.json(), { error: { code: 501, message: 'This server does not support slots endpoint. Start it with `--slots`', type: 'not_supported_error' } });
  const props = await postJson(`${plain.base}/props`, {}, { authorization: 'Bearer k' });
  t.equal(props.status, 501);
  t.same(props.body, { error: { code: 501, message: 'This server does not support changing global properties. Start it with `--props`', type: 'not_supported_error' } });
});

t.test('POST /props with --props succeeds', async (t) => {
  const settable = await startTestServer(models.chat, { props: true, parallel: 1, ctxSize: 512 });
  t.teardown(settable.close);
  const res = await postJson(`${settable.base}/props`, {});
  t.equal(res.status, 200);
  t.same(res.body, { success: true });
});

t.test('GET /slots?fail_on_no_slot=1 is 503 only when every slot is busy', async (t) => {
  const one = await startTestServer(models.chat, { parallel: 1, ctxSize: 512 });
  t.teardown(one.close);
  t.equal((await fetch(`${one.base}/slots?fail_on_no_slot=1`)).status, 200, 'an idle slot');
  const controller = new AbortController();
  const res = await fetch(`${one.base}/completion`, { method: 'POST', body: JSON.stringify({ prompt: 'forever', n_predict: -1, stream: true }), signal: controller.signal });
  const reader = res.body!.getReader();
  await reader.read();
  const busy = await fetch(`${one.base}/slots?fail_on_no_slot=1`);
  t.equal(busy.status, 503);
  t.same(await busy.json(), { error: { code: 503, message: 'no slot available', type: 'unavailable_error' } });
  controller.abort();
});

t.test('POST /v1/chat/completions/input_tokens counts the templated prompt', async (t) => {
  const messages = [{ role: 'user', content: 'Say hi' }];
  const rendered = await postJson(`${base}/apply-template`, { messages }, auth);
  const tokens = await postJson(`${base}/tokenize`, { content: rendered.body.prompt, add_special: true, parse_special: true }, auth);
  for (const path of ['/v1/chat/completions/input_tokens', '/chat/completions/input_tokens']) {
    const res = await postJson(`${base}${path}`, { messages }, auth);
    t.equal(res.status, 200, path);
    t.same(res.body, { input_tokens: tokens.body.tokens.length, object: 'response.input_tokens' });
  }
  const bad = await postJson(`${base}/v1/chat/completions/input_tokens`, { messages: 'hi' }, auth);
  t.equal(bad.status, 400);
});

t.test('--cors-origins localhost reflects loopback origins on every response and refuses others', async (t) => {
  const local = await startTestServer(models.chat, { cors: { origins: 'localhost', methods: 'GET, POST', headers: 'Authorization', credentials: false }, parallel: 1, ctxSize: 512 });
  t.teardown(local.close);
  const ok = await fetch(`${local.base}/health`, { headers: { origin: 'http://localhost:3000' } });
  t.equal(ok.headers.get('access-control-allow-origin'), 'http://localhost:3000');
  const evil = await fetch(`${local.base}/health`, { headers: { origin: 'http://localhost.evil.com' } });
  t.equal(evil.headers.get('access-control-allow-origin'), null);
  const preflight = await fetch(`${local.base}/completions`, { method: 'OPTIONS', headers: { origin: 'http://127.0.0.1', 'access-control-request-method': 'POST' } });
  t.equal(preflight.status, 200);
  t.same([preflight.headers.get('access-control-allow-origin'), preflight.headers.get('access-control-allow-methods'), preflight.headers.get('access-control-allow-headers'), preflight.headers.get('access-control-allow-credentials')],
    ['http://127.0.0.1', 'GET, POST', 'Authorization', 'false']);
});

t.test('--api-prefix puts every inference route under the prefix', async (t) => {
  const prefixed = await startTestServer(models.chat, { apiPrefix: '/llama', parallel: 1, ctxSize: 512 });
  t.teardown(prefixed.close);
  t.equal((await fetch(`${prefixed.base}/llama/health`)).status, 200);
  t.equal((await postJson(`${prefixed.base}/llama/completion`, { prompt: 'Hi', n_predict: 1 })).status, 200);
  t.equal((await fetch(`${prefixed.base}/health`)).status, 404);
});

t.test('/metrics counts cached prompt tokens apart, as llama-server, with its counters and gauges', async (t) => {
  const one = await startTestServer(models.chat, { parallel: 1, ctxSize: 512, metrics: true });
  t.teardown(one.close);
  let processed = 0;
  let cached = 0;
  for (let i = 0; i < 2; i++) {
    const res = await postJson(`${one.base}/completion`, { prompt: 'the quick brown fox jumps over the lazy dog', n_predict: 4 });
    processed += res.body.timings.prompt_n;
    cached += res.body.timings.cache_n;
  }
  t.ok(cached > 0, 'the second request reused the first one\'s prompt');
  const text = await (await fetch(`${one.base}/metrics`)).text();
  const value = (name: string) => Number(new RegExp(`^llamacpp:${name} (\\S+)$`, 'm').exec(text)?.[1]);
  t.equal(value('prompt_tokens_total'), processed);
  t.equal(value('prompt_tokens_cached_total'), cached);
  t.ok(value('n_tokens_max') >= 9 + 4 - 1, 'the longest sequence');
  t.equal(value('n_busy_slots_per_decode'), 1, 'one busy slot in every decode');
  for (const name of ['spec_decode_num_draft_tokens_total', 'spec_decode_num_accepted_tokens_total', 'spec_decode_num_drafts_total']) t.equal(value(name), 0, name);
  t.match(text, /^# TYPE llamacpp:n_busy_slots_per_decode gauge$/m);
});
