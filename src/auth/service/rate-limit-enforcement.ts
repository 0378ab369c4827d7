// Enforcing the rate limits: a refused request is 429 RATE_LIMITED with Retry-After (the seconds
// until the window that refused it ends). Every hit is counted, refused ones included, so a
// client that keeps trying stays blocked until the window ends.
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { deleteRateLimitCounter, findRateLimitBlock, listRateLimitBlocks, takeRateLimits, type RateLimitBlockRow } from '../queries/rate-limit-counters.js';
import type { RateLimitRule } from '../rate-limit-rules.js';

type Hit = { rule: RateLimitRule; subject: string };

/** Counts one hit for each (rule, subject); 429 when any is over its limit. One statement. */
export async function enforceRateLimits(ctx: AuthContext, hits: Hit[]): Promise<void> {
  const nowMs = ctx.clock.now();
  const retryAt = await countRateLimitHits(ctx, hits, nowMs);
  if (retryAt) throw rateLimited(retryAt, nowMs);
}

/** Counts one hit for each (rule, subject); returns when the latest refusing window ends, or null. */
export function countRateLimitHits(ctx: AuthContext, hits: Hit[], nowMs: number = ctx.clock.now()): Promise<Date | null> {
  const ordered = [...hits].sort((a, b) => compare(a.rule, b.rule) || compare(a.subject, b.subject));
  return takeRateLimits(ctx.sql, ordered.map((hit) => ({ ...hit, ...ctx.rateLimits[hit.rule] })), new Date(nowMs));
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** 429 when the subject is blocked under the rule; counts nothing. */
export async function refuseIfBlocked(ctx: AuthContext, rule: RateLimitRule, subject: string): Promise<void> {
  const nowMs = ctx.clock.now();
  const until = await findRateLimitBlock(ctx.sql, rule, subject, new Date(nowMs));
  if (until) throw rateLimited(until, nowMs);
}

/** 429 RATE_LIMITED whose Retry-After is the seconds left until `until` (at least 1). */
export function rateLimited(until: Date, nowMs: number): Error {
  const retryAfterSeconds = Math.max(1, Math.ceil((until.getTime() - nowMs) / 1000));
  return authError('RATE_LIMITED', 'Too many requests; retry later', { details: { retryAfterSeconds } });
}

export function listBlocks(ctx: AuthContext): Promise<RateLimitBlockRow[]> {
  return listRateLimitBlocks(ctx.sql, new Date(ctx.clock.now()));
}

export function liftBlock(ctx: AuthContext, rule: RateLimitRule, subject: string): Promise<boolean> {
  return deleteRateLimitCounter(ctx.sql, rule, subject);
}
