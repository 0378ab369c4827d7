// POST /fleet/exchange: inference-server replicas that reach this service over HTTP exchange the
// fleet counts of tenants' limits (service/fleet-exchange.ts says how and under which names).
// POST /fleet/usage: the same replicas send their hourly usage rows (service/usage.ts
// recordAppUsageBatch: stored under the app, exactly once per batch id).
import type { HttpRequest, HttpResult } from '../../http/request.js';
import type { AuthenticatedApp } from '../service/credentials.js';
import type { AuthContext } from '../context.js';
import type { FleetExchangeBody, FleetUsageBody } from '../schemas.js';
import { exchangeFleetCounts } from '../service/fleet-exchange.js';
import { recordAppUsageBatch } from '../service/usage.js';

/**
 * 200 `{ replicas, others: [{ tenant, requests, tokens, in_flight }] }`: the app's live replicas
 * (this one included) and the other replicas' counts of each tenant asked for.
 */
export async function handleFleetExchange(ctx: AuthContext, input: { app: AuthenticatedApp; body: FleetExchangeBody }, _req: HttpRequest): Promise<HttpResult> {
  return { body: await exchangeFleetCounts(ctx, input.app, input.body) };
}

/** 200 `{ batch_id, rows }`, the same for a batch sent again (whose rows were added the first time only). */
export async function handleFleetUsage(ctx: AuthContext, input: { app: AuthenticatedApp; body: FleetUsageBody }, _req: HttpRequest): Promise<HttpResult> {
  const { batch_id: batchId, rows } = input.body;
  await recordAppUsageBatch(ctx, input.app, batchId, rows.map((row) => ({
    appSlug: row.app_slug, tenant: row.tenant, key: row.key, model: row.model, hour: row.hour,
    requests: row.requests, promptTokens: row.prompt_tokens, cachedPromptTokens: row.cached_prompt_tokens,
    completionTokens: row.completion_tokens, queueMs: row.queue_ms, computeMs: row.compute_ms,
  })));
  return { body: { batch_id: batchId, rows: rows.length } };
}
