// Hourly usage written to the auth service mounted in this process (--auth): the rows the
// UsageMeter accumulated, in one write every interval (60 s by default) and a last one when the
// server closes (the hour in progress included), never a write per request. A write that fails
// keeps its rows for the next one. With a remote --auth-issuer nothing is written: usage stays on
// /metrics (docs/tenants.md, "Usage").
import type { UsageRecorder } from '../access/auth-bridge.js';
import type { UsageMeter } from './usage-meter.js';

export const USAGE_FLUSH_MS = 60_000;

export interface UsageFlush {
  /** Writes what is pending now (resolves when written, or kept after a failure). */
  flush(): Promise<void>;
  /** Stops the timer and writes what is pending. */
  stop(): Promise<void>;
}

export function startUsageFlush(meter: UsageMeter, recorder: UsageRecorder, options: { intervalMs?: number; log?: (line: string) => void } = {}): UsageFlush {
  let writing: Promise<void> = Promise.resolve();
  const flush = (): Promise<void> => {
    writing = writing.then(async () => {
      const rows = meter.drain();
      if (rows.length === 0) return;
      try {
        await recorder.record(rows);
      } catch (err) {
        meter.restore(rows);
        options.log?.(`usage: writing ${rows.length} rows failed, kept for the next write: ${(err as Error).message}`);
      }
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
