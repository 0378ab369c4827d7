// Queries on the shared rate-limit counters (migration 0013).
import type { Queryable } from '../database/client.js';

export interface RateLimitHit {
  rule: string;
  subject: string;
  maxHits: number;
  windowSeconds: number;
}

export interface RateLimitBlockRow {
  rule: string;
  subject: string;
  hits: number;
  max_hits: number;
  window_ends_at: Date;
}

/**
 * Counts one hit in each counter, in the order given (callers sort them, so two requests never
 * wait on each other's counters in opposite orders). Returns null when every hit is within its
 * limit, else the latest window end among those over it.
 */
export async function takeRateLimits(sql: Queryable, hits: RateLimitHit[], now: Date): Promise<Date | null> {
  const [row] = await sql<{ retry_at: Date | null }[]>`
    select max(take_rate_limit(h.rule, h.subject, h.max_hits, make_interval(secs => h.window_seconds), ${now})) as retry_at
    from unnest(
      ${hits.map((h) => h.rule)}::text[], ${hits.map((h) => h.subject)}::text[],
      ${hits.map((h) => h.maxHits)}::int[], ${hits.map((h) => h.windowSeconds)}::float8[]
    ) as h(rule, subject, max_hits, window_seconds)
  `;
  return row!.retry_at;
}

/**
 * Counts one refresh of an app, only when the credentials are right (an unauthenticated caller
 * cannot spend an app's budget). Returns null within the limit or for wrong credentials (the
 * refresh itself then answers 401), else the window's end.
 */
export async function takeAppRefreshRate(sql: Queryable, hit: { appId: string; secretHash: Buffer; maxHits: number; windowSeconds: number; now: Date }): Promise<Date | null> {
  const [row] = await sql<{ retry_at: Date | null }[]>`
    select take_rate_limit('refresh_app', a.id::text, ${hit.maxHits}, make_interval(secs => ${hit.windowSeconds}), ${hit.now}) as retry_at
    from apps a
    where a.id = ${hit.appId} and a.secret_hash = ${hit.secretHash}
  `;
  return row?.retry_at ?? null;
}

/** The end of the subject's block under the rule, or null when it is not blocked at `now`. */
export async function findRateLimitBlock(sql: Queryable, rule: string, subject: string, now: Date): Promise<Date | null> {
  const [row] = await sql<{ window_ends_at: Date }[]>`
    select window_ends_at
    from rate_limit_counters
    where rule = ${rule} and subject = ${subject} and hits >= max_hits and window_ends_at > ${now}
  `;
  return row?.window_ends_at ?? null;
}

/** Every subject blocked at `now`, the longest block first. */
export async function listRateLimitBlocks(sql: Queryable, now: Date): Promise<RateLimitBlockRow[]> {
  return sql<RateLimitBlockRow[]>`
    select rule, subject, hits, max_hits, window_ends_at
    from rate_limit_counters
    where hits >= max_hits and window_ends_at > ${now}
    order by window_ends_at desc, rule, subject
    limit 1000
  `;
}

/** Lifts a block (or any count) of the subject: its counter starts over. Returns whether there was one. */
export async function deleteRateLimitCounter(sql: Queryable, rule: string, subject: string): Promise<boolean> {
  const deleted = await sql`delete from rate_limit_counters where rule = ${rule} and subject = ${subject}`;
  return deleted.count > 0;
}

/** Deletes the counters whose window has ended (they would start over anyway). */
export async function purgeEndedRateLimitWindows(sql: Queryable, now: Date): Promise<number> {
  const deleted = await sql`delete from rate_limit_counters where window_ends_at <= ${now}`;
  return deleted.count;
}
