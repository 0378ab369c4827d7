// UsageMeter: what each tenant used, by tenant, key, model and UTC hour (docs/tenants.md, "Usage"):
// requests, prompt tokens (cached included), cached prompt tokens, completion tokens, time in
// queue and in compute. Tokens are exactly those of the `usage` the answers carried (each task's
// final counts); a request is counted once, when it ends. Two readers:
//  - drain(): the rows accumulated since the previous drain, as the auth service's usage table
//    takes them (UsageHourRow; usage-flush.ts writes them every minute and at shutdown, to the
//    mounted service or over HTTP);
//  - metricsText(): cumulative per-tenant series for /metrics, the 20 tenants that used the most
//    tokens by name and the rest summed as tenant="other" (bounded label cardinality).

// The auth service's row (a type only: nothing of the auth service is loaded for it).
import type { UsageHourRow } from '../../auth/mount.js';

export type { UsageHourRow };

/** One use to add: who, which model, and the amounts (absent: 0). */
export interface UsageEntry {
  appSlug: string | null;
  tenant: string;
  key: string;
  model: string;
  requests?: number;
  promptTokens?: number;
  cachedPromptTokens?: number;
  completionTokens?: number;
  queueMs?: number;
  computeMs?: number;
}

type Amounts = Pick<UsageHourRow, 'requests' | 'promptTokens' | 'cachedPromptTokens' | 'completionTokens' | 'queueMs' | 'computeMs'>;

const AMOUNT_FIELDS = ['requests', 'promptTokens', 'cachedPromptTokens', 'completionTokens', 'queueMs', 'computeMs'] as const;

/** Tenants named in /metrics; the others are summed as tenant="other". */
export const METRICS_TENANTS = 20;

const zero = (): Amounts => ({ requests: 0, promptTokens: 0, cachedPromptTokens: 0, completionTokens: 0, queueMs: 0, computeMs: 0 });

/** The ISO start of the UTC hour of `ms`. */
export function hourOf(ms: number): string {
  return new Date(Math.floor(ms / 3_600_000) * 3_600_000).toISOString();
}

/**
 * A row's identity: hour, app, tenant, key and model, each variable field length-prefixed so
 * that no two different rows share one. Built for every request: plain concatenation, where
 * JSON.stringify of the five took a microsecond.
 */
function rowId(hour: string, appSlug: string | null, tenant: string, key: string, model: string): string {
  return `${hour}|${appSlug === null ? '-' : `${appSlug.length}:${appSlug}`}|${tenant.length}:${tenant}|${key.length}:${key}|${model}`;
}

export class UsageMeter {
  /** Since the last drain, by hour, app, tenant, key and model. */
  private pending = new Map<string, UsageHourRow>();
  /** Since start-up, by tenant. */
  private readonly totals = new Map<string, Amounts>();

  /** The hour in progress: its start (ms) and ISO form, made again only when the hour changes. */
  private hourStart = -1;
  private hourIso = '';
  /**
   * The row and total each key used last, so that a key's next request in the same hour (the
   * common case) finds them without building its row's identity: by key label, checked against
   * the entry's other fields; dropped by drain().
   */
  private lastByKey = new Map<string, { entry: UsageEntry; hour: string; row: UsageHourRow; total: Amounts }>();

  constructor(private readonly now: () => number = Date.now) {}

  /** The ISO start of the current UTC hour (a Date and its ISO string cost microseconds per request). */
  private currentHour(): string {
    const now = this.now();
    const start = now - (now % 3_600_000);
    if (start !== this.hourStart) {
      this.hourStart = start;
      this.hourIso = hourOf(start);
    }
    return this.hourIso;
  }

  add(entry: UsageEntry): void {
    const hour = this.currentHour();
    const last = this.lastByKey.get(entry.key);
    let row: UsageHourRow;
    let total: Amounts;
    if (last && last.hour === hour && last.entry.model === entry.model && last.entry.tenant === entry.tenant && last.entry.appSlug === entry.appSlug) {
      row = last.row;
      total = last.total;
    } else {
      const id = rowId(hour, entry.appSlug, entry.tenant, entry.key, entry.model);
      let found = this.pending.get(id);
      if (!found) {
        found = { appSlug: entry.appSlug, tenant: entry.tenant, key: entry.key, model: entry.model, hour, ...zero() };
        this.pending.set(id, found);
      }
      row = found;
      let tenantTotal = this.totals.get(entry.tenant);
      if (!tenantTotal) {
        tenantTotal = zero();
        this.totals.set(entry.tenant, tenantTotal);
      }
      total = tenantTotal;
      this.lastByKey.set(entry.key, { entry: { appSlug: entry.appSlug, tenant: entry.tenant, key: entry.key, model: entry.model }, hour, row, total });
    }
    addAmounts(row, entry);
    addAmounts(total, entry);
  }

  /** The rows accumulated since the previous drain (the hour in progress included); starts anew. */
  drain(): UsageHourRow[] {
    const rows = [...this.pending.values()];
    this.pending = new Map();
    this.lastByKey = new Map();
    return rows;
  }

  /** The per-tenant series of /metrics (Prometheus text; empty before any use). */
  metricsText(): string {
    if (this.totals.size === 0) return '';
    const ranked = [...this.totals.entries()].sort((a, b) => (b[1].promptTokens + b[1].completionTokens) - (a[1].promptTokens + a[1].completionTokens) || (a[0] < b[0] ? -1 : 1));
    const shown: Array<[string, Amounts]> = ranked.slice(0, METRICS_TENANTS);
    const rest = ranked.slice(METRICS_TENANTS);
    if (rest.length > 0) {
      const other = zero();
      for (const [, a] of rest) for (const field of AMOUNT_FIELDS) other[field] += a[field];
      shown.push(['other', other]);
    }
    const lines: string[] = [];
    const series = (name: string, help: string, value: (a: Amounts) => number): void => {
      lines.push(`# HELP llamacpp:${name} ${help}`, `# TYPE llamacpp:${name} counter`);
      for (const [tenant, a] of shown) lines.push(`llamacpp:${name}{tenant="${escapeLabel(tenant)}"} ${value(a)}`);
    };
    series('tenant_requests_total', 'Requests per tenant (the 20 that used the most tokens; the rest as tenant="other")', (a) => a.requests);
    series('tenant_prompt_tokens_total', 'Prompt tokens per tenant, cached included (as usage.prompt_tokens)', (a) => a.promptTokens);
    series('tenant_prompt_tokens_cached_total', 'Prompt tokens per tenant reused from the cache', (a) => a.cachedPromptTokens);
    series('tenant_completion_tokens_total', 'Completion tokens per tenant', (a) => a.completionTokens);
    series('tenant_queue_seconds_total', 'Time the tenant\'s tasks waited for a slot', (a) => a.queueMs / 1000);
    series('tenant_compute_seconds_total', 'Time the tenant\'s tasks spent in prompt processing and generation', (a) => a.computeMs / 1000);
    return lines.join('\n') + '\n';
  }
}

/** Adds an entry's amounts (absent: 0), written out: a loop over the field names cost more per request. */
function addAmounts(to: Amounts, entry: UsageEntry): void {
  if (entry.requests !== undefined) to.requests += entry.requests;
  if (entry.promptTokens !== undefined) to.promptTokens += entry.promptTokens;
  if (entry.cachedPromptTokens !== undefined) to.cachedPromptTokens += entry.cachedPromptTokens;
  if (entry.completionTokens !== undefined) to.completionTokens += entry.completionTokens;
  if (entry.queueMs !== undefined) to.queueMs += entry.queueMs;
  if (entry.computeMs !== undefined) to.computeMs += entry.computeMs;
}

function escapeLabel(value: string): string {
  return value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}
