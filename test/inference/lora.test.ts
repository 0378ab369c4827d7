import t from 'tap';
import { startInferenceServer } from '../../src/inference/server.js';
import { resolveRuntime } from '../../src/inference/options.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';

const models = await ensureTestModels();
const base = await startTestServer(models.chat, { parallel: 4, ctxSize: 2048 });
const lora = await startTestServer(models.chat, { parallel: 4, ctxSize: 2048, loras: [{ path: models.lora, scale: 0 }] });
t.teardown(async () => {
  await base.close();
  await lora.close();
});

const greedy = async (url: string, extra: object = {}, n = 8) =>
  (await postJson(`${url}/completion`, { prompt: 'Hello', n_predict: n, temperature: 0, return_tokens: true, cache_prompt: false, ...extra })).body.tokens as number[];

const setScale = (scale: number) => postJson(`${lora.base}/lora-adapters`, { lora_adapters: [{ path: models.lora, scale }] });

t.test('an adapter loaded without apply (scale 0) gives the base model output', async (t) => {
  t.same((await (await fetch(`${lora.base}/lora-adapters`)).json()), [{ id: 0, path: models.lora, scale: 0 }]);
  t.same(await greedy(lora.base), await greedy(base.base));
});

t.test('POST /lora-adapters re-scales at runtime; scale 1 changes the output, 0 restores it', async (t) => {
  const plain = await greedy(base.base);
  const res = await setScale(1);
  t.equal(res.status, 200);
  t.same(res.body, { success: true, lora_adapters: [{ id: 0, path: models.lora, scale: 1 }] });
  const applied = await greedy(lora.base);
  t.notSame(applied, plain, 'the adapter changes the next request');
  t.not(applied[0], plain[0], 'from the first token');
  await postJson(`${lora.base}/lora-adapters`, [{ id: 0, scale: 0 }]);
  t.same(await greedy(lora.base), plain, "llama-server's bare array form works too");
});

t.test('a request started before a change keeps its scales', async (t) => {
  await setScale(0);
  const expected = await greedy(lora.base, {}, 48);
  const controller = new AbortController();
  const res = await fetch(`${lora.base}/completion`, { method: 'POST', body: JSON.stringify({ prompt: 'Hello', n_predict: 48, temperature: 0, return_tokens: true, cache_prompt: false, stream: true }), signal: controller.signal });
  const reader = res.body!.getReader();
  await reader.read();
  await setScale(1);
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += new TextDecoder().decode(value);
  }
  const events = text.split('\n\n').filter((b) => b.startsWith('data: ')).map((b) => JSON.parse(b.slice(6)));
  const final = events.at(-1);
  const streamed = events.flatMap((e: any) => (e.stop ? [] : e.tokens));
  t.equal(final.tokens_predicted, 48);
  t.same(streamed.slice(-8), expected.slice(-8), 'the tail still follows the old scales');
  await setScale(0);
});

t.test('per-request lora overrides the server scales for that request only', async (t) => {
  await setScale(0);
  const plain = await greedy(lora.base);
  const withAdapter = await greedy(lora.base, { lora: [{ id: 0, scale: 1 }] });
  t.notSame(withAdapter, plain);
  t.same(await greedy(lora.base), plain, 'the next request is back to the server scales');
  await setScale(1);
  t.same(await greedy(lora.base, { lora: [] }), plain, 'adapters not listed run at 0');
  await setScale(0);
});

t.test('requests with different adapter scales run concurrently, each with its own scales', async (t) => {
  await setScale(0);
  const alone0 = await greedy(lora.base, { lora: [{ id: 0, scale: 0 }] }, 16);
  const alone1 = await greedy(lora.base, { lora: [{ id: 0, scale: 1 }] }, 16);
  const mixed = await Promise.all([0, 1, 0, 1].map((scale) => greedy(lora.base, { lora: [{ id: 0, scale }] }, 16)));
  t.same(mixed[0], alone0);
  t.same(mixed[1], alone1);
  t.same(mixed[2], alone0);
  t.same(mixed[3], alone1);
});

t.test('chat completions take a per-request lora too', async (t) => {
  const body = { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 6, temperature: 0 };
  const a = await postJson(`${lora.base}/v1/chat/completions`, { ...body, lora: [{ id: 0, scale: 0 }] });
  const b = await postJson(`${lora.base}/v1/chat/completions`, { ...body, lora: [{ id: 0, scale: 1 }] });
  t.not(a.body.choices[0].message.content, b.body.choices[0].message.content);
});

t.test('unknown adapters and bad scales are 400', async (t) => {
  const cases: Array<[unknown, RegExp]> = [
    [{ lora_adapters: [{ id: 7, scale: 1 }] }, /no loaded LoRA adapter has id 7/],
    [{ lora_adapters: [{ path: '/nope.gguf', scale: 1 }] }, /no loaded LoRA adapter has path/],
    [{ lora_adapters: [{ id: 0, scale: 'big' }] }, /scale/],
    [{ lora_adapters: [{ scale: 1 }] }, /"id" or "path"/],
    ['{"lora_adapters":[{"id":0,"scale":1e999}]}', /lora_adapters\[0\]\.scale/],
  ];
  for (const [body, message] of cases) {
    const res = await postJson(`${lora.base}/lora-adapters`, body);
    t.equal(res.status, 400, JSON.stringify(body));
    t.match(res.body.error.message, message);
  }
  const perRequest = await postJson(`${lora.base}/completion`, { prompt: 'x', lora: [{ id: 3, scale: 1 }] });
  t.equal(perRequest.status, 400);
  t.same((await (await fetch(`${lora.base}/lora-adapters`)).json())[0].scale, 0, 'a refused change changes nothing');
});

t.test('an adapter that does not match the model fails at start-up', async (t) => {
  const server = await startInferenceServer({ runtime: resolveRuntime({ model: models.chat }, false), host: '127.0.0.1', port: 0, parallel: 1, apiKeys: [], metrics: false, nPredict: -1, maxBodyBytes: 1 << 20, loras: [{ path: models.embedding, scale: 1 }] });
  await t.rejects(server.ready, /failed to load LoRA adapter/);
  await server.close();
  const missing = await startInferenceServer({ runtime: resolveRuntime({ model: models.chat }, false), host: '127.0.0.1', port: 0, parallel: 1, apiKeys: [], metrics: false, nPredict: -1, maxBodyBytes: 1 << 20, loras: [{ path: '/nope/adapter.gguf', scale: 1 }] });
  await t.rejects(missing.ready, /LoRA adapter file not found/);
  await missing.close();
});
