// Past one machine (issue 48): an agent fleet spread over R replicas of ours (-t 1 each) by a
// prefix-aware picker that knows what each replica holds only from the KV-cache events they
// publish (--kv-events), against the same replicas taken round robin, against one llama-server
// given the same threads, slots and KV cells in all. The workload: groups of agents, each group
// sharing one long system prompt, each agent a conversation that comes back turn after turn with
// its history grown; all agents at once. Prompts are token ids (/completion), so the picker keys
// them as the servers do without a tokenizer of its own.
//
// The picker is a small llm-d: a ZMQ SUB socket per replica (each binds its own ipc:// endpoint,
// vLLM's default mode), an index of block key -> replicas from BlockStored / BlockRemoved /
// AllBlocksCleared, and per request vLLM's keys of the prompt's full blocks (block-keys.ts); each
// replica scores 3 x (its longest run of the prompt's blocks from the first, as a fraction) + 2 x
// (1 - its requests in flight / the most any replica has), llm-d's default weights for its prefix
// and queue scorers, and the best takes the request (ties: fewest in flight, then the lowest index).
//
// Then the tenants' limits across replicas, on the database and over HTTP (fleet-limits.ts).
//
// Environment: BENCH_FLEET_REPLICAS (2 or 3, default 3), BENCH_FLEET_SIZE=tiny (a smoke run:
// 2 groups of 2 agents, 2 turns, 256-token system prompts).
import { Subscriber } from 'zeromq';
import { decode } from '@msgpack/msgpack';
import { ensureBenchModel } from '../test/fixtures/models.js';
import { DEFAULT_BLOCK_KEY_RULE, sequenceBlocks } from '../src/inference/kv-events/block-keys.js';
import { BenchError, percentile, promptTokens, streamCompletion } from './load.js';
import { unifiedPoolArgs, type Profile, type Scenario, type ScenarioContext } from './scenario.js';
import { FLEET_LIMIT_METRICS, FLEET_LIMITS_DESCRIPTION, measureFleetLimits } from './fleet-limits.js';
import { join } from 'node:path';
import { REPO_ROOT } from '../test/helpers/reference.js';

const REPLICAS = Math.min(3, Math.max(2, Number(process.env.BENCH_FLEET_REPLICAS) || 3));
const TINY = process.env.BENCH_FLEET_SIZE === 'tiny';
const W = TINY
  ? { groups: 2, agentsPerGroup: 2, turns: 2, systemTokens: 256, userTokens: 32, answerTokens: 8 }
  : { groups: 4, agentsPerGroup: 3, turns: 4, systemTokens: 1024, userTokens: 48, answerTokens: 16 };
/** Each replica's slots and KV cells; the one llama-server gets R times both. */
const PER_REPLICA = { parallel: 4, ctx: 8192 };

const endpoint = (replica: number): string => `ipc:///tmp/bench-fleet-${process.pid}-r${replica}`;
const replicaFlags = (replica: number): string[] => ['--kv-events', endpoint(replica), '--kv-events-pod', `r${replica}`];

/** Which replica to send a prompt to. */
interface Picker {
  pick(tokens: readonly number[]): number;
  started(replica: number): void;
  ended(replica: number): void;
}

/** The events' view of the replicas and the scoring above. */
class PrefixPicker implements Picker {
  private readonly subs: Subscriber[] = [];
  /** Block key -> replica -> the media it holds it in. */
  private readonly index = new Map<bigint, Map<number, Set<string>>>();
  private readonly inFlight: number[];
  private readonly seen: boolean[];
  /** Requests sent to a replica holding at least their first block. */
  hits = 0;
  picks = 0;

  constructor(private readonly replicas: number) {
    this.inFlight = new Array<number>(replicas).fill(0);
    this.seen = new Array<boolean>(replicas).fill(false);
    for (let r = 0; r < replicas; r++) {
      const sub = new Subscriber({ linger: 0 });
      sub.subscribe('kv@');
      sub.connect(endpoint(r));
      this.subs.push(sub);
      void this.read(sub);
    }
  }

  private async read(sub: Subscriber): Promise<void> {
    try {
      for await (const [topic, , payload] of sub) {
        const replica = Number(/^kv@r(\d+)@/.exec(topic!.toString())?.[1] ?? NaN);
        if (!(replica >= 0 && replica < this.replicas)) continue;
        const batch = decode(payload!, { useBigInt64: true }) as [number, unknown[][]];
        for (const e of batch[1]) this.apply(replica, e);
        this.seen[replica] = true;
      }
    } catch {
      // Closed.
    }
  }

  private apply(replica: number, e: unknown[]): void {
    const keysOf = (list: unknown): bigint[] => (list as Array<number | bigint>).map((k) => BigInt(k));
    if (e[0] === 'BlockStored') {
      const medium = String(e[6] ?? 'GPU');
      for (const k of keysOf(e[1])) {
        const holders = this.index.get(k) ?? new Map<number, Set<string>>();
        this.index.set(k, holders);
        const media = holders.get(replica) ?? new Set<string>();
        holders.set(replica, media);
        media.add(medium);
      }
    } else if (e[0] === 'BlockRemoved') {
      const medium = String(e[2] ?? 'GPU');
      for (const k of keysOf(e[1])) {
        const holders = this.index.get(k);
        const media = holders?.get(replica);
        if (!media) continue;
        media.delete(medium);
        if (media.size === 0) holders!.delete(replica);
        if (holders!.size === 0) this.index.delete(k);
      }
    } else if (e[0] === 'AllBlocksCleared') {
      for (const [k, holders] of this.index) {
        holders.delete(replica);
        if (holders.size === 0) this.index.delete(k);
      }
    }
  }

  /** Whether every replica has published at least one batch (its subscription is live). */
  allSeen(): boolean {
    return this.seen.every(Boolean);
  }

  pick(tokens: readonly number[]): number {
    const keys = sequenceBlocks(DEFAULT_BLOCK_KEY_RULE, tokens, null).map((b) => b.key);
    const busiest = Math.max(1, ...this.inFlight);
    let best = 0;
    let bestScore = -Infinity;
    let bestRun = 0;
    for (let r = 0; r < this.replicas; r++) {
      let run = 0;
      while (run < keys.length && this.index.get(keys[run]!)?.has(r)) run++;
      const score = 3 * (keys.length > 0 ? run / keys.length : 0) + 2 * (1 - this.inFlight[r]! / busiest);
      if (score > bestScore || (score === bestScore && this.inFlight[r]! < this.inFlight[best]!)) {
        best = r;
        bestScore = score;
        bestRun = run;
      }
    }
    this.picks++;
    if (bestRun > 0) this.hits++;
    return best;
  }

  started(replica: number): void {
    this.inFlight[replica]!++;
  }

  ended(replica: number): void {
    this.inFlight[replica]!--;
  }

  close(): void {
    for (const sub of this.subs) sub.close();
  }
}

class RoundRobin implements Picker {
  private next = 0;
  constructor(private readonly replicas: number) {}
  pick(): number {
    const r = this.next;
    this.next = (this.next + 1) % this.replicas;
    return r;
  }
  started(): void {}
  ended(): void {}
}

interface FleetRun {
  ttftP50: number;
  ttftP90: number;
  requestsPerSecond: number;
  tokensPerSecond: number;
  /** First request sent -> last stream ended. */
  wallMs: number;
}

/** The whole workload against `bases` through `picker`; `seed` makes its prompts its own. */
async function runWorkload(bases: readonly string[], picker: Picker, seed: number): Promise<FleetRun> {
  const ttft: number[] = [];
  let generated = 0;
  const t0 = performance.now();
  let lastEnd = t0;
  const agent = async (group: number, a: number): Promise<void> => {
    const history = promptTokens(W.systemTokens, seed + group);
    for (let turn = 0; turn < W.turns; turn++) {
      history.push(...promptTokens(W.userTokens, seed + 1000 + 100 * (group * W.agentsPerGroup + a) + turn));
      const replica = picker.pick(history);
      picker.started(replica);
      try {
        const r = await streamCompletion(bases[replica]!, '/completion', { prompt: history, n_predict: W.answerTokens, ignore_eos: true, temperature: 0, seed: 1 }, { timeoutMs: 600_000 });
        ttft.push(r.firstTokenMs);
        generated += r.predicted;
        lastEnd = Math.max(lastEnd, r.endAt);
      } finally {
        picker.ended(replica);
      }
      // The answer as the agent's history keeps it (token ids standing for it).
      history.push(...promptTokens(W.answerTokens, seed + 5000 + 100 * (group * W.agentsPerGroup + a) + turn));
    }
  };
  const agents: Array<Promise<void>> = [];
  for (let g = 0; g < W.groups; g++) for (let a = 0; a < W.agentsPerGroup; a++) agents.push(agent(g, a));
  await Promise.all(agents);
  const seconds = (lastEnd - t0) / 1000;
  return { ttftP50: percentile(ttft, 50), ttftP90: percentile(ttft, 90), requestsPerSecond: ttft.length / seconds, tokensPerSecond: generated / seconds, wallMs: seconds * 1000 };
}

/** Until every replica's events arrive: each replica gets a short prompt of its own (two blocks). */
async function warmUp(bases: readonly string[], picker: PrefixPicker): Promise<void> {
  const deadline = performance.now() + 60_000;
  for (let round = 0; !picker.allSeen(); round++) {
    if (performance.now() > deadline) throw new BenchError('fleet: the replicas\' KV-cache events never arrived');
    await Promise.all(bases.map((base, r) => streamCompletion(base, '/completion', { prompt: promptTokens(40, 990_000 + 10 * round + r), n_predict: 1 })));
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const fleet: Scenario = {
  id: 'fleet',
  title: `agent fleet over ${REPLICAS} replicas`,
  timeoutSeconds: TINY ? 420 : 1920,
  description: `${W.groups} groups x ${W.agentsPerGroup} agents at once, each group sharing a ${W.systemTokens}-token system prompt, each agent ${W.turns} turns (+${W.userTokens} user tokens, ${W.answerTokens} generated, its history kept), streamed /completion with token-id prompts. Ours: ${REPLICAS} replicas (-t 1, -np ${PER_REPLICA.parallel}, -c ${PER_REPLICA.ctx} each) behind a prefix-aware picker fed only by their --kv-events (llm-d's prefix and queue weights), then the same replicas round robin, each with prompts of its own (the order alternates by round); llama-server: one server with -t ${REPLICAS}, -np ${REPLICAS * PER_REPLICA.parallel}, -c ${REPLICAS * PER_REPLICA.ctx}, the same workload once (its figures stand in both rows). TTFT = request start -> first token event; throughput = requests (generated tokens) / wall time (first request sent -> last stream ended). ${FLEET_LIMITS_DESCRIPTION} (ours only: llama-server has no tenants.)`,
  metrics: [
    { key: 'prefixTtftP50', label: 'prefix-aware: TTFT p50', unit: 'ms', kind: 'latency' },
    { key: 'prefixTtftP90', label: 'prefix-aware: TTFT p90', unit: 'ms', kind: 'latency' },
    { key: 'prefixWallMs', label: 'prefix-aware: wall time', unit: 'ms', kind: 'latency' },
    { key: 'prefixRequestsPerSecond', label: 'prefix-aware: requests/s', unit: 'req/s', kind: 'throughput' },
    { key: 'prefixTokensPerSecond', label: 'prefix-aware: generated tokens/s', unit: 'tok/s', kind: 'info' },
    { key: 'prefixHitShare', label: 'prefix-aware: requests sent where their first block was', unit: 'share', kind: 'info' },
    { key: 'rrTtftP50', label: 'round robin: TTFT p50', unit: 'ms', kind: 'info' },
    { key: 'rrTtftP90', label: 'round robin: TTFT p90', unit: 'ms', kind: 'info' },
    { key: 'rrRequestsPerSecond', label: 'round robin: requests/s', unit: 'req/s', kind: 'info' },
    { key: 'rrWallMs', label: 'round robin: wall time', unit: 'ms', kind: 'info' },
    ...FLEET_LIMIT_METRICS,
  ],
  async run(ctx: ScenarioContext) {
    if (ctx.server !== 'ours') {
      const single = await runWorkload([ctx.base], new RoundRobin(1), 10_000);
      return {
        prefixTtftP50: single.ttftP50, prefixTtftP90: single.ttftP90, prefixRequestsPerSecond: single.requestsPerSecond, prefixTokensPerSecond: single.tokensPerSecond, prefixHitShare: NaN,
        prefixWallMs: single.wallMs, rrTtftP50: single.ttftP50, rrTtftP90: single.ttftP90, rrRequestsPerSecond: single.requestsPerSecond, rrWallMs: single.wallMs,
        ...Object.fromEntries(FLEET_LIMIT_METRICS.map((m) => [m.key, NaN])),
      };
    }
    const bases = [ctx.base];
    for (let r = 1; r < REPLICAS; r++) bases.push((await ctx.startReplica(replicaFlags(r))).base);
    const picker = new PrefixPicker(REPLICAS);
    try {
      await warmUp(bases, picker);
      const order = ctx.round % 2 === 0 ? ['prefix', 'rr'] : ['rr', 'prefix'];
      const out: Record<string, number> = {};
      for (const which of order) {
        const run = which === 'prefix' ? await runWorkload(bases, picker, 20_000) : await runWorkload(bases, new RoundRobin(REPLICAS), 30_000);
        out[`${which}TtftP50`] = run.ttftP50;
        out[`${which}TtftP90`] = run.ttftP90;
        out[`${which}RequestsPerSecond`] = run.requestsPerSecond;
        out[`${which}WallMs`] = run.wallMs;
        if (which === 'prefix') out.prefixTokensPerSecond = run.tokensPerSecond;
      }
      out.prefixHitShare = picker.hits / Math.max(1, picker.picks);
      ctx.progress(`ours: fleet: prefix-aware TTFT p50 ${out.prefixTtftP50!.toFixed(0)} ms vs round robin ${out.rrTtftP50!.toFixed(0)} ms; ${(100 * out.prefixHitShare).toFixed(0)}% of requests went where their first block was`);
      // The limits across replicas: replicas of their own (with the auth service), started after the workload.
      Object.assign(out, await measureFleetLimits(join(REPO_ROOT, 'dist/inference/inference-server.cjs'), join(REPO_ROOT, 'bench/results/logs'), ctx.progress));
      return out;
    } finally {
      picker.close();
    }
  },
};

export const FLEET_PROFILE: Profile = {
  id: 'fleet',
  model: () => ensureBenchModel(),
  // Each replica of ours: one thread, its own slots and KV pool, and its KV-cache events.
  commonArgs: () => unifiedPoolArgs(PER_REPLICA.ctx, PER_REPLICA.parallel, 1),
  oursExtra: replicaFlags(0),
  referenceExtra: [{
    flags: ['-t', String(REPLICAS), '-tb', String(REPLICAS), '-np', String(REPLICAS * PER_REPLICA.parallel), '-c', String(REPLICAS * PER_REPLICA.ctx)],
    why: `one llama-server with the fleet's threads, slots and KV cells in all (${REPLICAS} replicas' worth)`,
  }],
  scenarios: [fleet],
};
