// TenantLimiter: each tenant's limits (tenant.ts TenantLimits) over a sliding window of 60 s, and
// OpenAI's rate-limit headers. The rules (docs/tenants.md, "Limits"):
//  - requestsPerMinute: a request is refused when the tenant's requests admitted in the last 60 s
//    number the limit already (the n+1-th is refused); refused requests are not counted.
//  - tokensPerMinute: prompt and completion tokens, counted as they are used (a prompt when its
//    task is submitted, each generated token when it is generated, corrected by the usage the
//    task reports at its end). A request is refused when the tokens of the last 60 s reach the
//    limit; one admitted below it runs to its end, even past the limit (the next ones wait).
//  - concurrentRequests: a request is refused while the tenant has that many in progress.
// A refusal names the limit and says when to retry (Retry-After, whole seconds). Every answer of a
// limited tenant carries x-ratelimit-{limit,remaining,reset}-{requests,tokens} for the limits it
// has (reset: how long until the window is back to the whole limit, as "1m2.5s").
// With FleetLimits (several replicas on one database), each limit holds for the fleet: the other
// replicas' counts, as last heard, are added to this one's, and the headers describe the fleet.
import type { FleetCounts } from './fleet-limits.js';
import type { OthersCounts } from './fleet-store.js';
import type { Tenant, TenantLimits } from './tenant.js';

const ALONE: OthersCounts = { requests: 0, tokens: 0, inFlight: 0 };

export const WINDOW_MS = 60_000;
/** Token counts this close together share one entry of the window. */
const TOKEN_BUCKET_MS = 100;

interface Window {
  inFlight: number;
  /** When each request of the window was admitted, oldest first. */
  requests: number[];
  /** Tokens used, by when, oldest first; `tokenSum` is their total. */
  tokens: Array<{ at: number; n: number }>;
  tokenSum: number;
}

export type LimitDecision =
  | { ok: true; headers: Record<string, string> }
  | { ok: false; headers: Record<string, string>; retryAfterSeconds: number; message: string };

/** OpenAI's duration format: "20ms", "6.5s", "1m0s". */
export function formatReset(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  const seconds = Math.ceil(ms / 10) / 100;
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  return `${minutes}m${Math.round((seconds - minutes * 60) * 100) / 100}s`;
}

export class TenantLimiter {
  private readonly windows = new Map<string, Window>();
  private admissions = 0;

  constructor(private readonly now: () => number = Date.now, private readonly fleet: FleetCounts | null = null) {}

  /** Admits a request of `tenant` against its limits (it is then in progress until end()) or refuses it. */
  admit(tenant: Tenant): LimitDecision {
    const { limits } = tenant;
    const now = this.now();
    if (++this.admissions % 1024 === 0) this.sweep(now);
    const w = this.window(tenant.id, now);
    const others = this.fleet?.of(tenant.id) ?? ALONE;
    const refuse = (message: string, retryAfterMs: number): LimitDecision => ({
      ok: false,
      headers: this.headers(limits, w, now, others),
      retryAfterSeconds: Math.max(1, Math.ceil(retryAfterMs / 1000)),
      message,
    });
    const rpm = limits.requestsPerMinute;
    if (rpm !== undefined && w.requests.length + others.requests >= rpm) {
      // Alone, the oldest request that keeps the count at the limit leaves the window first; with others' requests counted, retry in a second.
      const oldest = w.requests.length >= rpm ? w.requests[w.requests.length - rpm]! + WINDOW_MS - now : 1000;
      return refuse(`Rate limit reached for requests per minute (limit ${rpm}) of tenant ${tenant.id}`, oldest);
    }
    const tpm = limits.tokensPerMinute;
    if (tpm !== undefined && w.tokenSum + others.tokens >= tpm) {
      return refuse(`Rate limit reached for tokens per minute (limit ${tpm}, used ${w.tokenSum + others.tokens}) of tenant ${tenant.id}`, others.tokens > 0 ? 1000 : this.tokensFreeIn(w, tpm, now));
    }
    if (limits.concurrentRequests !== undefined && w.inFlight + others.inFlight >= limits.concurrentRequests) {
      return refuse(`Concurrent request limit reached (limit ${limits.concurrentRequests}) of tenant ${tenant.id}`, 1000);
    }
    const waiting = this.fleet?.refusal(tenant.id, limits);
    if (waiting) return refuse(waiting, 1000);
    w.inFlight++;
    w.requests.push(now);
    this.fleet?.admitted(tenant.id);
    return { ok: true, headers: this.headers(limits, w, now, others) };
  }

  /** A request admitted by admit() has ended. */
  end(tenant: Tenant): void {
    const w = this.windows.get(tenant.id);
    if (!w) return;
    w.inFlight = Math.max(0, w.inFlight - 1);
    this.fleet?.ended(tenant.id);
    this.forgetIfEmpty(tenant.id, w);
  }

  /** `n` tokens of `tenant` were used now (n may be negative: a correction). */
  addTokens(tenant: Tenant, n: number): void {
    if (tenant.limits.tokensPerMinute === undefined || n === 0) return;
    const now = this.now();
    this.addTo(this.window(tenant.id, now), n, now);
    this.fleet?.tokens(tenant.id, n);
  }

  /**
   * `n` tokens of the tenant `id` were used now, as a router's model process reports them: counted
   * when the tenant has a window here (it was admitted in the last 60 s, and has limits).
   */
  addTokensById(id: string, n: number): void {
    if (n === 0 || !this.windows.has(id)) return;
    const now = this.now();
    this.addTo(this.window(id, now), n, now);
    this.fleet?.tokens(id, n);
  }

  private addTo(w: Window, n: number, now: number): void {
    const last = w.tokens[w.tokens.length - 1];
    if (last && now - last.at < TOKEN_BUCKET_MS) last.n += n;
    else w.tokens.push({ at: now, n });
    w.tokenSum += n;
  }

  /** The headers of `tenant`'s state now, for an answer that does not count (read-only routes). */
  current(tenant: Tenant): Record<string, string> {
    const now = this.now();
    return this.headers(tenant.limits, this.window(tenant.id, now), now, this.fleet?.of(tenant.id) ?? ALONE);
  }

  private headers(limits: TenantLimits, w: Window, now: number, others: OthersCounts): Record<string, string> {
    const h: Record<string, string> = {};
    if (limits.requestsPerMinute !== undefined) {
      h['x-ratelimit-limit-requests'] = String(limits.requestsPerMinute);
      h['x-ratelimit-remaining-requests'] = String(Math.max(0, limits.requestsPerMinute - w.requests.length - others.requests));
      h['x-ratelimit-reset-requests'] = formatReset(w.requests.length > 0 ? w.requests[w.requests.length - 1]! + WINDOW_MS - now : 0);
    }
    if (limits.tokensPerMinute !== undefined) {
      h['x-ratelimit-limit-tokens'] = String(limits.tokensPerMinute);
      h['x-ratelimit-remaining-tokens'] = String(Math.max(0, limits.tokensPerMinute - w.tokenSum - others.tokens));
      h['x-ratelimit-reset-tokens'] = formatReset(w.tokens.length > 0 ? w.tokens[w.tokens.length - 1]!.at + WINDOW_MS - now : 0);
    }
    return h;
  }

  /** How long until the tokens of the window fall below `limit`. */
  private tokensFreeIn(w: Window, limit: number, now: number): number {
    let sum = w.tokenSum;
    for (const entry of w.tokens) {
      sum -= entry.n;
      if (sum < limit) return entry.at + WINDOW_MS - now;
    }
    return 0;
  }

  /** The tenant's window, its entries older than 60 s dropped. */
  private window(id: string, now: number): Window {
    let w = this.windows.get(id);
    if (!w) {
      w = { inFlight: 0, requests: [], tokens: [], tokenSum: 0 };
      this.windows.set(id, w);
    }
    const since = now - WINDOW_MS;
    let r = 0;
    while (r < w.requests.length && w.requests[r]! <= since) r++;
    if (r > 0) w.requests.splice(0, r);
    let t = 0;
    while (t < w.tokens.length && w.tokens[t]!.at <= since) w.tokenSum -= w.tokens[t++]!.n;
    if (t > 0) w.tokens.splice(0, t);
    return w;
  }

  /** Drops the windows of tenants with nothing left in them (bounded memory with many tenants). */
  private sweep(now: number): void {
    for (const id of [...this.windows.keys()]) this.forgetIfEmpty(id, this.window(id, now));
  }

  private forgetIfEmpty(id: string, w: Window): void {
    if (w.inFlight === 0 && w.requests.length === 0 && w.tokens.length === 0) this.windows.delete(id);
  }
}
