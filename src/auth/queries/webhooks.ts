// Queries on webhook endpoints and their deliveries (the outbox, migration 0015).
import type { Queryable } from '../database/client.js';

export interface WebhookEndpointRow {
  id: string;
  app_id: string;
  url: string;
  event_types: string[];
  created_at: Date;
}

export interface WebhookDeliveryRow {
  id: string;
  endpoint_id: string;
  app_id: string;
  event_type: string;
  payload: Record<string, unknown>;
  created_at: Date;
  state: 'pending' | 'delivered' | 'dead';
  attempts: number;
  next_attempt_at: Date;
  last_attempt_at: Date | null;
  last_status: number | null;
  last_error: string | null;
  delivered_at: Date | null;
}

/** A delivery claimed for sending, with what signing and sending it needs. */
export interface DueDelivery {
  id: string;
  endpoint_id: string;
  payload: Record<string, unknown>;
  attempts: number;
  url: string;
  secret_ciphertext: Buffer;
}

const ENDPOINT_COLUMNS = 'id, app_id, url, event_types, created_at';
const DELIVERY_COLUMNS = 'id, endpoint_id, app_id, event_type, payload, created_at, state, attempts, next_attempt_at, last_attempt_at, last_status, last_error, delivered_at';

export async function insertWebhookEndpoint(sql: Queryable, endpoint: {
  id: string; appId: string; url: string; secretCiphertext: Buffer; eventTypes: string[]; now: Date;
}): Promise<WebhookEndpointRow> {
  const [row] = await sql<WebhookEndpointRow[]>`
    insert into webhook_endpoints (id, app_id, url, secret_ciphertext, event_types, created_at)
    values (${endpoint.id}, ${endpoint.appId}, ${endpoint.url}, ${endpoint.secretCiphertext}, ${endpoint.eventTypes}::text[], ${endpoint.now})
    returning ${sql.unsafe(ENDPOINT_COLUMNS)}
  `;
  return row!;
}

export async function listWebhookEndpoints(sql: Queryable, appId: string): Promise<WebhookEndpointRow[]> {
  return sql<WebhookEndpointRow[]>`
    select ${sql.unsafe(ENDPOINT_COLUMNS)}
    from webhook_endpoints
    where app_id = ${appId}
    order by created_at, id
  `;
}

/** Deletes the endpoint and its deliveries; false when the app has no such endpoint. */
export async function deleteWebhookEndpoint(sql: Queryable, appId: string, id: string): Promise<boolean> {
  const deleted = await sql`delete from webhook_endpoints where id = ${id} and app_id = ${appId}`;
  return deleted.count > 0;
}

/**
 * Locks up to `limit` pending deliveries that are due (`for update skip locked`: two dispatchers,
 * of this instance or another, never claim the same one). The caller sends them and records the
 * outcome in the same transaction; if its process dies first, the locks go with its connection
 * and the deliveries are still pending.
 */
export async function claimDueDeliveries(sql: Queryable, now: Date, limit: number): Promise<DueDelivery[]> {
  return sql<DueDelivery[]>`
    select d.id, d.endpoint_id, d.payload, d.attempts, e.url, e.secret_ciphertext
    from webhook_deliveries d
    join webhook_endpoints e on e.id = d.endpoint_id
    where d.state = 'pending' and d.next_attempt_at <= ${now}
    order by d.next_attempt_at, d.id
    limit ${limit}
    for update of d skip locked
  `;
}

/** Records one attempt: delivered (2xx), retried at `retryAt`, or dead when retryAt is null. */
export async function recordDeliveryAttempt(sql: Queryable, attempt: {
  id: string; now: Date; status: number | null; error: string | null; delivered: boolean; retryAt: Date | null;
}): Promise<void> {
  const state = attempt.delivered ? 'delivered' : attempt.retryAt ? 'pending' : 'dead';
  await sql`
    update webhook_deliveries
    set attempts = attempts + 1,
        last_attempt_at = ${attempt.now},
        last_status = ${attempt.status},
        last_error = ${attempt.error},
        state = ${state},
        delivered_at = ${attempt.delivered ? attempt.now : null},
        next_attempt_at = coalesce(${attempt.retryAt}, next_attempt_at)
    where id = ${attempt.id}
  `;
}

/** The app's deliveries, newest first, optionally of one state. */
export async function listWebhookDeliveries(sql: Queryable, appId: string, filter: { state?: string; limit: number }): Promise<WebhookDeliveryRow[]> {
  return sql<WebhookDeliveryRow[]>`
    select ${sql.unsafe(DELIVERY_COLUMNS)}
    from webhook_deliveries
    where app_id = ${appId}
      ${filter.state ? sql`and state = ${filter.state}` : sql``}
    order by created_at desc, id
    limit ${filter.limit}
  `;
}

/**
 * Makes a delivery pending again, due now, its attempts counted from zero (a dead one, or a
 * delivered one the receiver lost). Undefined when the app has no delivery with this id.
 */
export async function requeueWebhookDelivery(sql: Queryable, appId: string, id: string, now: Date): Promise<WebhookDeliveryRow | undefined> {
  const [row] = await sql<WebhookDeliveryRow[]>`
    update webhook_deliveries
    set state = 'pending', attempts = 0, next_attempt_at = ${now}, delivered_at = null
    where id = ${id} and app_id = ${appId}
    returning ${sql.unsafe(DELIVERY_COLUMNS)}
  `;
  return row;
}

/** Deletes the delivered and dead deliveries created before `cutoff` (pending ones are kept); returns how many. */
export async function purgeFinishedDeliveriesBefore(sql: Queryable, cutoff: Date): Promise<number> {
  const deleted = await sql`delete from webhook_deliveries where created_at < ${cutoff} and state <> 'pending'`;
  return deleted.count;
}

/** Wakes the dispatchers of every instance when the caller's transaction commits. */
export async function notifyWebhookDispatchers(sql: Queryable): Promise<void> {
  await sql`select pg_notify(${WEBHOOK_CHANNEL}, '')`;
}

/** The channel the enqueue trigger (migration 0015) and notifyWebhookDispatchers notify. */
export const WEBHOOK_CHANNEL = 'auth_webhook_deliveries';
