// Mixed load (issue 11): streams generating while long prompts arrive. Measures what a user of a
// running stream sees when someone else's long prompt comes in (the gaps between its tokens), what
// the newcomer sees (time to its first token), and the aggregate throughput, on both servers.
import { ensureBenchModel } from '../test/fixtures/models.js';
import { BenchError, CACHE_MODE, completionBody, percentile, promptTokens, streamCompletion, type CacheMode } from './load.js';
import { unifiedPoolArgs, type Profile, type Scenario, type ScenarioContext } from './scenario.js';

/**
 * BENCH_MIXED_SCALE=k: newcomers arrive k times less often and the window is k times longer (the
 * same prompts, the same number of newcomers), for a machine k times slower than the one the
 * scenario was sized for (2 quiet cores at -t 2: a 2,000-token prefill in about 2 s).
 */
const SCALE = Number(process.env.BENCH_MIXED_SCALE) > 0 ? Number(process.env.BENCH_MIXED_SCALE) : 1;

const MIXED = {
  streams: 8,
  streamPrompt: 128,
  streamPredict: 200,
  newcomerPrompt: 2000,
  newcomerPredict: 32,
  everyMs: 3000 * SCALE,
  windowMs: 24_000 * SCALE,
  longGapMs: 250,
  parallel: 12,
  ctx: 16384,
  /** The window starts once every stream has a token, or after this long. */
  startLimitMs: 30_000,
};

/** What the running streams and the newcomers saw inside the measured window. */
interface MixedTrace {
  /** Milliseconds between two consecutive token-carrying events of one stream answer. */
  gaps: number[];
  /** Tokens (streams and newcomers) whose event arrived inside the window. */
  tokens: number;
  /** Newcomers' times to first token (ms). */
  ttft: number[];
}

/** The measured window (performance.now() times); Infinity until it starts. */
interface Window {
  from: number;
  to: number;
}

/** Counts tokens and inter-token gaps of one streamed answer, keeping those inside the window. */
function tokenTracker(trace: MixedTrace, window: Window, gaps: boolean): (at: number, predicted: number) => void {
  let last = -1;
  let seen = 0;
  return (at, predicted) => {
    if (!Number.isFinite(predicted) || predicted <= seen) return;
    if (at >= window.from && at <= window.to) {
      trace.tokens += predicted - seen;
      if (gaps && last >= window.from) trace.gaps.push(at - last);
    }
    seen = predicted;
    last = at;
  };
}

/** One stream: answers of streamPredict tokens back to back until `signal` aborts. */
async function streamLoop(ctx: ScenarioContext, mode: CacheMode, index: number, trace: MixedTrace, window: Window, started: () => void, signal: AbortSignal): Promise<void> {
  let first = false;
  for (let n = 0; !signal.aborted; n++) {
    const body = completionBody(promptTokens(MIXED.streamPrompt, 500_000 + 1000 * index + n), MIXED.streamPredict, 1000 * index + n, mode);
    const track = tokenTracker(trace, window, true);
    try {
      const r = await streamCompletion(ctx.base, '/completion', body, {
        signal,
        onEvent: (at, predicted) => {
          if (n === 0 && predicted >= 1 && !first) {
            first = true;
            started();
          }
          track(at, predicted);
        },
      });
      if (r.predicted !== MIXED.streamPredict) ctx.note(`${ctx.server}: mixed: a stream answer had ${r.predicted} tokens, ${MIXED.streamPredict} asked (ignore_eos)`);
    } catch (err) {
      if (signal.aborted) return;
      throw err;
    }
  }
}

/** `servers`: what the description says of the servers' flags (the profile's), and an id suffix for a second set. */
const mixed = (mode: CacheMode, servers = { id: '', title: '', words: `-np ${MIXED.parallel} -c ${MIXED.ctx}` }): Scenario => ({
  id: `mixed${CACHE_MODE[mode].id}${servers.id}`,
  title: `mixed load${CACHE_MODE[mode].title}${servers.title}`,
  timeoutSeconds: 120 + 2 * 24 * SCALE,
  description: `${servers.words}: ${MIXED.streams} streams each generating ${MIXED.streamPredict}-token answers (${MIXED.streamPrompt}-token prompts) back to back (${CACHE_MODE[mode].words}); once all stream, a ${MIXED.newcomerPrompt}-token prompt (${MIXED.newcomerPredict} generated) arrives every ${MIXED.everyMs / 1000} s for ${MIXED.windowMs / 1000} s (the window; streams are cut at its end)${SCALE !== 1 ? ` (BENCH_MIXED_SCALE=${SCALE})` : ''}. Gaps = client-side time between two consecutive token events of one stream answer, inside the window; time in gaps > ${MIXED.longGapMs} ms = the sum of those gaps per stream; TTFT = a newcomer's request start -> its first token event; aggregate = all tokens whose event arrived inside the window / the window.`,
  metrics: [
    { key: 'gapMax', label: 'streams: worst inter-token gap', unit: 'ms', kind: 'latency', targetRatio: 0.3 },
    { key: 'gapP99', label: 'streams: inter-token gap p99', unit: 'ms', kind: 'info' },
    { key: 'gapP50', label: 'streams: inter-token gap p50', unit: 'ms', kind: 'info' },
    { key: 'longGaps', label: `streams: time in gaps > ${MIXED.longGapMs} ms, per stream`, unit: 's', kind: 'info' },
    { key: 'ttftP50', label: 'newcomers: TTFT p50', unit: 'ms', kind: 'latency', targetRatio: 1.2 },
    { key: 'aggregate', label: 'aggregate tokens/s', unit: 'tok/s', kind: 'throughput' },
  ],
  async run(ctx) {
    // Warm-up: one short answer and one long prompt, alone.
    await streamCompletion(ctx.base, '/completion', completionBody(promptTokens(16, 400_000), 8, 1, mode));
    await streamCompletion(ctx.base, '/completion', completionBody(promptTokens(MIXED.newcomerPrompt, 400_001), 1, 2, mode));

    const trace: MixedTrace = { gaps: [], tokens: 0, ttft: [] };
    const window: Window = { from: Infinity, to: Infinity };
    const stop = new AbortController();
    let running = 0;
    let allStarted!: () => void;
    const streaming = new Promise<void>((r) => (allStarted = r));
    const loops = Array.from({ length: MIXED.streams }, (_, i) =>
      streamLoop(ctx, mode, i, trace, window, () => { if (++running === MIXED.streams) allStarted(); }, stop.signal));
    const failed = Promise.race(loops.map((l) => l.then(() => new Promise<never>(() => undefined))));
    const startLimit = new Promise((r) => setTimeout(r, MIXED.startLimitMs));
    await Promise.race([streaming, startLimit, failed]);
    if (running < MIXED.streams) ctx.note(`${ctx.server}: mixed: only ${running} of ${MIXED.streams} streams had a token after ${MIXED.startLimitMs / 1000} s; the window starts anyway`);

    window.from = performance.now();
    window.to = window.from + MIXED.windowMs;
    const count = Math.ceil(MIXED.windowMs / MIXED.everyMs);
    const newcomers = Array.from({ length: count }, async (_, k) => {
      await new Promise((r) => setTimeout(r, window.from + k * MIXED.everyMs - performance.now()));
      const track = tokenTracker(trace, window, false);
      const r = await streamCompletion(ctx.base, '/completion', completionBody(promptTokens(MIXED.newcomerPrompt, 600_000 + k), MIXED.newcomerPredict, 5000 + k, mode), { onEvent: track, timeoutMs: 300_000 });
      if (r.promptN !== MIXED.newcomerPrompt) ctx.note(`${ctx.server}: mixed: newcomer prompt_n ${r.promptN}, expected ${MIXED.newcomerPrompt}`);
      trace.ttft.push(r.firstTokenMs);
    });
    // A newcomer refused ends the scenario with its error, as a failed stream does.
    const newcomerFailed = Promise.race(newcomers.map((n) => n.then(() => new Promise<never>(() => undefined))));
    await Promise.race([new Promise((r) => setTimeout(r, MIXED.windowMs)), failed, newcomerFailed]);
    stop.abort(new Error('window over'));
    await Promise.all([...loops, ...newcomers]);

    if (trace.gaps.length === 0) throw new BenchError(`${ctx.server}: mixed: no stream token arrived inside the window`);
    const longGaps = trace.gaps.filter((g) => g > MIXED.longGapMs).reduce((a, b) => a + b, 0);
    return {
      gapMax: Math.max(...trace.gaps),
      gapP99: percentile(trace.gaps, 99),
      gapP50: percentile(trace.gaps, 50),
      longGaps: longGaps / 1000 / MIXED.streams,
      ttftP50: percentile(trace.ttft, 50),
      aggregate: (trace.tokens * 1000) / MIXED.windowMs,
    };
  },
});

const mixedArgs = (t: number): string[] => unifiedPoolArgs(MIXED.ctx, MIXED.parallel, t);

export const MIXED_PROFILE: Profile = {
  id: 'mixed',
  model: () => ensureBenchModel(),
  // cache_prompt false and no host-memory prompt cache on either server (--cache-ram 0): the
  // scenario is about scheduling, not caches.
  commonArgs: (t) => [...mixedArgs(t), '--cache-ram', '0'],
  oursExtra: [],
  referenceExtra: [],
  scenarios: [mixed('no-cache')],
};

export const MIXED_DEFAULTS_PROFILE: Profile = {
  id: 'mixed-defaults',
  model: () => ensureBenchModel(),
  // As users run it: no cache_prompt field, and llama-server's default host-memory prompt cache
  // (--cache-ram 8192, --cache-idle-slots) on both servers.
  commonArgs: mixedArgs,
  oursExtra: [],
  referenceExtra: [],
  scenarios: [mixed('defaults')],
};

export const MIXED_SERVER_DEFAULTS_PROFILE: Profile = {
  id: 'mixed-server-defaults',
  model: () => ensureBenchModel(),
  // As a new user runs both servers: the pool the load needs said in the three flags that say it
  // (with the model's own 4,096-token context two newcomers overflow the pool on both servers)
  // and every other setting at its default (threads = cores, batch sizes, flash attention, the
  // host-memory prompt cache), with clients that send no cache_prompt field.
  commonArgs: () => ['-c', String(MIXED.ctx), '-np', String(MIXED.parallel), '--kv-unified'],
  oursExtra: [],
  referenceExtra: [],
  scenarios: [mixed('defaults', { id: '-new-user', title: ", both servers' defaults", words: `both servers with -c ${MIXED.ctx} -np ${MIXED.parallel} --kv-unified and nothing else` })],
};
