// Webhook endpoints of an app and their deliveries (admin API). Deliveries are written by the
// enqueue trigger (migration 0015) and sent by webhooks/dispatcher.ts.
import { randomUUID } from 'node:crypto';
import { AUDIT_EVENT_TYPES, type AuditEventType } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import {
  deleteWebhookEndpoint, insertWebhookEndpoint, listWebhookDeliveries, listWebhookEndpoints, notifyWebhookDispatchers,
  requeueWebhookDelivery, type WebhookDeliveryRow, type WebhookEndpointRow,
} from '../queries/webhooks.js';
import { seal } from '../tokens/sealed-box.js';
import { generateWebhookSecret } from '../webhooks/signature.js';
import { getApp } from './admin.js';
import { isUuid } from './credentials.js';

/** The events an app can subscribe to: those about its users and sessions (not the admin's own). */
export const WEBHOOK_EVENT_TYPES: readonly AuditEventType[] = AUDIT_EVENT_TYPES.filter(
  (type) => type !== 'admin.key_rejected' && type !== 'signing_key.rotated' && type !== 'app.created',
);

/** Registers an endpoint; its signing secret is returned here only. */
export async function createWebhookEndpoint(ctx: AuthContext, appId: string, endpoint: { url: string; eventTypes: string[] }): Promise<{ endpoint: WebhookEndpointRow; secret: string }> {
  const app = await getApp(ctx, appId);
  checkUrl(endpoint.url);
  const unknown = endpoint.eventTypes.find((type) => !(WEBHOOK_EVENT_TYPES as readonly string[]).includes(type));
  if (unknown !== undefined) {
    throw authError('VALIDATION_ERROR', `Invalid field "event_types": "${unknown}" is not one of ${WEBHOOK_EVENT_TYPES.join(', ')}`, { details: { field: 'event_types' } });
  }
  const id = randomUUID();
  const secret = generateWebhookSecret();
  const row = await insertWebhookEndpoint(ctx.sql, {
    id, appId: app.id, url: endpoint.url, eventTypes: [...new Set(endpoint.eventTypes)],
    secretCiphertext: seal(ctx.webhookSecretKey, Buffer.from(secret), id), now: new Date(ctx.clock.now()),
  });
  return { endpoint: row, secret };
}

export async function listEndpoints(ctx: AuthContext, appId: string): Promise<WebhookEndpointRow[]> {
  return listWebhookEndpoints(ctx.sql, (await getApp(ctx, appId)).id);
}

/** Deletes an endpoint and its deliveries (pending ones are never sent). */
export async function deleteEndpoint(ctx: AuthContext, appId: string, endpointId: string): Promise<void> {
  const app = await getApp(ctx, appId);
  if (!isUuid(endpointId) || !(await deleteWebhookEndpoint(ctx.sql, app.id, endpointId))) throw authError('WEBHOOK_NOT_FOUND');
}

export async function listDeliveries(ctx: AuthContext, appId: string, filter: { state?: string; limit: number }): Promise<WebhookDeliveryRow[]> {
  if (filter.state !== undefined && !['pending', 'delivered', 'dead'].includes(filter.state)) {
    throw authError('VALIDATION_ERROR', 'Invalid query parameter "state": expected pending, delivered or dead');
  }
  return listWebhookDeliveries(ctx.sql, (await getApp(ctx, appId)).id, filter);
}

/** Sends a delivery again (dead, or delivered and lost by the receiver): pending, due now, attempts from zero. */
export async function redeliver(ctx: AuthContext, appId: string, deliveryId: string): Promise<WebhookDeliveryRow> {
  const app = await getApp(ctx, appId);
  if (!isUuid(deliveryId)) throw authError('WEBHOOK_DELIVERY_NOT_FOUND');
  return ctx.sql.begin(async (tx) => {
    const row = await requeueWebhookDelivery(tx, app.id, deliveryId, new Date(ctx.clock.now()));
    if (!row) throw authError('WEBHOOK_DELIVERY_NOT_FOUND');
    await notifyWebhookDispatchers(tx);
    return row;
  });
}

function checkUrl(url: string): void {
  let parsed: URL | null = null;
  try { parsed = new URL(url); } catch { /* below */ }
  if (!parsed || (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') || parsed.username || parsed.password) {
    throw authError('VALIDATION_ERROR', 'Invalid field "url": expected an http(s) URL without credentials', { details: { field: 'url' } });
  }
}
