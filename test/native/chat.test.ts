import t, { type Test } from 'tap';
import {
  native, type ChatInputMessage, type ChatParams, type ChatParsedMessage, type ChatTool, type NativeModel, type SamplingParams,
} from '../../src/native/binding.js';
import { InferenceEngine } from '../../src/inference/engine/engine.js';
import { ensureTemplateModels } from '../fixtures/models.js';
import type { ChatTemplateModelName } from '../fixtures/chat-templates.js';
import { TEST_THREADS } from '../helpers/test-threads.js';

native.setLogLevel('error');
const paths = await ensureTemplateModels();
const loaded = new Map<ChatTemplateModelName, NativeModel>();
async function model(name: ChatTemplateModelName): Promise<NativeModel> {
  let m = loaded.get(name);
  if (!m) loaded.set(name, (m = await native.Model.load(paths[name], {}).promise));
  return m;
}
t.teardown(() => { for (const m of loaded.values()) m.dispose(); });

const UNIT_SCHEMA = { type: 'object', properties: { unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['unit'] };
const tools: ChatTool[] = [{ name: 'get_weather', description: 'Weather of a city', parameters: JSON.stringify(UNIT_SCHEMA) }];

/** A full tool round trip: the call, its result, the answer, the next question. */
const history: ChatInputMessage[] = [
  { role: 'user', content: 'Weather?' },
  { role: 'assistant', content: '', toolCalls: [{ id: 'call00001', name: 'get_weather', arguments: '{"unit":"celsius"}' }] },
  { role: 'tool', toolCallId: 'call00001', toolName: 'get_weather', content: '{"temperature": 21}' },
  { role: 'assistant', content: 'It is 21 degrees.' },
  { role: 'user', content: 'Thanks' },
];

// What each template renders for the tools and the history above (read off the template sources).
const rendered: Array<[ChatTemplateModelName, string[]]> = [
  ['qwen25', [
    '<tools>\n{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {"type": "object", "properties": {"unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["unit"]}}}\n</tools>',
    '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"unit": "celsius"}}\n</tool_call><|im_end|>',
    '<|im_start|>user\n<tool_response>\n{"temperature": 21}\n</tool_response><|im_end|>',
    '<|im_start|>assistant\nIt is 21 degrees.<|im_end|>\n<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n',
  ]],
  ['hermes2Pro', [
    'Here are the available tools: <tools> {"type": "function", "function": {"name": "get_weather", "description": "get_weather(unit: str) - Weather of a city',
    '<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"unit": "celsius"}}\n</tool_call><|im_end|>',
    '<|im_start|>tool\n<tool_response>\n{"temperature": 21}\n</tool_response>\n<|im_end|>',
  ]],
  ['llama31', [
    '"name": "get_weather",\n        "description": "Weather of a city",',
    '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"unit": "celsius"}}<|eot_id|>',
    '<|start_header_id|>ipython<|end_header_id|>\n\n"{\\"temperature\\": 21}"<|eot_id|>',
  ]],
  ['mistralNemo', [
    '[INST]Weather?[/INST][TOOL_CALLS][{"name": "get_weather", "arguments": {"unit": "celsius"}, "id": "call00001"}]</s>',
    '[TOOL_RESULTS]{"content": {"temperature": 21}, "call_id": "call00001"}[/TOOL_RESULTS]It is 21 degrees.</s>',
    '[AVAILABLE_TOOLS][{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": ',
  ]],
  ['deepseekR1', [
    '<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{"unit": "celsius"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>',
    '<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{"temperature": 21}<｜tool▁output▁end｜>',
    '<｜User｜>Thanks<｜Assistant｜><think>\n',
  ]],
  ['gptOss', [
    'namespace functions {\n\n// Weather of a city\ntype get_weather = (_: {\nunit: "celsius" | "fahrenheit",\n}) => any;',
    '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"unit": "celsius"}<|call|>',
    '<|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>"{\\"temperature\\": 21}"<|end|>',
  ]],
  ['functionaryV32', [
    '// Weather of a city\ntype get_weather = (_: {\nunit: "celsius" | "fahrenheit",\n}) => any;',
    '<|start_header_id|>assistant<|end_header_id|>\n\n>>>get_weather\n{"unit":"celsius"}<|eot_id|>',
    '<|start_header_id|>tool<|end_header_id|>\n\n{"temperature": 21}<|eot_id|>',
  ]],
  ['commandR7b', [
    '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"unit": "celsius"}}\n]<|END_ACTION|>',
    '<|START_TOOL_RESULT|>[\n    {\n        "tool_call_id": "0",\n        "results": {\n            "0": "{\\"temperature\\": 21}"\n        },',
    '<|START_RESPONSE|>It is 21 degrees.<|END_RESPONSE|>',
  ]],
];

t.test('applyChat renders the tools and the whole tool history into the prompt', async (t) => {
  for (const [name, substrings] of rendered) {
    const p = (await model(name)).applyChat({ messages: history, tools });
    for (const s of substrings) t.ok(p.prompt.includes(s), `${name} renders ${JSON.stringify(s.slice(0, 60))}`);
  }
});

t.test('tool_choice auto gives a lazy grammar with the format trigger; required a grammar from the start', async (t) => {
  const cases: Array<[ChatTemplateModelName, string, string[]]> = [
    ['qwen25', '<tool_call>\n', ['<tool_call>', '</tool_call>']],
    ['hermes2Pro', '<tool_call>\n', ['<tool_call>', '</tool_call>']],
    ['granite40', '<tool_call>\n', ['<tool_call>', '</tool_call>']],
    ['mistralNemo', '[TOOL_CALLS]', ['[TOOL_CALLS]']],
    ['commandR7b', '<|START_ACTION|>', ['<|START_THINKING|>', '<|END_THINKING|>', '<|START_RESPONSE|>', '<|END_RESPONSE|>', '<|START_ACTION|>', '<|END_ACTION|>']],
    ['deepseekR1', '<｜tool▁calls▁begin｜>', ['<think>', '</think>', '<｜tool▁calls▁begin｜>', '<｜end▁of▁sentence｜>', '<｜tool▁call▁begin｜>', 'function<｜tool▁sep｜>', '```json', '```<｜tool▁call▁end｜><｜tool▁calls▁end｜>']],
  ];
  for (const [name, trigger, preserved] of cases) {
    const m = await model(name);
    const auto = m.applyChat({ messages: [{ role: 'user', content: 'Weather?' }], tools, toolChoice: 'auto' });
    t.equal(auto.format, 'peg-native', `${name} format`);
    t.equal(auto.grammarLazy, true, `${name} auto is lazy`);
    t.same(auto.grammarTriggers, [{ type: 'word', value: trigger, token: null }], `${name} trigger`);
    t.same(auto.preservedTokens, preserved, `${name} preserved tokens`);
    t.match(auto.grammar, /get_weather/, `${name} grammar names the tool`);
    const required = m.applyChat({ messages: [{ role: 'user', content: 'Weather?' }], tools, toolChoice: 'required' });
    t.equal(required.grammarLazy, false, `${name} required is not lazy`);
    t.same(required.grammarTriggers, [], `${name} required needs no trigger`);
    t.match(required.grammar, /get_weather/);
    const none = m.applyChat({ messages: [{ role: 'user', content: 'Weather?' }], tools, toolChoice: 'none' });
    t.equal(none.grammar, '', `${name} none: free output`);
  }
});

t.test('applyChat reports the generation prompt and the thinking tags of the template', async (t) => {
  const qwen3 = (await model('qwen3')).applyChat({ messages: [{ role: 'user', content: 'Hi' }] });
  t.equal(qwen3.generationPrompt, '<|im_start|>assistant\n');
  t.equal(qwen3.supportsThinking, true);
  t.equal(qwen3.thinkingStartTag, '<think>');
  t.same(qwen3.thinkingEndTags, ['</think>']);
  t.ok(qwen3.prompt.endsWith('<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n'));
  const noThinking = (await model('qwen3')).applyChat({ messages: [{ role: 'user', content: 'Hi' }], enableThinking: false });
  t.ok(noThinking.prompt.endsWith('<|im_start|>assistant\n<think>\n\n</think>\n\n'), 'enable_thinking false closes the think block in the prompt');
  const r1 = (await model('deepseekR1')).applyChat({ messages: [{ role: 'user', content: 'Hi' }] });
  t.equal(r1.generationPrompt, '<｜Assistant｜><think>\n', 'DeepSeek R1 opens the think block itself');
  const qwen25 = (await model('qwen25')).applyChat({ messages: [{ role: 'user', content: 'Hi' }] });
  t.equal(qwen25.supportsThinking, false);
  t.equal(qwen25.thinkingStartTag, '');
});

t.test('kwargs, content parts and a template override reach the template', async (t) => {
  const m = await model('qwen25');
  const template = '{{ greeting }}|{% for m in messages %}{{ m.role }}={{ m.content }};{% endfor %}';
  const p = m.applyChat({ template, kwargs: { greeting: '"hello"' }, messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }] });
  t.equal(p.prompt, 'hello|user=a\nb;');
  t.equal(p.format, 'peg-native');
  t.equal(m.applyChat({ template: 'n={{ messages|length }}', messages: [{ role: 'user', content: 'x' }] }).prompt, 'n=1', 'another override replaces the first');
  t.equal(m.applyChat({ messages: [{ role: 'user', content: 'x' }] }).prompt,
    '<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n',
    'without one, the model\'s own template again');
});

// llama.cpp's parsers keep the whitespace around markers (as llama-server returns it).
t.test('parse splits a hand-written output into reasoning, content and tool calls', async (t) => {
  const cases: Array<[ChatTemplateModelName, string, ChatParsedMessage]> = [
    ['qwen25', 'Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"unit": "celsius"}}\n</tool_call>',
      { content: 'Let me check.\n', reasoningContent: '', toolCalls: [{ id: '', name: 'get_weather', arguments: '{"unit": "celsius"}' }] }],
    ['qwen3', '<think>\nThe user wants weather.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"unit": "fahrenheit"}}\n</tool_call>',
      { content: '', reasoningContent: 'The user wants weather.\n', toolCalls: [{ id: '', name: 'get_weather', arguments: '{"unit": "fahrenheit"}' }] }],
    ['granite40', '<tool_call>\n{"name": "get_weather", "arguments": {"unit": "fahrenheit"}}\n</tool_call>',
      { content: '', reasoningContent: '', toolCalls: [{ id: '', name: 'get_weather', arguments: '{"unit": "fahrenheit"}' }] }],
    ['mistralNemo', '[TOOL_CALLS][{"name": "get_weather", "arguments": {"unit": "celsius"}, "id": "abcdefghi"}]',
      { content: '', reasoningContent: '', toolCalls: [{ id: 'abcdefghi', name: 'get_weather', arguments: '{"unit": "celsius"}' }] }],
    // The generation prompt ends with "<think>\n": thinking is open when the output starts.
    ['deepseekR1', 'Cold, probably.\n</think>\n\nIt is cold.',
      { content: '\n\nIt is cold.', reasoningContent: '\nCold, probably.\n', toolCalls: [] }],
    ['commandR7b', '<|START_THINKING|>Call the tool.<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"unit": "celsius"}}\n]<|END_ACTION|>',
      { content: '', reasoningContent: 'Call the tool.', toolCalls: [{ id: '0', name: 'get_weather', arguments: '{"unit": "celsius"}' }] }],
    ['gptOss', '<|channel|>analysis<|message|>Need the tool.<|end|><|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"unit": "celsius"}',
      { content: '', reasoningContent: 'Need the tool.', toolCalls: [{ id: '', name: 'get_weather', arguments: '{"unit": "celsius"}' }] }],
  ];
  for (const [name, output, expected] of cases) {
    const p = (await model(name)).applyChat({ messages: [{ role: 'user', content: 'Weather?' }], tools, reasoningFormat: 'auto' });
    const parser = new native.ChatParser({ format: p.format, parser: p.parser, generationPrompt: p.generationPrompt, reasoningFormat: 'auto' });
    t.same(parser.parse(output, false), expected, name);
  }
});

t.test('partial parses of growing prefixes never contradict the final parse, and their diffs add up to it', async (t) => {
  const cases: Array<[ChatTemplateModelName, string]> = [
    ['qwen3', '<think>\nThe user wants weather.\n</think>\n\nSure.\n<tool_call>\n{"name": "get_weather", "arguments": {"unit": "fahrenheit"}}\n</tool_call>'],
    ['mistralNemo', '[TOOL_CALLS][{"name": "get_weather", "arguments": {"unit": "celsius"}, "id": "abcdefghi"}]'],
    ['commandR7b', '<|START_THINKING|>Call it.<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", "parameters": {"unit": "celsius"}}\n]<|END_ACTION|>'],
  ];
  for (const [name, output] of cases) {
    const p = (await model(name)).applyChat({ messages: [{ role: 'user', content: 'Weather?' }], tools, reasoningFormat: 'auto' });
    const parser = new native.ChatParser({ format: p.format, parser: p.parser, generationPrompt: p.generationPrompt, reasoningFormat: 'auto' });
    const final = parser.parse(output, false);
    let previous: ChatParsedMessage = { content: '', reasoningContent: '', toolCalls: [] };
    const acc = { content: '', reasoning: '', calls: [] as Array<{ id: string; name: string; arguments: string }> };
    let contradictions = 0;
    const chars = Array.from(output);
    for (let n = 1; n <= chars.length; n++) {
      const partial = n === chars.length ? final : parser.parse(chars.slice(0, n).join(''), true);
      if (!final.content.startsWith(partial.content) || !final.reasoningContent.startsWith(partial.reasoningContent) ||
          partial.toolCalls.length > final.toolCalls.length ||
          partial.toolCalls.some((c, i) => !final.toolCalls[i]!.name.startsWith(c.name) || !final.toolCalls[i]!.arguments.startsWith(c.arguments))) {
        contradictions++;
      }
      for (const d of native.ChatParser.diff(previous, partial)) {
        acc.content += d.contentDelta;
        acc.reasoning += d.reasoningContentDelta;
        if (d.toolCallIndex !== null && d.toolCallDelta) {
          const call = (acc.calls[d.toolCallIndex] ??= { id: '', name: '', arguments: '' });
          if (d.toolCallDelta.name) call.name = d.toolCallDelta.name;
          if (d.toolCallDelta.id) call.id = d.toolCallDelta.id;
          call.arguments += d.toolCallDelta.arguments;
        }
      }
      previous = partial;
    }
    t.equal(contradictions, 0, `${name}: every prefix is consistent with the final parse`);
    t.same({ content: acc.content, reasoningContent: acc.reasoning, toolCalls: acc.calls }, final, `${name}: the deltas add up to the final message`);
  }
});

t.test('diff gives llama.cpp deltas and refuses a message that withdraws a tool call', async (t) => {
  const call = { id: '', name: 'get_weather', arguments: '{"unit": "cel' };
  t.same(native.ChatParser.diff({ content: 'Hi', reasoningContent: '', toolCalls: [] }, { content: 'Hi there', reasoningContent: '', toolCalls: [call] }), [
    { reasoningContentDelta: '', contentDelta: ' there', toolCallIndex: null, toolCallDelta: null },
    { reasoningContentDelta: '', contentDelta: '', toolCallIndex: 0, toolCallDelta: call },
  ]);
  t.same(native.ChatParser.diff({ content: '', reasoningContent: '', toolCalls: [call] }, { content: '', reasoningContent: '', toolCalls: [{ ...call, arguments: '{"unit": "celsius"}' }] }), [
    { reasoningContentDelta: '', contentDelta: '', toolCallIndex: 0, toolCallDelta: { id: '', name: '', arguments: 'sius"}' } },
  ]);
  t.throws(() => native.ChatParser.diff({ content: '', reasoningContent: '', toolCalls: [call] }, { content: '', reasoningContent: '', toolCalls: [] }),
    { code: 'INVALID_DIFF', message: /now finding less tool calls/ });
});

t.test('applyChatAsync renders on a worker what applyChat renders, many at once and across template overrides', async (t) => {
  for (const [name] of rendered) {
    const m = await model(name);
    const inputs = { messages: history, tools, now: Date.UTC(2026, 10, 26) };
    t.same(await m.applyChatAsync(inputs), m.applyChat(inputs), `${name}: the same ChatParams`);
  }
  // Two overrides in turn: each call swaps the cached override while others still render with the one they started with.
  const m = await model('qwen25');
  const templates = ['{% for m in messages %}A:{{ m.content }}{% endfor %}', '{% for m in messages %}B:{{ m.content }}{% endfor %}'];
  const calls = Array.from({ length: 24 }, (_, i) => ({ messages: [{ role: 'user', content: `turn ${i}` }], template: templates[i % 2]! }));
  const results = await Promise.all(calls.map((c) => m.applyChatAsync(c)));
  t.same(results.map((r) => r.prompt), calls.map((c, i) => `${i % 2 ? 'B' : 'A'}:${c.messages[0]!.content}`), 'each call rendered with its own override');
});

t.test('applyChatAsync: malformed inputs throw at once, a render that fails rejects with TEMPLATE_FAILED', async (t) => {
  const m = await model('qwen25');
  const user = [{ role: 'user', content: 'Hi' }];
  t.throws(() => m.applyChatAsync({ messages: user, tools: [{ name: 'f', parameters: '[1]' }] }), { code: 'BAD_TOOLS', message: 'tools[0].parameters must be a JSON object (a JSON schema)' });
  t.throws(() => m.applyChatAsync({ messages: user, template: '{% for m in messages %}{{ m.content }}' }), { code: 'TEMPLATE_FAILED', message: /^chat template failed to parse: / });
  await t.rejects(m.applyChatAsync({ messages: user, template: "{{ raise_exception('no tools here') }}" }), { code: 'TEMPLATE_FAILED', message: /^chat template failed: [\s\S]*no tools here/ });
  await t.rejects(m.applyChatAsync({ messages: user, tools, grammar: 'root ::= "x"' }), { code: 'TEMPLATE_FAILED', message: /Cannot specify grammar with tools/ });
  t.equal((await m.applyChatAsync({ messages: user })).prompt, m.applyChat({ messages: user }).prompt, 'the model still renders after the failures');
});

t.test('bad tools, templates, JSON and parsers are refused with coded errors', async (t) => {
  const m = await model('qwen25');
  const user = [{ role: 'user', content: 'Hi' }];
  t.throws(() => m.applyChat({ messages: user, tools: [{ name: 'f', parameters: '{not json' }] }), { code: 'BAD_TOOLS', message: /^tools\[0\]\.parameters is not valid JSON/ });
  t.throws(() => m.applyChat({ messages: user, tools: [{ name: 'f', parameters: '[1]' }] }), { code: 'BAD_TOOLS', message: 'tools[0].parameters must be a JSON object (a JSON schema)' });
  t.throws(() => m.applyChat({ messages: user, tools: [tools[0]!, { name: '' }] }), { code: 'BAD_TOOLS', message: 'tools[1].name must be a non-empty string' });
  t.throws(() => m.applyChat({ messages: user, template: '{% for m in messages %}{{ m.content }}' }), { code: 'TEMPLATE_FAILED', message: /^chat template failed to parse: / });
  t.throws(() => m.applyChat({ messages: user, template: "{{ raise_exception('no tools here') }}" }), { code: 'TEMPLATE_FAILED', message: /no tools here/ });
  t.throws(() => (loaded.get('mistralNemo') as NativeModel).applyChat({ messages: [...user, { role: 'user', content: 'again' }] }),
    { code: 'TEMPLATE_FAILED', message: /conversation roles must alternate user\/assistant/ });
  t.throws(() => m.applyChat({ messages: user, tools, grammar: 'root ::= "x"' }), { code: 'TEMPLATE_FAILED', message: /Cannot specify grammar with tools/ });
  t.throws(() => m.applyChat({ messages: user, kwargs: { enable_thinking: 'yes' } }), { code: 'BAD_JSON', message: /^kwargs\.enable_thinking is not valid JSON/ });
  t.throws(() => m.applyChat({ messages: user, jsonSchema: '{' }), { code: 'BAD_JSON' });
  t.throws(() => new native.ChatParser({ format: 'no-such-format', parser: '', generationPrompt: '' }), { code: 'BAD_PARSER', message: 'unknown chat format: no-such-format' });
  t.throws(() => new native.ChatParser({ format: 'peg-native', parser: 'not a parser', generationPrompt: '' }), { code: 'BAD_PARSER' });
});

// ---------------------------------------------------------------------------------------------
// Generation through the engine: the chat format's grammar on the sampler.

/** The sampling parameters llama-server derives from a ChatParams (greedy). */
function chatSampling(p: ChatParams, extra: SamplingParams = {}): SamplingParams {
  return {
    temperature: 0, grammar: p.grammar, grammarToolCalls: true, grammarLazy: p.grammarLazy, grammarTriggers: p.grammarTriggers,
    preservedTokens: p.preservedTokens, generationPrompt: p.generationPrompt,
    ...(p.thinkingEndTags.length ? { reasoningBudgetStartTag: p.thinkingStartTag, reasoningBudgetEndTags: p.thinkingEndTags } : {}),
    ...extra,
  };
}

/** A logit bias that makes the random model pick `text` (one token) whenever it is allowed. */
async function favour(name: ChatTemplateModelName, text: string, bias = 50): Promise<[number, number]> {
  const ids = (await model(name)).tokenize(text, false, true);
  if (ids.length !== 1) throw new Error(`${text} is not one token of ${name}`);
  return [ids[0]!, bias];
}

async function generate(name: ChatTemplateModelName, toolChoice: 'auto' | 'required', extra: SamplingParams = {}) {
  const m = await model(name);
  const engine = await InferenceEngine.create(m, { nThreads: TEST_THREADS, nCtx: 4096, nParallel: 1 });
  try {
    const p = m.applyChat({ messages: [{ role: 'user', content: 'Weather?' }], tools, toolChoice });
    const out = await engine.run({ prompt: m.tokenize(p.prompt, true, true), nPredict: 120, stop: p.additionalStops, sampling: chatSampling(p, extra) });
    const parser = new native.ChatParser({ format: p.format, parser: p.parser, generationPrompt: p.generationPrompt });
    return { out, parsed: parser.parse(out.content, false), m };
  } finally {
    await engine.dispose();
  }
}

const expectCall = (t: Test, parsed: ChatParsedMessage) => {
  t.ok(parsed.toolCalls.length >= 1, 'at least one tool call');
  for (const call of parsed.toolCalls) {
    t.equal(call.name, 'get_weather');
    t.match(JSON.parse(call.arguments), { unit: /^(celsius|fahrenheit)$/ }, 'arguments follow the schema');
  }
};

// Grammars of formats that allow content before the calls (Qwen, Hermes, Llama 3.x, ...) let a
// random model write text until the limit; these two formats start with the call.
t.test('with tool_choice required, the grammar forces a well-formed call from random weights (Command R7B, Functionary v3.2)', async (t) => {
  for (const [name, eot] of [['commandR7b', '<|END_OF_TURN_TOKEN|>'], ['functionaryV32', '<|eot_id|>']] as const) {
    // End of turn is only allowed once a call is complete; the bias takes it then (the grammar
    // would also allow further calls).
    const { out, parsed } = await generate(name, 'required', { logitBias: [await favour(name, eot)] });
    t.equal(out.stop, 'eos', `${name}: the turn ends after the call`);
    expectCall(t, parsed);
  }
});

t.test('a preserved trigger token starts the lazy grammar, and its text reaches the parser (Command R7B, tool_choice auto)', async (t) => {
  // The random model never picks a control token by itself: the bias makes it start a call;
  // the grammar then allows nothing else there, and only end of generation after the call.
  const { out, parsed } = await generate('commandR7b', 'auto', { logitBias: [await favour('commandR7b', '<|START_ACTION|>')] });
  t.ok(out.content.startsWith('<|START_ACTION|> ['), 'the trigger token is emitted as its text');
  t.ok(out.content.endsWith('<|END_ACTION|>'), 'the call is closed');
  t.equal(out.stop, 'eos');
  t.equal(parsed.content, '');
  expectCall(t, parsed);
});

t.test('a trigger word that is one token must be a preserved token (as llama-server refuses it)', async (t) => {
  const m = await model('qwen25');
  const engine = await InferenceEngine.create(m, { nThreads: TEST_THREADS, nCtx: 512, nParallel: 1 });
  t.teardown(() => engine.dispose());
  const spec = (sampling: SamplingParams) => ({ prompt: m.tokenize('Hi', false, true), nPredict: 4, sampling });
  // Refused at submission (synchronously or through `queued`): the adapter treats both alike.
  await t.rejects(async () => engine.native.submit([spec({ grammar: 'root ::= "x"', grammarLazy: true, grammarTriggers: [{ type: 'word', value: '<tool_call>', token: null }] })]).queued,
    { code: 'BAD_SAMPLING', message: /grammar trigger word should be marked as preserved token: <tool_call>/ });
  await t.rejects(async () => engine.native.submit([spec({ grammar: 'root ::= "x"', grammarLazy: true })]).queued, { code: 'BAD_SAMPLING', message: /no triggers set for lazy grammar/ });
});

t.test('a reasoning budget forces the end of thinking after that many tokens (DeepSeek R1, --reasoning-budget)', async (t) => {
  const m = await model('deepseekR1');
  const engine = await InferenceEngine.create(m, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 1 });
  t.teardown(() => engine.dispose());
  const p = m.applyChat({ messages: [{ role: 'user', content: 'Hi' }], reasoningFormat: 'auto' });
  const out = await engine.run({ prompt: m.tokenize(p.prompt, true, true), nPredict: 12, sampling: chatSampling(p, { reasoningBudgetTokens: 4 }) });
  const [thinkEnd] = m.tokenize('</think>', false, true);
  // The budget counts from the start tag on: the generation prompt's "\n" after <think> is the first of the four.
  t.same(m.tokenize(p.generationPrompt, false, true).slice(-2), m.tokenize('<think>\n', false, true), 'the prompt ends with <think> and a new line');
  t.equal(out.tokens.indexOf(thinkEnd!), 3, 'the fourth generated token closes the think block');
  const thought = m.detokenize(out.tokens.slice(0, 3));
  const parsed = new native.ChatParser({ format: p.format, parser: p.parser, generationPrompt: p.generationPrompt, reasoningFormat: 'auto' }).parse(out.content, true);
  t.equal(parsed.reasoningContent, `\n${thought}`, 'the tokens before it are the reasoning');
  t.equal(parsed.content, m.detokenize(out.tokens.slice(4)), 'the rest is content');
});

t.test('chatTemplateInfo reports the template, its caps and whether it thinks', async (t) => {
  const qwen3 = (await model('qwen3')).chatTemplateInfo();
  t.equal(qwen3.hasModelTemplate, true);
  t.match(qwen3.source, /^\{%- if tools %\}/);
  t.equal(qwen3.caps.supports_tools, true);
  t.equal(qwen3.caps.supports_tool_calls, true);
  t.equal(qwen3.supportsEnableThinking, true);
  const qwen25 = (await model('qwen25')).chatTemplateInfo();
  t.equal(qwen25.supportsEnableThinking, false);
  const plain = (await model('qwen25')).chatTemplateInfo('{% for m in messages %}{{ m.content }}{% endfor %}');
  t.equal(plain.caps.supports_tools, false);
  t.throws(() => (loaded.get('qwen25') as NativeModel).chatTemplateInfo('{% if %}'), { code: 'TEMPLATE_FAILED' });
});
