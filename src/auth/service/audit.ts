// Reading the audit trail (admin API) and its retention. Writing is done by each service
// function, in the transaction of its change (see audit.ts).
import type { AuthContext } from '../context.js';
import type { Sql } from '../database/client.js';
import { authError } from '../errors.js';
import { listAuditEvents as selectAuditEvents, purgeAuditEventsBefore, type AuditEventFilter, type AuditEventRow } from '../queries/audit-events.js';
import { purgeFinishedDeliveriesBefore } from '../queries/webhooks.js';

export interface AuditPage {
  events: AuditEventRow[];
  /** Pass as `cursor` for the next (older) page; null on the last page. */
  nextCursor: string | null;
}

/**
 * One page of events, newest first. The cursor is opaque to clients: the last id of the page,
 * base64url-encoded. Paging by id is stable while events are added (new ones have higher ids,
 * so they never shift a later page).
 */
export async function listAuditEvents(ctx: AuthContext, filter: Omit<AuditEventFilter, 'beforeId'> & { cursor?: string }): Promise<AuditPage> {
  const beforeId = filter.cursor === undefined ? undefined : decodeCursor(filter.cursor);
  const rows = await selectAuditEvents(ctx.sql, { ...filter, beforeId, limit: filter.limit + 1 });
  const events = rows.slice(0, filter.limit);
  const more = rows.length > filter.limit;
  return { events, nextCursor: more ? Buffer.from(events.at(-1)!.id).toString('base64url') : null };
}

function decodeCursor(cursor: string): string {
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!/^[1-9][0-9]{0,17}$/.test(id) || Buffer.from(id).toString('base64url') !== cursor) {
    throw authError('VALIDATION_ERROR', 'Invalid query parameter "cursor": pass the next_cursor of a previous page');
  }
  return id;
}

/**
 * Deletes the events older than the retention period, and the finished (delivered or dead)
 * webhook deliveries of that age, which the same period bounds; returns how many events.
 */
export async function purgeExpiredAuditEvents(sql: Sql, nowMs: number, retentionMs: number): Promise<number> {
  const cutoff = new Date(nowMs - retentionMs);
  await purgeFinishedDeliveriesBefore(sql, cutoff);
  return purgeAuditEventsBefore(sql, cutoff);
}
