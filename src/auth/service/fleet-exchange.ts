// The fleet counts of tenants' limits for inference-server replicas that reach this service over
// HTTP (--auth-issuer) instead of sharing its database (--auth): each replica's batch
// (src/inference/tenants/fleet-limits.ts) is applied here exactly as a replica on the database
// applies it (tenants/fleet-store.ts, one transaction), in the fleet of the app whose credentials
// it presents (appFleetStore: its replica and tenant names stored under the app's slug), so one
// app's credentials can neither read nor inflate another app's counts, and the app's replicas on
// the database (--auth --auth-app SLUG) count with them.
import type { AuthContext } from '../context.js';
import type { AuthenticatedApp } from './credentials.js';
import type { FleetExchangeBody } from '../schemas.js';
import { appFleetStore, type TenantReport } from '../../inference/tenants/fleet-store.js';

export interface FleetExchangeResult {
  /** The app's live replicas, this one included. */
  replicas: number;
  /** The other replicas' counts of each tenant asked for. */
  others: Array<{ tenant: string; requests: number; tokens: number; in_flight: number }>;
}

/** Applies one replica's batch for `app` and reads back the others' counts. */
export async function exchangeFleetCounts(ctx: AuthContext, app: AuthenticatedApp, body: FleetExchangeBody): Promise<FleetExchangeResult> {
  const reports = new Map<string, TenantReport>();
  for (const r of body.reports) {
    const report = reports.get(r.tenant) ?? { requests: [], tokens: [], inFlight: 0 };
    report.requests.push(...r.requests);
    report.tokens.push(...r.tokens);
    report.inFlight = r.in_flight;
    reports.set(r.tenant, report);
  }
  const tenants = [...new Set(body.tenants)];
  const view = await appFleetStore(ctx.sql, app.slug).exchange(body.replica, body.now_ms, body.window_start_second, reports, tenants);
  return {
    replicas: view.replicas,
    others: tenants.map((tenant) => {
      const counts = view.others.get(tenant)!;
      return { tenant, requests: counts.requests, tokens: counts.tokens, in_flight: counts.inFlight };
    }),
  };
}
