// Admin routes of an app's webhooks: endpoints, deliveries, redelivery.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import type { AuthContext } from '../context.js';
import type { WebhookDeliveryRow, WebhookEndpointRow } from '../queries/webhooks.js';
import { CreateWebhookBody } from '../schemas.js';
import * as webhooks from '../service/webhooks.js';
import { queryInteger } from './query-params.js';

const createWebhookBody = compileBody(CreateWebhookBody);
type NoInput = Record<string, never>;

/** POST /admin/apps/:app_id/webhooks `{url, event_types}` → 201 endpoint with its `secret` (shown once). */
export async function handleCreateWebhook(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const body = createWebhookBody.parse(req);
  const { endpoint, secret } = await webhooks.createWebhookEndpoint(ctx, req.params.app_id!, { url: body.url, eventTypes: body.event_types });
  return { status: 201, body: { ...endpointJson(endpoint), secret } };
}

/** GET /admin/apps/:app_id/webhooks → 200 `{webhooks: [...]}` (no secrets). */
export async function handleListWebhooks(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return { body: { webhooks: (await webhooks.listEndpoints(ctx, req.params.app_id!)).map(endpointJson) } };
}

/** DELETE /admin/apps/:app_id/webhooks/:webhook_id → 200 `{id, deleted: true}`. */
export async function handleDeleteWebhook(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  await webhooks.deleteEndpoint(ctx, req.params.app_id!, req.params.webhook_id!);
  return { body: { id: req.params.webhook_id!.toLowerCase(), deleted: true } };
}

/** GET /admin/apps/:app_id/webhook-deliveries?state=dead&limit=100 → 200 `{deliveries: [...]}`, newest first. */
export async function handleListDeliveries(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const deliveries = await webhooks.listDeliveries(ctx, req.params.app_id!, {
    state: req.query.get('state') ?? undefined,
    limit: queryInteger(req, 'limit', 100, 1, 1000),
  });
  return { body: { deliveries: deliveries.map(deliveryJson) } };
}

/** POST /admin/apps/:app_id/webhook-deliveries/:delivery_id/redeliver → 200 the delivery, pending again. */
export async function handleRedeliver(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return { body: deliveryJson(await webhooks.redeliver(ctx, req.params.app_id!, req.params.delivery_id!)) };
}

function endpointJson(endpoint: WebhookEndpointRow): Record<string, unknown> {
  return { id: endpoint.id, app_id: endpoint.app_id, url: endpoint.url, event_types: endpoint.event_types, created_at: endpoint.created_at.toISOString() };
}

function deliveryJson(delivery: WebhookDeliveryRow): Record<string, unknown> {
  return {
    id: delivery.id,
    message_id: `msg_${delivery.id}`,
    endpoint_id: delivery.endpoint_id,
    event_type: delivery.event_type,
    payload: delivery.payload,
    state: delivery.state,
    attempts: delivery.attempts,
    created_at: delivery.created_at.toISOString(),
    next_attempt_at: delivery.state === 'pending' ? delivery.next_attempt_at.toISOString() : null,
    last_attempt_at: delivery.last_attempt_at?.toISOString() ?? null,
    last_status: delivery.last_status,
    last_error: delivery.last_error,
    delivered_at: delivery.delivered_at?.toISOString() ?? null,
  };
}
