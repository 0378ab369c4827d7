// POST /fleet/exchange: inference-server replicas that reach this service over HTTP exchange the
// fleet counts of tenants' limits (service/fleet-exchange.ts says how and under which names).
import type { HttpRequest, HttpResult } from '../../http/request.js';
import type { AuthenticatedApp } from '../service/credentials.js';
import type { AuthContext } from '../context.js';
import type { FleetExchangeBody } from '../schemas.js';
import { exchangeFleetCounts } from '../service/fleet-exchange.js';

/**
 * 200 `{ replicas, others: [{ tenant, requests, tokens, in_flight }] }`: the app's live replicas
 * (this one included) and the other replicas' counts of each tenant asked for.
 */
export async function handleFleetExchange(ctx: AuthContext, input: { app: AuthenticatedApp; body: FleetExchangeBody }, _req: HttpRequest): Promise<HttpResult> {
  return { body: await exchangeFleetCounts(ctx, input.app.id, input.body) };
}
