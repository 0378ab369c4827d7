// GET /admin/usage: what the inference server metered, per app, tenant, key, model and hour.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { USAGE_QUERY_MAX_DAYS, USAGE_QUERY_MAX_ROWS } from '../limits.js';
import { findAppBySlug } from '../queries/apps.js';
import type { StoredUsageHour } from '../queries/usage.js';
import { getApp } from '../service/admin.js';
import { checkUsageRange, countersJson, queryUsage } from '../service/usage.js';
import { isUuid } from '../service/credentials.js';
import { queryInstant } from './admin.js';

const DAY_MS = 24 * 3600 * 1000;

/**
 * GET /admin/usage?app=&tenant=&key=&from=&to= → 200 `{from, to, rows: [...], totals, truncated}`.
 * `app` is an app id or slug (404 APP_NOT_FOUND); `from` (inclusive) and `to` (exclusive) are
 * ISO 8601 instants, default the last 24 hours, at most USAGE_QUERY_MAX_DAYS apart; rows whose
 * hour starts in [from, to) are listed, oldest first, USAGE_QUERY_MAX_ROWS at most (`truncated`
 * then), and summed in `totals` (all of them).
 */
export async function handleGetUsage(ctx: AuthContext, _: Record<string, never>, req: HttpRequest): Promise<HttpResult> {
  const appParam = req.query.get('app');
  const appId = appParam === null ? undefined : (await appByIdOrSlug(ctx, appParam)).id;
  const nowMs = ctx.clock.now();
  const to = queryInstant(req, 'to') ?? new Date(nowMs);
  const from = queryInstant(req, 'from') ?? new Date(to.getTime() - DAY_MS);
  checkUsageRange(from, to, USAGE_QUERY_MAX_DAYS);
  const tenant = queryLabel(req, 'tenant');
  const key = queryLabel(req, 'key');
  const report = await queryUsage(ctx, { appId, tenant, key, from, to, limit: USAGE_QUERY_MAX_ROWS });
  return {
    body: {
      from: from.toISOString(),
      to: to.toISOString(),
      rows: report.rows.map(usageRowJson),
      totals: countersJson(report.totals),
      truncated: report.truncated,
    },
  };
}

async function appByIdOrSlug(ctx: AuthContext, value: string) {
  if (isUuid(value)) return getApp(ctx, value);
  const app = await findAppBySlug(ctx.sql, value);
  if (!app) throw authError('APP_NOT_FOUND');
  return app;
}

function queryLabel(req: HttpRequest, name: string): string | undefined {
  const raw = req.query.get(name);
  if (raw === null) return undefined;
  if (raw.length > 200 || /[\x00-\x1f\x7f]/.test(raw)) throw authError('VALIDATION_ERROR', `Invalid query parameter "${name}": expected a label of at most 200 characters`);
  return raw;
}

function usageRowJson(row: StoredUsageHour): Record<string, unknown> {
  return {
    app_id: row.app_id, app_slug: row.app_slug, tenant: row.tenant, key: row.key_label, model: row.model,
    hour: row.hour.toISOString(), ...countersJson(row),
  };
}
