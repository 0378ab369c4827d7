// Hourly usage rows through auth-server's POST /fleet/usage, for replicas that reach the auth
// service over HTTP (--auth-issuer with AUTH_APP_ID and AUTH_APP_SECRET, the credentials of the
// fleet exchange: remote-fleet-store.ts): usage-flush.ts writes each batch with its id, and the
// service adds a batch id's rows once (a batch sent again after a lost answer adds nothing).
// The rows are stored under the app of the credentials. A batch too large for one request body
// is split (request-chunks.ts) before it gets its ids, so each part is a batch of its own.
import type { AppCredentials } from './remote-fleet-store.js';
import { chunkByJsonSize } from './request-chunks.js';
import { UsageBatchRefused, type UsageRecorder } from './usage-flush.js';
import type { UsageHourRow } from './usage-meter.js';

const USAGE_TIMEOUT_MS = 10_000;

/** A row as POST /fleet/usage takes it. */
function wireRow(row: UsageHourRow): Record<string, string | number | null> {
  return {
    app_slug: row.appSlug, tenant: row.tenant, key: row.key, model: row.model, hour: row.hour,
    requests: row.requests, prompt_tokens: row.promptTokens, cached_prompt_tokens: row.cachedPromptTokens,
    completion_tokens: row.completionTokens, queue_ms: row.queueMs, compute_ms: row.computeMs,
  };
}

export function remoteUsageRecorder(issuer: string, credentials: AppCredentials): UsageRecorder {
  const url = new URL('fleet/usage', `${issuer.replace(/\/+$/, '')}/`);
  return {
    split: (rows) => chunkByJsonSize(rows, wireRow),
    async record(rows, batchId) {
      const response = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ app_id: credentials.appId, app_secret: credentials.appSecret, batch_id: batchId, rows: rows.map(wireRow) }),
        signal: AbortSignal.timeout(USAGE_TIMEOUT_MS),
      });
      if (response.status === 200) {
        await response.body?.cancel();
        return;
      }
      const text = (await response.text().catch(() => '')).slice(0, 300);
      if (response.status === 401) throw new Error(`${url} refused the app's credentials (AUTH_APP_ID, AUTH_APP_SECRET): 401`);
      // Malformed (400) or too large (413): the same rows would be refused again.
      if (response.status === 400 || response.status === 413) throw new UsageBatchRefused(`${url} answered ${response.status}: ${text}`);
      throw new Error(`${url} answered ${response.status}: ${text}`);
    },
  };
}
