// Resumable streams (llama-server's X-Conversation-Id, GET/DELETE /v1/stream,
// POST /v1/streams/lookup): a streamed completion that names its conversation is teed into a
// session that outlives its client, and can be replayed from any byte offset; without the
// header a client that disconnects still cancels its request at once.
import { copyFileSync, mkdtempSync, mkdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { native } from '../../src/native/binding.js';
import { startRouterServer, type RouterServer } from '../../src/inference/multi-model/server.js';
import type { ModelEvent } from '../../src/inference/multi-model/model-registry.js';
import { StreamSessions } from '../../src/inference/streams/stream-sessions.js';
import { ensureTestModels } from '../fixtures/models.js';
import { chatStreamTokens, sameGreedyAnswer } from '../helpers/greedy.js';
import { parseSse, postJson, startTestServer } from '../helpers/inference-server.js';
import { REPO_ROOT } from '../helpers/reference.js';

const models = await ensureTestModels();
const server = await startTestServer(models.chat, { ctxSize: 512, parallel: 2 });
t.teardown(() => server.close());
const { base } = server;

// With the top two log-probabilities of each token: greedy answers computed over other cells or in
// other batches are compared up to their first near tie (test/helpers/greedy.ts).
const CHAT = { messages: [{ role: 'user', content: 'hello' }], stream: true, max_tokens: 24, temperature: 0, logprobs: true, top_logprobs: 2 };
/** Long enough that a client dropping after its first chunk leaves it running. */
const LONG_CHAT = { ...CHAT, max_tokens: 200, ignore_eos: true };
const streamUrl = (id: string, from?: number | string): string => `${base}/v1/stream?conv_id=${encodeURIComponent(id)}${from === undefined ? '' : `&from=${from}`}`;

/** The `content` of a chat completion stream's deltas, concatenated. */
function contentOf(sse: string): string {
  return parseSse(sse).map((e: any) => (e === '[DONE]' ? '' : e.choices?.[0]?.delta?.content ?? '')).join('');
}

/** Starts a streamed request, reads its first chunk, then drops the connection. Returns the bytes it read. */
async function disconnectAfterFirstChunk(url: string, body: unknown, headers: Record<string, string>): Promise<Buffer> {
  const controller = new AbortController();
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body), signal: controller.signal });
  const first = await res.body!.getReader().read();
  controller.abort();
  return Buffer.from(first.value ?? []);
}

/** Resolves when the engine next cancels a task (the server's reaction to a stop or a disconnect). */
function nextCancel(t: Test): Promise<void> {
  const engine = server.server.host.ready().engine.native;
  t.teardown(() => { delete (engine as { cancel?: unknown }).cancel; });
  return new Promise<void>((resolve) => {
    const cancel = engine.cancel.bind(engine);
    Object.defineProperty(engine, 'cancel', { configurable: true, value: (id: number) => { cancel(id); resolve(); } });
  });
}

const normal = await (await fetch(`${base}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(CHAT) })).text();
const normalTokens = chatStreamTokens(parseSse(normal));
const long = await (await fetch(`${base}/v1/chat/completions`, { method: 'POST', body: JSON.stringify(LONG_CHAT) })).text();
const longTokens = chatStreamTokens(parseSse(long));

t.test('a client that disconnects with X-Conversation-Id leaves the generation running into its session', async (t) => {
  const received = await disconnectAfterFirstChunk(`${base}/v1/chat/completions`, LONG_CHAT, { 'X-Conversation-Id': 'conv-a::chat' });
  const during = await postJson(`${base}/v1/streams/lookup`, { conversation_ids: ['conv-a::chat'] });
  t.equal(during.body[0].is_done, false, 'the client left while the generation ran');
  // The replay follows the session live until the generation ends.
  const replay = await fetch(streamUrl('conv-a::chat', 0));
  t.equal(replay.status, 200);
  t.match(replay.headers.get('content-type'), /^text\/event-stream/);
  const bytes = Buffer.from(await replay.arrayBuffer());
  const text = bytes.toString('utf8');
  t.ok(received.length > 0 && bytes.subarray(0, received.length).equals(received), 'the replay starts with the bytes the client received before it left');
  // The whole generation: every token the task generated after the client left, each once, in
  // order (the content is its tokens' bytes), and the greedy answer of the request.
  const tokens = chatStreamTokens(parseSse(text));
  t.equal(tokens.length, LONG_CHAT.max_tokens, 'every token of the generation');
  t.equal(contentOf(text), Buffer.from(tokens.flatMap((tk) => tk.bytes)).toString('utf8'), 'the content is the generated tokens\' text, nothing lost or repeated');
  sameGreedyAnswer(t, tokens, longTokens, 'the whole generation, as a normal greedy stream of the same request');
  t.equal(parseSse(text).at(-1), '[DONE]', 'it ran to its end');
  t.ok(text.endsWith('data: [DONE]\n\n\n\n'), 'the last event and its tail');

  const offset = text.indexOf('\n\n') + 2;
  const resumed = Buffer.from(await (await fetch(streamUrl('conv-a::chat', offset))).arrayBuffer());
  t.same(resumed, bytes.subarray(offset), 'from=N resumes at byte N');
  t.equal((await (await fetch(streamUrl('conv-a::chat', bytes.length))).text()), '', 'from the end: nothing');

  const lookup = await postJson(`${base}/v1/streams/lookup`, { conversation_ids: ['conv-a', 'unknown'] });
  t.equal(lookup.status, 200);
  t.equal(lookup.body.length, 1, 'only the ids asked about, each matching "<id>::<model>"');
  const [entry] = lookup.body;
  t.same(Object.keys(entry).sort(), ['completed_at', 'conversation_id', 'is_done', 'started_at', 'total_bytes']);
  t.equal(entry.conversation_id, 'conv-a::chat');
  t.equal(entry.is_done, true);
  t.equal(entry.total_bytes, bytes.length);
  t.ok(entry.started_at > 0 && entry.completed_at >= entry.started_at);
  t.same((await postJson(`${base}/v1/streams/lookup`, { conversation_ids: ['other'] })).body, []);

  const stop = await fetch(streamUrl('conv-a::chat'), { method: 'DELETE' });
  t.equal(stop.status, 204);
  const gone = await fetch(streamUrl('conv-a::chat', 0));
  t.equal(gone.status, 404);
  t.same(await gone.json(), { error: { code: 404, message: 'Stream not found or expired', type: 'not_found_error' } });
  t.same((await postJson(`${base}/v1/streams/lookup`, { conversation_ids: ['conv-a'] })).body, []);
});

t.test('DELETE /v1/stream stops a running generation and frees its slot', async (t) => {
  const res = await fetch(`${base}/completion`, {
    method: 'POST', headers: { 'X-Conversation-Id': 'conv-b' },
    body: JSON.stringify({ prompt: 'forever', n_predict: 100000, ignore_eos: true, stream: true }),
  });
  const reader = res.body!.getReader();
  await reader.read();
  const cancelled = nextCancel(t);
  t.equal((await fetch(streamUrl('conv-b'), { method: 'DELETE' })).status, 204);
  await cancelled;
  while (!(await reader.read()).done);
  t.pass('the task was cancelled and the POST\'s stream ended');
  t.equal((await fetch(streamUrl('conv-b', 0))).status, 404);
});

t.test('a newer request of the same conversation replaces and stops the older one', async (t) => {
  const first = await fetch(`${base}/completion`, {
    method: 'POST', headers: { 'X-Conversation-Id': 'conv-c' },
    body: JSON.stringify({ prompt: 'forever', n_predict: 100000, ignore_eos: true, stream: true }),
  });
  const reader = first.body!.getReader();
  await reader.read();
  // The newer request runs beside the older one: another batch than the normal stream's.
  const second = await (await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'X-Conversation-Id': 'conv-c' }, body: JSON.stringify(CHAT) })).text();
  sameGreedyAnswer(t, chatStreamTokens(parseSse(second)), normalTokens, 'the newer request');
  while (!(await reader.read()).done);
  const replay = await (await fetch(streamUrl('conv-c', 0))).text();
  t.equal(replay, second, 'the session is the newer request\'s: its bytes');
  await fetch(streamUrl('conv-c'), { method: 'DELETE' });
});

t.test('without the header a client that disconnects cancels its request at once', async (t) => {
  const cancelled = nextCancel(t);
  await disconnectAfterFirstChunk(`${base}/completion`, { prompt: 'forever', n_predict: 100000, ignore_eos: true, stream: true }, {});
  await cancelled;
  t.pass('the task was cancelled on the disconnect');
});

t.test('bad input to the stream routes is a 400 with its reason', async (t) => {
  const cases: Array<[string, string, string]> = [
    ['GET', `${base}/v1/stream`, 'Missing conversation id in path'],
    ['DELETE', `${base}/v1/stream`, 'Missing conversation id in path'],
    ['GET', streamUrl('conv-e', 'abc'), "Invalid 'from' offset"],
    ['GET', streamUrl('conv-e', '-1'), "Invalid 'from' offset"],
  ];
  // As llama-server, the offset is checked once the session is found.
  await (await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { 'X-Conversation-Id': 'conv-e' }, body: JSON.stringify(CHAT) })).text();
  for (const [method, url, message] of cases) {
    const res = await fetch(url, { method });
    t.equal(res.status, 400, `${method} ${url}`);
    t.same(await res.json(), { error: { code: 400, message, type: 'invalid_request_error' } });
  }
  const notJson = await postJson(`${base}/v1/streams/lookup`, '{nope');
  t.equal(notJson.status, 400);
  t.equal(notJson.body.error.type, 'invalid_request_error');
  t.equal((await fetch(streamUrl('never-seen', 0))).status, 404);
  t.equal((await fetch(streamUrl('never-seen'), { method: 'DELETE' })).status, 204, 'a stop is idempotent, as llama-server');
});

t.test('a session keeps the last bytes within its cap and is collected after the retention time', async (t) => {
  const sessions = new StreamSessions({ ttlSeconds: 300, maxBytes: 10 });
  t.teardown(() => sessions.close());
  const session = sessions.open('c');
  session.append('0123456789');
  session.append('abcde');
  t.equal(session.totalBytes, 15);
  t.equal(session.droppedBytes, 5);
  t.equal(session.readFrom(0), null, 'an offset dropped from the front is lost');
  t.equal(session.readFrom(5)!.toString(), '56789abcde');
  t.equal(session.readFrom(12)!.toString(), 'cde');
  session.finalize();
  t.equal(session.append('more'), false, 'a finished session takes no more bytes');
  sessions.collect(session.completedAt + 299);
  t.equal(sessions.size, 1, 'kept within the retention time');
  sessions.collect(session.completedAt + 300);
  t.equal(sessions.size, 0, 'collected after it');
  const older = sessions.open('d');
  const newer = sessions.open('d');
  t.equal(older.signal.aborted, true, 'the older session of a conversation is stopped');
  t.equal(older.isDone, true);
  t.equal(sessions.get('d'), newer);
});

t.test('router mode forwards the stream routes to the child that owns the conversation', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'streams-router-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  mkdirSync(join(dir, 'models'));
  copyFileSync(models.chat, join(dir, 'models', 'chat.gguf'));
  const params = native.ServerParams.parse(['llama-server', '--models-dir', join(dir, 'models'), '-c', '512', '-np', '2', '-t', '1']);
  const router: RouterServer = await startRouterServer({
    host: '127.0.0.1', port: 0, apiKeys: [], maxBodyBytes: 1 << 20, autoload: true, modelsMax: 0, buildInfo: 'b1-test',
    readSpecs: () => params.routerModels(),
    command: [process.execPath, '--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), join(REPO_ROOT, 'src', 'inference', 'server-main.ts')],
    childArgs: [], log: () => {},
  });
  t.teardown(() => router.close());
  const rbase = `http://127.0.0.1:${router.port}`;
  const id = 'conv-r::chat';
  const rstream = (from?: number): string => `${rbase}/v1/stream?conv_id=${encodeURIComponent(id)}${from === undefined ? '' : `&from=${from}`}`;
  const post = (): Promise<Response> => fetch(`${rbase}/v1/chat/completions`, { method: 'POST', headers: { 'X-Conversation-Id': id }, body: JSON.stringify({ ...CHAT, model: 'chat' }) });

  // A stop while the model loads: GET answers 503, and the parked request fails with a 400.
  const loading = new Promise<void>((resolve) => {
    const on = (e: ModelEvent): void => {
      if (e.model !== 'chat' || (e.data as { status?: string }).status !== 'loading') return;
      router.registry.off('event', on);
      resolve();
    };
    router.registry.on('event', on);
  });
  const parked = post();
  await loading;
  const retry = await fetch(rstream(0));
  t.equal(retry.status, 503);
  t.equal((await retry.json()).error.type, 'unavailable_error');
  t.equal((await fetch(rstream(), { method: 'DELETE' })).status, 204);
  const cancelled = await parked;
  t.equal(cancelled.status, 400);
  t.match((await cancelled.json()).error.message, /cancelled/);
  t.equal((await fetch(rstream(0))).status, 404);

  // Once loaded: the stream's bytes are replayed by the owning child through the router.
  const streamed = await (await post()).text();
  sameGreedyAnswer(t, chatStreamTokens(parseSse(streamed)), normalTokens, 'through the router');
  const replay = await fetch(rstream(0));
  t.equal(replay.status, 200);
  t.equal(await replay.text(), streamed);
  const lookup = await postJson(`${rbase}/v1/streams/lookup`, { conversation_ids: [id, 'unknown'] });
  t.same(lookup.body.map((e: any) => [e.conversation_id, e.is_done, e.total_bytes]), [[id, true, Buffer.byteLength(streamed)]]);
  t.equal((await fetch(rstream(), { method: 'DELETE' })).status, 204);
  t.equal((await fetch(rstream(0))).status, 404);
  t.same((await postJson(`${rbase}/v1/streams/lookup`, { conversation_ids: [id] })).body, []);
});
