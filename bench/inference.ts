// Inference benchmark: inference-server against llama.cpp's llama-server, built from the same
// vendored source, on the same generated model, flags and machine, one server after the other.
// Also measures the engine-only ceiling with llama-bench (decode tg128).
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync, statSync } from 'node:fs';
import { availableParallelism, cpus } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { ensureBenchModel } from '../test/fixtures/models.js';
import { REPO_ROOT, referenceTool } from '../test/helpers/reference.js';
import { BenchError, CACHE_MODE, completionBody, httpJson, median, percentile, promptTokens, requestLoop, streamCompletion, type CacheMode } from './load.js';
import { ratioTarget, unifiedPoolArgs, type Profile, type Row, type Scenario, type ScenarioContext } from './scenario.js';
import { startServer, type RunningServer, type ServerLaunch } from './servers.js';
import { cpuMeter, waitForQuiet, type CpuUsage } from './cpu.js';
import { EMBEDDING_PROFILE, RERANK_PROFILE } from './embedding-profiles.js';
import { MIXED_DEFAULTS_PROFILE, MIXED_PROFILE, MIXED_SERVER_DEFAULTS_PROFILE } from './mixed-profile.js';
import { TENANTS_PROFILE, TENANTS_SERVER_DEFAULTS_PROFILE } from './tenants-profile.js';
import { AGENT_PROFILE } from './agent-profile.js';
import { FLEET_PROFILE } from './fleet-profile.js';
import { WARM_RESTART_PROFILE } from './warm-restart-profile.js';
import { ROUTER_PROFILE } from './router-profile.js';
import { SPEC_DRAFT_PROFILE, SPEC_NGRAM_PROFILE, SPEC_SELF_PROFILE } from './speculative-profiles.js';

const run = promisify(execFile);

export const RESULTS_DIR = join(REPO_ROOT, 'bench/results');

function checkPredicted(ctx: ScenarioContext, what: string, got: number, want: number): void {
  if (got !== want) ctx.note(`${ctx.server}: ${what}: ${got} tokens generated, ${want} asked (ignore_eos)`);
}

// ---------------------------------------------------------------------------------------------
// Scenarios (generation profile)

const SINGLE = { prompt: 512, predict: 128, reps: 5 };

const singleStream = (mode: CacheMode): Scenario => ({
  id: `single${CACHE_MODE[mode].id}`,
  title: `single stream${CACHE_MODE[mode].title}`,
  timeoutSeconds: 60,
  description: `1 client, ${SINGLE.prompt}-token prompt (token ids), ${SINGLE.predict} generated, stream, ignore_eos, ${CACHE_MODE[mode].words}; median of ${SINGLE.reps} runs after a warm-up. Decode = (n-1) tokens / (final event - first token event), client-side; TTFT = request start -> first token event.`,
  metrics: [
    { key: 'decode', label: 'decode tokens/s', unit: 'tok/s', kind: 'throughput' },
    { key: 'ttft', label: 'time to first token', unit: 'ms', kind: 'latency' },
    { key: 'decodeServer', label: 'decode tokens/s (server timings)', unit: 'tok/s', kind: 'info' },
  ],
  async run(ctx) {
    await streamCompletion(ctx.base, '/completion', completionBody(promptTokens(SINGLE.prompt, 1000), 16, 1, mode));
    const decode: number[] = [];
    const ttft: number[] = [];
    const server: number[] = [];
    for (let i = 0; i < SINGLE.reps; i++) {
      const r = await streamCompletion(ctx.base, '/completion', completionBody(promptTokens(SINGLE.prompt, 1001 + i), SINGLE.predict, 10 + i, mode));
      checkPredicted(ctx, 'single stream', r.predicted, SINGLE.predict);
      if (r.promptN !== SINGLE.prompt) ctx.note(`${ctx.server}: single stream: prompt_n ${r.promptN}, expected ${SINGLE.prompt} (a different prompt each run)`);
      decode.push(((r.predicted - 1) * 1000) / (r.endAt - (r.startAt + r.firstTokenMs)));
      ttft.push(r.firstTokenMs);
      server.push(Number(r.timings.predicted_per_second));
    }
    return { decode: median(decode), ttft: median(ttft), decodeServer: median(server) };
  },
});

function concurrent(clients: number, prompt: number, predict: number, waves: number, mode: CacheMode): Scenario {
  return {
    id: `concurrent-${clients}${CACHE_MODE[mode].id}`,
    title: `${clients} concurrent streams${CACHE_MODE[mode].title}`,
    timeoutSeconds: 120,
    description: `${clients} streaming clients started together, each a different ${prompt}-token prompt, ${predict} generated, ignore_eos, ${CACHE_MODE[mode].words}; ${waves} wave${waves > 1 ? 's' : ''} after a short warm-up wave (16-token prompts, 8 generated). Aggregate = all generated tokens / wall time of the wave${waves > 1 ? 's' : ''}; TTFT percentiles over its ${clients * waves} requests.`,
    metrics: [
      { key: 'aggregate', label: 'aggregate tokens/s', unit: 'tok/s', kind: 'throughput' },
      { key: 'ttftP50', label: 'TTFT p50', unit: 'ms', kind: 'latency' },
      { key: 'ttftP99', label: 'TTFT p99', unit: 'ms', kind: 'latency' },
      { key: 'ttftMean', label: 'TTFT mean', unit: 'ms', kind: 'info' },
    ],
    async run(ctx) {
      const wave = async (w: number, promptLength: number, nPredict: number) => {
        const t0 = performance.now();
        const results = await Promise.all(
          Array.from({ length: clients }, (_, i) =>
            streamCompletion(ctx.base, '/completion', completionBody(promptTokens(promptLength, 100_000 * clients + 1000 * w + i), nPredict, 1000 * w + i, mode)),
          ),
        );
        const wall = Math.max(...results.map((r) => r.endAt)) - t0;
        return { results, wall };
      };
      await wave(0, 16, 8); // warm-up: the same batch shapes, short

      let tokens = 0;
      let wall = 0;
      const ttft: number[] = [];
      for (let w = 1; w <= waves; w++) {
        const { results, wall: ms } = await wave(w, prompt, predict);
        for (const r of results) {
          checkPredicted(ctx, `${clients} concurrent`, r.predicted, predict);
          tokens += r.predicted;
          ttft.push(r.firstTokenMs);
        }
        wall += ms;
      }
      return { aggregate: (tokens * 1000) / wall, ttftP50: percentile(ttft, 50), ttftP99: percentile(ttft, 99), ttftMean: ttft.reduce((a, b) => a + b, 0) / ttft.length };
    },
  };
}

const PROMPT = { tokens: 2000, reps: 2 };

const promptProcessing = (mode: CacheMode): Scenario => ({
  id: `prompt${CACHE_MODE[mode].id}`,
  title: `prompt processing${CACHE_MODE[mode].title}`,
  timeoutSeconds: 90,
  description: `${PROMPT.tokens}-token prompt (token ids, a different one each run), n_predict 1, not streamed, ${CACHE_MODE[mode].words}; median of ${PROMPT.reps} runs after a warm-up. Client-side = ${PROMPT.tokens} / whole request time.`,
  metrics: [
    { key: 'pp', label: 'prompt tokens/s', unit: 'tok/s', kind: 'throughput' },
    { key: 'ppServer', label: 'prompt tokens/s (server timings)', unit: 'tok/s', kind: 'info' },
  ],
  async run(ctx) {
    const one = async (seed: number) => {
      const body = completionBody(promptTokens(PROMPT.tokens, seed), 1, seed, mode);
      const res = await httpJson(ctx.base, 'POST', '/completion', body, 300_000);
      if (res.status !== 200 || !res.body?.timings) {
        throw new BenchError(`${ctx.server}: POST /completion (${PROMPT.tokens}-token prompt) answered ${res.status}`, res.text.slice(0, 2000));
      }
      const promptN = Number(res.body.timings.prompt_n);
      if (promptN !== PROMPT.tokens) ctx.note(`${ctx.server}: prompt processing: prompt_n ${promptN}, expected ${PROMPT.tokens}`);
      return { client: (PROMPT.tokens * 1000) / res.ms, server: Number(res.body.timings.prompt_per_second) };
    };
    await one(2000);
    const runs = [];
    for (let i = 0; i < PROMPT.reps; i++) runs.push(await one(2001 + i));
    return { pp: median(runs.map((r) => r.client)), ppServer: median(runs.map((r) => r.server)) };
  },
});

const TOKENIZE = { connections: 64, seconds: 5, warmupSeconds: 1 };
const TOKENIZE_TEXT = 'The quick brown fox jumps over the lazy dog. Benchmarks measure what a server does per request, not per token.';

const tokenize: Scenario = {
  id: 'tokenize',
  title: '/tokenize',
  timeoutSeconds: 30,
  description: `${TOKENIZE.connections} keep-alive connections, each sending POST /tokenize {content: ${TOKENIZE_TEXT.length} chars} back to back for ${TOKENIZE.seconds} s after a ${TOKENIZE.warmupSeconds} s warm-up; one raw-socket Node client sharing the CPU with the server. A connection the server closes (llama-server's cpp-httplib does after ~100 requests) is reopened, within the measured time.`,
  metrics: [{ key: 'rps', label: 'requests/s', unit: 'req/s', kind: 'throughput' }],
  async run(ctx) {
    const expected = await httpJson(ctx.base, 'POST', '/tokenize', { content: TOKENIZE_TEXT });
    if (expected.status !== 200 || !Array.isArray(expected.body?.tokens)) throw new BenchError(`${ctx.server}: POST /tokenize answered ${expected.status}`, expected.text.slice(0, 1000));
    const want = JSON.stringify(expected.body.tokens);
    const validate = (text: string): boolean => {
      try {
        return JSON.stringify(JSON.parse(text).tokens) === want;
      } catch {
        return false;
      }
    };
    await requestLoop(ctx.base, '/tokenize', { content: TOKENIZE_TEXT }, TOKENIZE.connections, TOKENIZE.warmupSeconds, validate);
    const r = await requestLoop(ctx.base, '/tokenize', { content: TOKENIZE_TEXT }, TOKENIZE.connections, TOKENIZE.seconds, validate);
    if (r.reconnects > 0) ctx.progress(`${ctx.server}: /tokenize: the server closed keep-alive connections ${r.reconnects} times; the client reconnected (counted in the time)`);
    return { rps: r.perSecond };
  },
};

// ---------------------------------------------------------------------------------------------
// Profiles

/** Foreign CPU load (in CPUs) the bench waits to fall below, for at most maxWaitMs, and notes above. */
const QUIET = { threshold: 0.15, maxWaitMs: 20_000, totalBudgetMs: Number(process.env.BENCH_QUIET_BUDGET_MS ?? 120_000), noteAbove: 0.15 };

const PARALLEL = 32;
const CTX = 8192;

const generationArgs = (t: number): string[] => unifiedPoolArgs(CTX, PARALLEL, t);

// 32 x 96 prompt tokens = 3072: both servers fill a first 2048-token batch (about 21 prompts
// complete in it) and then a second, so first tokens come in two groups. With 32 x 128 = 2 x 2048
// the groups are 16 and 16 and the median falls on the boundary between them, so that p50 jumps
// by a whole batch time (~2.5 s) with one request more or less in the first batch.
const generationRows = (mode: CacheMode): Scenario[] => [singleStream(mode), concurrent(8, 128, 128, 2, mode), concurrent(32, 96, 64, 1, mode), promptProcessing(mode)];

export const GENERATION_PROFILE: Profile = {
  id: 'generation',
  model: () => ensureBenchModel(),
  // Every request sends cache_prompt false, and neither server keeps a host-memory prompt cache
  // (--cache-ram 0): the rows measure decoding, not caches (ours frees a task's cells at its end,
  // llama-server keeps them).
  commonArgs: (t) => [...generationArgs(t), '--cache-ram', '0'],
  oursExtra: [],
  referenceExtra: [],
  scenarios: [...generationRows('no-cache'), tokenize],
};

export const GENERATION_DEFAULTS_PROFILE: Profile = {
  id: 'generation-defaults',
  model: () => ensureBenchModel(),
  // The same rows as users run them: no cache_prompt field in the requests and llama-server's
  // default host-memory prompt cache (--cache-ram 8192, --cache-idle-slots) on both servers, which
  // sends idle slots' caches to host memory and frees their cells when a task starts.
  commonArgs: generationArgs,
  oursExtra: [],
  referenceExtra: [],
  scenarios: generationRows('defaults'),
};

export const PROFILES: Profile[] = [GENERATION_PROFILE, GENERATION_DEFAULTS_PROFILE, AGENT_PROFILE, WARM_RESTART_PROFILE, MIXED_PROFILE, MIXED_DEFAULTS_PROFILE, MIXED_SERVER_DEFAULTS_PROFILE, TENANTS_PROFILE, TENANTS_SERVER_DEFAULTS_PROFILE, EMBEDDING_PROFILE, RERANK_PROFILE, SPEC_DRAFT_PROFILE, SPEC_SELF_PROFILE, SPEC_NGRAM_PROFILE, ROUTER_PROFILE, FLEET_PROFILE];

// ---------------------------------------------------------------------------------------------
// Build checks

/** .ts files under a directory whose compiled .js in dist/ is missing or older. */
function staleSources(srcDir: string, distDir: string): string[] {
  const stale: string[] = [];
  for (const entry of readdirSync(srcDir, { withFileTypes: true })) {
    const p = join(srcDir, entry.name);
    if (entry.isDirectory()) stale.push(...staleSources(p, join(distDir, entry.name)));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
      const js = join(distDir, entry.name.replace(/\.ts$/, '.js'));
      if (!existsSync(js) || statSync(js).mtimeMs < statSync(p).mtimeMs) stale.push(relative(REPO_ROOT, p));
    }
  }
  return stale;
}

/** Compiles src/ to dist/ (tsc) when a source of the inference server is newer than its output. */
function ensureDist(progress: (m: string) => void): string {
  const main = join(REPO_ROOT, 'dist/inference/inference-server.cjs');
  const stale = ['inference', 'http', 'native'].flatMap((d) => staleSources(join(REPO_ROOT, 'src', d), join(REPO_ROOT, 'dist', d)));
  if (stale.length > 0) {
    progress(`compiling src/ to dist/ (tsc): ${stale.length} stale file(s), e.g. ${stale[0]}`);
    try {
      execFileSync(process.execPath, [join(REPO_ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(REPO_ROOT, 'tsconfig.json')], { stdio: 'pipe' });
    } catch (err) {
      const out = String((err as { stdout?: Buffer }).stdout ?? '');
      throw new BenchError(`tsc failed:\n${out.split('\n').slice(0, 10).join('\n')}`);
    }
    if (!existsSync(main)) throw new BenchError(`tsc did not produce ${relative(REPO_ROOT, main)}`);
  }
  const addon = join(REPO_ROOT, 'build/Release/llama_addon.node');
  if (!existsSync(addon)) throw new BenchError(`native addon missing (${relative(REPO_ROOT, addon)}): run npm run build:addon first`);
  return main;
}

// ---------------------------------------------------------------------------------------------
// Engine ceiling

export interface EngineCeiling {
  command: string;
  /** Median of llama-bench's tg128 samples (tokens/s) on an empty context; llama-bench's own average beside it. */
  decode: number;
  avg: number;
  samples: number[];
  /** The same at a depth of the single-stream prompt (tg128 @ d512): the context the servers decode in. */
  atDepth: { depth: number; decode: number; avg: number; samples: number[] };
}

async function llamaBenchDecode(tool: string, model: string, threads: number, depth: number): Promise<EngineCeiling> {
  const args = ['-m', model, '-p', '0', '-n', '128', '-d', `0,${depth}`, '-t', String(threads), '-fa', 'auto', '-r', '5', '-o', 'json'];
  const { stdout } = await run(tool, args, { cwd: REPO_ROOT, maxBuffer: 16 * 1024 * 1024, timeout: 180_000 });
  const parsed = JSON.parse(stdout) as Array<{ n_gen: number; n_prompt: number; n_depth: number; avg_ts: number; samples_ts: number[] }>;
  const pick = (d: number) => {
    const r = parsed.find((x) => x.n_gen === 128 && x.n_prompt === 0 && (x.n_depth ?? 0) === d);
    if (!r) throw new BenchError(`llama-bench printed no tg128 @ d${d} result`, stdout.slice(0, 2000));
    return { decode: median(r.samples_ts), avg: r.avg_ts, samples: r.samples_ts };
  };
  const command = `${relative(REPO_ROOT, tool)} ${args.map((a) => (a === model ? relative(REPO_ROOT, model) : a)).join(' ')}`;
  return { command, ...pick(0), atDepth: { depth, ...pick(depth) } };
}

// ---------------------------------------------------------------------------------------------
// Runner

export interface ServerRun {
  id: string;
  label: string;
  command: string;
  startupSeconds: number[];
}

export interface InferenceBenchResult {
  threads: number;
  rounds: number;
  machine: { cpus: number; cpuModel: string; node: string };
  /** Absent when BENCH_ONLY selects no scenario of the generation profile. */
  ceiling?: EngineCeiling;
  servers: Array<{ profile: string; model: string; servers: ServerRun[]; referenceExtra: Array<{ flags: string[]; why: string }> }>;
  scenarios: Array<{ profile: string; id: string; title: string; description: string }>;
  /** metrics[profile/scenario/metric][serverId] = value per round. */
  raw: Record<string, Record<string, number[]>>;
  /** CPU use during each measurement: foreign = processes other than the bench client and the server. */
  cpu: Record<string, CpuUsage | undefined>;
  rows: Row[];
  notes: string[];
  seconds: number;
}

export interface InferenceBenchOptions {
  threads?: number;
  /** Rounds of (ours, llama-server) runs, alternating the order; figures are medians over rounds. */
  rounds?: number;
  progress?: (message: string) => void;
}

export async function runInferenceBench(opts: InferenceBenchOptions = {}): Promise<InferenceBenchResult> {
  const t0 = Date.now();
  /** Past this point the remaining scenarios are skipped (reported as missing): the run stays bounded on a loaded machine. */
  const deadline = t0 + (Number(process.env.BENCH_DEADLINE_S) || 3600) * 1000;
  const threads = opts.threads ?? (Number(process.env.BENCH_THREADS) || availableParallelism());
  const rounds = opts.rounds ?? (Number(process.env.BENCH_ROUNDS) || 2);
  /** BENCH_ONLY=prompt,single: only these scenario ids (the others are reported as missing). */
  const only = process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(',').map((s) => s.trim())) : null;
  const progress = opts.progress ?? ((m: string) => console.error(`bench: ${m}`));
  const notes: string[] = [];
  const note = (m: string): void => {
    notes.push(m);
    progress(`NOTE ${m}`);
  };

  const serverMain = ensureDist(progress);
  /** BENCH_OURS_EXTRA: flags appended to ours only (e.g. "--prefill-budget 0" to compare a setting). */
  const oursExtra = (process.env.BENCH_OURS_EXTRA ?? '').split(/\s+/).filter((a) => a !== '');
  rmSync(join(RESULTS_DIR, 'logs'), { recursive: true, force: true });
  progress('reference binaries (built once from vendor/llama.cpp when missing)');
  const llamaServer = await referenceTool('llama-server');

  const raw: Record<string, Record<string, number[]>> = {};
  const cpu: Record<string, CpuUsage | undefined> = {};
  const foreign: Record<string, Record<string, number[]>> = {};
  let waited = 0;
  /** Waits (bounded) until other processes leave the CPUs alone. */
  const quiet = async (pids: number[], what: string): Promise<void> => {
    const q = await waitForQuiet(pids, QUIET.threshold, 500, Math.max(0, Math.min(QUIET.maxWaitMs, QUIET.totalBudgetMs - waited)));
    waited += q.waitedMs;
    if (q.waitedMs > 600) progress(`waited ${(q.waitedMs / 1000).toFixed(1)} s for other processes to leave the CPUs before ${what} (foreign load now ${q.foreignCores.toFixed(2)} CPUs)`);
  };
  const contended = (what: string, u: CpuUsage | undefined): CpuUsage | undefined => {
    if (u && u.foreignCores > QUIET.noteAbove) note(`${what}: other processes used ${u.foreignCores.toFixed(2)} of ${availableParallelism()} CPUs during the measurement (figures disturbed)`);
    if (u && u.stealCores > QUIET.noteAbove) note(`${what}: the hypervisor stole ${u.stealCores.toFixed(2)} CPUs during the measurement`);
    return u;
  };
  const serverRuns: InferenceBenchResult['servers'] = [];
  let ceiling: EngineCeiling | undefined;

  for (const profile of PROFILES) {
    // BENCH_ONLY: a profile none of whose scenarios is selected is not started at all.
    if (only && !profile.scenarios.some((s) => only.has(s.id))) continue;
    progress(`profile ${profile.id}: model`);
    const model = await profile.model();
    const modelArg = relative(REPO_ROOT, model);
    // The ceiling relates the generation profile's figures to the engine's; not measured when BENCH_ONLY leaves them out.
    if (profile === GENERATION_PROFILE && (!only || profile.scenarios.some((s) => only.has(s.id)))) {
      progress('llama-bench tg128 (engine ceiling)');
      const llamaBench = await referenceTool('llama-bench');
      // llama-bench is a child of the bench, not foreign: its ticks count once it is reaped (cutime).
      const once = async () => {
        await quiet([], 'llama-bench');
        const meter = cpuMeter([]);
        const c = await llamaBenchDecode(llamaBench, model, threads, SINGLE.prompt);
        return { c, usage: meter() };
      };
      let best = await once();
      const disturbed = (u?: CpuUsage) => (u ? u.foreignCores + u.stealCores : 0);
      if (disturbed(best.usage) > QUIET.noteAbove) {
        progress(`llama-bench: other processes used ${disturbed(best.usage).toFixed(2)} CPUs during the measurement; measuring again`);
        const again = await once();
        if (disturbed(again.usage) < disturbed(best.usage)) best = again;
      }
      ceiling = best.c;
      cpu['engine ceiling/llama-bench'] = contended('llama-bench', best.usage);
      progress(`llama-bench tg128: ${ceiling.decode.toFixed(1)} tok/s (median of ${ceiling.samples.map((s) => s.toFixed(1)).join(', ')}); tg128 @ d${ceiling.atDepth.depth}: ${ceiling.atDepth.decode.toFixed(1)} tok/s`);
    }
    const common = [...(profile.modelArgs ? profile.modelArgs(model) : ['-m', modelArg]), ...profile.commonArgs(threads)];
    const launches: ServerLaunch[] = [
      { id: 'ours', label: 'inference-server', command: process.execPath, args: [relative(REPO_ROOT, serverMain), ...common, ...profile.oursExtra, ...oursExtra] },
      { id: 'llama-server', label: 'llama-server', command: llamaServer, args: [...common, ...profile.referenceExtra.flatMap((e) => e.flags)] },
      ...(profile.oursVariants ?? []).map((v) => ({ id: v.id, label: v.label, command: process.execPath, args: [relative(REPO_ROOT, serverMain), ...common, ...v.flags, ...oursExtra] })),
    ];
    const runs: ServerRun[] = launches.map((l) => ({ id: l.id, label: l.label, command: `${l.command === process.execPath ? 'node ' : relative(REPO_ROOT, l.command) + ' '}${[...l.args, ...(profile.perRun?.[l.id]?.shown ?? [])].join(' ')} --host 127.0.0.1 --port <free>`, startupSeconds: [] }));
    serverRuns.push({ profile: profile.id, model: modelArg, servers: runs, referenceExtra: profile.referenceExtra });

    // Scenario-major: both servers run a scenario (each freshly started, one after the other)
    // before the next scenario, so that slow drifts of the machine hit both alike; with several
    // rounds the order alternates (ours first, then llama-server first, ...).
    for (const scenario of profile.scenarios.filter((s) => !only || only.has(s.id))) {
      for (let round = 0; round < rounds; round++) {
        const order = launches.map((_, i) => i);
        for (const which of round % 2 === 0 ? order : order.reverse()) {
          const launch = launches[which]!;
          const tag = `${launch.label}: ${scenario.title}${rounds > 1 ? ` (round ${round + 1}/${rounds})` : ''}`;
          const record = (values: Record<string, number>, usage?: CpuUsage): void => {
            for (const key of new Set(scenario.metrics.map((m) => m.key))) ((raw[`${profile.id}/${scenario.id}/${key}`] ??= {})[launch.id] ??= []).push(values[key] ?? NaN);
            ((foreign[`${profile.id}/${scenario.id}`] ??= {})[launch.id] ??= []).push(usage ? usage.foreignCores + usage.stealCores : NaN);
          };
          if ((deadline - Date.now()) / 1000 < 5) {
            note(`${tag}: skipped, the bench's ${((deadline - t0) / 1000).toFixed(0)} s deadline has passed (BENCH_DEADLINE_S)`);
            record({});
            continue;
          }
          // One measurement on a fresh server. A measurement that other processes disturbed is
          // taken again once (time permitting), keeping the less disturbed of the two.
          const measure = async (attempt: number): Promise<{ values: Record<string, number>; usage?: CpuUsage }> => {
            const logName = `${launch.id}-${profile.id}-${scenario.id}${rounds > 1 ? `-r${round + 1}` : ''}${attempt > 0 ? `-retry${attempt}` : ''}`;
            // This measurement's own flags (e.g. a fresh directory), kept across the scenario's restarts.
            const own = profile.perRun?.[launch.id]?.make();
            const launchNow: ServerLaunch = own ? { ...launch, args: [...launch.args, ...own.flags] } : launch;
            let server: RunningServer;
            try {
              server = await startServer(launchNow, join(RESULTS_DIR, 'logs'), logName);
            } catch (err) {
              own?.cleanup();
              throw err;
            }
            runs[which]!.startupSeconds.push(server.startupSeconds);
            let log = relative(REPO_ROOT, server.logPath);
            let finished = false;
            const replicas: RunningServer[] = [];
            const startReplica = async (flags: string[]): Promise<{ base: string }> => {
              const replica = await startServer({ ...launchNow, args: [...launchNow.args, ...flags] }, join(RESULTS_DIR, 'logs'), `${logName}-replica${replicas.length + 1}`);
              replicas.push(replica);
              if (finished) await replica.stop();
              return { base: replica.base };
            };
            const restart = async (): Promise<{ base: string; seconds: number }> => {
              const ts = performance.now();
              // A graceful stop may write state (e.g. --cache-disk at shutdown): a long grace, and a note if it runs out.
              const how = await server.stop(120_000);
              if (how === 'SIGKILL') note(`${tag}: the server did not exit within 120 s of SIGTERM at the scenario's restart; killed (server log: ${log})`);
              else if (how === 'exited') note(`${tag}: the server had exited before the scenario's restart (server log: ${log})`);
              server = await startServer(launchNow, join(RESULTS_DIR, 'logs'), `${logName}-restarted`);
              log = relative(REPO_ROOT, server.logPath);
              // The measurement ended (timed out) while this one was starting: it is not left running.
              if (finished) await server.stop();
              return { base: server.base, seconds: (performance.now() - ts) / 1000 };
            };
            try {
              await quiet([server.pid], tag);
              const limit = Math.min(scenario.timeoutSeconds, Math.max(5, (deadline - Date.now()) / 1000));
              const ts = Date.now();
              progress(`${tag}${attempt > 0 ? ' (again)' : ''}`);
              const meter = cpuMeter(() => [server.pid, ...replicas.map((r) => r.pid)]);
              let timer: NodeJS.Timeout | undefined;
              const timeout = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), limit * 1000)));
              const running = scenario.run({ base: server.base, server: launch.id, round, note, progress, restart, startReplica });
              let values: Record<string, number> | 'timeout';
              try {
                values = await Promise.race([running, timeout]);
              } catch (err) {
                throw new BenchError(`${tag}: failed (server log: ${log})`, (err as Error).message);
              } finally {
                clearTimeout(timer);
              }
              const usage = meter();
              if (values === 'timeout') {
                // Reported as missing; stopping the server below ends its in-flight requests.
                note(`${tag}: not finished within ${limit.toFixed(0)} s; figures missing (server log: ${log})`);
                running.catch(() => undefined);
                values = {};
              }
              const v = values;
              // Each figure once, under its first metric's label (further rows reuse a key against another server).
              const shown = scenario.metrics.filter((m, i, all) => all.findIndex((x) => x.key === m.key) === i);
              progress(`${tag}: ${shown.map((m) => `${m.label} ${fmt(v[m.key] ?? NaN)}`).join(', ')} (${((Date.now() - ts) / 1000).toFixed(1)} s)`);
              return { values, usage };
            } finally {
              finished = true;
              await server.stop();
              for (const replica of replicas) await replica.stop();
              own?.cleanup();
            }
          };
          const disturbance = (u?: CpuUsage) => (u ? u.foreignCores + u.stealCores : 0);
          let best = await measure(0);
          if (disturbance(best.usage) > QUIET.noteAbove && (deadline - Date.now()) / 1000 > scenario.timeoutSeconds) {
            progress(`${tag}: other processes used ${disturbance(best.usage).toFixed(2)} CPUs during the measurement; measuring again`);
            const again = await measure(1);
            if (disturbance(again.usage) < disturbance(best.usage)) best = again;
          }
          contended(tag, best.usage);
          cpu[`${profile.id}/${scenario.id}/${launch.id}${rounds > 1 ? `#${round + 1}` : ''}`] = best.usage;
          record(best.values, best.usage);
        }
      }
      // Figures across servers (e.g. answers compared), in place of what run() gave for those keys.
      for (const [key, byServer] of Object.entries(scenario.across?.() ?? {})) {
        for (const [id, values] of Object.entries(byServer)) (raw[`${profile.id}/${scenario.id}/${key}`] ??= {})[id] = values;
      }
    }
  }

  const rows: Row[] = [];
  const scenarios: InferenceBenchResult['scenarios'] = [];
  for (const profile of PROFILES) {
    for (const scenario of profile.scenarios) {
      scenarios.push({ profile: profile.id, id: scenario.id, title: scenario.title, description: scenario.description });
      for (const m of scenario.metrics) {
        const r = raw[`${profile.id}/${scenario.id}/${m.key}`] ?? {}; // none when BENCH_ONLY left the scenario out
        const of = m.of ?? 'ours';
        const versus = m.versus ?? 'llama-server';
        const ours = median((r[of] ?? []).filter(Number.isFinite));
        const reference = median((r[versus] ?? []).filter(Number.isFinite));
        const ratio = ours / reference;
        const t = ratioTarget(m.kind, m.targetRatio);
        const f = foreign[`${profile.id}/${scenario.id}`] ?? {};
        const worst = (xs: number[] | undefined) => (xs && xs.length ? Math.max(...xs) : NaN);
        const absolute = m.oursMax !== undefined;
        rows.push({
          scenario: scenario.title,
          metric: m.label,
          unit: m.unit,
          kind: m.kind,
          ours,
          reference,
          ratio,
          target: absolute ? `ours <= ${m.oursMax}` : t.target,
          pass: absolute ? Number.isFinite(ours) && ours <= m.oursMax! : Number.isFinite(ratio) ? t.pass(ratio) : t.pass(ratio) === null ? null : false,
          ...(absolute ? { absolute } : {}),
          foreign: [worst(f[of]), worst(f[versus])],
        });
      }
    }
  }
  if (ceiling) {
    const single = (id: string) => median(raw['generation/single/decode']?.[id] ?? []);
    rows.push({
      scenario: 'engine ceiling',
      metric: `single-stream decode / llama-bench tg128 (${fmt(ceiling.decode)} tok/s)`,
      unit: 'fraction',
      kind: 'ceiling',
      ours: single('ours') / ceiling.decode,
      reference: single('llama-server') / ceiling.decode,
      ratio: NaN,
      target: 'ours >= 0.97',
      pass: single('ours') / ceiling.decode >= 0.97,
      foreign: [(cpu['engine ceiling/llama-bench']?.foreignCores ?? NaN) + (cpu['engine ceiling/llama-bench']?.stealCores ?? 0), NaN],
    });
    const d = ceiling.atDepth;
    rows.push({
      scenario: 'engine ceiling',
      metric: `single-stream decode / llama-bench tg128 @ d${d.depth} (${fmt(d.decode)} tok/s)`,
      unit: 'fraction',
      kind: 'ceiling',
      ours: single('ours') / d.decode,
      reference: single('llama-server') / d.decode,
      ratio: NaN,
      target: '(info)',
      pass: null,
      foreign: [(cpu['engine ceiling/llama-bench']?.foreignCores ?? NaN) + (cpu['engine ceiling/llama-bench']?.stealCores ?? 0), NaN],
    });
  }

  return {
    threads,
    rounds,
    machine: { cpus: availableParallelism(), cpuModel: cpus()[0]?.model ?? 'unknown', node: process.version },
    ...(ceiling ? { ceiling } : {}),
    servers: serverRuns,
    scenarios,
    raw,
    cpu,
    rows,
    notes,
    seconds: (Date.now() - t0) / 1000,
  };
}

export function fmt(v: number): string {
  if (!Number.isFinite(v)) return '-';
  if (Math.abs(v) >= 100) return v.toFixed(0);
  if (Math.abs(v) >= 10) return v.toFixed(1);
  return v.toFixed(2);
}
