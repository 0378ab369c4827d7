import t from 'tap';
import { ensureTestModels, CHAT_VOCAB_SIZE } from '../fixtures/models.js';
import { postJson, startLoadingServer, startTestServer } from '../helpers/inference-server.js';
import { llamaSimpleGreedy } from '../helpers/reference.js';

const models = await ensureTestModels();
const { base, close } = await startTestServer(models.chat);
t.teardown(close);

t.test('the port is open while the model loads: health is 503 "Loading model", then 200', async (t) => {
  const loading = await startLoadingServer({ apiKeys: ['k'] });
  for (const path of ['/health', '/v1/health']) {
    const res = await fetch(loading.base + path);
    t.equal(res.status, 503, path);
    t.same(await res.json(), { error: { code: 503, message: 'Loading model', type: 'unavailable_error' } });
  }
  const completion = await postJson(`${loading.base}/completion`, { prompt: 'x' });
  t.equal(completion.status, 503, 'other endpoints are 503 too, before the API key check');
  // Release the loader with bytes that are not a model: loading fails cleanly.
  const failed = t.rejects(loading.server.ready, /not a GGUF file/);
  await loading.failLoad();
  await failed;
});

t.test('health is 200 {"status":"ok"} when ready', async (t) => {
  for (const path of ['/health', '/v1/health']) {
    const res = await fetch(base + path);
    t.equal(res.status, 200);
    t.same(await res.json(), { status: 'ok' });
  }
});

t.test('POST /tokenize returns token ids, with pieces when asked', async (t) => {
  const plain = await postJson(`${base}/tokenize`, { content: 'Hello world' });
  t.equal(plain.status, 200);
  t.same(plain.body, { tokens: [8302, 5810] });
  const pieces = await postJson(`${base}/tokenize`, { content: 'Hello world', with_pieces: true });
  t.same(pieces.body, { tokens: [{ id: 8302, piece: 'Hello' }, { id: 5810, piece: ' world' }] });
  const bytes = await postJson(`${base}/tokenize`, { content: '🦙', with_pieces: true });
  t.same(bytes.body.tokens[0], { id: bytes.body.tokens[0].id, piece: [0xf0, 0x9f] }, 'a piece that is not valid UTF-8 is its bytes');
});

t.test('POST /tokenize add_special inserts BOS', async (t) => {
  // This vocabulary does not add BOS by default: add_special follows the model's rule.
  const res = await postJson(`${base}/tokenize`, { content: 'Hello', add_special: true });
  t.same(res.body, { tokens: [8302] });
  const special = await postJson(`${base}/tokenize`, { content: '<|im_end|>' });
  t.same(special.body, { tokens: [49153] }, 'special-token text is parsed');
});

t.test('POST /detokenize returns the text of tokens', async (t) => {
  const res = await postJson(`${base}/detokenize`, { tokens: [8302, 5810] });
  t.equal(res.status, 200);
  t.same(res.body, { content: 'Hello world' });
  const bad = await postJson(`${base}/detokenize`, { tokens: [CHAT_VOCAB_SIZE + 5] });
  t.equal(bad.status, 400);
  t.equal(bad.body.error.type, 'invalid_request_error');
});

t.test('POST /completion returns the native completion response, greedy as llama.cpp', async (t) => {
  const reference = await llamaSimpleGreedy(models.chat, 'Hello', 12);
  const res = await postJson(`${base}/completion`, { prompt: 'Hello', n_predict: 12, temperature: 0 });
  t.equal(res.status, 200);
  const b = res.body;
  t.equal(b.content, reference);
  t.equal(b.stop, true);
  t.equal(b.stop_type, 'limit');
  t.equal(b.stopping_word, '');
  t.equal(b.model, 'tiny-chat.gguf');
  t.equal(b.tokens_evaluated, 1);
  t.equal(b.tokens_predicted, 12);
  t.type(b.tokens_cached, 'number');
  t.equal(b.truncated, false);
  t.equal(b.timings.predicted_n, 12);
  t.type(b.timings.prompt_ms, 'number');
  t.type(b.timings.predicted_per_second, 'number');
});

t.test('bad input is a 400 with a JSON error body, never a crash', async (t) => {
  const cases: Array<[string, string | object, RegExp]> = [
    ['malformed JSON', '{"prompt": "x"', /Malformed JSON/],
    ['a wrong type', { prompt: 'x', n_predict: 'ten' }, /n_predict/],
    ['a missing field', { n_predict: 3 }, /prompt/],
    ['a body that is not an object', '[1,2,3]', /Invalid/],
    ['an unknown sampler', { prompt: 'x', samplers: ['top_k', 'bogus'] }, /samplers/],
    ['a token outside the vocabulary', { prompt: [1, CHAT_VOCAB_SIZE] }, /Invalid token id/],
  ];
  for (const [name, body, message] of cases) {
    const res = await postJson(`${base}/completion`, body);
    t.equal(res.status, 400, name);
    t.equal(res.body.error.code, 400, name);
    t.equal(res.body.error.type, 'invalid_request_error', name);
    t.match(res.body.error.message, message, name);
  }
  const health = await fetch(`${base}/health`);
  t.equal(health.status, 200, 'the server is still up');
});

t.test('an oversized body is 413', async (t) => {
  const res = await postJson(`${base}/completion`, { prompt: 'x'.repeat(2 * 1024 * 1024) });
  t.equal(res.status, 413);
  t.equal(res.body.error.code, 413);
});

t.test('unknown routes are 404 in the same error shape', async (t) => {
  const res = await fetch(`${base}/nope`);
  t.equal(res.status, 404);
  t.same((await res.json()).error.type, 'not_found_error');
});
