// Queries on metered usage (migration 0021): adding batches of hourly rows, reading them back,
// and claiming closed hours for their usage.hourly event.
import type { Queryable } from '../database/client.js';

/** One batch row as addUsageHours takes it; counters are non-negative integers. */
export interface UsageHourInput {
  appSlug: string | null;
  tenant: string;
  key: string;
  model: string;
  hour: Date;
  requests: number;
  promptTokens: number;
  cachedPromptTokens: number;
  completionTokens: number;
  queueMs: number;
  computeMs: number;
}

/** A row of usage_hourly as stored (the hour's start, snake_case columns); not the metered row the inference server sends (service/usage.ts UsageHourRow). */
export interface StoredUsageHour {
  app_id: string | null;
  app_slug: string | null;
  tenant: string;
  /** The name of the app's tenant whose id is the `tenant` label; null for any other label. */
  tenant_name: string | null;
  key_label: string;
  model: string;
  hour: Date;
  requests: number;
  prompt_tokens: number;
  cached_prompt_tokens: number;
  completion_tokens: number;
  queue_ms: number;
  compute_ms: number;
}

export type UsageTotals = Pick<StoredUsageHour, 'requests' | 'prompt_tokens' | 'cached_prompt_tokens' | 'completion_tokens' | 'queue_ms' | 'compute_ms'>;

/**
 * Adds a batch in one statement. The batch's rows are first summed per (app, tenant, key,
 * model, hour) after the app slugs are resolved (an unknown slug is a null app): ON CONFLICT DO
 * UPDATE may touch a row once per statement, and two slugs of one batch may meet on the null app.
 *
 * Races: the counters are added (`usage_hourly.x + excluded.x`), never set, and PostgreSQL
 * re-reads a conflicting row after the other transaction commits before it adds to it, so
 * concurrent batches of several processes sum exactly. The rows are inserted in the order of
 * the unique key, so two batches lock the rows they share in the same order and cannot deadlock.
 */
export async function addUsageHours(sql: Queryable, rows: readonly UsageHourInput[]): Promise<void> {
  if (rows.length === 0) return;
  const column = <K extends keyof UsageHourInput>(name: K) => rows.map((row) => row[name]);
  const numbers = (name: 'requests' | 'promptTokens' | 'cachedPromptTokens' | 'completionTokens' | 'queueMs' | 'computeMs') => rows.map((row) => String(row[name]));
  await sql`
    insert into usage_hourly as u (app_id, tenant, key_label, model, hour, requests, prompt_tokens, cached_prompt_tokens, completion_tokens, queue_ms, compute_ms)
    select a.id, b.tenant, b.key_label, b.model, date_trunc('hour', b.hour, 'UTC'),
      sum(b.requests), sum(b.prompt_tokens), sum(b.cached_prompt_tokens), sum(b.completion_tokens), sum(b.queue_ms), sum(b.compute_ms)
    from unnest(
      ${column('appSlug') as string[]}::text[], ${column('tenant')}::text[], ${column('key')}::text[], ${column('model')}::text[],
      ${column('hour').map((hour) => hour.toISOString())}::timestamptz[],
      ${numbers('requests')}::bigint[], ${numbers('promptTokens')}::bigint[], ${numbers('cachedPromptTokens')}::bigint[],
      ${numbers('completionTokens')}::bigint[], ${numbers('queueMs')}::bigint[], ${numbers('computeMs')}::bigint[]
    ) as b (app_slug, tenant, key_label, model, hour, requests, prompt_tokens, cached_prompt_tokens, completion_tokens, queue_ms, compute_ms)
    left join apps a on a.slug = b.app_slug
    group by a.id, b.tenant, b.key_label, b.model, date_trunc('hour', b.hour, 'UTC')
    order by a.id nulls first, b.tenant, b.key_label, b.model, date_trunc('hour', b.hour, 'UTC')
    on conflict (app_id, tenant, key_label, model, hour) do update
    set requests = u.requests + excluded.requests,
        prompt_tokens = u.prompt_tokens + excluded.prompt_tokens,
        cached_prompt_tokens = u.cached_prompt_tokens + excluded.cached_prompt_tokens,
        completion_tokens = u.completion_tokens + excluded.completion_tokens,
        queue_ms = u.queue_ms + excluded.queue_ms,
        compute_ms = u.compute_ms + excluded.compute_ms
  `;
}

/**
 * Claims a usage batch of an app (migration 0046): true when this transaction inserted it, false
 * when it was there already. A second transaction claiming the same batch waits for the first:
 * after its commit it claims nothing, after its rollback it claims the batch itself.
 */
export async function claimUsageBatch(sql: Queryable, appId: string, batchId: string, now: Date): Promise<boolean> {
  const claimed = await sql`
    insert into usage_batches (app_id, batch_id, received_at) values (${appId}, ${batchId}, ${now})
    on conflict (app_id, batch_id) do nothing
    returning batch_id
  `;
  return claimed.length === 1;
}

/** Forgets the usage batches received before `before`. */
export async function deleteUsageBatchesBefore(sql: Queryable, before: Date): Promise<void> {
  await sql`delete from usage_batches where received_at < ${before}`;
}

export interface UsageFilter {
  /** An app id; undefined: every app and the rows of no app. */
  appId?: string;
  tenant?: string;
  key?: string;
  /** hour >= from */
  from: Date;
  /** hour < to */
  to: Date;
  limit: number;
}

const SUMS = `coalesce(sum(requests), 0)::float8 as requests, coalesce(sum(prompt_tokens), 0)::float8 as prompt_tokens,
  coalesce(sum(cached_prompt_tokens), 0)::float8 as cached_prompt_tokens, coalesce(sum(completion_tokens), 0)::float8 as completion_tokens,
  coalesce(sum(queue_ms), 0)::float8 as queue_ms, coalesce(sum(compute_ms), 0)::float8 as compute_ms`;

function usageWhere(sql: Queryable, filter: UsageFilter) {
  return sql`
    where u.hour >= ${filter.from} and u.hour < ${filter.to}
      ${filter.appId ? sql`and u.app_id = ${filter.appId}` : sql``}
      ${filter.tenant !== undefined ? sql`and u.tenant = ${filter.tenant}` : sql``}
      ${filter.key !== undefined ? sql`and u.key_label = ${filter.key}` : sql``}
  `;
}

/** Up to `limit` rows, oldest hour first; counters as numbers (exact below 2^53). */
export async function listUsageHours(sql: Queryable, filter: UsageFilter): Promise<StoredUsageHour[]> {
  return sql<StoredUsageHour[]>`
    select u.app_id, a.slug as app_slug, u.tenant, t.name as tenant_name, u.key_label, u.model, u.hour,
      u.requests::float8 as requests, u.prompt_tokens::float8 as prompt_tokens, u.cached_prompt_tokens::float8 as cached_prompt_tokens,
      u.completion_tokens::float8 as completion_tokens, u.queue_ms::float8 as queue_ms, u.compute_ms::float8 as compute_ms
    from usage_hourly u
    left join apps a on a.id = u.app_id
    left join tenants t on t.app_id = u.app_id and t.id::text = u.tenant
    ${usageWhere(sql, filter)}
    order by u.hour, a.slug nulls first, u.tenant, u.key_label, u.model
    limit ${filter.limit}
  `;
}

/** The sums of every row the filter matches (not only of the listed page) and their count. */
export async function sumUsageHours(sql: Queryable, filter: UsageFilter): Promise<UsageTotals & { rows: number }> {
  const [row] = await sql<(UsageTotals & { rows: number })[]>`
    select count(*)::int as rows, ${sql.unsafe(SUMS)}
    from usage_hourly u
    ${usageWhere(sql, filter)}
  `;
  return row!;
}

/**
 * Claims every (app, hour) with usage whose hour started in [since, before) and has no event
 * yet; returns the pairs claimed. The claim is an insert into usage_hours_emitted's primary key,
 * so of two transactions claiming one pair the second waits for the first and then inserts
 * nothing (or claims it, if the first rolled back): each pair is claimed by one commit only. The
 * caller writes the events in the claim's transaction.
 */
export async function claimUsageHours(sql: Queryable, since: Date, before: Date, now: Date): Promise<Array<{ app_id: string; hour: Date }>> {
  return sql<Array<{ app_id: string; hour: Date }>>`
    insert into usage_hours_emitted (app_id, hour, emitted_at)
    select distinct u.app_id, u.hour, ${now}::timestamptz
    from usage_hourly u
    where u.app_id is not null and u.hour >= ${since} and u.hour < ${before}
      and not exists (select from usage_hours_emitted e where e.app_id = u.app_id and e.hour = u.hour)
    order by u.app_id, u.hour
    on conflict do nothing
    returning app_id, hour
  `;
}
