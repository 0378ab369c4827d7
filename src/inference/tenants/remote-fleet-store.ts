// The fleet's counts of tenants' limits through auth-server's POST /fleet/exchange, for replicas
// that reach the auth service over HTTP (--auth-issuer) rather than through its database: the
// same exchange as fleet-store.ts's, authenticated as the app (AUTH_APP_ID and AUTH_APP_SECRET),
// whose replicas count among themselves. A batch too large for one request body (the service
// takes at most 16 KiB) is sent as several (request-chunks.ts), each applied on its own: counts
// add up the same.
import type { FleetStore, FleetView, OthersCounts, TenantReport } from './fleet-store.js';
import { chunkByJsonSize } from './request-chunks.js';

export interface AppCredentials {
  appId: string;
  appSecret: string;
}

const EXCHANGE_TIMEOUT_MS = 5_000;

/** Thrown when the service refuses the app's credentials (401): a configuration error (fatal), not a passing failure. */
export class FleetCredentialsRefused extends Error {
  readonly fatal = true;
}

interface Chunk {
  reports: Array<{ tenant: string; requests: Array<[number, number]>; tokens: Array<[number, number]>; in_flight: number }>;
  tenants: string[];
}

/** Splits a batch into requests that fit the body limit; always at least one (the heartbeat). */
function chunks(reports: Map<string, TenantReport>, tenants: readonly string[]): Chunk[] {
  type Item = { report: Chunk['reports'][number] } | { tenant: string };
  const items: Item[] = [
    ...[...reports].map(([tenant, r]) => ({ report: { tenant, requests: r.requests, tokens: r.tokens, in_flight: r.inFlight } })),
    ...tenants.map((tenant) => ({ tenant })),
  ];
  return chunkByJsonSize(items, (item) => ('report' in item ? item.report : item.tenant)).map((run) => ({
    reports: run.flatMap((item) => ('report' in item ? [item.report] : [])),
    tenants: run.flatMap((item) => ('tenant' in item ? [item.tenant] : [])),
  }));
}

export function remoteFleetStore(issuer: string, credentials: AppCredentials): FleetStore {
  const url = new URL('fleet/exchange', `${issuer.replace(/\/+$/, '')}/`);
  return {
    async exchange(replica, nowMs, windowStartSecond, reports, tenants): Promise<FleetView> {
      const others = new Map<string, OthersCounts>();
      let replicas = 1;
      for (const chunk of chunks(reports, tenants)) {
        const response = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ app_id: credentials.appId, app_secret: credentials.appSecret, replica, now_ms: nowMs, window_start_second: windowStartSecond, ...chunk }),
          signal: AbortSignal.timeout(EXCHANGE_TIMEOUT_MS),
        });
        if (response.status === 401) {
          await response.body?.cancel();
          throw new FleetCredentialsRefused(`${url} refused the app's credentials (AUTH_APP_ID, AUTH_APP_SECRET): 401`);
        }
        if (response.status !== 200) {
          const text = await response.text().catch(() => '');
          throw new Error(`${url} answered ${response.status}: ${text.slice(0, 200)}`);
        }
        const body = (await response.json()) as { replicas: number; others: Array<{ tenant: string; requests: number; tokens: number; in_flight: number }> };
        replicas = Math.max(replicas, body.replicas);
        for (const o of body.others) others.set(o.tenant, { requests: o.requests, tokens: o.tokens, inFlight: o.in_flight });
      }
      return { replicas, others };
    },
  };
}
