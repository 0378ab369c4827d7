// The fleet counts of tenants' limits for inference-server replicas that reach this service over
// HTTP (--auth-issuer) instead of sharing its database (--auth): each replica's batch
// (src/inference/tenants/fleet-limits.ts) is applied here exactly as a replica on the database
// applies it (tenants/fleet-store.ts, one transaction), under the app whose credentials it
// presents. An app's replicas count only among themselves: their replica and tenant names are
// stored under the app's id, so one app's credentials can neither read nor inflate another app's
// counts.
import type { AuthContext } from '../context.js';
import type { FleetExchangeBody } from '../schemas.js';
import { postgresFleetStore, type TenantReport } from '../../inference/tenants/fleet-store.js';

/** The names an app's replicas and tenants are stored under. */
export function fleetScope(appId: string): string {
  return `app:${appId}/`;
}

export interface FleetExchangeResult {
  /** The app's live replicas, this one included. */
  replicas: number;
  /** The other replicas' counts of each tenant asked for. */
  others: Array<{ tenant: string; requests: number; tokens: number; in_flight: number }>;
}

/** Applies one replica's batch for `appId` and reads back the others' counts. */
export async function exchangeFleetCounts(ctx: AuthContext, appId: string, body: FleetExchangeBody): Promise<FleetExchangeResult> {
  const scope = fleetScope(appId);
  const reports = new Map<string, TenantReport>();
  for (const r of body.reports) {
    const report = reports.get(scope + r.tenant) ?? { requests: [], tokens: [], inFlight: 0 };
    report.requests.push(...r.requests);
    report.tokens.push(...r.tokens);
    report.inFlight = r.in_flight;
    reports.set(scope + r.tenant, report);
  }
  const tenants = [...new Set(body.tenants)];
  const view = await postgresFleetStore(ctx.sql, scope).exchange(scope + body.replica, body.now_ms, body.window_start_second, reports, tenants.map((t) => scope + t));
  return {
    replicas: view.replicas,
    others: tenants.map((tenant) => {
      const counts = view.others.get(scope + tenant) ?? { requests: 0, tokens: 0, inFlight: 0 };
      return { tenant, requests: counts.requests, tokens: counts.tokens, in_flight: counts.inFlight };
    }),
  };
}
