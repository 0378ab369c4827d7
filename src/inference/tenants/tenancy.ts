// Tenancy: a request's tenant from its admission to its end (docs/tenants.md). The guard of the
// routes that use the model admits a request's tenant here (its limits, 429 over one; the
// rate-limit headers on every answer of a limited tenant), gives the handler the admitted
// RequestTenant as part of its input, and ends it when the handler is done; the handler passes
// it to the service, which puts it on the engine's tasks (fair share) and meters what the tasks
// used. The tenant is also the request span's llama.tenant attribute when tracing is on
// (docs/telemetry.md).
import { EventEmitter } from 'node:events';
import type { HttpRequest } from '../../http/request.js';
import type { CompletionTaskSpec } from '../../native/binding.js';
import type { CompletionOutcome, GeneratedToken } from '../engine/engine.js';
import { requestUsage } from '../engine/request-usage.js';
import { rateLimited } from '../errors.js';
import { setRequestTenant } from '../../telemetry/tracing.js';
import type { FleetCounts } from './fleet-limits.js';
import { TenantLimiter } from './rate-limits.js';
import { ANONYMOUS, isLimited, type Tenant } from './tenant.js';
import { UsageMeter, type UsageEntry } from './usage-meter.js';

/** Where a router's model process reports what its tenants used (multi-model/child-link.ts). */
export interface UsageReporter {
  tokens(tenant: string, n: number): void;
  usage(entry: UsageEntry): void;
}

/** Tenancy's events: `report`, a model process's report taken (router). */
interface TenancyEvents {
  report: [];
}

export class Tenancy extends EventEmitter<TenancyEvents> {
  readonly limiter: TenantLimiter;
  readonly usage: UsageMeter;

  /** `fleet`: the other replicas' counts, when the limits hold across replicas (fleet-limits.ts). */
  constructor(now: () => number = Date.now, private readonly reporter: UsageReporter | null = null, fleet: FleetCounts | null = null) {
    super();
    this.limiter = new TenantLimiter(now, fleet);
    this.usage = new UsageMeter(now);
  }

  /** `n` tokens of `tenant` used now: against its tokensPerMinute here, and reported to a router. */
  countTokens(tenant: Tenant, n: number): void {
    this.limiter.addTokens(tenant, n);
    this.reporter?.tokens(tenant.id, n);
  }

  /** Usage to meter here and report to a router. */
  addUsage(entry: UsageEntry): void {
    this.usage.add(entry);
    this.reporter?.usage(entry);
  }

  /** What a model process reported (router): its tokens against the tenants' limits here, its usage metered here. */
  takeReport(tokens: ReadonlyArray<readonly [string, number]>, entries: readonly UsageEntry[]): void {
    for (const [tenant, n] of tokens) this.limiter.addTokensById(tenant, n);
    for (const entry of entries) this.usage.add(entry);
    this.emit('report');
  }

  /**
   * Admits a request of `tenant` against its limits, or throws 429 (rate_limit_exceeded, with
   * Retry-After); either way a limited tenant's answer gets the rate-limit headers. Admitted, the
   * request is the tenant's until end(), which the caller owes the returned ticket.
   */
  admit(tenant: Tenant, req: HttpRequest): RequestTenant {
    traceTenant(tenant);
    if (isLimited(tenant.limits)) {
      const decision = this.limiter.admit(tenant);
      for (const [name, value] of Object.entries(decision.headers)) req.setResponseHeader(name, value);
      if (!decision.ok) {
        req.setResponseHeader('Retry-After', String(decision.retryAfterSeconds));
        throw rateLimited(decision.message);
      }
    }
    return new RequestTenant(tenant, this, req);
  }

  /**
   * The token headers of `ticket`'s answer set again from the window now, this request's tokens
   * counted so far included (the prompt once submitted, the whole request at its end). An answer
   * whose headers have gone out already (a stream) keeps what it sent.
   */
  refreshTokenHeaders(ticket: RequestTenant): void {
    if (ticket.tenant.limits.tokensPerMinute === undefined || !ticket.req) return;
    const headers = this.limiter.current(ticket.tenant);
    for (const name of ['x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens']) ticket.req.setResponseHeader(name, headers[name]!);
  }

  /** An answer that counts against no limit (read-only routes): a limited tenant's headers all the same. */
  annotate(tenant: Tenant, req: HttpRequest): void {
    traceTenant(tenant);
    if (!isLimited(tenant.limits)) return;
    for (const [name, value] of Object.entries(this.limiter.current(tenant))) req.setResponseHeader(name, value);
  }

  /** The admitted request has ended; `model`: the one it used (null: it never reached one). */
  end(ticket: RequestTenant, model: string | null): void {
    if (isLimited(ticket.tenant.limits)) this.limiter.end(ticket.tenant);
    this.refreshTokenHeaders(ticket);
    if (model !== null) this.addUsage({ appSlug: ticket.tenant.appSlug, tenant: ticket.tenant.id, key: ticket.tenant.key, model, requests: 1 });
  }
}

/** The request span's llama.tenant: a named tenant's id (none for the anonymous tenant, where no key is required). */
function traceTenant(tenant: Tenant): void {
  if (tenant.id !== ANONYMOUS) setRequestTenant(tenant.id);
}

/** One admitted request's tenant, as the service uses it. */
export class RequestTenant {
  /** `req`: the request whose answer carries the tenant's rate-limit headers (none: a router's forwarded tenant). */
  constructor(readonly tenant: Tenant, private readonly tenancy: Tenancy, readonly req: HttpRequest | null = null) {}

  get who(): { appSlug: string | null; tenant: string; key: string } {
    return { appSlug: this.tenant.appSlug, tenant: this.tenant.id, key: this.tenant.key };
  }

  /** The task fields of fair share (native/admission.h), with the request's own priority, if any. */
  share(priority?: number): Pick<CompletionTaskSpec, 'tenant' | 'tenantWeight' | 'priorityClass' | 'priority'> {
    return { tenant: this.tenant.id, tenantWeight: this.tenant.weight, priorityClass: this.tenant.priorityClass, ...(priority !== undefined ? { priority } : {}) };
  }

  /**
   * Meters the tasks of one request, submitted together at `submittedAt` (ms): tokens count against
   * tokensPerMinute as they are used (each prompt now, each generated token through the returned
   * onToken wrapper), and once every task has ended the usage is recorded as the answer's `usage`
   * counts it (engine/request-usage.ts), the limiter's count corrected to it. A request that fails records nothing.
   */
  meter(model: string, specs: readonly CompletionTaskSpec[], submittedAt: number): TaskMeter {
    const tenancy = this.tenancy;
    const tenant = this.tenant;
    let counted = 0;
    const count = (n: number): void => {
      counted += n;
      tenancy.countTokens(tenant, n);
    };
    for (const spec of specs) count(spec.prompt.length);
    // A stream's headers go out with its first event: they count its prompt, not its completion.
    tenancy.refreshTokenHeaders(this);
    return {
      onToken: (inner) => (t) => {
        count(1);
        inner?.(t);
      },
      settle: (outcomes) => {
        void Promise.all(outcomes).then((done) => {
          const used = requestUsage(done);
          count(used.promptTokens + used.completionTokens - counted);
          const wallMs = Date.now() - submittedAt;
          // Whole milliseconds, as the usage table keeps them.
          const computeMs = Math.round(done.reduce((n, o) => n + o.tPromptMs + o.tPredictMs, 0));
          const queueMs = Math.round(done.reduce((n, o) => n + Math.max(0, wallMs - o.tPromptMs - o.tPredictMs), 0));
          this.tenancy.addUsage({ ...this.who, model, ...used, queueMs, computeMs });
        }, () => {});
      },
    };
  }

  /** Embeddings: their prompt tokens, as the answer's usage counts them. */
  meterEmbeddings(model: string, promptTokens: number): void {
    this.tenancy.countTokens(this.tenant, promptTokens);
    this.tenancy.refreshTokenHeaders(this);
    this.tenancy.addUsage({ ...this.who, model, promptTokens });
  }
}

export interface TaskMeter {
  /** Wraps a task's token callback (or none) so that its tokens count as they come. */
  onToken(inner: ((t: GeneratedToken) => void) | undefined): (t: GeneratedToken) => void;
  /** The tasks' outcomes: usage recorded once all have ended. */
  settle(outcomes: ReadonlyArray<Promise<CompletionOutcome>>): void;
}
