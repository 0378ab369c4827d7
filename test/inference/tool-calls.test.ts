// Tool calling and reasoning on /v1/chat/completions, checked against llama-server built from
// the same source: same generated model (carrying a shipped template), same greedy request, same
// message (tool_calls names and arguments, content, reasoning_content), plain and streamed.
import OpenAI from 'openai';
import t from 'tap';
import { ensureTemplateModels } from '../fixtures/models.js';
import { startLlamaServer } from '../helpers/llama-server.js';
import { parseSse, postJson, startTestServer } from '../helpers/inference-server.js';

const models = await ensureTemplateModels(['commandR7b', 'functionaryV32', 'deepseekR1', 'qwen25', 'hermes2Pro']);

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'] },
  },
};
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

/** A message without the random ids of its calls (llama-server makes them up too). */
function withoutIds(message: any): any {
  return { ...message, ...(message.tool_calls ? { tool_calls: message.tool_calls.map(({ id: _id, ...rest }: any) => rest) } : {}) };
}

/** The message a stream of chat chunks adds up to, and the finish reason. */
function assemble(text: string): { message: any; finish: string | null } {
  const message: any = { role: 'assistant', content: '' };
  let finish: string | null = null;
  for (const event of parseSse(text) as any[]) {
    if (event === '[DONE]' || event.choices.length === 0) continue;
    const { delta, finish_reason } = event.choices[0];
    if (finish_reason) finish = finish_reason;
    if (delta.content) message.content += delta.content;
    if (delta.reasoning_content) message.reasoning_content = (message.reasoning_content ?? '') + delta.reasoning_content;
    for (const call of delta.tool_calls ?? []) {
      message.tool_calls ??= [];
      const slot = (message.tool_calls[call.index] ??= { type: 'function', function: { name: '', arguments: '' } });
      if (call.id) slot.id = call.id;
      slot.function.name += call.function?.name ?? '';
      slot.function.arguments += call.function?.arguments ?? '';
    }
  }
  return { message, finish };
}

for (const name of ['commandR7b', 'functionaryV32'] as const) {
  t.test(`${name}: tool_choice "required" gives llama-server's tool call, plain and streamed`, async (t) => {
    const ours = await startTestServer(models[name], { parallel: 1, ctxSize: 2048 });
    t.teardown(ours.close);
    const ref = await startLlamaServer(['-m', models[name], '-c', '2048', '-np', '1']);
    t.teardown(ref.close);
    const body = { messages: ask, tools: [weather], tool_choice: 'required', max_tokens: 64, temperature: 0 };
    const mine = await postJson(`${ours.base}/v1/chat/completions`, body);
    const theirs = await postJson(`${ref.base}/v1/chat/completions`, body);
    t.equal(mine.status, 200);
    t.equal(mine.body.choices[0].finish_reason, theirs.body.choices[0].finish_reason);
    t.same(withoutIds(mine.body.choices[0].message), withoutIds(theirs.body.choices[0].message));
    const calls = mine.body.choices[0].message.tool_calls;
    t.equal(calls?.[0]?.function.name, 'get_weather', 'the grammar forced a call');
    t.type(JSON.parse(calls[0].function.arguments).city, 'string', 'with arguments that follow the schema');
    t.match(calls[0].id, /^\S+$/, 'every call has an id');

    const streamed = await fetch(`${ours.base}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ ...body, stream: true }) });
    const { message, finish } = assemble(await streamed.text());
    t.same(withoutIds(message), withoutIds(mine.body.choices[0].message), 'the stream adds up to the plain answer');
    t.equal(finish, mine.body.choices[0].finish_reason);
  });
}

t.test('a tool result round trip is rendered by the template, as llama-server renders it', async (t) => {
  const ours = await startTestServer(models.qwen25, { parallel: 1, ctxSize: 2048 });
  t.teardown(ours.close);
  const ref = await startLlamaServer(['-m', models.qwen25, '-c', '2048', '-np', '1']);
  t.teardown(ref.close);
  const messages = [
    ...ask,
    { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: '{"temperature_c": 21}' },
  ];
  const mine = await postJson(`${ours.base}/apply-template`, { messages, tools: [weather] });
  const theirs = await postJson(`${ref.base}/apply-template`, { messages, tools: [weather] });
  t.equal(mine.status, 200);
  t.equal(mine.body.prompt, theirs.body.prompt);
  t.match(mine.body.prompt, /get_weather/, 'the tool definitions');
  t.match(mine.body.prompt, /"city": ?"Paris"/, 'the call');
  t.match(mine.body.prompt, /temperature_c/, 'the result');
});

t.test('DeepSeek R1: reasoning_content split from content, as llama-server, plain and streamed', async (t) => {
  const ours = await startTestServer(models.deepseekR1, { parallel: 1, ctxSize: 2048 });
  t.teardown(ours.close);
  const ref = await startLlamaServer(['-m', models.deepseekR1, '-c', '2048', '-np', '1', '--reasoning-budget', '4']);
  t.teardown(ref.close);
  // A budget of 4 thinking tokens forces </think>, so the answer has both parts even from random weights.
  const body = { messages: ask, max_tokens: 12, temperature: 0, reasoning_budget_tokens: 4 };
  const mine = await postJson(`${ours.base}/v1/chat/completions`, body);
  const theirs = await postJson(`${ref.base}/v1/chat/completions`, body);
  t.equal(mine.status, 200);
  t.same(mine.body.choices[0].message, theirs.body.choices[0].message);
  t.ok(mine.body.choices[0].message.reasoning_content, 'there is reasoning');
  const streamed = await fetch(`${ours.base}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ ...body, stream: true }) });
  t.same(assemble(await streamed.text()).message, mine.body.choices[0].message, 'streamed as reasoning_content and content deltas');
  const none = await postJson(`${ours.base}/v1/chat/completions`, { ...body, reasoning_format: 'none' });
  t.notOk('reasoning_content' in none.body.choices[0].message, 'reasoning_format none keeps the thinking in the content');
  t.match(none.body.choices[0].message.content, /<\/think>/);
});

t.test('--reasoning-budget-message / reasoning_budget_message: the text forced before </think>, as llama-server', async (t) => {
  const message = ' Time is up, answering now.';
  const ours = await startTestServer(models.deepseekR1, { parallel: 1, ctxSize: 2048, chat: { reasoningBudgetMessage: message } });
  t.teardown(ours.close);
  const ref = await startLlamaServer(['-m', models.deepseekR1, '-c', '2048', '-np', '1', '--reasoning-budget-message', message]);
  t.teardown(ref.close);
  const body = { messages: ask, max_tokens: 24, temperature: 0, reasoning_budget_tokens: 4 };
  const mine = await postJson(`${ours.base}/v1/chat/completions`, body);
  const theirs = await postJson(`${ref.base}/v1/chat/completions`, body);
  t.equal(mine.status, 200);
  t.match(mine.body.choices[0].message.reasoning_content, /Time is up, answering now\.$/, 'the message ends the reasoning');
  t.same(mine.body.choices[0].message, theirs.body.choices[0].message, 'the server default, as llama-server');
  const perRequest = { ...body, reasoning_budget_message: ' Stop.' };
  const mineOwn = await postJson(`${ours.base}/v1/chat/completions`, perRequest);
  t.match(mineOwn.body.choices[0].message.reasoning_content, /Stop\.$/, 'a request\'s own message wins');
  t.same(mineOwn.body.choices[0].message, (await postJson(`${ref.base}/v1/chat/completions`, perRequest)).body.choices[0].message);
});

t.test('bad tool requests are 400s naming the field, never a crash', async (t) => {
  const ours = await startTestServer(models.qwen25, { parallel: 1, ctxSize: 1024 });
  t.teardown(ours.close);
  const url = `${ours.base}/v1/chat/completions`;
  const cases: Array<[string, object, RegExp]> = [
    ['a tool without a name', { messages: ask, tools: [{ type: 'function', function: { description: 'x' } }] }, /tools/],
    ['a tool that is not a function', { messages: ask, tools: [{ type: 'retrieval' }] }, /tools/],
    ['an unknown named tool_choice', { messages: ask, tools: [weather], tool_choice: { type: 'function', function: { name: 'nope' } } }, /no tool named "nope"/],
    ['an unknown tool_choice', { messages: ask, tools: [weather], tool_choice: 'sometimes' }, /tool_choice/],
    ['an assistant message with neither content nor tool calls', { messages: [...ask, { role: 'assistant' }] }, /assistant message must contain either 'content' or 'tool_calls'/],
    ['a tool call without a function', { messages: [...ask, { role: 'assistant', tool_calls: [{ id: 'x', type: 'function' }] }] }, /tool_calls/],
    ['a user message without content', { messages: [{ role: 'user' }] }, /must contain 'content'/],
    ['two assistant messages at the end', { messages: [...ask, { role: 'assistant', content: 'a' }, { role: 'assistant', content: 'b' }] }, /2 or more assistant messages/],
    ['add_generation_prompt with continue_final_message', { messages: [...ask, { role: 'assistant', content: 'a' }], add_generation_prompt: true, continue_final_message: true }, /Cannot set both/],
    ['a grammar with tools', { messages: ask, tools: [weather], grammar: 'root ::= "x"' }, /Cannot use custom grammar constraints with tools/],
    ['tool parameters that are not an object', { messages: ask, tools: [{ type: 'function', function: { name: 'f', parameters: 'x' } }] }, /tools/],
  ];
  for (const [name, body, message] of cases) {
    const res = await postJson(url, body);
    t.equal(res.status, 400, name);
    t.match(res.body.error?.message, message, name);
  }
  t.equal((await fetch(`${ours.base}/health`)).status, 200, 'the server keeps serving');
});

t.test('the openai client: tools plain and streamed, and a tool-result round trip', async (t) => {
  const ours = await startTestServer(models.commandR7b, { parallel: 1, ctxSize: 2048 });
  t.teardown(ours.close);
  const client = new OpenAI({ baseURL: `${ours.base}/v1`, apiKey: 'unused' });
  const tools = [weather] as OpenAI.Chat.Completions.ChatCompletionTool[];
  const first = await client.chat.completions.create({ model: 'x', messages: ask as never, tools, tool_choice: 'required', max_tokens: 64, temperature: 0 });
  const call = first.choices[0]!.message.tool_calls?.[0];
  t.equal(call?.type === 'function' && call.function.name, 'get_weather');
  const stream = await client.chat.completions.create({ model: 'x', messages: ask as never, tools, tool_choice: 'required', max_tokens: 64, temperature: 0, stream: true });
  let name = '';
  let args = '';
  for await (const chunk of stream) {
    for (const c of chunk.choices[0]?.delta.tool_calls ?? []) {
      name += c.function?.name ?? '';
      args += c.function?.arguments ?? '';
    }
  }
  t.equal(name, 'get_weather');
  t.equal(args, call?.type === 'function' ? call.function.arguments : '', 'the streamed arguments equal the plain ones');
  // The round trip on Qwen 2.5, whose format parses free text (Command R7B answers it with llama-server's 500).
  const qwen = await startTestServer(models.qwen25, { parallel: 1, ctxSize: 2048 });
  t.teardown(qwen.close);
  const next = await new OpenAI({ baseURL: `${qwen.base}/v1`, apiKey: 'unused' }).chat.completions.create({
    model: 'x',
    messages: [...ask, first.choices[0]!.message, { role: 'tool', tool_call_id: call!.id, content: '{"temperature_c": 21}' }] as never,
    tools,
    max_tokens: 8,
    temperature: 0,
  });
  t.equal(next.choices[0]!.message.role, 'assistant', 'the round trip is accepted');
});

t.test('a reply its format cannot parse is llama-server\'s 500, plain and streamed', async (t) => {
  const ours = await startTestServer(models.functionaryV32, { parallel: 1, ctxSize: 2048 });
  t.teardown(ours.close);
  const ref = await startLlamaServer(['-m', models.functionaryV32, '-c', '2048', '-np', '1']);
  t.teardown(ref.close);
  const body = { messages: ask, tools: [weather], max_tokens: 24, temperature: 0 };
  const mine = await postJson(`${ours.base}/v1/chat/completions`, body);
  const theirs = await postJson(`${ref.base}/v1/chat/completions`, body);
  t.equal(mine.status, 500);
  t.same(mine.body, theirs.body);
  const streamed = await fetch(`${ours.base}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ ...body, stream: true }) });
  const events = parseSse(await streamed.text()) as any[];
  t.same(events[0].choices[0].delta, { role: 'assistant', content: null }, 'the role chunk, as llama-server');
  t.same(events.at(-1), theirs.body, 'then the error as the last event, with no text before it');
  t.equal(events.length, 2);
});

t.test('every shipped template of the generated models answers a tools request as llama-server does, plain and streamed', async (t) => {
  const all = await ensureTemplateModels();
  for (const [name, path] of Object.entries(all)) {
    const ours = await startTestServer(path, { parallel: 1, ctxSize: 2048 });
    const ref = await startLlamaServer(['-m', path, '-c', '2048', '-np', '1']);
    try {
      const body = { messages: ask, tools: [weather], max_tokens: 24, temperature: 0 };
      const mine = await postJson(`${ours.base}/v1/chat/completions`, body);
      const theirs = await postJson(`${ref.base}/v1/chat/completions`, body);
      t.equal(mine.status, theirs.status, `${name}: status`);
      if (theirs.status !== 200) continue;
      t.equal(mine.body.choices[0].finish_reason, theirs.body.choices[0].finish_reason, `${name}: finish_reason`);
      t.same(withoutIds(mine.body.choices[0].message), withoutIds(theirs.body.choices[0].message), `${name}: message`);
      const streamed = await fetch(`${ours.base}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ ...body, stream: true }) });
      t.same(withoutIds(assemble(await streamed.text()).message), withoutIds(mine.body.choices[0].message), `${name}: the stream adds up to it`);
    } finally {
      await ours.close();
      await ref.close();
    }
  }
});
