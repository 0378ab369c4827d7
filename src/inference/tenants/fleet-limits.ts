// FleetLimits: tenants' limits held across replicas on one database, without a write per request.
// Each replica counts what it admits locally (TenantLimiter's window) and, in batches (every
// `intervalMs`, 200 ms by default, or at once when a budget below is used up), writes its counts
// to the database and reads back what the other replicas counted (fleet-store.ts). A request is
// admitted when this replica's count plus the others' last known counts are below the limit.
//
// A replica writes its totals of each second (what it counted in that second so far), not what it
// counted since the last exchange: writing a total again changes nothing, so an exchange whose
// answer was lost after the store applied it (an HTTP timeout), or that was applied in part, is
// simply sent again with the totals of then, and nothing is counted twice. What the store has
// confirmed of each second is kept; the difference is this replica's unsynced count.
//
// The bound: what a replica admitted and has not yet written (its unsynced admissions, those of a
// batch being written included) is what the others cannot see; and a batch written just after
// another replica read the counts is unseen by that one until its next exchange. Each replica may
// hold at most `budget = max(1, floor(slack * limit / (2 * (replicas - 1))))` unsynced admissions
// of a tenant's limit (requests, tokens or requests in progress); past it, it refuses that tenant
// (Retry-After 1 s) and writes its batch at once. So what any replica cannot see of another is at
// most 2 * budget, and a tenant is admitted at most limit + max(slack * limit, 2 * (replicas - 1)):
// limit x (1 + slack) once slack * limit >= 2 * (replicas - 1) (slack is 0.1 by default; 3
// replicas: limits of 40 and more). Tokens are counted as they are used, as on one replica: a
// request admitted below the tokens limit runs to its end.
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { TenantLimits } from './tenant.js';
import type { FleetStore, OthersCounts, TenantReport } from './fleet-store.js';

export const FLEET_SYNC_MS = 200;
export const FLEET_SLACK = 0.1;

/** The most a tenant's limit is exceeded across `replicas` replicas (see above). */
export function fleetOvershoot(limit: number, replicas: number, slack = FLEET_SLACK): number {
  return replicas <= 1 ? 0 : Math.max(Math.floor(slack * limit), 2 * (replicas - 1));
}

/** What TenantLimiter asks of the fleet. */
export interface FleetCounts {
  /** The other replicas' counts of tenant `id` as last heard. */
  of(id: string): OthersCounts;
  /** A refusal while this replica's unsynced admissions of a limit are at its budget; null otherwise. */
  refusal(id: string, limits: TenantLimits): string | null;
  admitted(id: string): void;
  ended(id: string): void;
  tokens(id: string, n: number): void;
}

/** A replica's counts of one kind by second over the window: its totals, and what the store confirmed of them. */
class SecondCounts {
  readonly counted = new Map<number, number>();
  readonly confirmed = new Map<number, number>();
  /** Counted and not confirmed, kept as counts change: read on every admission (the budgets). */
  private pending = 0;

  add(second: number, n: number): void {
    this.counted.set(second, (this.counted.get(second) ?? 0) + n);
    this.pending += n;
  }

  unsynced(): number {
    return this.pending;
  }

  /** [second, total] of the seconds the store has not confirmed in full (once per exchange). */
  report(): Array<[number, number]> {
    const out: Array<[number, number]> = [];
    for (const [second, total] of this.counted) if (total > (this.confirmed.get(second) ?? 0)) out.push([second, total]);
    return out;
  }

  /** The store holds these totals now. */
  confirm(sent: Array<[number, number]>): void {
    for (const [second, total] of sent) {
      const before = this.confirmed.get(second) ?? 0;
      if (total <= before || !this.counted.has(second)) continue;
      this.confirmed.set(second, total);
      this.pending -= total - before;
    }
  }

  /** Forgets the seconds before `second` (out of every window the store reads), confirmed or not. */
  forgetBefore(second: number): void {
    for (const [s, total] of this.counted) {
      if (s >= second) continue;
      this.pending -= total - (this.confirmed.get(s) ?? 0);
      this.counted.delete(s);
      this.confirmed.delete(s);
    }
  }
}

interface TenantState {
  others: OthersCounts;
  inFlight: number;
  requests: SecondCounts;
  tokens: SecondCounts;
  /** Admissions into progress not yet written (for the concurrency budget). */
  unsyncedStarts: number;
  lastActiveMs: number;
  /** The tenant's limits as last admitted (for the budgets). */
  limits: TenantLimits;
}

const NONE: OthersCounts = { requests: 0, tokens: 0, inFlight: 0 };

export interface FleetOptions {
  intervalMs?: number;
  slack?: number;
  now?: () => number;
  log?: (line: string) => void;
}

export class FleetLimits implements FleetCounts {
  private readonly tenants = new Map<string, TenantState>();
  private replicas = 1;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private again = false;
  private readonly now: () => number;
  private readonly slack: number;
  /** Exchanges that failed (their counts are kept for the next one). */
  failures = 0;

  /** The last failure the store marked as fatal (a configuration error), if any. */
  private fatal: Error | null = null;

  constructor(private readonly store: FleetStore, readonly replica: string, private readonly options: FleetOptions = {}) {
    this.now = options.now ?? Date.now;
    this.slack = options.slack ?? FLEET_SLACK;
  }

  /**
   * Registers this replica and learns the fleet (one exchange), then exchanges every interval.
   * Rejects when that first exchange fails for good (an error marked `fatal` by the store, such
   * as credentials refused); a passing failure is logged and the next exchange tries again.
   */
  async start(): Promise<void> {
    await this.exchange();
    if (this.fatal) throw this.fatal;
    this.timer = setInterval(() => void this.exchange(), this.options.intervalMs ?? FLEET_SYNC_MS);
    this.timer.unref();
  }

  /** Stops the timer and writes what is pending. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.exchange();
  }

  /** Live replicas as last heard, this one included. */
  get fleetSize(): number {
    return this.replicas;
  }

  of(id: string): OthersCounts {
    return this.tenants.get(id)?.others ?? NONE;
  }

  /** Unsynced admissions a replica may hold of a limit. */
  budget(limit: number): number {
    return this.replicas <= 1 ? Infinity : Math.max(1, Math.floor((this.slack * limit) / (2 * (this.replicas - 1))));
  }

  refusal(id: string, limits: TenantLimits): string | null {
    const s = this.state(id);
    s.limits = limits;
    if (!this.atBudget(s)) return null;
    void this.exchange();
    return `Rate limit of tenant ${id}: this replica is waiting for the other replicas' counts`;
  }

  /** Whether a budget of the tenant's limits is used up (its batch must be written first). */
  private atBudget(s: TenantState): boolean {
    const over = (limit: number | undefined, unsynced: number): boolean => limit !== undefined && unsynced >= this.budget(limit);
    return over(s.limits.requestsPerMinute, s.requests.unsynced()) || over(s.limits.tokensPerMinute, s.tokens.unsynced()) || over(s.limits.concurrentRequests, s.unsyncedStarts);
  }

  admitted(id: string): void {
    const s = this.state(id);
    s.inFlight++;
    s.unsyncedStarts++;
    s.requests.add(this.second(), 1);
    // Written at once, so that the next request here finds the batch written rather than a refusal.
    if (this.atBudget(s)) void this.exchange();
  }

  ended(id: string): void {
    const s = this.tenants.get(id);
    if (s) s.inFlight = Math.max(0, s.inFlight - 1);
  }

  tokens(id: string, n: number): void {
    if (n === 0) return;
    const s = this.state(id);
    s.tokens.add(this.second(), n);
    if (this.atBudget(s)) void this.exchange();
  }

  private second(): number {
    return Math.floor(this.now() / 1000);
  }

  private state(id: string): TenantState {
    let s = this.tenants.get(id);
    if (!s) {
      s = { others: NONE, inFlight: 0, requests: new SecondCounts(), tokens: new SecondCounts(), unsyncedStarts: 0, lastActiveMs: this.now(), limits: {} };
      this.tenants.set(id, s);
    }
    s.lastActiveMs = this.now();
    return s;
  }

  /** One exchange at a time; a call during one runs another right after it. */
  exchange(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = this.exchangeOnce().finally(() => {
      this.running = null;
      if (this.again) {
        this.again = false;
        void this.exchange();
      }
    });
    return this.running;
  }

  private async exchangeOnce(): Promise<void> {
    const now = this.now();
    const windowStartSecond = Math.floor((now - 60_000) / 1000);
    const reports = new Map<string, TenantReport>();
    const starts = new Map<string, number>();
    for (const [id, s] of this.tenants) {
      s.requests.forgetBefore(windowStartSecond - 1);
      s.tokens.forgetBefore(windowStartSecond - 1);
      reports.set(id, { requests: s.requests.report(), tokens: s.tokens.report(), inFlight: s.inFlight });
      starts.set(id, s.unsyncedStarts);
    }
    try {
      const view = await this.store.exchange(this.replica, now, windowStartSecond, reports, [...this.tenants.keys()]);
      this.replicas = view.replicas;
      for (const [id, report] of reports) {
        const s = this.tenants.get(id)!;
        // What this exchange wrote is no longer unsynced; what came meanwhile stays.
        s.requests.confirm(report.requests);
        s.tokens.confirm(report.tokens);
        s.unsyncedStarts -= starts.get(id)!;
        s.others = view.others.get(id) ?? NONE;
        // A tenant idle for a window, with nothing in progress or unsynced, is forgotten.
        if (s.inFlight === 0 && s.requests.unsynced() === 0 && s.tokens.unsynced() === 0 && now - s.lastActiveMs > 60_000) this.tenants.delete(id);
      }
    } catch (err) {
      if ((err as { fatal?: unknown }).fatal === true) this.fatal = err as Error;
      this.failures++;
      this.options.log?.(`tenants: exchanging counts with the fleet failed (sent again with the next exchange): ${(err as Error).message}`);
    }
  }
}

/** A replica's default name in the fleet's counts: unique per process, readable in the table. */
export function defaultReplicaName(): string {
  return `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`;
}
