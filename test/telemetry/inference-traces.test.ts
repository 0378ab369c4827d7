// inference-server's traces, received over OTLP/HTTP JSON from a real server on the generated
// models: one GenAI SERVER span per request with the conventions' attributes (usage equal to the
// response's), its queue wait, prompt processing and generation children (an embedding input's
// first two), streams ended with the stream, errors typed, a client's traceparent continued, a
// handler's tenant recorded.
import t from 'tap';
import { startHttpServer } from '../../src/http/server.js';
import { flushTracing, setRequestTenant, startTracing, stopTracing, tracingEnabled } from '../../src/telemetry/tracing.js';
import { ensureTemplateModels, ensureTestModels } from '../fixtures/models.js';
import { parseSse, postJson, startTestServer } from '../helpers/inference-server.js';
import { OtlpReceiver, type ReceivedSpan } from './otlp-receiver.js';

/** OTLP's SPAN_KIND_SERVER (the API's SpanKind.SERVER is 1). */
const SERVER = 2;
const STATUS_UNSET = 0;
const STATUS_ERROR = 2;

const receiver = await OtlpReceiver.start();
process.env['OTEL_EXPORTER_OTLP_ENDPOINT'] = receiver.url;
process.env['OTEL_EXPORTER_OTLP_PROTOCOL'] = 'http/json';
process.env['OTEL_EXPORTER_OTLP_HEADERS'] = 'x-collector-token=secret-1';
delete process.env['OTEL_SERVICE_NAME'];
t.equal(await startTracing('inference-server'), true, 'an endpoint in the environment turns tracing on');

const models = await ensureTestModels();
const chat = await startTestServer(models.chat, { ctxSize: 1024 });
const embed = await startTestServer(models.embedding, { embedding: true, ctxSize: 512 });
t.teardown(async () => {
  await chat.close();
  await embed.close();
  await stopTracing();
  await receiver.close();
});

/** The span the receiver gets under that name (or that matches), the SDK's batch flushed until it arrives. */
const exported = (match: string | ((s: ReceivedSpan) => boolean)): Promise<ReceivedSpan> =>
  receiver.flushedUntil(typeof match === 'string' ? (s) => s.name === match : match, flushTracing);

const byName = (spans: ReceivedSpan[], name: string): ReceivedSpan => {
  const found = spans.filter((s) => s.name === name);
  if (found.length !== 1) throw new Error(`expected one "${name}" span, got ${found.length}`);
  return found[0]!;
};

t.test('a chat completion is a SERVER span named after the operation and the model, with the GenAI attributes', async (t) => {
  const reply = await postJson(`${chat.base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'Hello' }], max_tokens: 6, temperature: 0.5, top_p: 0.75, top_k: 7 });
  t.equal(reply.status, 200);
  const model: string = reply.body.model;
  const span = await exported((s) => s.attributes['gen_ai.response.id'] === reply.body.id);
  t.equal(span.name, `chat ${model}`);
  t.equal(span.kind, SERVER);
  t.equal(span.statusCode, STATUS_UNSET);
  t.same(span.attributes, {
    'http.request.method': 'POST',
    'http.route': '/v1/chat/completions',
    'http.response.status_code': 200,
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'llama.cpp',
    'gen_ai.system': 'llama.cpp',
    'gen_ai.request.model': model,
    'gen_ai.response.model': model,
    'gen_ai.request.max_tokens': 6,
    'gen_ai.request.temperature': 0.5,
    'gen_ai.request.top_p': 0.75,
    'gen_ai.request.top_k': 7,
    'gen_ai.request.frequency_penalty': 0,
    'gen_ai.request.presence_penalty': 0,
    'gen_ai.response.id': reply.body.id,
    'gen_ai.usage.input_tokens': reply.body.usage.prompt_tokens,
    'gen_ai.usage.output_tokens': reply.body.usage.completion_tokens,
    'gen_ai.usage.cache_read.input_tokens': reply.body.usage.prompt_tokens_details.cached_tokens,
    'gen_ai.response.finish_reasons': [reply.body.choices[0].finish_reason],
  });
  t.equal(span.resource['service.name'], 'inference-server', 'the default service name');
  t.ok(receiver.requests.every((r) => r.headers['x-collector-token'] === 'secret-1'), 'OTEL_EXPORTER_OTLP_HEADERS reach the collector');
});

t.test('each task has queue wait, prompt processing and generation children, end to end, with the engine timings', async (t) => {
  const reply = await postJson(`${chat.base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'Tell me more' }], max_tokens: 5, temperature: 0 });
  const span = await exported((s) => s.attributes['gen_ai.response.id'] === reply.body.id);
  const children = receiver.children(span);
  t.equal(children.length, 3);
  const queue = byName(children, 'queue wait');
  const prompt = byName(children, 'prompt processing');
  const generation = byName(children, 'generation');
  const timings = reply.body.timings;
  t.same(prompt.attributes, {
    'llama.task.index': 0,
    'llama.slot.id': prompt.attributes['llama.slot.id'],
    'llama.prompt.tokens': reply.body.usage.prompt_tokens,
    'llama.prompt.cached_tokens': timings.cache_n,
    'llama.timings.prompt_ms': timings.prompt_ms,
  });
  t.same(generation.attributes, {
    'llama.task.index': 0,
    'llama.slot.id': prompt.attributes['llama.slot.id'],
    'llama.generation.tokens': reply.body.usage.completion_tokens,
    'llama.timings.predicted_ms': timings.predicted_ms,
  });
  t.equal(queue.attributes['llama.task.index'], 0);
  t.ok(span.startMs <= queue.startMs, 'the queue wait starts within the request');
  t.equal(queue.endMs, prompt.startMs, 'prompt processing starts when the wait ends');
  t.equal(prompt.endMs, generation.startMs, 'generation starts when the prompt is processed');
  t.ok(generation.endMs <= span.endMs, 'generation ends within the request');
  t.ok(Math.abs(generation.endMs - generation.startMs - timings.predicted_ms) < 0.01, 'generation lasts predicted_ms');
});

t.test('a streamed text completion ends its span with the stream, with the usage of its last chunk', async (t) => {
  const reply = await postJson(`${chat.base}/v1/completions`, { prompt: 'Once upon a time', max_tokens: 8, temperature: 0, stream: true, stream_options: { include_usage: true } });
  t.equal(reply.status, 200);
  const events = parseSse(reply.body) as any[];
  const last = events.at(-2);
  const span = await exported((s) => s.attributes['gen_ai.response.id'] === last.id);
  t.equal(span.name, `text_completion ${last.model}`);
  t.equal(span.attributes['http.route'], '/v1/completions');
  t.equal(span.attributes['http.response.status_code'], 200);
  t.equal(span.attributes['gen_ai.operation.name'], 'text_completion');
  t.equal(span.attributes['gen_ai.request.max_tokens'], 8);
  t.equal(span.attributes['gen_ai.usage.input_tokens'], last.usage.prompt_tokens);
  t.equal(span.attributes['gen_ai.usage.output_tokens'], last.usage.completion_tokens);
  t.same(span.attributes['gen_ai.response.finish_reasons'], [events.at(-3).choices[0].finish_reason]);
  t.equal(receiver.children(span).length, 3);
});

t.test('a chat that ends with tool calls has the finish reason tool_calls, plain and streamed, as its response says', async (t) => {
  const { commandR7b } = await ensureTemplateModels(['commandR7b']);
  const tools = await startTestServer(commandR7b, { parallel: 1, ctxSize: 2048 });
  t.teardown(tools.close);
  const weather = { type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] } } };
  const body = { messages: [{ role: 'user', content: 'What is the weather in Paris?' }], tools: [weather], tool_choice: 'required', max_tokens: 200, temperature: 0 };
  const plain = await postJson(`${tools.base}/v1/chat/completions`, body);
  t.equal(plain.body.choices[0].finish_reason, 'tool_calls', 'the grammar forced a call');
  const span = await exported((s) => s.attributes['gen_ai.response.id'] === plain.body.id);
  t.same(span.attributes['gen_ai.response.finish_reasons'], ['tool_calls']);
  const streamed = await postJson(`${tools.base}/v1/chat/completions`, { ...body, stream: true });
  const events = parseSse(streamed.body) as any[];
  t.equal(events.at(-2).choices[0].finish_reason, 'tool_calls');
  const streamSpan = await exported((s) => s.attributes['gen_ai.response.id'] === events.at(-2).id);
  t.same(streamSpan.attributes['gen_ai.response.finish_reasons'], ['tool_calls']);
});

t.test('a client that leaves a stream ends its span as an error', async (t) => {
  const controller = new AbortController();
  const res = await fetch(`${chat.base}/completion`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, signal: controller.signal,
    body: JSON.stringify({ prompt: 'Keep going', n_predict: 4000, temperature: 0, stream: true, 'x-test': 'leave' }),
  });
  const reader = res.body!.getReader();
  await reader.read();
  controller.abort();
  const span = await exported((s) => s.attributes['http.route'] === '/completion' && s.attributes['error.type'] === 'CLIENT_CLOSED');
  t.equal(span.statusCode, STATUS_ERROR);
  t.equal(span.attributes['http.response.status_code'], 200, 'the status line had gone out');
  t.equal(span.attributes['gen_ai.operation.name'], 'text_completion');
});

t.test('a rejected request keeps its HTTP name and carries error.type; a 4xx leaves the status unset', async (t) => {
  const reply = await postJson(`${chat.base}/v1/chat/completions`, { messages: 'not a list' }, { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' });
  t.equal(reply.status, 400);
  const span = await exported((s) => s.traceId === '0af7651916cd43dd8448eb211c80319c');
  t.equal(span.name, 'POST /v1/chat/completions');
  t.equal(span.statusCode, STATUS_UNSET);
  t.same(span.attributes, {
    'http.request.method': 'POST',
    'http.route': '/v1/chat/completions',
    'gen_ai.operation.name': 'chat',
    'http.response.status_code': 400,
    'error.type': 'VALIDATION_ERROR',
  });
  t.equal(reply.body.error.type, 'invalid_request_error', "error.type is the thrown error's code, finer than the body's type");
});

t.test("a client's traceparent is continued: same trace, the client's span as parent", async (t) => {
  const reply = await postJson(`${chat.base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 }, {
    traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
  });
  t.equal(reply.status, 200);
  const span = await exported((s) => s.attributes['gen_ai.response.id'] === reply.body.id);
  t.equal(span.traceId, '4bf92f3577b34da6a3ce929d0e0e4736');
  t.equal(span.parentSpanId, '00f067aa0ba902b7');
  for (const child of receiver.children(span)) t.equal(child.traceId, span.traceId);
});

t.test('embeddings are an embeddings span with the input tokens of the usage; each input has queue wait and prompt processing children', async (t) => {
  const reply = await postJson(`${embed.base}/v1/embeddings`, { input: ['first sentence', 'and a second one'] });
  t.equal(reply.status, 200);
  const span = await exported((s) => s.name === `embeddings ${reply.body.model}`);
  t.equal(span.attributes['gen_ai.operation.name'], 'embeddings');
  t.equal(span.attributes['http.route'], '/v1/embeddings');
  t.equal(span.attributes['gen_ai.usage.input_tokens'], reply.body.usage.prompt_tokens);
  t.equal(span.attributes['gen_ai.embeddings.dimension.count'], reply.body.data[0].embedding.length);
  const children = receiver.children(span);
  t.equal(children.length, 4, 'two per input, no generation');
  let tokens = 0;
  for (const index of [0, 1]) {
    const mine = children.filter((c) => c.attributes['llama.task.index'] === index);
    const queue = byName(mine, 'queue wait');
    const prompt = byName(mine, 'prompt processing');
    const promptMs = prompt.attributes['llama.timings.prompt_ms'] as number;
    const slot = prompt.attributes['llama.slot.id'] as number;
    t.same(prompt.attributes, {
      'llama.task.index': index, 'llama.slot.id': slot, 'llama.prompt.tokens': prompt.attributes['llama.prompt.tokens'], 'llama.timings.prompt_ms': promptMs,
    }, `input ${index}: the prompt's attributes`);
    t.same(queue.attributes, { 'llama.task.index': index, 'llama.slot.id': slot }, `input ${index}: the queue wait's attributes`);
    t.ok(Number.isInteger(slot) && slot >= 0, `input ${index}: the slot that embedded it (${slot})`);
    t.ok(promptMs > 0, `input ${index}: the engine's time for it (${promptMs} ms)`);
    t.ok(span.startMs <= queue.startMs, `input ${index}: the queue wait starts within the request`);
    t.equal(queue.endMs, prompt.startMs, `input ${index}: prompt processing starts when the wait ends`);
    t.ok(prompt.endMs <= span.endMs, `input ${index}: prompt processing ends within the request`);
    t.ok(Math.abs(prompt.endMs - prompt.startMs - promptMs) < 0.01, `input ${index}: prompt processing lasts the engine's time`);
    tokens += prompt.attributes['llama.prompt.tokens'] as number;
  }
  t.equal(tokens, reply.body.usage.prompt_tokens, "the inputs' tokens add up to the usage");
});

t.test('every route of a server is a span named by its template; a handler can set the tenant', async (t) => {
  t.ok(tracingEnabled());
  const server = await startHttpServer({
    host: '127.0.0.1', port: 0, maxBodyBytes: 1024, formatError: (e) => ({ status: e.status, body: { error: { code: e.code } } }),
    routes: [{ method: 'GET', path: '/items/:id', handler: async (req) => {
      await Promise.resolve();
      setRequestTenant('tenant-42');
      return { body: { id: req.params['id'] } };
    } }],
  });
  t.teardown(() => server.close());
  const res = await fetch(`http://127.0.0.1:${server.port}/items/abc`);
  t.equal(res.status, 200);
  const span = await exported('GET /items/:id');
  t.same(span.attributes, { 'http.request.method': 'GET', 'http.route': '/items/:id', 'http.response.status_code': 200, 'llama.tenant': 'tenant-42' });
  await fetch(`http://127.0.0.1:${server.port}/nowhere`);
  const unrouted = await exported((s) => s.name === 'GET' && s.attributes['http.response.status_code'] === 404);
  t.equal(unrouted.attributes['error.type'], 'NOT_FOUND');
  t.equal(unrouted.attributes['http.route'], undefined, 'no route, no http.route');
});
