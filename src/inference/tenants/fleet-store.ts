// The fleet's counts of tenants' limits in PostgreSQL (the auth service's database): one exchange
// per batch, in one transaction: this replica's totals of each second it reports are written (by
// tenant and second; a total never lowers what is stored, so an exchange applied twice or out of
// order counts nothing twice), its requests in progress and its heartbeat set, and the other live
// replicas' counts over the window read back for the tenants it has seen. Rows older than the
// window are deleted by whichever replica exchanges. An app's replicas (on the database or
// through auth-server's POST /fleet/exchange) count among themselves: appFleetStore.
import type { Sql } from '../../auth/database/client.js';

/** A replica that has not exchanged for this long is not counted (its requests in progress neither). */
export const REPLICA_TIMEOUT_MS = 10_000;

export interface TenantReport {
  /** [second, n]: this replica's total of that second so far (sending it again changes nothing). */
  requests: Array<[number, number]>;
  tokens: Array<[number, number]>;
  /** This replica's requests in progress now. */
  inFlight: number;
}

export interface OthersCounts {
  requests: number;
  tokens: number;
  inFlight: number;
}

export interface FleetView {
  /** Live replicas, this one included. */
  replicas: number;
  /**
   * The other replicas' counts of each tenant asked for: requests and tokens of the window's
   * seconds (a replica gone since still counts: what it admitted was admitted), and the live
   * replicas' requests in progress.
   */
  others: Map<string, OthersCounts>;
}

export interface FleetStore {
  exchange(replica: string, nowMs: number, windowStartSecond: number, reports: Map<string, TenantReport>, tenants: readonly string[]): Promise<FleetView>;
}

function rows(reports: Map<string, TenantReport>): { tenant: string[]; second: string[]; requests: string[]; tokens: string[] } {
  const byKey = new Map<string, { tenant: string; second: number; requests: number; tokens: number }>();
  for (const [tenant, report] of reports) {
    for (const [kind, list] of [['requests', report.requests], ['tokens', report.tokens]] as const) {
      for (const [second, n] of list) {
        const key = `${tenant}\u0000${second}`;
        const row = byKey.get(key) ?? { tenant, second, requests: 0, tokens: 0 };
        row[kind] = Math.max(row[kind], n);
        byKey.set(key, row);
      }
    }
  }
  // In key order, so that two replicas' batches never lock rows in opposite orders.
  const sorted = [...byKey.values()].sort((a, b) => (a.tenant < b.tenant ? -1 : a.tenant > b.tenant ? 1 : a.second - b.second));
  return {
    tenant: sorted.map((r) => r.tenant),
    second: sorted.map((r) => String(r.second)),
    requests: sorted.map((r) => String(r.requests)),
    tokens: sorted.map((r) => String(r.tokens)),
  };
}

/**
 * `replicaScope`: the prefix of the replica names counted as this fleet's (appFleetStore's, for
 * the replicas of one app; '' counts every replica of no app: apps' fleets are theirs).
 */
export function postgresFleetStore(sql: Sql, replicaScope = ''): FleetStore {
  return {
    async exchange(replica, nowMs, windowStartSecond, reports, tenants) {
      const batch = rows(reports);
      const inFlight = [...reports].map(([tenant, r]) => [tenant, r.inFlight] as const).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      return sql.begin(async (tx) => {
        const now = new Date(nowMs);
        await tx`
          insert into tenant_replicas (replica, seen_at) values (${replica}, ${now})
          on conflict (replica) do update set seen_at = excluded.seen_at
        `;
        if (batch.tenant.length > 0) {
          await tx`
            insert into tenant_rate_counts as c (tenant, replica, second, requests, tokens)
            select b.tenant, ${replica}, b.second, b.requests, b.tokens
            from unnest(${batch.tenant}::text[], ${batch.second}::bigint[], ${batch.requests}::bigint[], ${batch.tokens}::bigint[]) as b (tenant, second, requests, tokens)
            on conflict (tenant, replica, second) do update
            set requests = greatest(c.requests, excluded.requests), tokens = greatest(c.tokens, excluded.tokens)
          `;
        }
        if (inFlight.length > 0) {
          await tx`
            insert into tenant_in_flight (tenant, replica, in_flight)
            select f.tenant, ${replica}, f.in_flight
            from unnest(${inFlight.map(([t]) => t)}::text[], ${inFlight.map(([, n]) => n)}::int[]) as f (tenant, in_flight)
            on conflict (tenant, replica) do update set in_flight = excluded.in_flight
          `;
        }
        await tx`delete from tenant_rate_counts where second < ${windowStartSecond - 1}`;
        const live = new Date(nowMs - REPLICA_TIMEOUT_MS);
        const [{ replicas }] = await tx<Array<{ replicas: number }>>`
          select count(*)::int as replicas from tenant_replicas
          where seen_at > ${live} and starts_with(replica, ${replicaScope}) and (${replicaScope} <> '' or not starts_with(replica, ${APP_SCOPE}))
        `;
        const counted = tenants.length === 0 ? [] : await tx<Array<{ tenant: string; requests: string; tokens: string; in_flight: number }>>`
          select t.tenant,
            coalesce((select sum(c.requests) from tenant_rate_counts c
                      where c.tenant = t.tenant and c.replica <> ${replica} and c.second >= ${windowStartSecond}), 0) as requests,
            coalesce((select sum(c.tokens) from tenant_rate_counts c
                      where c.tenant = t.tenant and c.replica <> ${replica} and c.second >= ${windowStartSecond}), 0) as tokens,
            coalesce((select sum(f.in_flight)::int from tenant_in_flight f join tenant_replicas r using (replica)
                      where f.tenant = t.tenant and f.replica <> ${replica} and r.seen_at > ${live}), 0) as in_flight
          from unnest(${[...tenants]}::text[]) as t (tenant)
        `;
        return {
          replicas: Math.max(1, replicas!),
          others: new Map(counted.map((r) => [r.tenant, { requests: Number(r.requests), tokens: Number(r.tokens), inFlight: r.in_flight }])),
        };
      });
    },
  };
}

/** What every app's scope starts with. */
const APP_SCOPE = 'app:';

/** The prefix an app's replicas and tenants are stored under (a slug holds no '/', so no app's prefix starts another's). */
export function fleetScope(appSlug: string): string {
  return `${APP_SCOPE}${appSlug}/`;
}

const NO_COUNTS: OthersCounts = { requests: 0, tokens: 0, inFlight: 0 };

/**
 * The fleet of one app's replicas: its replica and tenant names stored under fleetScope(slug),
 * and only its replicas counted. Used alike by the replicas on the database that serve the app
 * (--auth with --auth-app SLUG) and by auth-server's POST /fleet/exchange for its replicas over
 * HTTP, so both kinds count together; one app's replicas never see or change another app's counts.
 */
export function appFleetStore(sql: Sql, appSlug: string): FleetStore {
  const scope = fleetScope(appSlug);
  const store = postgresFleetStore(sql, scope);
  return {
    async exchange(replica, nowMs, windowStartSecond, reports, tenants) {
      const scoped = new Map([...reports].map(([tenant, report]) => [scope + tenant, report]));
      const view = await store.exchange(scope + replica, nowMs, windowStartSecond, scoped, tenants.map((tenant) => scope + tenant));
      return { replicas: view.replicas, others: new Map(tenants.map((tenant) => [tenant, view.others.get(scope + tenant) ?? NO_COUNTS])) };
    },
  };
}
