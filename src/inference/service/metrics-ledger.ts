// MetricsLedger: what /metrics reports over the server's life, as llama-server reports it.
// Counters are cumulative since start-up, across sleeps (each engine's final counters are folded
// in when it is unloaded). The two throughput gauges (prompt_tokens_seconds,
// predicted_tokens_seconds) cover the window since the previous scrape: each scrape reports its
// window and starts the next one, so a scrape during sleep reports what ran before sleeping
// once, then nothing.
import type { EngineMetrics } from '../../native/binding.js';

/** The cumulative fields; the others (queued, preparing, busySlots, promptCacheBytes, diskPending, diskBytes) are the live engine's or zero. */
type Cumulative = Omit<EngineMetrics, 'queued' | 'preparing' | 'busySlots' | 'promptCacheBytes' | 'diskPending' | 'diskBytes'>;

const ZERO: Cumulative = {
  promptTokens: 0, cachedTokens: 0, sharedTokens: 0, sharedJoins: 0, busySlotDecodes: 0, nTokensMax: 0, promptMs: 0,
  predictedTokens: 0, predictedMs: 0, decodeCalls: 0, splitSteps: 0, earlyOutputCalls: 0, contextShifts: 0, tokensElsewhere: 0, promptCacheSaves: 0, promptCacheReuses: 0, tasksDone: 0,
  diskHits: 0, diskMisses: 0, diskBytesWritten: 0, diskFilesWritten: 0, diskBytesRead: 0, diskEvictions: 0, diskRejected: 0, diskDropped: 0, diskAdopted: 0,
};

/** Tokens and time of the two throughput gauges. */
interface Throughput {
  promptTokens: number;
  promptMs: number;
  predictedTokens: number;
  predictedMs: number;
}

/** Requests counted for /metrics: every routed request, and those answered with an error. */
export interface RequestCounters {
  requests: number;
  errors: number;
}

export interface MetricsReport {
  totals: EngineMetrics;
  /** tokens/s over the window since the previous scrape (0 when nothing ran). */
  promptRate: number;
  predictedRate: number;
}

export class MetricsLedger {
  /** Engines unloaded so far, summed. */
  private retired: Cumulative = { ...ZERO };
  /** Throughput counters at the end of the previous window. */
  private windowStart: Throughput = { promptTokens: 0, promptMs: 0, predictedTokens: 0, predictedMs: 0 };

  /** An engine is being unloaded: its final counters join the totals. */
  retire(final: EngineMetrics): void {
    this.retired = add(this.retired, final);
  }

  /** The totals with `live` (the running engine's counters, or none while asleep); starts a new window. */
  scrape(live: EngineMetrics | null): MetricsReport {
    const totals: EngineMetrics = { ...add(this.retired, live ?? ZERO), queued: live?.queued ?? 0, preparing: live?.preparing ?? 0, busySlots: live?.busySlots ?? 0, promptCacheBytes: live?.promptCacheBytes ?? 0, diskPending: live?.diskPending ?? 0, diskBytes: live?.diskBytes ?? 0 };
    const start = this.windowStart;
    const rate = (tokens: number, ms: number): number => (ms > 0 ? (1000 * tokens) / ms : 0);
    const report = {
      totals,
      promptRate: rate(totals.promptTokens - start.promptTokens, totals.promptMs - start.promptMs),
      predictedRate: rate(totals.predictedTokens - start.predictedTokens, totals.predictedMs - start.predictedMs),
    };
    this.windowStart = { promptTokens: totals.promptTokens, promptMs: totals.promptMs, predictedTokens: totals.predictedTokens, predictedMs: totals.predictedMs };
    return report;
  }
}

function add(a: Cumulative, b: Cumulative): Cumulative {
  return {
    promptTokens: a.promptTokens + b.promptTokens,
    cachedTokens: a.cachedTokens + b.cachedTokens,
    sharedTokens: a.sharedTokens + b.sharedTokens,
    sharedJoins: a.sharedJoins + b.sharedJoins,
    busySlotDecodes: a.busySlotDecodes + b.busySlotDecodes,
    nTokensMax: Math.max(a.nTokensMax, b.nTokensMax),
    promptMs: a.promptMs + b.promptMs,
    predictedTokens: a.predictedTokens + b.predictedTokens,
    predictedMs: a.predictedMs + b.predictedMs,
    decodeCalls: a.decodeCalls + b.decodeCalls,
    splitSteps: a.splitSteps + b.splitSteps,
    earlyOutputCalls: a.earlyOutputCalls + b.earlyOutputCalls,
    contextShifts: a.contextShifts + b.contextShifts,
    tokensElsewhere: a.tokensElsewhere + b.tokensElsewhere,
    promptCacheSaves: a.promptCacheSaves + b.promptCacheSaves,
    promptCacheReuses: a.promptCacheReuses + b.promptCacheReuses,
    tasksDone: a.tasksDone + b.tasksDone,
    diskHits: a.diskHits + b.diskHits,
    diskMisses: a.diskMisses + b.diskMisses,
    diskBytesWritten: a.diskBytesWritten + b.diskBytesWritten,
    diskFilesWritten: a.diskFilesWritten + b.diskFilesWritten,
    diskBytesRead: a.diskBytesRead + b.diskBytesRead,
    diskEvictions: a.diskEvictions + b.diskEvictions,
    diskRejected: a.diskRejected + b.diskRejected,
    diskDropped: a.diskDropped + b.diskDropped,
    diskAdopted: a.diskAdopted + b.diskAdopted,
    ...speculative(a, b),
  };
}

/** The speculative counters, summed; absent while neither side drafted (speculation off). */
function speculative(a: Cumulative, b: Cumulative): Partial<Cumulative> {
  if (a.draftSteps === undefined && b.draftSteps === undefined) return {};
  const pa = a.acceptedPerPos ?? [];
  const pb = b.acceptedPerPos ?? [];
  return {
    draftTokens: (a.draftTokens ?? 0) + (b.draftTokens ?? 0),
    draftAccepted: (a.draftAccepted ?? 0) + (b.draftAccepted ?? 0),
    draftSteps: (a.draftSteps ?? 0) + (b.draftSteps ?? 0),
    acceptedPerPos: Array.from({ length: Math.max(pa.length, pb.length) }, (_, i) => (pa[i] ?? 0) + (pb[i] ?? 0)),
  };
}
