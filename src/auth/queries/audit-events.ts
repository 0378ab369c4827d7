// Queries on the audit trail (migration 0011): append, page through, purge.
import type { Queryable, Sql } from '../database/client.js';

export interface NewAuditEvent {
  type: string;
  actor: 'app' | 'admin' | 'anonymous' | 'service';
  appId?: string | null;
  userId?: string | null;
  familyId?: string | null;
  ip: string | null;
  userAgent: string | null;
  details?: Record<string, unknown>;
  now: Date;
}

export interface AuditEventRow {
  id: string;
  occurred_at: Date;
  type: string;
  actor: string;
  app_id: string | null;
  user_id: string | null;
  family_id: string | null;
  ip: string | null;
  user_agent: string | null;
  details: Record<string, unknown>;
}

export async function insertAuditEvent(sql: Queryable, event: NewAuditEvent): Promise<void> {
  await sql`
    insert into audit_events (occurred_at, type, actor, app_id, user_id, family_id, ip, user_agent, details)
    values (
      ${event.now}, ${event.type}, ${event.actor}, ${event.appId ?? null}, ${event.userId ?? null}, ${event.familyId ?? null},
      ${event.ip}, ${event.userAgent}, ${sql.json((event.details ?? {}) as Record<string, string>)}
    )
  `;
}

export interface AuditEventFilter {
  appId?: string;
  userId?: string;
  type?: string;
  /** occurred_at >= since */
  since?: Date;
  /** occurred_at < until */
  until?: Date;
  /** Only events with an id below this one (the cursor: the last id of the previous page). */
  beforeId?: string;
  limit: number;
}

/** Newest first (by id); every filter is optional and they combine with AND. */
export async function listAuditEvents(sql: Queryable, filter: AuditEventFilter): Promise<AuditEventRow[]> {
  return sql<AuditEventRow[]>`
    select id::text, occurred_at, type, actor, app_id, user_id, family_id, ip, user_agent, details
    from audit_events
    where true
      ${filter.appId ? sql`and app_id = ${filter.appId}` : sql``}
      ${filter.userId ? sql`and user_id = ${filter.userId}` : sql``}
      ${filter.type ? sql`and type = ${filter.type}` : sql``}
      ${filter.since ? sql`and occurred_at >= ${filter.since}` : sql``}
      ${filter.until ? sql`and occurred_at < ${filter.until}` : sql``}
      ${filter.beforeId ? sql`and id < ${filter.beforeId}::bigint` : sql``}
    order by id desc
    limit ${filter.limit}
  `;
}

/** Deletes the events that occurred before `cutoff` (the retention purge); returns how many. */
export async function purgeAuditEventsBefore(sql: Sql, cutoff: Date): Promise<number> {
  return sql.begin(async (tx) => {
    await tx`select set_config('auth.audit_purge', 'on', true)`;
    const deleted = await tx`delete from audit_events where occurred_at < ${cutoff}`;
    return deleted.count;
  });
}
