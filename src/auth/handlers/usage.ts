// GET /admin/usage: what the inference server metered, per app, tenant, key, model and hour.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import type { AuthContext } from '../context.js';
import type { StoredUsageHour } from '../queries/usage.js';
import { getAppByIdOrSlug } from '../service/admin.js';
import { countersJson, queryUsage } from '../service/usage.js';
import { queryInstant, queryLabel } from './query-params.js';

/**
 * GET /admin/usage?app=&tenant=&key=&from=&to= → 200 `{from, to, rows: [...], totals, truncated}`.
 * `app` is an app id or slug (404 APP_NOT_FOUND); `from` (inclusive) and `to` (exclusive) are
 * ISO 8601 instants, default the last 24 hours, at most USAGE_QUERY_MAX_DAYS apart; rows whose
 * hour starts in [from, to) are listed, oldest first, USAGE_QUERY_MAX_ROWS at most (`truncated`
 * then), and summed in `totals` (all of them): service/usage.ts queryUsage.
 */
export async function handleGetUsage(ctx: AuthContext, _: Record<string, never>, req: HttpRequest): Promise<HttpResult> {
  const appParam = req.query.get('app');
  const app = appParam === null ? undefined : await getAppByIdOrSlug(ctx, appParam);
  const to = queryInstant(req, 'to');
  const from = queryInstant(req, 'from');
  const report = await queryUsage(ctx, { appId: app?.id, tenant: queryLabel(req, 'tenant'), key: queryLabel(req, 'key'), from, to });
  return {
    body: {
      from: report.from.toISOString(),
      to: report.to.toISOString(),
      rows: report.rows.map(usageRowJson),
      totals: countersJson(report.totals),
      truncated: report.truncated,
    },
  };
}

function usageRowJson(row: StoredUsageHour): Record<string, unknown> {
  return {
    app_id: row.app_id, app_slug: row.app_slug, tenant: row.tenant, tenant_name: row.tenant_name, key: row.key_label, model: row.model,
    hour: row.hour.toISOString(), ...countersJson(row),
  };
}
