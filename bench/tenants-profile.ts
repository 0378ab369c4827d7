// Tenants (issue 40, docs/tenants.md): two API keys share one server. Key A is a batch pipeline:
// a 128-token completion every 200 ms, at most 48 outstanding; key B is a person chatting: a short
// chat every 2.5 s. Measures what B waits for its first token while A's backlog grows (median and
// worst), and what A gets done (its generated tokens per second), on both servers. llama-server
// serves its queue first come, first served; ours by fair share across the two keys.
import { setMaxListeners } from 'node:events';
import { ensureBenchModel } from '../test/fixtures/models.js';
import { BenchError, completionBody, percentile, promptTokens, streamChat, streamCompletion } from './load.js';
import { type Profile, type Scenario } from './scenario.js';

/** BENCH_TENANTS_SCALE=k: the window is k times longer (more of B's chats, the same rates). */
const SCALE = Number(process.env.BENCH_TENANTS_SCALE) > 0 ? Number(process.env.BENCH_TENANTS_SCALE) : 1;

const TENANTS = {
  keys: ['bench-key-a', 'bench-key-b'],
  parallel: 4,
  ctx: 8192,
  batchPrompt: 64,
  batchPredict: 128,
  batchEveryMs: 200,
  batchOutstanding: 48,
  chatEveryMs: 2500,
  chatPredict: 16,
  windowMs: 40_000 * SCALE,
};

const auth = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` });

/** `servers`: the servers' flags in words, and an id suffix for a second set of them. */
const tenants = (servers = { id: '', title: '', words: `-np ${TENANTS.parallel} -c ${TENANTS.ctx} --api-key A,B` }): Scenario => ({
  id: `tenants${servers.id}`,
  title: `two tenants: a batch backlog and a chat${servers.title}`,
  timeoutSeconds: 180 + (TENANTS.windowMs / 1000) * 2,
  description: `${servers.words}: key A sends a ${TENANTS.batchPrompt}-token prompt for ${TENANTS.batchPredict} tokens every ${TENANTS.batchEveryMs} ms (at most ${TENANTS.batchOutstanding} outstanding), key B a short chat (${TENANTS.chatPredict} tokens) every ${TENANTS.chatEveryMs / 1000} s, for ${TENANTS.windowMs / 1000} s${SCALE !== 1 ? ` (BENCH_TENANTS_SCALE=${SCALE})` : ''}. B's TTFT = its request start -> first content chunk (chats still waiting at the end of the window are awaited); A's tokens/s = A's generated tokens whose event arrived inside the window / the window.`,
  metrics: [
    { key: 'chatTtftP50', label: 'B (chat): TTFT p50', unit: 'ms', kind: 'latency', targetRatio: 0.3 },
    { key: 'chatTtftMax', label: 'B (chat): worst TTFT', unit: 'ms', kind: 'latency', targetRatio: 0.3 },
    { key: 'batchTokensPerSecond', label: 'A (batch): generated tokens/s', unit: 'tok/s', kind: 'throughput', targetRatio: 0.9 },
    { key: 'batchDone', label: 'A (batch): requests finished in the window', unit: 'requests', kind: 'info' },
  ],
  async run(ctx) {
    const [keyA, keyB] = TENANTS.keys as [string, string];
    // Warm-up: one chat and one batch request, alone.
    await streamChat(ctx.base, { messages: [{ role: 'user', content: 'warm up' }], max_tokens: 4 }, 120_000, auth(keyB));
    await streamCompletion(ctx.base, '/completion', completionBody(promptTokens(TENANTS.batchPrompt, 700_000), 4, 1), { headers: auth(keyA) });

    const from = performance.now();
    const to = from + TENANTS.windowMs;
    let outstanding = 0;
    let batchTokens = 0;
    let batchDone = 0;
    const stop = new AbortController();
    // Every outstanding batch request listens to it (at most batchOutstanding at once).
    setMaxListeners(TENANTS.batchOutstanding + 8, stop.signal);
    const batches: Array<Promise<void>> = [];
    const failures: unknown[] = [];
    const batchLoop = (async () => {
      for (let n = 0; performance.now() < to; n++) {
        const due = from + n * TENANTS.batchEveryMs;
        await new Promise((r) => setTimeout(r, Math.max(0, due - performance.now())));
        if (performance.now() >= to) break;
        if (outstanding >= TENANTS.batchOutstanding) continue;
        outstanding++;
        let seen = 0;
        batches.push(streamCompletion(ctx.base, '/completion', completionBody(promptTokens(TENANTS.batchPrompt, 710_000 + n), TENANTS.batchPredict, 100 + n), {
          headers: auth(keyA),
          signal: stop.signal,
          timeoutMs: 600_000,
          onEvent: (at, predicted) => {
            if (!Number.isFinite(predicted) || predicted <= seen) return;
            if (at <= to) batchTokens += predicted - seen;
            seen = predicted;
          },
        }).then((r) => {
          if (r.endAt <= to) batchDone++;
        }, (err: unknown) => {
          // Kept, not thrown: a scenario abandoned at its timeout must not leave a rejection unhandled.
          if (!stop.signal.aborted) failures.push(err);
        }).finally(() => outstanding--));
      }
    })();
    const ttft: number[] = [];
    const chats = Array.from({ length: Math.floor(TENANTS.windowMs / TENANTS.chatEveryMs) }, async (_, k) => {
      await new Promise((r) => setTimeout(r, from + (k + 0.5) * TENANTS.chatEveryMs - performance.now()));
      try {
        const r = await streamChat(ctx.base, { messages: [{ role: 'user', content: `Question ${k}: what is ${k} plus ${k}?` }], max_tokens: TENANTS.chatPredict, ignore_eos: true }, 300_000, auth(keyB));
        ttft.push(r.firstTokenMs);
      } catch (err) {
        failures.push(err);
      }
    });
    await batchLoop;
    await Promise.all(chats);
    stop.abort(new Error('window over'));
    await Promise.all(batches);
    if (failures.length > 0) throw new BenchError(`${ctx.server}: tenants: ${failures.length} request(s) failed`, String(failures[0]));
    if (ttft.length === 0) throw new BenchError(`${ctx.server}: tenants: no chat answered`);
    return {
      chatTtftP50: percentile(ttft, 50),
      chatTtftMax: Math.max(...ttft),
      batchTokensPerSecond: (batchTokens * 1000) / TENANTS.windowMs,
      batchDone,
    };
  },
});

export const TENANTS_PROFILE: Profile = {
  id: 'tenants',
  model: () => ensureBenchModel(),
  // The issue's command line: 4 slots, one 8192-cell pool (-np splits it: each slot 2048), two keys.
  commonArgs: (t) => ['-c', String(TENANTS.ctx), '-np', String(TENANTS.parallel), '-t', String(t), '-tb', String(t), '--api-key', TENANTS.keys.join(','), '--no-webui', '--cache-ram', '0'],
  oursExtra: [],
  referenceExtra: [],
  scenarios: [tenants()],
};

export const TENANTS_SERVER_DEFAULTS_PROFILE: Profile = {
  id: 'tenants-server-defaults',
  model: () => ensureBenchModel(),
  // As a new user runs both servers: the model and the two keys, nothing else (4 slots, one
  // unified pool of the model's 4,096-token training context, threads = cores, the host-memory
  // prompt cache on).
  commonArgs: () => ['--api-key', TENANTS.keys.join(',')],
  oursExtra: [],
  referenceExtra: [],
  scenarios: [tenants({ id: '-new-user', title: ", both servers' defaults", words: 'both servers with the model and --api-key A,B only' })],
};
