// Admin routes of the SMS defences: GET and PUT /admin/apps/:app_id/sms-defences.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import type { AuthContext } from '../context.js';
import type { SmsDefencesRow } from '../queries/sms-defences.js';
import { SmsDefencesBody } from '../schemas.js';
import { getApp } from '../service/admin.js';
import { describeSmsDefences, setSmsDefences } from '../service/sms-defences.js';

const smsDefencesBody = compileBody(SmsDefencesBody);

/** 200 the settings `{allowed_calling_codes, daily_cap, prefix_hourly, country_hourly, ratio_min_sent, ratio_min_verified, updated_at}`. */
export async function handlePutSmsDefences(ctx: AuthContext, _: Record<string, never>, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  const body = smsDefencesBody.parse(req);
  const row = await setSmsDefences(ctx, app.id, {
    allowed_calling_codes: body.allowed_calling_codes ?? null,
    daily_cap: body.daily_cap ?? null,
    prefix_hourly: body.prefix_hourly ?? null,
    country_hourly: body.country_hourly ?? null,
    ratio_min_sent: body.ratio_min_sent ?? 20,
    ratio_min_verified: body.ratio_min_verified ?? null,
  });
  return { body: settingsJson(row) };
}

/** 200 `{settings (null: none), sent_today, countries_this_hour: [{calling_code, sent, verified, throttled_at}]}`. */
export async function handleGetSmsDefences(ctx: AuthContext, _: Record<string, never>, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  const state = await describeSmsDefences(ctx, app.id);
  return {
    body: {
      settings: state.settings && settingsJson(state.settings),
      sent_today: state.sent_today,
      countries_this_hour: state.countries_this_hour.map((row) => ({
        calling_code: row.calling_code, sent: row.sent, verified: row.verified, throttled_at: row.throttled_at?.toISOString() ?? null,
      })),
    },
  };
}

function settingsJson(row: SmsDefencesRow): Record<string, unknown> {
  return {
    allowed_calling_codes: row.allowed_calling_codes,
    daily_cap: row.daily_cap,
    prefix_hourly: row.prefix_hourly,
    country_hourly: row.country_hourly,
    ratio_min_sent: row.ratio_min_sent,
    ratio_min_verified: row.ratio_min_verified,
    updated_at: row.updated_at.toISOString(),
  };
}
