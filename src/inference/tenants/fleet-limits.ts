// FleetLimits: tenants' limits held across replicas on one database, without a write per request.
// Each replica counts what it admits locally (TenantLimiter's window) and, in batches (every
// `intervalMs`, 200 ms by default, or at once when a budget below is used up), adds its counts to
// the database and reads back what the other replicas counted (fleet-store.ts). A request is
// admitted when this replica's count plus the others' last known counts are below the limit.
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

interface TenantState {
  others: OthersCounts;
  inFlight: number;
  /** Counts by second not yet written. */
  requests: Map<number, number>;
  tokens: Map<number, number>;
  /** Admissions into progress not yet written (for the concurrency budget). */
  unsyncedStarts: number;
  lastActiveMs: number;
  /** The tenant's limits as last admitted (for the budgets). */
  limits: TenantLimits;
}

const NONE: OthersCounts = { requests: 0, tokens: 0, inFlight: 0 };

const sum = (m: Map<number, number>): number => [...m.values()].reduce((a, b) => a + b, 0);

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
    return over(s.limits.requestsPerMinute, sum(s.requests)) || over(s.limits.tokensPerMinute, sum(s.tokens)) || over(s.limits.concurrentRequests, s.unsyncedStarts);
  }

  admitted(id: string): void {
    const s = this.state(id);
    s.inFlight++;
    s.unsyncedStarts++;
    this.add(s.requests, 1);
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
    this.add(s.tokens, n);
    if (this.atBudget(s)) void this.exchange();
  }

  private add(m: Map<number, number>, n: number): void {
    const second = Math.floor(this.now() / 1000);
    m.set(second, (m.get(second) ?? 0) + n);
  }

  private state(id: string): TenantState {
    let s = this.tenants.get(id);
    if (!s) {
      s = { others: NONE, inFlight: 0, requests: new Map(), tokens: new Map(), unsyncedStarts: 0, lastActiveMs: this.now(), limits: {} };
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
    const reports = new Map<string, TenantReport>();
    const carried = new Map<string, { requests: Map<number, number>; tokens: Map<number, number>; starts: number }>();
    for (const [id, s] of this.tenants) {
      reports.set(id, { requests: [...s.requests], tokens: [...s.tokens], inFlight: s.inFlight });
      carried.set(id, { requests: new Map(s.requests), tokens: new Map(s.tokens), starts: s.unsyncedStarts });
    }
    try {
      const view = await this.store.exchange(this.replica, now, Math.floor((now - 60_000) / 1000), reports, [...this.tenants.keys()]);
      this.replicas = view.replicas;
      for (const [id, c] of carried) {
        const s = this.tenants.get(id)!;
        // What this exchange wrote is no longer unsynced; what came meanwhile stays.
        for (const [second, n] of c.requests) subtract(s.requests, second, n);
        for (const [second, n] of c.tokens) subtract(s.tokens, second, n);
        s.unsyncedStarts -= c.starts;
        s.others = view.others.get(id) ?? NONE;
        // A tenant idle for a window, with nothing in progress or pending, is forgotten.
        if (s.inFlight === 0 && s.requests.size === 0 && s.tokens.size === 0 && now - s.lastActiveMs > 60_000) this.tenants.delete(id);
      }
    } catch (err) {
      if ((err as { fatal?: unknown }).fatal === true) this.fatal = err as Error;
      this.failures++;
      this.options.log?.(`tenants: exchanging counts with the fleet failed (kept for the next exchange): ${(err as Error).message}`);
    }
  }
}

function subtract(m: Map<number, number>, key: number, n: number): void {
  const left = (m.get(key) ?? 0) - n;
  if (left === 0) m.delete(key);
  else m.set(key, left);
}

/** A replica's default name in the fleet's counts: unique per process, readable in the table. */
export function defaultReplicaName(): string {
  return `${hostname()}/${process.pid}/${randomUUID().slice(0, 8)}`;
}
