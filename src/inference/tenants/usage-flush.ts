// Hourly usage written to the auth service: the rows the UsageMeter accumulated, in one write
// every interval (60 s by default) and a last one when the server closes (the hour in progress
// included), never a write per request. Written to the service mounted in this process (--auth),
// or to a remote auth-server's POST /fleet/usage (--auth-issuer with the app's credentials:
// remote-usage-recorder.ts).
//
// Exactly once: each batch gets an id when it is drained (one per part, when the recorder splits
// it), and a write that fails keeps the batch, id and rows unchanged, to be written first next
// time: a write whose answer was lost after the service applied it is then sent again with the
// same id, which the service recognises (it adds nothing). Meanwhile new rows stay in the meter,
// so a long outage holds one drained batch and the meter's rows, not a batch per interval. A
// batch the service refuses for good (UsageBatchRefused: malformed) is logged and dropped, never
// retried.
import { randomUUID } from 'node:crypto';
import type { UsageHourRow } from './usage-meter.js';
import type { UsageMeter } from './usage-meter.js';

export const USAGE_FLUSH_MS = 60_000;

/** Where the rows go: the mounted service's usage table, or auth-server over HTTP. */
export interface UsageRecorder {
  /**
   * Adds the rows; resolves once they are stored. `batchId` is the same each time a batch is
   * written again after a failure. Throws UsageBatchRefused when the batch can never be stored.
   */
  record(rows: UsageHourRow[], batchId: string): Promise<void>;
  /** Splits a drained batch into the parts written one by one (default: one part). */
  split?(rows: UsageHourRow[]): UsageHourRow[][];
}

/** A batch the recorder's service refuses for what it holds (malformed): dropped, not retried. */
export class UsageBatchRefused extends Error {}

export interface UsageFlush {
  /** Writes what is pending now (resolves when written, or kept after a failure). */
  flush(): Promise<void>;
  /** Stops the timer and writes what is pending. */
  stop(): Promise<void>;
}

interface UsageBatch {
  id: string;
  rows: UsageHourRow[];
}

export function startUsageFlush(meter: UsageMeter, recorder: UsageRecorder, options: { intervalMs?: number; log?: (line: string) => void } = {}): UsageFlush {
  /** Drained batches not yet written, oldest first. */
  const batches: UsageBatch[] = [];
  /** Writes the batches in order; false when one failed (it and the rest are kept). */
  const writeBatches = async (): Promise<boolean> => {
    while (batches.length > 0) {
      const batch = batches[0]!;
      try {
        await recorder.record(batch.rows, batch.id);
      } catch (err) {
        if (!(err instanceof UsageBatchRefused)) {
          options.log?.(`usage: writing ${batch.rows.length} rows (batch ${batch.id}) failed, kept for the next write: ${(err as Error).message}`);
          return false;
        }
        options.log?.(`usage: the auth service refused batch ${batch.id} of ${batch.rows.length} rows for good, dropped: ${err.message}`);
      }
      batches.shift();
    }
    return true;
  };
  let writing: Promise<void> = Promise.resolve();
  const flush = (): Promise<void> => {
    writing = writing.then(async () => {
      if (!(await writeBatches())) return;
      const rows = meter.drain();
      if (rows.length === 0) return;
      for (const part of recorder.split?.(rows) ?? [rows]) if (part.length > 0) batches.push({ id: randomUUID(), rows: part });
      await writeBatches();
    });
    return writing;
  };
  const timer = setInterval(() => void flush(), options.intervalMs ?? USAGE_FLUSH_MS);
  timer.unref();
  return {
    flush,
    stop: () => {
      clearInterval(timer);
      return flush();
    },
  };
}
