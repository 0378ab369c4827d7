import OpenAI from 'openai';
import t from 'tap';
import { CHATML_TEMPLATE, ensureTestModels } from '../fixtures/models.js';
import { parseSse, postJson, startTestServer } from '../helpers/inference-server.js';
import { startLlamaServer } from '../helpers/llama-server.js';
import { llamaSimpleGreedy } from '../helpers/reference.js';

const models = await ensureTestModels();
const { base, close } = await startTestServer(models.chat, { alias: 'tiny' });
t.teardown(close);
const client = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused' });
const messages = [{ role: 'system' as const, content: 'You are terse.' }, { role: 'user' as const, content: 'Say hi' }];
const rendered = '<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nSay hi<|im_end|>\n<|im_start|>assistant\n';

t.test('chat completions: greedy content equals llama.cpp on the templated prompt', async (t) => {
  t.match(CHATML_TEMPLATE, /im_start/);
  const reference = await llamaSimpleGreedy(models.chat, rendered, 12);
  const before = Math.floor(Date.now() / 1000);
  const res = await postJson(`${base}/v1/chat/completions`, { messages, max_tokens: 12, temperature: 0 });
  const after = Math.floor(Date.now() / 1000);
  t.equal(res.status, 200);
  const b = res.body;
  t.equal(b.object, 'chat.completion');
  t.match(b.id, /^chatcmpl-[A-Za-z0-9_-]{16}$/);
  t.ok(b.created >= before && b.created <= after, 'created is the request time in seconds');
  t.equal(b.model, 'tiny');
  t.equal(b.choices.length, 1);
  t.same(b.choices[0].message, { role: 'assistant', content: reference });
  t.equal(b.choices[0].finish_reason, 'length');
  t.equal(b.choices[0].index, 0);
  t.same(b.usage, { prompt_tokens: 20, completion_tokens: 12, total_tokens: 32, prompt_tokens_details: { cached_tokens: b.timings.cache_n } });
});

t.test('text completions: greedy text equals llama.cpp', async (t) => {
  const reference = await llamaSimpleGreedy(models.chat, 'Once upon a time', 10);
  const res = await postJson(`${base}/v1/completions`, { prompt: 'Once upon a time', max_tokens: 10, temperature: 0 });
  t.equal(res.status, 200);
  t.equal(res.body.object, 'text_completion');
  t.equal(res.body.choices[0].text, reference);
  t.equal(res.body.choices[0].finish_reason, 'length');
  t.equal(res.body.usage.completion_tokens, 10);
});

t.test('finish_reason is "stop" at end of generation and at a stop string', async (t) => {
  const eos = await postJson(`${base}/v1/chat/completions`, { messages, max_tokens: 5, temperature: 0, logit_bias: { '49153': 100 } });
  t.equal(eos.body.choices[0].finish_reason, 'stop');
  const full = await postJson(`${base}/v1/completions`, { prompt: 'Hello', max_tokens: 8, temperature: 0 });
  const stop = full.body.choices[0].text.slice(3, 6);
  const stopped = await postJson(`${base}/v1/completions`, { prompt: 'Hello', max_tokens: 8, temperature: 0, stop });
  t.equal(stopped.body.choices[0].finish_reason, 'stop');
  t.equal(stopped.body.choices[0].text, full.body.choices[0].text.slice(0, 3));
});

t.test('the openai client: chat, streamed chat and completions', async (t) => {
  const chat = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 6, temperature: 0 });
  t.equal(chat.choices[0]!.message.role, 'assistant');
  t.equal(chat.usage?.completion_tokens, 6);
  const stream = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 6, temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let role: string | undefined;
  let finish: string | null | undefined;
  let usage;
  for await (const chunk of stream) {
    if (chunk.choices[0]?.delta.role) role = chunk.choices[0].delta.role;
    text += chunk.choices[0]?.delta.content ?? '';
    if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
    if (chunk.usage) usage = chunk.usage;
  }
  t.equal(role, 'assistant');
  t.equal(text, chat.choices[0]!.message.content);
  t.equal(finish, 'length');
  t.same(usage, chat.usage);
  const completion = await client.completions.create({ model: 'tiny', prompt: 'Hello', max_tokens: 4, temperature: 0 });
  t.equal(completion.choices[0]!.finish_reason, 'length');
  t.equal(completion.usage?.completion_tokens, 4);
  const models = await client.models.list();
  t.equal(models.data[0]!.id, 'tiny');
});

t.test('streamed chat chunks: role first, content deltas, finish_reason, usage, [DONE]', async (t) => {
  const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ messages, max_tokens: 5, temperature: 0, stream: true, stream_options: { include_usage: true } }) });
  const events = parseSse(await res.text()) as any[];
  t.equal(events.at(-1), '[DONE]');
  const chunks = events.slice(0, -1);
  t.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && c.id === chunks[0].id));
  t.same(chunks[0].choices[0].delta, { role: 'assistant', content: null });
  const finishChunk = chunks.at(-2);
  t.equal(finishChunk.choices[0].finish_reason, 'length');
  t.same(finishChunk.choices[0].delta, {});
  t.same(chunks.at(-1).choices, []);
  t.same(chunks.at(-1).usage, { prompt_tokens: 20, completion_tokens: 5, total_tokens: 25, prompt_tokens_details: { cached_tokens: chunks.at(-1).timings.cache_n } });
  const noUsage = parseSse(await (await fetch(`${base}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ messages, max_tokens: 2, stream: true }) })).text()) as any[];
  t.notOk(noUsage.some((c) => c !== '[DONE]' && c.usage), 'no usage chunk unless asked');
});

t.test('streamed text completions end with finish_reason then [DONE]', async (t) => {
  const res = await fetch(`${base}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: 'Hello', max_tokens: 4, temperature: 0, stream: true }) });
  const events = parseSse(await res.text()) as any[];
  t.equal(events.at(-1), '[DONE]');
  t.ok(events.slice(0, -1).every((c) => c.object === 'text_completion'));
  t.equal(events.at(-2).choices[0].finish_reason, 'length');
});

t.test('response_format json_object and json_schema produce valid JSON', async (t) => {
  const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 8 }, n: { type: 'integer' } }, required: ['name', 'n'] };
  const res = await postJson(`${base}/v1/chat/completions`, { messages, max_tokens: 80, temperature: 0, response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
  const value = JSON.parse(res.body.choices[0].message.content);
  t.same(Object.keys(value).sort(), ['n', 'name']);
  t.ok(typeof value.name === 'string' && value.name.length <= 8 && Number.isInteger(value.n), 'the value follows the schema');
  // llama-server built from the same source answers the same requests with the same text.
  const ref = await startLlamaServer(['-m', models.chat, '-c', '4096', '-np', '1']);
  t.teardown(ref.close);
  const theirs = await postJson(`${ref.base}/v1/chat/completions`, { messages, max_tokens: 80, temperature: 0, response_format: { type: 'json_schema', json_schema: { name: 'x', schema } } });
  t.equal(res.body.choices[0].message.content, theirs.body.choices[0].message.content);
  const objSchema = { type: 'object', properties: { a: { type: 'boolean' } }, required: ['a'] };
  const obj = await postJson(`${base}/v1/chat/completions`, { messages, max_tokens: 60, temperature: 0, response_format: { type: 'json_object', schema: objSchema } });
  const theirsObj = await postJson(`${ref.base}/v1/chat/completions`, { messages, max_tokens: 60, temperature: 0, response_format: { type: 'json_object', schema: objSchema } });
  t.equal(obj.body.choices[0].message.content, theirsObj.body.choices[0].message.content);
  t.type(JSON.parse(obj.body.choices[0].message.content).a, 'boolean');
  const bad = await postJson(`${base}/v1/chat/completions`, { messages, response_format: { type: 'yaml' } });
  t.equal(bad.status, 400);
  t.match(bad.body.error.message, /response_format/);
});

t.test('logprobs and top_logprobs map to token probabilities', async (t) => {
  const res = await postJson(`${base}/v1/chat/completions`, { messages, max_tokens: 3, temperature: 0, logprobs: true, top_logprobs: 2 });
  const content = res.body.choices[0].logprobs.content;
  t.equal(content.length, 3);
  for (const item of content) {
    t.equal(item.top_logprobs.length, 2);
    t.equal(item.top_logprobs[0].token, item.token);
    t.ok(item.top_logprobs[0].logprob >= item.top_logprobs[1].logprob);
    t.ok(item.logprob <= 0);
  }
  t.equal(content.map((c: any) => c.token).join(''), res.body.choices[0].message.content);
  const native = await postJson(`${base}/completion`, { prompt: rendered, n_predict: 3, temperature: 0, n_probs: 2 });
  const pairs = (items: any[]) => items.map((i) => [i.id, i.logprob, i.top_logprobs.map((a: any) => [a.id, a.logprob])]);
  t.same(pairs(content), pairs(native.body.completion_probabilities), 'the same ids and logprobs as /completion');
  const text = await postJson(`${base}/v1/completions`, { prompt: 'Hello', max_tokens: 2, temperature: 0, logprobs: 2 });
  t.equal(text.body.choices[0].logprobs.tokens.length, 2);
  t.equal(Object.keys(text.body.choices[0].logprobs.top_logprobs[0]).length, 2);
});

t.test('n_probs (llama-server reads it for chat too) returns logprobs.content with that many alternatives, as /completion', async (t) => {
  const native = await postJson(`${base}/completion`, { prompt: 'Hello', n_predict: 3, temperature: 0, n_probs: 3 });
  const text = await postJson(`${base}/v1/completions`, { prompt: 'Hello', max_tokens: 3, temperature: 0, n_probs: 3 });
  t.same(text.body.choices[0].logprobs.tokens, native.body.completion_probabilities.map((p: any) => p.token));
  t.same(text.body.choices[0].logprobs.top_logprobs.map((m: any) => Object.keys(m).length), [3, 3, 3]);

  const chat = await postJson(`${base}/v1/chat/completions`, { messages, max_tokens: 3, temperature: 0, n_probs: 3 });
  const content = chat.body.choices[0].logprobs.content;
  t.equal(content.length, 3);
  for (const item of content) {
    t.equal(item.top_logprobs.length, 3);
    t.equal(item.top_logprobs[0].id, item.id, 'greedy took the most probable token');
    t.equal(item.top_logprobs[0].logprob, item.logprob);
  }
  const none = await postJson(`${base}/v1/chat/completions`, { messages, max_tokens: 2, temperature: 0 });
  t.equal(none.body.choices[0].logprobs, null, 'no probabilities unless asked');

  const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ messages, max_tokens: 3, temperature: 0, n_probs: 2, stream: true }) });
  const chunks = (parseSse(await res.text()) as any[]).filter((c) => c !== '[DONE]' && c.choices[0]?.delta?.content);
  const streamed = chunks.flatMap((c) => c.choices[0].logprobs.content);
  const plain = await postJson(`${base}/v1/chat/completions`, { messages, max_tokens: 3, temperature: 0, n_probs: 2 });
  t.same(streamed, plain.body.choices[0].logprobs.content, 'streamed chunks carry the same items');
});

t.test('n > 1 returns that many choices; too many is a clear 400', async (t) => {
  const res = await postJson(`${base}/v1/chat/completions`, { messages, max_tokens: 4, n: 3, seed: 5, temperature: 1 });
  t.equal(res.body.choices.length, 3);
  t.same(res.body.choices.map((c: any) => c.index), [0, 1, 2]);
  t.equal(res.body.usage.completion_tokens, 12);
  const tooMany = await postJson(`${base}/v1/chat/completions`, { messages, n: 9 });
  t.equal(tooMany.status, 400);
  t.match(tooMany.body.error.message, /"n"/);
});

t.test('chat request errors: missing messages, wrong role type, image without projector', async (t) => {
  const missing = await postJson(`${base}/v1/chat/completions`, { max_tokens: 3 });
  t.equal(missing.status, 400);
  t.match(missing.body.error.message, /messages/);
  const wrong = await postJson(`${base}/v1/chat/completions`, { messages: [{ role: 5, content: 'x' }] });
  t.equal(wrong.status, 400);
  t.match(wrong.body.error.message, /messages\[0\]\.role/);
  const image = await postJson(`${base}/v1/chat/completions`, { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }] });
  t.equal(image.status, 500, 'an image without a projector is llama-server\'s 500');
  t.match(image.body.error.message, /^image input is not supported - hint: .*mmproj/);
});

t.test('streamed chat with timings_per_token: timings on every token chunk, the engine\'s on the usage chunk, none on the first', async (t) => {
  const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ messages, max_tokens: 10, temperature: 0, stream: true, stream_options: { include_usage: true }, timings_per_token: true }) });
  const chunks = (parseSse(await res.text()) as any[]).filter((c) => c !== '[DONE]');
  t.notOk('timings' in chunks[0], 'the role chunk has none');
  const tokenChunks = chunks.filter((c) => c.choices[0]?.delta?.content);
  t.ok(tokenChunks.length > 0);
  const counts = tokenChunks.map((c) => c.timings.predicted_n);
  t.ok(counts.every((n, i) => n > (counts[i - 1] ?? 0) && n <= 10), `the tokens so far, growing: ${counts.join(', ')}`);
  const last = chunks.at(-1);
  t.same(last.choices, []);
  t.equal(last.timings.predicted_n, last.usage.completion_tokens);
  t.equal(last.timings.prompt_n + last.timings.cache_n, last.usage.prompt_tokens);
  t.ok(last.timings.prompt_per_second > 0 && last.timings.predicted_per_second > 0);
  t.notOk('timings' in chunks.at(-2), 'the finish chunk leaves them to the usage chunk');
});
