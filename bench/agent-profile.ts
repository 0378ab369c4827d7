// Agent traffic: many chat requests at once that share one long system prompt with tool schemas
// and differ in a short user turn (agent-fleet), and agents that come back with a growing history
// of tool calls and tool results (agent-loop). Clients' defaults throughout: no cache_prompt field,
// streamed OpenAI chat completions, greedy.
import { ensureBenchModel } from '../test/fixtures/models.js';
import { BenchError, median, percentile, prng, streamChat } from './load.js';
import type { Profile, Scenario, ScenarioContext } from './scenario.js';

export const FLEET = { requests: 12, maxTokens: 8, rounds: 2 };
const LOOP = { agents: 8, turns: 6, maxTokens: 16, toolResultWords: 90 };

const WORDS = ('agent tool call result file path search read write list directory function argument value return error retry ' +
  'context window token budget plan step check test build deploy review commit branch merge issue ticket user request answer ' +
  'schema field type string number boolean object array required optional description example default format pattern').split(' ');

/** `n` words of deterministic filler text (a pure function of `seed`). */
function words(n: number, seed: number): string {
  const next = prng(seed);
  return Array.from({ length: n }, () => WORDS[Math.floor(next() * WORDS.length)]!).join(' ');
}

/** The shared system prompt: instructions of about 1,400 tokens in all with the tools' schemas. */
const SYSTEM_PROMPT = `You are a coding agent working in a repository. Follow these rules.\n${Array.from({ length: 32 }, (_, i) => `${i + 1}. ${words(38, 77 + i)}.`).join('\n')}`;

/** Six tool schemas, as agent frameworks send them. */
const TOOLS = ['read_file', 'write_file', 'list_directory', 'search_code', 'run_tests', 'git_commit'].map((name, i) => ({
  type: 'function',
  function: {
    name,
    description: words(24, 900 + i),
    parameters: {
      type: 'object',
      properties: {
        path: { type: 'string', description: words(10, 950 + i) },
        query: { type: 'string', description: words(8, 970 + i) },
        limit: { type: 'integer', description: 'most results to return' },
      },
      required: ['path'],
    },
  },
}));

type Message = Record<string, unknown>;

function chatBody(messages: Message[], maxTokens: number): Record<string, unknown> {
  return { model: 'bench', messages, tools: TOOLS, max_tokens: maxTokens, temperature: 0 };
}

/** Request `i` of agent-fleet's round `round`. */
export function fleetRequest(round: number, i: number): Record<string, unknown> {
  return chatBody([{ role: 'system', content: SYSTEM_PROMPT }, { role: 'user', content: `Task ${round}-${i}: ${words(12, 3000 + 100 * round + i)}` }], FLEET.maxTokens);
}

const agentFleet: Scenario = {
  id: 'agent-fleet',
  title: 'agent fleet',
  timeoutSeconds: 300,
  description: `${FLEET.requests} streamed /v1/chat/completions sent together, each with the same system prompt (~1,400 tokens with ${TOOLS.length} tool schemas) and a different one-line user turn, max_tokens ${FLEET.maxTokens}, temperature 0, no cache_prompt field (clients' default); cold (fresh server) then a second round with new user turns. Wall = first request sent -> last stream ended; TTFT = request start -> first chunk carrying text or a tool call.`,
  metrics: [
    { key: 'coldWall', label: 'cold: wall time', unit: 'ms', kind: 'latency', targetRatio: 0.3 },
    { key: 'coldTtftP50', label: 'cold: TTFT p50', unit: 'ms', kind: 'latency', targetRatio: 0.3 },
    { key: 'coldTtftMax', label: 'cold: TTFT max', unit: 'ms', kind: 'info' },
    { key: 'warmWall', label: 'second round: wall time', unit: 'ms', kind: 'latency', targetRatio: 0.8 },
    { key: 'warmTtftP50', label: 'second round: TTFT p50', unit: 'ms', kind: 'info' },
    { key: 'warmTtftMax', label: 'second round: TTFT max', unit: 'ms', kind: 'info' },
  ],
  async run(ctx) {
    const out: Record<string, number> = {};
    for (let round = 0; round < FLEET.rounds; round++) {
      const t0 = performance.now();
      const results = await Promise.all(
        Array.from({ length: FLEET.requests }, (_, i) =>
          streamChat(ctx.base, fleetRequest(round, i)),
        ),
      );
      const wall = Math.max(...results.map((r) => r.endAt)) - t0;
      const ttft = results.map((r) => r.firstTokenMs);
      const tag = round === 0 ? 'cold' : 'warm';
      out[`${tag}Wall`] = wall;
      out[`${tag}TtftP50`] = percentile(ttft, 50);
      out[`${tag}TtftMax`] = Math.max(...ttft);
      ctx.progress(`${ctx.server}: agent fleet ${tag}: wall ${wall.toFixed(0)} ms, prompt tokens ${median(results.map((r) => r.promptTokens))} (median), cached ${results.map((r) => r.cachedTokens).join(',')}`);
    }
    return out;
  },
};

/** One agent's turns: each answer is followed by a tool call of the agent's and the tool's result. */
async function agentTurns(ctx: ScenarioContext, agent: number, ttft: number[]): Promise<void> {
  const messages: Message[] = [{ role: 'system', content: SYSTEM_PROMPT }, { role: 'user', content: `Agent ${agent}: ${words(20, 5000 + agent)}` }];
  for (let turn = 0; turn < LOOP.turns; turn++) {
    const r = await streamChat(ctx.base, chatBody(messages, LOOP.maxTokens));
    ttft.push(r.firstTokenMs);
    // The history as an agent framework keeps it: the assistant's tool call and the tool's result
    // (fixed, so that both servers see the same prompts whatever the random model answered).
    const id = `call_${agent}_${turn}`;
    messages.push({ role: 'assistant', content: '', tool_calls: [{ id, type: 'function', function: { name: TOOLS[turn % TOOLS.length]!.function.name, arguments: JSON.stringify({ path: `src/file${agent}_${turn}.ts` }) } }] });
    messages.push({ role: 'tool', tool_call_id: id, content: words(LOOP.toolResultWords, 7000 + 100 * agent + turn) });
  }
}

const agentLoop: Scenario = {
  id: 'agent-loop',
  title: 'agent loop',
  timeoutSeconds: 400,
  description: `${LOOP.agents} agents at once, ${LOOP.turns} turns each: the shared system prompt and tools of agent-fleet, a user task, then per turn a streamed /v1/chat/completions (max_tokens ${LOOP.maxTokens}, temperature 0, clients' defaults) and the history grown by an assistant tool call and a tool result (~${LOOP.toolResultWords} words). Total = first request -> last agent done.`,
  metrics: [
    { key: 'total', label: 'total time', unit: 'ms', kind: 'latency', targetRatio: 0.7 },
    { key: 'ttftP50', label: 'TTFT p50', unit: 'ms', kind: 'info' },
    { key: 'ttftP99', label: 'TTFT p99', unit: 'ms', kind: 'info' },
  ],
  async run(ctx) {
    const ttft: number[] = [];
    const t0 = performance.now();
    await Promise.all(Array.from({ length: LOOP.agents }, (_, a) => agentTurns(ctx, a, ttft)));
    const total = performance.now() - t0;
    if (ttft.length !== LOOP.agents * LOOP.turns) throw new BenchError(`${ctx.server}: agent loop: ${ttft.length} answers, ${LOOP.agents * LOOP.turns} expected`);
    return { total, ttftP50: percentile(ttft, 50), ttftP99: percentile(ttft, 99) };
  },
};

export const AGENT_PROFILE: Profile = {
  id: 'agent',
  model: () => ensureBenchModel(),
  // The command line of the issue that measured this workload, as users run both servers: one
  // shared KV pool for 12 slots, the chat template through jinja, llama-server's default
  // host-memory prompt cache (no --cache-ram).
  commonArgs: (t) => ['-np', '12', '-c', '18432', '--kv-unified', '--jinja', '-t', String(t), '--no-webui'],
  oursExtra: [],
  referenceExtra: [],
  scenarios: [agentFleet, agentLoop],
};
