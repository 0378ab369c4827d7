import OpenAI from 'openai';
import t from 'tap';
import { startInferenceServer } from '../../src/inference/server.js';
import { resolveRuntime } from '../../src/inference/options.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';
import { startLlamaServer } from '../helpers/llama-server.js';

const models = await ensureTestModels();
const embed = await startTestServer(models.embedding, { embedding: true, ctxSize: 512 });
const rerank = await startTestServer(models.reranker, { rerank: true, ctxSize: 512 });
t.teardown(async () => {
  await embed.close();
  await rerank.close();
});

const norm = (v: number[], p: number) => v.reduce((s, x) => s + Math.abs(x) ** p, 0) ** (1 / p);

t.test('/v1/embeddings: one vector per input, of the model width, Euclidean norm 1', async (t) => {
  const res = await postJson(`${embed.base}/v1/embeddings`, { input: ['hello world', 'a second input'], model: 'x' });
  t.equal(res.status, 200);
  t.equal(res.body.object, 'list');
  t.equal(res.body.data.length, 2);
  res.body.data.forEach((d: any, i: number) => {
    t.equal(d.object, 'embedding');
    t.equal(d.index, i);
    t.equal(d.embedding.length, 64);
    t.ok(Math.abs(norm(d.embedding, 2) - 1) < 1e-5);
  });
  t.equal(res.body.model, 'tiny-bert-embed.gguf');
  t.ok(res.body.usage.prompt_tokens > 4);
  t.equal(res.body.usage.total_tokens, res.body.usage.prompt_tokens);
});

t.test('identical inputs give identical vectors alone, batched or concurrent, as llama-server does', async (t) => {
  // llama.cpp's CPU kernels may round the last bit differently when a sequence shares its batch
  // with others (the kernel tile a row lands in changes). llama-server has the same effect (its
  // result for a batched input varies with how its slots happened to be batched); ours is fixed
  // per request because a request's inputs are queued together. Differences stay below 1e-6.
  const raw = async (base: string, content: string | string[], i: number) =>
    (await postJson(`${base}/embedding`, { content, embd_normalize: -1 })).body[i].embedding[0] as number[];
  const ref = await startLlamaServer(['-m', models.embedding, '--embedding', '-c', '512']);
  t.teardown(ref.close);
  const batch = ['other', 'the same text', 'more words here'];
  const oursAlone = await raw(embed.base, 'the same text', 0);
  const oursBatched = await raw(embed.base, batch, 1);
  t.same(oursAlone, await raw(ref.base, 'the same text', 0), 'alone: bit for bit as llama-server');
  const theirsBatched = await raw(ref.base, batch, 1);
  t.ok(Math.max(...theirsBatched.map((x, j) => Math.abs(x - oursBatched[j]!))) < 1e-6, 'batched: within 1e-6 of llama-server');
  const diff = Math.max(...oursAlone.map((x, j) => Math.abs(x - oursBatched[j]!)));
  t.ok(diff < 1e-6, `alone vs batched differ by at most ${diff}`);
  for (let i = 0; i < 3; i++) t.same(await raw(embed.base, batch, 1), oursBatched, 'the same request gives the same vectors');
  const concurrent = await Promise.all(Array.from({ length: 6 }, (_, i) => postJson(`${embed.base}/v1/embeddings`, { input: i % 2 ? 'the same text' : `noise ${i}` })));
  const alone = (await postJson(`${embed.base}/v1/embeddings`, { input: 'the same text' })).body.data[0].embedding as number[];
  for (const i of [1, 3, 5]) {
    const v = concurrent[i]!.body.data[0].embedding as number[];
    t.ok(Math.max(...v.map((x, j) => Math.abs(x - alone[j]!))) < 1e-6, `concurrent request ${i}`);
  }
});

t.test('base64 encoding carries the same floats', async (t) => {
  const floats = (await postJson(`${embed.base}/v1/embeddings`, { input: 'hi' })).body.data[0].embedding;
  const b64 = (await postJson(`${embed.base}/v1/embeddings`, { input: 'hi', encoding_format: 'base64' })).body.data[0].embedding;
  const buf = Buffer.from(b64, 'base64');
  t.equal(buf.length, 64 * 4);
  t.same(Array.from({ length: 64 }, (_, i) => buf.readFloatLE(i * 4)), floats);
});

t.test('token arrays are accepted as input', async (t) => {
  const tokens = (await postJson(`${embed.base}/tokenize`, { content: 'hello world', add_special: true })).body.tokens;
  const a = (await postJson(`${embed.base}/v1/embeddings`, { input: 'hello world' })).body.data[0].embedding;
  const b = (await postJson(`${embed.base}/v1/embeddings`, { input: tokens })).body.data[0].embedding;
  t.same(b, a);
});

t.test('/embedding: embd_normalize -1, 0, 1, 2 and p-norms', async (t) => {
  const get = async (n?: number) => (await postJson(`${embed.base}/embedding`, { content: 'normalise me', ...(n === undefined ? {} : { embd_normalize: n }) })).body[0].embedding[0] as number[];
  const raw = await get(-1);
  t.ok(Math.abs(norm(raw, 2) - 1) > 1e-3, 'raw vectors are not unit length');
  t.ok(Math.abs(norm(await get(), 2) - 1) < 1e-5, 'default is Euclidean');
  t.ok(Math.abs(norm(await get(2), 2) - 1) < 1e-5);
  t.ok(Math.abs(norm(await get(1), 1) - 1) < 1e-5, 'taxicab');
  t.ok(Math.abs(norm(await get(3), 3) - 1) < 1e-5, 'p-norm 3');
  const maxAbs = Math.max(...(await get(0)).map(Math.abs));
  t.ok(Math.abs(maxAbs - 32760) < 0.01, 'max-abs scaled to int16');
  const res = await postJson(`${embed.base}/embedding`, { content: ['a', 'b'] });
  t.same(res.body.map((r: any) => r.index), [0, 1]);
});

t.test('pooling none returns one vector per token', async (t) => {
  const none = await startTestServer(models.embedding, { embedding: true, pooling: 'none', ctxSize: 512 });
  t.teardown(none.close);
  const tokens = (await postJson(`${none.base}/tokenize`, { content: 'one two three', add_special: true })).body.tokens;
  const res = await postJson(`${none.base}/embedding`, { content: 'one two three' });
  t.equal(res.body[0].embedding.length, tokens.length);
  t.ok(res.body[0].embedding.every((v: number[]) => v.length === 64));
  const oai = await postJson(`${none.base}/v1/embeddings`, { input: 'x' });
  t.equal(oai.status, 400);
  t.match(oai.body.error.message, /not OAI compatible/);
});

t.test('the openai client embeddings.create works', async (t) => {
  const client = new OpenAI({ baseURL: `${embed.base}/v1`, apiKey: 'x' });
  const res = await client.embeddings.create({ model: 'tiny', input: ['alpha', 'beta'] });
  t.equal(res.data.length, 2);
  t.equal(res.data[0]!.embedding.length, 64);
  const b64 = await client.embeddings.create({ model: 'tiny', input: 'alpha', encoding_format: 'base64' });
  t.equal(typeof b64.data[0]!.embedding, 'string');
});

t.test('bad embedding input is a 400', async (t) => {
  for (const body of [{ input: [] }, { input: [999999] }, { input: 5 }, { nope: 1 }]) {
    const res = await postJson(`${embed.base}/v1/embeddings`, body);
    t.equal(res.status, 400, JSON.stringify(body));
    t.equal(res.body.error.type, 'invalid_request_error');
  }
  const long = await postJson(`${embed.base}/v1/embeddings`, { input: Array.from({ length: 600 }, () => 1000) });
  t.equal(long.status, 400);
  t.equal(long.body.error.type, 'exceed_context_size_error');
  t.equal(long.body.error.message, 'input (600 tokens) is larger than the max context size (512 tokens). skipping');
});

t.test('an input longer than a physical batch is a 500 with llama-server\'s message', async (t) => {
  const small = await startTestServer(models.embedding, { embedding: true, parallel: 1, runtime: { ...resolveRuntime({ model: models.embedding }, false), ctxSize: 512, batchSize: 256, ubatchSize: 256 } });
  t.teardown(small.close);
  const res = await postJson(`${small.base}/v1/embeddings`, { input: Array.from({ length: 300 }, () => 1000) });
  t.equal(res.status, 500);
  t.same(res.body, { error: { code: 500, message: 'input (300 tokens) is too large to process. increase the physical batch size (current batch size: 256)', type: 'server_error' } });
});

t.test('an embedding server refuses generation with a clear error', async (t) => {
  for (const [path, body] of [['/completion', { prompt: 'x' }], ['/v1/completions', { prompt: 'x' }], ['/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }] }]] as const) {
    const res = await postJson(embed.base + path, body);
    t.equal(res.status, 501, path);
    t.equal(res.body.error.type, 'not_supported_error');
    t.match(res.body.error.message, /does not support completions/);
  }
});

t.test('without --embedding the embedding endpoints answer 501 and the server keeps running', async (t) => {
  const chat = await startTestServer(models.chat, { parallel: 1, ctxSize: 512 });
  t.teardown(chat.close);
  for (const path of ['/v1/embeddings', '/embedding']) {
    const res = await postJson(chat.base + path, { input: 'x', content: 'x' });
    t.equal(res.status, 501, path);
    t.match(res.body.error.message, /--embedding/);
  }
  const r = await postJson(`${chat.base}/v1/rerank`, { query: 'q', documents: ['d'] });
  t.equal(r.status, 501);
  t.match(r.body.error.message, /--rerank/);
  t.equal((await fetch(`${chat.base}/health`)).status, 200);
});

t.test('/v1/rerank: results sorted by score, top_n, return_text', async (t) => {
  const documents = ['a cat is a small animal', 'the stock market fell', 'what is a cat', 'dogs bark loudly'];
  const all = await postJson(`${rerank.base}/v1/rerank`, { query: 'what is a cat', documents });
  t.equal(all.status, 200);
  const scores = all.body.results.map((r: any) => r.relevance_score);
  t.equal(all.body.results.length, 4);
  t.same([...scores].sort((a: number, b: number) => b - a), scores, 'sorted by relevance_score');
  t.same(all.body.results.map((r: any) => r.index).sort(), [0, 1, 2, 3]);
  const top = await postJson(`${rerank.base}/rerank`, { query: 'what is a cat', documents, top_n: 2, return_text: true });
  t.equal(top.body.results.length, 2);
  t.same(top.body.results.map((r: any) => r.index), all.body.results.slice(0, 2).map((r: any) => r.index));
  t.equal(top.body.results[0].document.text, documents[top.body.results[0].index]);
  const ref = await startLlamaServer(['-m', models.reranker, '--rerank', '-c', '512']);
  t.teardown(ref.close);
  const theirs = (await postJson(`${ref.base}/v1/rerank`, { query: 'what is a cat', documents })).body.results;
  t.same(theirs.map((r: any) => r.index), all.body.results.map((r: any) => r.index), 'same ranking as llama-server');
  theirs.forEach((r: any, i: number) => t.ok(Math.abs(r.relevance_score - all.body.results[i].relevance_score) < 1e-5));
});

t.test('rerank with TEI\'s `texts` answers in TEI\'s shape, as llama-server (top_n, return_text)', async (t) => {
  const texts = ['a cat is a small animal', 'the stock market fell', 'what is a cat', 'dogs bark loudly'];
  const jina = await postJson(`${rerank.base}/rerank`, { query: 'what is a cat', documents: texts });
  const tei = await postJson(`${rerank.base}/rerank`, { query: 'what is a cat', texts });
  t.equal(tei.status, 200);
  t.same(tei.body, jina.body.results.map((r: any) => ({ index: r.index, score: r.relevance_score })));
  const top = await postJson(`${rerank.base}/rerank`, { query: 'what is a cat', texts, top_n: 2, return_text: true });
  t.same(top.body, tei.body.slice(0, 2).map((r: any) => ({ ...r, text: texts[r.index] })));
  t.equal((await postJson(`${rerank.base}/rerank`, { query: 'what is a cat', texts, top_n: 99 })).body.length, 4, 'top_n past the end gives them all');
  const ref = await startLlamaServer(['-m', models.reranker, '--rerank', '-c', '512']);
  t.teardown(ref.close);
  const theirs = (await postJson(`${ref.base}/rerank`, { query: 'what is a cat', texts, top_n: 3, return_text: true })).body;
  t.same(theirs.map((r: any) => [r.index, r.text]), tei.body.slice(0, 3).map((r: any) => [r.index, texts[r.index]]), 'the same shape and order as llama-server');
});

t.test('rerank input errors', async (t) => {
  const missing = await postJson(`${rerank.base}/v1/rerank`, { query: 'q' });
  t.equal(missing.status, 400);
  const empty = await postJson(`${rerank.base}/v1/rerank`, { query: 'q', documents: [] });
  t.equal(empty.status, 400);
  const wrong = await postJson(`${rerank.base}/v1/rerank`, { query: 'q', documents: [1, 2] });
  t.equal(wrong.status, 400);
  t.match(wrong.body.error.message, /documents\[0\]/);
});

t.test('--rerank on a model that is not a reranker fails at start-up', async (t) => {
  const server = await startInferenceServer({ runtime: resolveRuntime({ model: models.embedding }, false), host: '127.0.0.1', port: 0, parallel: 1, apiKeys: [], metrics: false, nPredict: -1, maxBodyBytes: 1 << 20, rerank: true });
  await t.rejects(server.ready, /is not a reranker/);
  await server.close();
});

t.test('embedding inputs take every prompt form of /completion, as llama-server', async (t) => {
  const text = await postJson(`${embed.base}/v1/embeddings`, { input: 'string' });
  const tokens = (await postJson(`${embed.base}/tokenize`, { content: 'string', add_special: true })).body.tokens as number[];
  for (const [input, count] of [
    ['', 1], ['string', 1], [[12, 34, 56], 1], [[12, 34, 'string', 56, 78], 1],
    [['string1', 'string2'], 2], [['string1', [12, 34, 56]], 2], [[[12, 34, 56], [12, 34, 56]], 2], [[[12, 34, 56], [12, 'string', 34, 56]], 2],
  ] as const) {
    const res = await postJson(`${embed.base}/v1/embeddings`, { input });
    t.equal(res.status, 200, JSON.stringify(input));
    t.equal(res.body.data.length, count, JSON.stringify(input));
  }
  const asTokens = await postJson(`${embed.base}/v1/embeddings`, { input: tokens });
  t.same(asTokens.body.data[0].embedding, text.body.data[0].embedding, 'the tokens of a text embed as the text');
  const native = await postJson(`${embed.base}/embeddings`, { input: 'string' });
  t.equal(native.status, 200, '/embeddings takes `input` as well as `content`');
  t.same(native.body, (await postJson(`${embed.base}/embeddings`, { content: 'string' })).body);
});
