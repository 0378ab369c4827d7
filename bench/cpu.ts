// CPU accounting from /proc (Linux): how much CPU the processes outside the bench (not this
// client, not the server under test) used during a measurement. On a small shared machine another
// process's load changes the figures more than anything the servers do, so the bench waits
// (bounded) for a quiet machine before each scenario and reports the foreign load it saw.
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { sleep } from './load.js';

interface Sample {
  busy: number;
  steal: number;
  total: number;
  mine: number;
}

function procTicks(pid: number | 'self'): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // utime, stime, cutime, cstime: fields 14-17 (1-based), 12-15 after the comm field.
    return Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
  } catch {
    return 0;
  }
}

function sample(pids: number[]): Sample | undefined {
  let line: string;
  try {
    line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  } catch {
    return undefined; // not Linux
  }
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = v;
  const busy = user + nice + system + irq + softirq;
  return { busy, steal, total: busy + idle + iowait + steal, mine: procTicks('self') + pids.reduce((s, p) => s + procTicks(p), 0) };
}

export interface CpuUsage {
  /** Average CPUs used by processes other than this one and `pids`. */
  foreignCores: number;
  /** Average CPUs used by this process and `pids`. */
  benchCores: number;
  /** Average CPUs stolen by the hypervisor. */
  stealCores: number;
}

/**
 * Starts measuring; the returned function gives the usage since then. `pids` may be a function,
 * read at both ends: a server the bench restarted in between is counted whole (the old one's
 * ticks reach this process's cutime once it is reaped, the new one's are read by its pid).
 */
export function cpuMeter(pids: number[] | (() => number[])): () => CpuUsage | undefined {
  const now = typeof pids === 'function' ? pids : () => pids;
  const a = sample(now());
  return () => {
    const b = sample(now());
    if (!a || !b) return undefined;
    const elapsed = (b.total - a.total) / availableParallelism();
    if (elapsed <= 0) return { foreignCores: 0, benchCores: 0, stealCores: 0 };
    const mine = b.mine - a.mine;
    return {
      foreignCores: Math.max(0, (b.busy - a.busy - mine) / elapsed),
      benchCores: mine / elapsed,
      stealCores: (b.steal - a.steal) / elapsed,
    };
  };
}

/**
 * Waits until processes other than the bench use less than `threshold` CPUs over a `windowMs`
 * window, for at most `maxMs`. Returns the last window's foreign load and the time waited.
 */
export async function waitForQuiet(pids: number[], threshold = 0.2, windowMs = 500, maxMs = 20_000): Promise<{ foreignCores: number; waitedMs: number }> {
  const t0 = Date.now();
  for (;;) {
    const meter = cpuMeter(pids);
    await sleep(windowMs);
    const u = meter();
    if (!u) return { foreignCores: NaN, waitedMs: 0 };
    if (u.foreignCores < threshold || Date.now() - t0 >= maxMs) return { foreignCores: u.foreignCores, waitedMs: Date.now() - t0 };
  }
}
