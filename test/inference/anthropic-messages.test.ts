// Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens), checked against
// llama-server built from the same source: same generated model, same greedy request, same
// message (content blocks, tool_use ids aside), plain and streamed, same token counts; errors in
// Anthropic's shape.
import Anthropic from '@anthropic-ai/sdk';
import t, { type Test } from 'tap';
import { anthropicStopReason } from '../../src/inference/dialects/anthropic.js';
import { ensureTemplateModels } from '../fixtures/models.js';
import { startLlamaServer } from '../helpers/llama-server.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';

const models = await ensureTemplateModels(['commandR7b', 'deepseekR1', 'qwen25']);

const weather = {
  name: 'get_weather',
  description: 'The weather in a city',
  input_schema: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] },
};
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

interface SseEvent { event: string; data: any }

/** An Anthropic SSE body: `event:` and `data:` line pairs. */
function events(text: string): SseEvent[] {
  return text.split('\n\n').filter((b) => b.trim() !== '').map((block) => {
    const [eventLine, dataLine, ...rest] = block.split('\n');
    if (!eventLine?.startsWith('event: ') || !dataLine?.startsWith('data: ') || rest.length > 0) throw new Error(`not an Anthropic event: ${JSON.stringify(block)}`);
    const data = JSON.parse(dataLine.slice(6));
    if (data.type !== eventLine.slice(7)) throw new Error(`event ${eventLine} carries ${data.type}`);
    return { event: eventLine.slice(7), data };
  });
}

/** The message a stream adds up to: its blocks by index, stop reason and output tokens. */
function assemble(stream: SseEvent[]): any {
  let message: any = null;
  const partial: string[] = [];
  for (const { data } of stream) {
    switch (data.type) {
      case 'message_start': message = { ...data.message, content: [] }; break;
      case 'content_block_start': message.content[data.index] = { ...data.content_block }; partial[data.index] = ''; break;
      case 'content_block_delta': {
        const block = message.content[data.index];
        if (data.delta.type === 'text_delta') block.text += data.delta.text;
        else if (data.delta.type === 'thinking_delta') block.thinking += data.delta.thinking;
        else if (data.delta.type === 'signature_delta') block.signature = data.delta.signature;
        else if (data.delta.type === 'input_json_delta') partial[data.index] += data.delta.partial_json;
        break;
      }
      case 'content_block_stop': {
        const block = message.content[data.index];
        if (block.type === 'tool_use') block.input = JSON.parse(partial[data.index] || '{}');
        break;
      }
      case 'message_delta': Object.assign(message, data.delta); message.usage = { ...message.usage, ...data.usage }; break;
    }
  }
  return message;
}

/** A message's blocks without the tool_use ids (each server makes its own up). */
function blocks(message: any): any[] {
  return message.content.map(({ id: _id, ...rest }: any) => rest);
}

/** The shape of an event sequence: each event's type, and its block's type and index where it has one. */
function sequence(stream: SseEvent[]): string[] {
  return stream.map(({ data }) => [data.type, data.index, data.content_block?.type ?? data.delta?.type].filter((x) => x !== undefined).join(' '));
}

/** The shape with consecutive equal deltas collapsed (servers may split text differently). */
function collapsed(stream: SseEvent[]): string[] {
  return sequence(stream).filter((s, i, all) => !(s.startsWith('content_block_delta') && all[i - 1] === s));
}

async function stream(url: string, body: object): Promise<{ status: number; type: string | null; events: SseEvent[] }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, stream: true }) });
  return { status: res.status, type: res.headers.get('content-type'), events: events(await res.text()) };
}

/** The same request to both servers, plain and streamed: the same message and events; the stream adds up to the plain answer. */
async function sameAsLlamaServer(t: Test, ours: string, ref: string, name: string, body: object): Promise<any> {
  const mine = await postJson(`${ours}/v1/messages`, body);
  const theirs = await postJson(`${ref}/v1/messages`, body);
  t.equal(mine.status, 200, name);
  t.equal(theirs.status, 200, `${name}: llama-server answers too`);
  t.same(blocks(mine.body), blocks(theirs.body), `${name}: the same content blocks`);
  t.equal(mine.body.stop_reason, theirs.body.stop_reason, `${name}: the same stop reason`);
  t.equal(mine.body.stop_sequence, theirs.body.stop_sequence);
  t.same(Object.keys(mine.body).sort(), Object.keys(theirs.body).sort(), `${name}: the same fields`);
  t.match(mine.body, { type: 'message', role: 'assistant', model: String, id: String });
  t.equal(mine.body.usage.output_tokens, theirs.body.usage.output_tokens);
  t.equal(mine.body.usage.input_tokens + mine.body.usage.cache_read_input_tokens, theirs.body.usage.input_tokens + theirs.body.usage.cache_read_input_tokens, `${name}: the same prompt length`);

  const mineStream = await stream(`${ours}/v1/messages`, body);
  const theirStream = await stream(`${ref}/v1/messages`, body);
  t.equal(mineStream.status, 200);
  t.match(mineStream.type, /^text\/event-stream/);
  t.same(collapsed(mineStream.events), collapsed(theirStream.events), `${name}: llama-server's event sequence`);
  const assembled = assemble(mineStream.events);
  t.same(blocks(assembled), blocks(mine.body), `${name}: the stream adds up to the plain answer`);
  t.equal(assembled.stop_reason, mine.body.stop_reason);
  t.equal(assembled.usage.output_tokens, mine.body.usage.output_tokens);
  return mine.body;
}

t.test('Command R7B: a forced tool call (tool_choice any), as llama-server, plain and streamed', async (t) => {
  const ours = await startTestServer(models.commandR7b, { parallel: 1, ctxSize: 2048 });
  t.teardown(ours.close);
  const ref = await startLlamaServer(['-m', models.commandR7b, '-c', '2048', '-np', '1']);
  t.teardown(ref.close);
  // tool_choice "tool" forces the named tool; llama-server forces any, the same with one tool.
  for (const type of ['any', 'tool']) {
    const body = { messages: ask, tools: [weather], tool_choice: { type, name: 'get_weather' }, max_tokens: 64, temperature: 0 };
    const message = await sameAsLlamaServer(t, ours.base, ref.base, `tool_choice ${type}`, body);
    const call = message.content.find((b: any) => b.type === 'tool_use');
    t.equal(call?.name, 'get_weather', 'the grammar forced a call');
    t.type(call.input.city, 'string', 'with an input object that follows the schema');
    t.match(call.id, /^\S+$/);
  }
});

t.test('stop reasons: a reply that ends on its own ends its turn, or stops for its tool calls; a cut one hit max_tokens', async (t) => {
  t.equal(anthropicStopReason('eos', false), 'end_turn');
  t.equal(anthropicStopReason('word', false), 'end_turn');
  t.equal(anthropicStopReason('eos', true), 'tool_use');
  t.equal(anthropicStopReason('word', true), 'tool_use');
  t.equal(anthropicStopReason('limit', true), 'max_tokens');
  t.equal(anthropicStopReason('limit', false), 'max_tokens');
});

t.test('DeepSeek R1: a thinking block before the text, as llama-server, plain and streamed', async (t) => {
  const ours = await startTestServer(models.deepseekR1, { parallel: 1, ctxSize: 2048 });
  t.teardown(ours.close);
  const ref = await startLlamaServer(['-m', models.deepseekR1, '-c', '2048', '-np', '1']);
  t.teardown(ref.close);
  // A budget of 4 thinking tokens forces </think>, so the answer has both parts even from random weights.
  const body = { messages: ask, max_tokens: 12, temperature: 0, thinking: { type: 'enabled', budget_tokens: 4 } };
  const mine = await postJson(`${ours.base}/v1/messages`, body);
  const theirs = await postJson(`${ref.base}/v1/messages`, body);
  t.equal(mine.status, 200);
  t.same(mine.body.content, theirs.body.content);
  t.equal(mine.body.content[0]?.type, 'thinking', 'thinking comes first');
  t.equal(mine.body.content[0]?.signature, '');
  const mineStream = await stream(`${ours.base}/v1/messages`, body);
  const theirStream = await stream(`${ref.base}/v1/messages`, body);
  t.same(collapsed(mineStream.events), collapsed(theirStream.events), "llama-server's event sequence, signature_delta included");
  t.same(assemble(mineStream.events).content, mine.body.content, 'the stream adds up to the plain answer');
});

t.test('Qwen 2.5: history with tool_use and tool_result blocks, count_tokens, stop_sequences, as llama-server', async (t) => {
  const ours = await startTestServer(models.qwen25, { parallel: 1, ctxSize: 2048 });
  t.teardown(ours.close);
  const ref = await startLlamaServer(['-m', models.qwen25, '-c', '2048', '-np', '1']);
  t.teardown(ref.close);
  const history = [
    ...ask,
    { role: 'assistant', content: [{ type: 'text', text: 'Let me look.' }, { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: '{"temperature_c": 21}' }] }, { type: 'text', text: 'And so?' }] },
  ];
  const requests: Array<[string, object]> = [
    ['a string system and a plain question', { system: 'You are terse.', messages: ask, max_tokens: 16 }],
    ['system blocks', { system: [{ type: 'text', text: 'You are ' }, { type: 'text', text: 'terse.' }], messages: ask, max_tokens: 16 }],
    ['a tool round trip', { messages: history, tools: [weather], max_tokens: 16 }],
    ['a string tool result', { messages: [...history.slice(0, 2), { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny' }] }], tools: [weather], max_tokens: 16 }],
  ];
  await sameAsLlamaServer(t, ours.base, ref.base, 'text', { system: 'Be brief.', messages: ask, max_tokens: 12, temperature: 0 });
  for (const [name, body] of requests) {
    const mine = await postJson(`${ours.base}/v1/messages/count_tokens`, body);
    const theirs = await postJson(`${ref.base}/v1/messages/count_tokens`, body);
    t.equal(mine.status, 200, name);
    t.same(mine.body, theirs.body, `${name}: count_tokens as llama-server`);
    t.ok(mine.body.input_tokens > 0);
    const reply = await postJson(`${ours.base}/v1/messages`, { ...body, temperature: 0 });
    const refReply = await postJson(`${ref.base}/v1/messages`, { ...body, temperature: 0 });
    t.same(blocks(reply.body), blocks(refReply.body), `${name}: the same reply`);
  }
  const withTools = await postJson(`${ours.base}/v1/messages/count_tokens`, { messages: ask, tools: [weather] });
  const without = await postJson(`${ours.base}/v1/messages/count_tokens`, { messages: ask });
  t.ok(withTools.body.input_tokens > without.body.input_tokens, 'the tools are part of the prompt');

  // A stop sequence taken from the greedy answer ends it there.
  const free = await postJson(`${ours.base}/v1/messages`, { messages: ask, max_tokens: 16, temperature: 0 });
  const text: string = free.body.content[0].text;
  const stop = text.trim().slice(2, 5);
  t.ok(stop.length > 0, 'the greedy answer has text to stop on');
  const body = { messages: ask, max_tokens: 16, temperature: 0, stop_sequences: [stop] };
  const stopped = await postJson(`${ours.base}/v1/messages`, body);
  const refStopped = await postJson(`${ref.base}/v1/messages`, body);
  t.equal(stopped.body.stop_reason, 'end_turn');
  t.equal(stopped.body.stop_sequence, stop);
  t.same(blocks(stopped.body), blocks(refStopped.body));
  t.equal(refStopped.body.stop_sequence, stop);
  const capped = await postJson(`${ours.base}/v1/messages`, { messages: ask, max_tokens: 2, temperature: 0 });
  t.equal(capped.body.stop_reason, 'max_tokens');
  t.equal(capped.body.usage.output_tokens, 2);
});

t.test('bad requests: 400 in Anthropic\'s error shape, as llama-server refuses them', async (t) => {
  const ours = await startTestServer(models.qwen25, { parallel: 1, ctxSize: 1024 });
  t.teardown(ours.close);
  const ref = await startLlamaServer(['-m', models.qwen25, '-c', '1024', '-np', '1']);
  t.teardown(ref.close);
  const cases: Array<[string, unknown]> = [
    ['no messages', { max_tokens: 8 }],
    ['a text block without text', { messages: [{ role: 'user', content: [{ type: 'text' }] }], max_tokens: 8 }],
    ['an assistant message at the end after another', { messages: [...ask, { role: 'assistant', content: 'a' }, { role: 'assistant', content: 'b' }], max_tokens: 8 }],
    ['malformed JSON', '{"messages": ['],
  ];
  for (const [name, body] of cases) {
    for (const path of ['/v1/messages', '/v1/messages/count_tokens']) {
      const mine = await postJson(`${ours.base}${path}`, body);
      const theirs = await postJson(`${ref.base}${path}`, body);
      t.equal(mine.status, 400, `${name} ${path}`);
      t.ok(theirs.status >= 400, `${name} ${path}: llama-server refuses it too (${theirs.status})`);
      t.equal(mine.body.type, 'error', name);
      t.equal(mine.body.error?.type, 'invalid_request_error', name);
      t.type(mine.body.error?.message, 'string');
    }
  }
  // tool_choice "tool" names a tool of the request (llama-server ignores the name).
  const unknown = await postJson(`${ours.base}/v1/messages`, { messages: ask, tools: [weather], tool_choice: { type: 'tool', name: 'nope' }, max_tokens: 8 });
  t.equal(unknown.status, 400, 'an unknown tool');
  t.match(unknown.body, { type: 'error', error: { type: 'invalid_request_error', message: /no tool named "nope"/ } });
  // tool_choice "none" is OpenAI's "none" (llama-server leaves the default, auto).
  const none = await postJson(`${ours.base}/v1/messages`, { messages: ask, tools: [weather], tool_choice: { type: 'none' }, max_tokens: 8, temperature: 0 });
  const openaiTools = [{ type: 'function', function: { name: weather.name, description: weather.description, parameters: weather.input_schema } }];
  const chatNone = await postJson(`${ours.base}/v1/chat/completions`, { messages: ask, tools: openaiTools, tool_choice: 'none', max_tokens: 8, temperature: 0 });
  t.equal(none.status, 200);
  t.same(none.body.content, [{ type: 'text', text: chatNone.body.choices[0].message.content }], 'tool_choice none: the chat reply with tool_choice "none"');
  // Stricter than llama-server, which reads messages that are not an array as none.
  const notArray = await postJson(`${ours.base}/v1/messages`, { messages: 'hi', max_tokens: 8 });
  t.equal(notArray.status, 400);
  t.match(notArray.body, { type: 'error', error: { type: 'invalid_request_error', message: /messages/ } });
  // As in llama-server, max_tokens may be left out (4096), and unknown block types are dropped.
  const lenient = { messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }, { type: 'document', title: 'x' }] }] };
  const mine = await postJson(`${ours.base}/v1/messages/count_tokens`, lenient);
  t.equal(mine.status, 200);
  t.same(mine.body, (await postJson(`${ref.base}/v1/messages/count_tokens`, lenient)).body);
  const image = { messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }] }], max_tokens: 8 };
  const refused = await postJson(`${ours.base}/v1/messages`, image);
  t.equal(refused.status, 500, 'an image without a projector, as llama-server');
  t.match(refused.body, { type: 'error', error: { type: 'api_error', message: /image input is not supported/ } });
  t.equal((await fetch(`${ours.base}/health`)).status, 200, 'the server keeps serving');
});

t.test('--api-key: x-api-key (and anthropic-version) admitted, a wrong key refused in Anthropic\'s shape', async (t) => {
  const ours = await startTestServer(models.qwen25, { parallel: 1, ctxSize: 1024, apiKeys: ['sk-test'] });
  t.teardown(ours.close);
  const body = { messages: ask, max_tokens: 2 };
  const ok = await postJson(`${ours.base}/v1/messages`, body, { 'x-api-key': 'sk-test', 'anthropic-version': '2023-06-01' });
  t.equal(ok.status, 200);
  t.equal(ok.body.type, 'message');
  const counted = await postJson(`${ours.base}/v1/messages/count_tokens`, body, { 'x-api-key': 'sk-test', 'anthropic-version': '2023-06-01' });
  t.equal(counted.status, 200);
  for (const headers of [{}, { 'x-api-key': 'wrong' }]) {
    const refused = await postJson(`${ours.base}/v1/messages`, body, headers);
    t.equal(refused.status, 401);
    t.same(refused.body, { type: 'error', error: { type: 'authentication_error', message: 'Invalid API Key' } });
  }
  const streamRefused = await postJson(`${ours.base}/v1/messages`, { ...body, stream: true }, { 'x-api-key': 'wrong' });
  t.equal(streamRefused.status, 401, 'a refused stream is a plain error response');
  t.equal(streamRefused.body.type, 'error');
});

t.test('the anthropic client: messages.create plain, streamed and with tools, a tool result, countTokens, errors', async (t) => {
  // Text on Qwen 2.5, forced tool calls on Command R7B (whose format does not parse free text).
  const ours = await startTestServer(models.qwen25, { parallel: 1, ctxSize: 2048, apiKeys: ['sk-test'] });
  t.teardown(ours.close);
  const tooling = await startTestServer(models.commandR7b, { parallel: 1, ctxSize: 2048, apiKeys: ['sk-test'] });
  t.teardown(tooling.close);
  const client = new Anthropic({ baseURL: ours.base, apiKey: 'sk-test', maxRetries: 0 });
  const toolClient = new Anthropic({ baseURL: tooling.base, apiKey: 'sk-test', maxRetries: 0 });
  const messages = ask as Anthropic.MessageParam[];
  const plain = await client.messages.create({ model: 'local', max_tokens: 8, temperature: 0, messages });
  t.equal(plain.type, 'message');
  t.equal(plain.content[0]?.type, 'text');
  t.equal(plain.stop_reason, 'max_tokens');
  t.equal(plain.usage.output_tokens, 8);
  const raw = await postJson(`${ours.base}/v1/messages`, { max_tokens: 8, temperature: 0, messages }, { 'x-api-key': 'sk-test' });
  t.same(plain.content, raw.body.content, 'the client reads what the server sent');
  const streamed = await client.messages.stream({ model: 'local', max_tokens: 8, temperature: 0, messages }).finalMessage();
  t.same(streamed.content, plain.content, 'the client assembles the stream into the plain answer');
  t.equal(streamed.stop_reason, 'max_tokens');

  const tools = [weather] as Anthropic.Tool[];
  const forced = { model: 'local', max_tokens: 64, temperature: 0, messages, tools, tool_choice: { type: 'tool', name: 'get_weather' } } as const;
  const call = await toolClient.messages.create(forced);
  const use = call.content.find((b): b is Anthropic.ToolUseBlock => b.type === 'tool_use');
  t.equal(use?.name, 'get_weather');
  t.type((use?.input as { city?: unknown }).city, 'string');
  const streamedCall = await toolClient.messages.stream(forced).finalMessage();
  t.same(blocks(streamedCall), blocks(call), 'a streamed tool call: input_json_delta assembled by the client');
  // The round trip on Qwen 2.5, whose format parses free text (Command R7B's answers it with a 500, as llama-server).
  const answer = await client.messages.create({
    model: 'local', max_tokens: 8, temperature: 0, tools,
    messages: [...messages, { role: 'assistant', content: call.content }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: use!.id, content: 'sunny, 21 C' }] }],
  });
  t.equal(answer.type, 'message', 'a tool result round trip');

  const counted = await client.messages.countTokens({ model: 'local', messages, tools });
  const rawCount = await postJson(`${ours.base}/v1/messages/count_tokens`, { messages, tools }, { 'x-api-key': 'sk-test' });
  t.equal(counted.input_tokens, rawCount.body.input_tokens);
  t.ok(counted.input_tokens > 0);

  const wrongKey = new Anthropic({ baseURL: ours.base, apiKey: 'wrong', maxRetries: 0 });
  await t.rejects(wrongKey.messages.create({ model: 'local', max_tokens: 8, messages }), Anthropic.AuthenticationError, 'a wrong key: the client\'s AuthenticationError');
  const bad = await client.messages.create({ model: 'local', max_tokens: 8, messages: [{ role: 'user', content: [{ type: 'text' } as never] }] }).catch((e: unknown) => e);
  t.type(bad, Anthropic.BadRequestError);
  t.equal((bad as InstanceType<typeof Anthropic.BadRequestError>).status, 400);
  t.match((bad as InstanceType<typeof Anthropic.BadRequestError>).error, { type: 'error', error: { type: 'invalid_request_error' } });
});
