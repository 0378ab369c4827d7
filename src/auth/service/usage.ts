// Usage metered by the inference server: batches of hourly rows added up (AuthService.usage, and
// POST /fleet/usage for replicas over HTTP, exactly once per batch),
// the admin query, and the usage.hourly event of each app and closed hour.
import type { AuthContext } from '../context.js';
import type { AuthenticatedApp } from './credentials.js';
import { authError } from '../errors.js';
import { USAGE_BATCH_KEEP_MS, USAGE_EMIT_GRACE_MS, USAGE_EMIT_LOOKBACK_MS, USAGE_QUERY_MAX_DAYS, USAGE_QUERY_MAX_ROWS } from '../limits.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import {
  addUsageHours, claimUsageBatch, claimUsageHours, deleteUsageBatchesBefore, listUsageHours, sumUsageHours, type UsageFilter, type UsageHourInput, type StoredUsageHour, type UsageTotals,
} from '../queries/usage.js';

const HOUR_MS = 3600 * 1000;
const DAY_MS = 24 * HOUR_MS;

/** One row of a batch, as the inference server meters it (exported by mount.ts). */
export interface UsageHourRow {
  /** The auth app of the key; null for usage without one (a plain --api-key). An unknown slug is stored as null. */
  appSlug: string | null;
  /** A tenant label (the tenant id of an auth key, or any label); '' for none. */
  tenant: string;
  /** The auth key's id, or a non-secret label for another key. Never the key itself. */
  key: string;
  model: string;
  /** Any instant of the UTC hour (ISO 8601); stored as the hour's start. */
  hour: string;
  requests: number;
  promptTokens: number;
  cachedPromptTokens: number;
  completionTokens: number;
  queueMs: number;
  computeMs: number;
}

const COUNTERS = ['requests', 'promptTokens', 'cachedPromptTokens', 'completionTokens', 'queueMs', 'computeMs'] as const;

/**
 * Adds a batch in one statement (queries/usage.ts addUsageHours: concurrent batches sum
 * exactly). A row that is malformed (a counter that is not a non-negative safe integer, an hour
 * that is not an instant, a label over 200 characters) is a programming error of the caller:
 * RangeError, and nothing of the batch is stored.
 */
export async function recordUsage(ctx: AuthContext, rows: readonly UsageHourRow[]): Promise<void> {
  await addUsageHours(ctx.sql, usageInputs(rows));
}

/** The rows as addUsageHours takes them; RangeError naming the first malformed row (recordUsage's rules). */
function usageInputs(rows: readonly UsageHourRow[]): UsageHourInput[] {
  return rows.map((row, index) => {
    for (const name of COUNTERS) {
      if (!Number.isSafeInteger(row[name]) || row[name] < 0) throw new RangeError(`usage row ${index}: ${name} must be a non-negative integer, got ${row[name]}`);
    }
    for (const name of ['tenant', 'key', 'model'] as const) {
      if (typeof row[name] !== 'string' || row[name].length > 200 || /[\x00]/.test(row[name])) throw new RangeError(`usage row ${index}: ${name} must be a string of at most 200 characters`);
    }
    const hour = new Date(row.hour);
    if (Number.isNaN(hour.getTime())) throw new RangeError(`usage row ${index}: hour must be an ISO 8601 instant, got ${row.hour}`);
    return { ...row, hour };
  });
}

/**
 * Adds a batch that an inference-server replica of `app` sent over HTTP (POST /fleet/usage),
 * exactly once per `batchId`: the batch is claimed (queries/usage.ts claimUsageBatch) in the
 * transaction that adds its rows, so a batch sent again, because its answer was lost after the
 * commit, adds nothing and is answered as the first time. Batch ids are remembered for
 * USAGE_BATCH_KEEP_MS (each batch forgets the older ones).
 *
 * Every row is stored under `app`: its replicas meter usage of its keys (`app_slug` its slug) and
 * of keys of no app (null, a plain --api-key beside --auth-app); a row naming another app is a
 * replica given the wrong app's credentials, refused (400 VALIDATION_ERROR) rather than billed to
 * this app. A malformed row (recordUsage's rules) is 400 VALIDATION_ERROR too; nothing of a
 * refused batch is stored.
 */
export async function recordAppUsageBatch(ctx: AuthContext, app: AuthenticatedApp, batchId: string, rows: readonly UsageHourRow[]): Promise<void> {
  let inputs: UsageHourInput[];
  try {
    inputs = usageInputs(rows);
  } catch (err) {
    throw authError('VALIDATION_ERROR', `Invalid usage batch: ${(err as Error).message}`);
  }
  const foreign = inputs.findIndex((row) => row.appSlug !== null && row.appSlug !== app.slug);
  if (foreign >= 0) {
    throw authError('VALIDATION_ERROR', `Invalid usage batch: usage row ${foreign} names the app "${inputs[foreign]!.appSlug}", not the app of these credentials ("${app.slug}")`);
  }
  const mine = inputs.map((row) => ({ ...row, appSlug: app.slug }));
  const nowMs = ctx.clock.now();
  await ctx.sql.begin(async (tx) => {
    if (await claimUsageBatch(tx, app.id, batchId, new Date(nowMs))) await addUsageHours(tx, mine);
    await deleteUsageBatchesBefore(tx, new Date(nowMs - USAGE_BATCH_KEEP_MS));
  });
}

export interface UsageQuery {
  /** An app's id (service/admin.ts getAppByIdOrSlug); undefined: every app and the rows of no app. */
  appId?: string;
  tenant?: string;
  key?: string;
  /** Inclusive; default 24 hours before `to`. */
  from?: Date;
  /** Exclusive; default now. */
  to?: Date;
}

export interface UsageReport {
  from: Date;
  to: Date;
  rows: StoredUsageHour[];
  totals: UsageTotals;
  /** True when more rows matched than were listed (the totals count them all). */
  truncated: boolean;
}

/**
 * The rows whose hour starts in [from, to), oldest first, USAGE_QUERY_MAX_ROWS at most, and the
 * totals of all of them. 400 VALIDATION_ERROR unless from < to and the range is at most
 * USAGE_QUERY_MAX_DAYS long.
 */
export async function queryUsage(ctx: AuthContext, query: UsageQuery): Promise<UsageReport> {
  const to = query.to ?? new Date(ctx.clock.now());
  const from = query.from ?? new Date(to.getTime() - DAY_MS);
  checkUsageRange(from, to, USAGE_QUERY_MAX_DAYS);
  const filter: UsageFilter = { appId: query.appId, tenant: query.tenant, key: query.key, from, to, limit: USAGE_QUERY_MAX_ROWS };
  const [rows, sums] = await Promise.all([listUsageHours(ctx.sql, filter), sumUsageHours(ctx.sql, filter)]);
  const { rows: count, ...totals } = sums;
  return { from, to, rows, totals, truncated: count > rows.length };
}

/**
 * Writes the usage.hourly event of every app and hour that ended at least USAGE_EMIT_GRACE_MS
 * ago (within USAGE_EMIT_LOOKBACK_MS) and has none yet; returns how many were written.
 *
 * Exactly once across threads and instances: the (app, hour) pairs are claimed by inserting
 * them into usage_hours_emitted (queries/usage.ts claimUsageHours) and the events are written in
 * the claim's transaction. A second transaction claiming the same pair waits for the first:
 * after its commit it claims nothing, after its rollback (a crash included) it claims the pair
 * and writes the event itself. The event is an audit event of the app, so the webhook outbox
 * (migration 0015) enqueues it in that same transaction.
 */
export async function emitClosedUsageHours(ctx: AuthContext): Promise<number> {
  const nowMs = ctx.clock.now();
  const before = new Date(Math.floor((nowMs - USAGE_EMIT_GRACE_MS) / HOUR_MS) * HOUR_MS);
  const since = new Date(before.getTime() - USAGE_EMIT_LOOKBACK_MS);
  const now = new Date(nowMs);
  return ctx.sql.begin(async (tx) => {
    const claimed = await claimUsageHours(tx, since, before, now);
    for (const { app_id: appId, hour } of claimed) {
      const filter = { appId, from: hour, to: new Date(hour.getTime() + HOUR_MS), limit: Number.MAX_SAFE_INTEGER };
      const [rows, sums] = await Promise.all([listUsageHours(tx, filter), sumUsageHours(tx, filter)]);
      const { rows: _count, ...totals } = sums;
      await insertAuditEvent(tx, {
        type: 'usage.hourly', actor: 'service', appId, ip: null, userAgent: null, now,
        details: {
          hour: hour.toISOString(),
          rows: rows.map((row) => ({ tenant: row.tenant, key: row.key_label, model: row.model, ...countersJson(row) })),
          totals: countersJson(totals),
        },
      });
    }
    return claimed.length;
  });
}

export function countersJson(row: UsageTotals): Record<string, number> {
  return {
    requests: row.requests, prompt_tokens: row.prompt_tokens, cached_prompt_tokens: row.cached_prompt_tokens,
    completion_tokens: row.completion_tokens, queue_ms: row.queue_ms, compute_ms: row.compute_ms,
  };
}

/** Raises 400 unless the range is from < to and at most maxDays long. */
function checkUsageRange(from: Date, to: Date, maxDays: number): void {
  if (from.getTime() >= to.getTime()) throw authError('VALIDATION_ERROR', 'Invalid query parameters "from" and "to": "from" must be before "to"');
  if (to.getTime() - from.getTime() > maxDays * 24 * HOUR_MS) {
    throw authError('VALIDATION_ERROR', `Invalid query parameters "from" and "to": the range is longer than ${maxDays} days`);
  }
}
