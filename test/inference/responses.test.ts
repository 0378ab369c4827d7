// The OpenAI Responses API (POST /v1/responses, /v1/responses/input_tokens) checked against
// llama-server built from the same source: same generated model, same greedy request, same output
// items (ids aside, both servers make them up), the same event types in the same order when
// streamed, the same token counts, and the same status for a request it refuses.
import OpenAI from 'openai';
import t, { type Test } from 'tap';
import { ensureTemplateModels } from '../fixtures/models.js';
import { startLlamaServer } from '../helpers/llama-server.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';

const models = await ensureTemplateModels(['commandR7b', 'deepseekR1', 'qwen25']);

const weather = {
  type: 'function',
  name: 'get_weather',
  description: 'The weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] },
};
const question = 'What is the weather in Paris?';

/** An item without its random ids, after checking their prefixes. */
function withoutIds(t: Test, item: any): any {
  const { id, call_id, ...rest } = item;
  const prefix = { message: 'msg_', reasoning: 'rs_', function_call: 'fc_' }[item.type as string];
  t.ok(typeof id === 'string' && prefix && id.startsWith(prefix), `${item.type} id ${id} starts with ${prefix}`);
  if (item.type === 'function_call') t.match(call_id, /^call_\S+$/);
  return rest;
}

/** The named events of a Responses stream; each event's name must be its data's type. */
function parseEvents(t: Test, text: string): any[] {
  const events: any[] = [];
  for (const block of text.split('\n\n')) {
    if (block.trim() === '') continue;
    const match = /^event: (\S+)\ndata: (.*)$/s.exec(block);
    if (!match) throw new Error(`not a named SSE event: ${JSON.stringify(block)}`);
    const data = JSON.parse(match[2]!);
    if (data.type !== match[1]) t.fail(`event ${match[1]} carries type ${data.type}`);
    events.push(data);
  }
  return events;
}

async function streamEvents(t: Test, url: string, body: object): Promise<any[]> {
  const res = await fetch(url, { method: 'POST', body: JSON.stringify({ ...body, stream: true }) });
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /text\/event-stream/);
  return parseEvents(t, await res.text());
}

/**
 * llama-server's event types, each of response.created and response.in_progress once: it sends
 * them again with every token until the first token has gone out as text of its own (a first
 * token that is part of a UTF-8 character never does), where the API announces a response once.
 */
function announcedOnce(types: string[]): string[] {
  const opening = new Set(['response.created', 'response.in_progress']);
  return types.filter((type, i) => !opening.has(type) || types.indexOf(type) === i);
}

/** What the deltas of a stream add up to: reasoning text, output text, and each call's arguments. */
function assemble(events: any[]): { reasoning: string; text: string; calls: Record<string, string> } {
  const out = { reasoning: '', text: '', calls: {} as Record<string, string> };
  for (const e of events) {
    if (e.type === 'response.reasoning_text.delta') out.reasoning += e.delta;
    if (e.type === 'response.output_text.delta') out.text += e.delta;
    if (e.type === 'response.output_item.added' && e.item.type === 'function_call') out.calls[e.item.id] = '';
    if (e.type === 'response.function_call_arguments.delta') out.calls[e.item_id] += e.delta;
  }
  return out;
}

/** Checks a streamed answer against the plain one and llama-server's stream; returns the completed response. */
async function checkStream(t: Test, ours: string, ref: string, body: object, plain: any): Promise<any> {
  const mine = await streamEvents(t, `${ours}/v1/responses`, body);
  const theirs = await streamEvents(t, `${ref}/v1/responses`, body);
  t.same(mine.map((e) => e.type), announcedOnce(theirs.map((e) => e.type)), 'the event types of llama-server, in order');
  t.equal(mine[0].type, 'response.created');
  const completed = mine.at(-1);
  t.equal(completed.type, 'response.completed');
  t.ok(completed.timings, 'response.completed carries the timings');
  // The plain request ran first: this one reuses its cached prompt.
  const { input_tokens_details: cached, ...usage } = completed.response.usage;
  const { input_tokens_details: _, ...plainUsage } = plain.usage;
  t.same(usage, plainUsage, 'the usage of the plain answer');
  t.ok(cached.cached_tokens > 0 && cached.cached_tokens < usage.input_tokens, 'the cached part of the prompt is counted');
  t.same(completed.response.output.map((i: any) => withoutIds(t, i)), plain.output.map((i: any) => withoutIds(t, i)).map(({ status, ...i }: any) => (i.type === 'reasoning' ? i : { status, ...i })), 'the output of the plain answer');
  const sum = assemble(mine);
  for (const item of completed.response.output) {
    if (item.type === 'message') t.equal(sum.text, item.content[0].text, 'the text deltas add up to the message');
    if (item.type === 'reasoning') t.equal(sum.reasoning, item.content[0].text, 'the reasoning deltas add up to the reasoning');
    if (item.type === 'function_call') t.equal(sum.calls[item.id], item.arguments, 'the argument deltas add up to the call');
  }
  return completed.response;
}

t.test('commandR7b: tool_choice "required" gives llama-server\'s function_call item, plain and streamed', async (t) => {
  const ours = await startTestServer(models.commandR7b, { parallel: 1, ctxSize: 2048 });
  t.teardown(ours.close);
  const ref = await startLlamaServer(['-m', models.commandR7b, '-c', '2048', '-np', '1']);
  t.teardown(ref.close);
  const body = { input: question, tools: [weather], tool_choice: 'required', max_output_tokens: 64, temperature: 0 };
  const mine = await postJson(`${ours.base}/v1/responses`, body);
  const theirs = await postJson(`${ref.base}/v1/responses`, body);
  t.equal(mine.status, 200);
  t.equal(mine.body.object, 'response');
  t.equal(mine.body.status, 'completed');
  t.match(mine.body.id, /^resp_[0-9A-Za-z]{32}$/);
  t.same(mine.body.output.map((i: any) => withoutIds(t, i)), theirs.body.output.map((i: any) => withoutIds(t, i)));
  t.same(mine.body.usage, theirs.body.usage);
  const call = mine.body.output.find((i: any) => i.type === 'function_call');
  t.equal(call?.name, 'get_weather', 'the grammar forced a call');
  t.type(JSON.parse(call.arguments).city, 'string', 'with arguments that follow the schema');
  t.equal(call.id.slice(3), call.call_id.slice(5), 'fc_ and call_ name the same call');
  await checkStream(t, ours.base, ref.base, body, mine.body);
});

t.test('DeepSeek R1: a reasoning item before the message, as llama-server, plain and streamed', async (t) => {
  const ours = await startTestServer(models.deepseekR1, { parallel: 1, ctxSize: 2048 });
  t.teardown(ours.close);
  const ref = await startLlamaServer(['-m', models.deepseekR1, '-c', '2048', '-np', '1', '--reasoning-budget', '4']);
  t.teardown(ref.close);
  // A budget of 4 thinking tokens forces </think>, so the answer has both parts even from random weights.
  const body = { input: question, max_output_tokens: 12, temperature: 0, reasoning_budget_tokens: 4 };
  const mine = await postJson(`${ours.base}/v1/responses`, body);
  const theirs = await postJson(`${ref.base}/v1/responses`, body);
  t.equal(mine.status, 200);
  t.same(mine.body.output.map((i: any) => withoutIds(t, i)), theirs.body.output.map((i: any) => withoutIds(t, i)));
  t.same(mine.body.output.map((i: any) => i.type), ['reasoning', 'message'], 'there is reasoning, then text');
  const streamed = await checkStream(t, ours.base, ref.base, body, mine.body);
  t.notOk('status' in streamed.output[0], 'the streamed reasoning item has no status, as llama-server');
});

t.test('qwen25 through the openai client: plain and streamed, with llama-server\'s text and token counts', async (t) => {
  const ours = await startTestServer(models.qwen25, { parallel: 1, ctxSize: 2048 });
  t.teardown(ours.close);
  const ref = await startLlamaServer(['-m', models.qwen25, '-c', '2048', '-np', '1']);
  t.teardown(ref.close);
  const client = new OpenAI({ apiKey: 'dummy', baseURL: `${ours.base}/v1` });
  const reference = new OpenAI({ apiKey: 'dummy', baseURL: `${ref.base}/v1` });
  const request = {
    model: 'gpt-4.1',
    instructions: 'Answer briefly.',
    input: [{ role: 'user' as const, content: [{ type: 'input_text' as const, text: 'What is the best book?' }] }],
    max_output_tokens: 10,
    temperature: 0,
  };
  const mine = await client.responses.create(request);
  const theirs = await reference.responses.create(request);
  t.match(mine.id, /^resp_/);
  t.match(mine.output[0]?.id, /^msg_/);
  t.ok(mine.output_text.length > 0, 'some text');
  t.equal(mine.output_text, theirs.output_text);
  t.same(mine.usage, theirs.usage);

  const stream = await client.responses.create({ ...request, stream: true });
  const types: string[] = [];
  let text = '';
  let completed: any;
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === 'response.output_text.delta') text += event.delta;
    if (event.type === 'response.completed') completed = event.response;
  }
  const theirTypes: string[] = [];
  for await (const event of await reference.responses.create({ ...request, stream: true })) theirTypes.push(event.type);
  t.same(types, announcedOnce(theirTypes), 'the event types of llama-server, in order');
  t.equal(types.filter((type) => type === 'response.created').length, 1, 'one response.created');
  t.equal(text, mine.output_text, 'the deltas add up to the plain answer');
  t.equal(completed?.output_text ?? completed?.output[0].content[0].text, mine.output_text);

  const count = { model: 'x', instructions: 'Answer briefly.', input: [{ role: 'user', content: 'Hello' }, { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Hi!' }] }, { role: 'user', content: 'Bye' }] };
  for (const path of ['/v1/responses/input_tokens', '/responses/input_tokens']) {
    const a = await postJson(`${ours.base}${path}`, count);
    const b = await postJson(`${ref.base}${path}`, count);
    t.equal(a.status, 200);
    t.same(a.body, b.body, `${path}: llama-server's count`);
    t.equal(a.body.object, 'response.input_tokens');
  }
  const chat = await postJson(`${ours.base}/v1/chat/completions/input_tokens`, {
    messages: [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: 'Hello' }, { role: 'assistant', content: 'Hi!' }, { role: 'user', content: 'Bye' }],
  });
  t.equal(chat.body.input_tokens, (await postJson(`${ours.base}/v1/responses/input_tokens`, count)).body.input_tokens, 'the prompt of the equivalent chat');
});

t.test('a function_call and its function_call_output round trip as llama-server renders them', async (t) => {
  const ours = await startTestServer(models.qwen25, { parallel: 1, ctxSize: 2048 });
  t.teardown(ours.close);
  const ref = await startLlamaServer(['-m', models.qwen25, '-c', '2048', '-np', '1']);
  t.teardown(ref.close);
  const input = [
    { role: 'user', content: question },
    { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
    { type: 'function_call_output', call_id: 'call_1', output: '{"temperature_c": 21}' },
  ];
  const body = { input, tools: [weather], max_output_tokens: 16, temperature: 0 };
  const mine = await postJson(`${ours.base}/responses`, body);
  const theirs = await postJson(`${ref.base}/responses`, body);
  t.equal(mine.status, 200);
  t.same(mine.body.output.map((i: any) => withoutIds(t, i)), theirs.body.output.map((i: any) => withoutIds(t, i)));
  t.same(mine.body.usage, theirs.body.usage, 'the same prompt length');
  // The same history as chat messages renders the same prompt.
  const chat = await postJson(`${ours.base}/apply-template`, {
    messages: [
      { role: 'user', content: question },
      { role: 'assistant', tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temperature_c": 21}' },
    ],
    tools: [{ type: 'function', function: { name: weather.name, description: weather.description, parameters: weather.parameters } }],
  });
  t.match(chat.body.prompt, /temperature_c/);
  const counted = await postJson(`${ours.base}/v1/responses/input_tokens`, body);
  t.equal(counted.body.input_tokens, mine.body.usage.input_tokens, 'input_tokens counts the prompt that ran');

  // Assistant text, a reasoning item and a call merge into one assistant message, as in llama-server.
  const merged = {
    input: [
      { role: 'developer', content: 'Be terse.' },
      { role: 'user', content: question },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Let me look.' }] },
      { type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text: 'A weather question.' }] },
      { type: 'function_call', call_id: 'call_2', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { type: 'function_call_output', call_id: 'call_2', output: [{ type: 'input_text', text: 'sunny' }] },
    ],
    tools: [weather, { type: 'web_search' }],
  };
  const a = await postJson(`${ours.base}/v1/responses/input_tokens`, merged);
  const b = await postJson(`${ref.base}/v1/responses/input_tokens`, merged);
  t.equal(a.status, 200);
  t.same(a.body, b.body, 'a merged history counts as in llama-server');
  const asChat = await postJson(`${ours.base}/v1/chat/completions/input_tokens`, {
    messages: [
      { role: 'developer', content: 'Be terse.' },
      { role: 'user', content: question },
      {
        role: 'assistant',
        content: [{ type: 'text', text: 'Let me look.' }],
        reasoning_content: 'A weather question.',
        tool_calls: [{ id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }],
      },
      { role: 'tool', tool_call_id: 'call_2', content: [{ type: 'text', text: 'sunny' }] },
    ],
    tools: [{ type: 'function', function: { name: weather.name, description: weather.description, parameters: weather.parameters } }],
  });
  t.equal(a.body.input_tokens, asChat.body.input_tokens, 'the prompt of one assistant message holding text, reasoning and the call');
});

t.test('bad Responses requests are 400s naming the field, as llama-server refuses them, never a crash', async (t) => {
  const ours = await startTestServer(models.qwen25, { parallel: 1, ctxSize: 1024 });
  t.teardown(ours.close);
  const ref = await startLlamaServer(['-m', models.qwen25, '-c', '1024', '-np', '1']);
  t.teardown(ref.close);
  const cases: Array<[string, object, RegExp]> = [
    ['no input', { instructions: 'x' }, /'input' is required/],
    ['previous_response_id', { input: 'hi', previous_response_id: 'resp_1' }, /does not support 'previous_response_id'/],
    ['an input that is a number', { input: 42 }, /'input' must be a string or array of objects/],
    ['an item of no known type', { input: [{ foo: 1 }] }, /input\[0\].*Cannot determine type of 'item'/],
    ['an item that is not an object', { input: ['hi'] }, /input\[0\]/],
    ['an input_file part', { input: [{ role: 'user', content: [{ type: 'input_file', file_id: 'f' }] }] }, /input\[0\]\.content\[0\].*'input_file' is not supported/],
    ['an input_text part without text', { input: [{ role: 'user', content: [{ type: 'input_text' }] }] }, /'Input text' requires 'text'/],
    ['an unknown part type', { input: [{ role: 'user', content: [{ type: 'audio' }] }] }, /'type' must be one of/],
    ['an output_text without text', { input: [{ type: 'message', role: 'assistant', content: [{ type: 'output_text' }] }] }, /'Output text' requires 'text'/],
    ['a reasoning item with empty content', { input: [{ type: 'reasoning', summary: [], content: [] }] }, /input\[0\]\.content.*is empty/],
    ['a tool output part of no type', { input: [{ type: 'function_call_output', call_id: 'c', output: [{ text: 'x' }] }] }, /missing 'type' field/],
    ['tools that are not an array', { input: 'hi', tools: { type: 'function' } }, /'tools' must be an array/],
    ['a temperature that is text', { input: 'hi', temperature: 'hot' }, /temperature/],
    ['an unknown named tool_choice', { input: 'hi', tools: [weather], tool_choice: { type: 'function', name: 'nope' } }, /no tool named "nope"/],
  ];
  for (const [what, body, message] of cases) {
    const mine = await postJson(`${ours.base}/v1/responses`, body);
    t.equal(mine.status, 400, `${what}: 400`);
    t.match(mine.body.error?.message, message, `${what}: names the problem`);
    if (what === 'an unknown named tool_choice') continue; // llama-server ignores a tool_choice object (it runs "auto")
    const theirs = await postJson(`${ref.base}/v1/responses`, body);
    t.equal(theirs.status, 400, `${what}: llama-server refuses it too`);
  }
  const counted = await postJson(`${ours.base}/v1/responses/input_tokens`, { input: 7 });
  t.equal(counted.status, 400, 'input_tokens checks the input too');
  const health = await fetch(`${ours.base}/health`);
  t.equal(health.status, 200, 'the server is still up');
});

t.test('return_progress: the first prompt report rides on response.in_progress, as llama-server', async (t) => {
  const ours = await startTestServer(models.qwen25, { parallel: 1, ctxSize: 2048 });
  t.teardown(ours.close);
  const res = await fetch(`${ours.base}/responses`, { method: 'POST', body: JSON.stringify({ input: 'This is a test'.repeat(10), max_output_tokens: 4, stream: true, return_progress: true, timings_per_token: true }) });
  const events = (await res.text()).split('\n\n').filter((b) => b.includes('data: ')).map((b) => JSON.parse(b.slice(b.indexOf('data: ') + 6)));
  const withProgress = events.filter((e) => e.prompt_progress);
  t.equal(withProgress.length, 1);
  t.equal(withProgress[0].type, 'response.in_progress');
  t.ok(withProgress[0].prompt_progress.total > 0 && withProgress[0].prompt_progress.processed >= withProgress[0].prompt_progress.cache);
  t.equal(events.filter((e) => e.type === 'response.created').length, 1, 'the response is opened once');
  t.ok(events.some((e) => e.type === 'response.completed' && e.timings), 'response.completed carries timings');
});
