// SMS abuse defences per app (migration 0018), checked before a code is sent by SMS, in this
// order: the allow-list of countries (403 SMS_COUNTRY_NOT_ALLOWED), the verification-ratio guard
// (429 SMS_COUNTRY_THROTTLED), the velocities per number prefix and per country (429
// SMS_VELOCITY_EXCEEDED), the daily cap (429 SMS_DAILY_CAP_REACHED). The narrow defences come
// first: each counter counts the attempts that reach it, refused ones included, so a run of codes
// refused for one prefix or one throttled country never reaches the app's daily cap and cannot
// use it up for every other number. Each defence that trips records `sms.defence_tripped` (and so
// sends its webhook) once per window, on the first refusal, so an attack does not flood the
// trail; later refusals in the window are answered the same.
//
// What was sent is counted apart from the defences' counters: recordSmsSent, once the code was
// handed to the delivery, adds it to its country's hour (the ratio guard's `sent`, and the sum
// of a day's hours is `sent_today`), so refused attempts and failed deliveries are not in it.
//
// Races: every counter is one upsert returning its new value, so of concurrent requests exactly
// one sees limit + 1 (the trip) and the others more; the ratio guard's throttle is one update
// `where throttled_at is null`, so one request records it. The ratio itself is read without a
// lock: a request or two may pass while another one throttles the country, which is within the
// guard's purpose (stopping a collapse, not counting exactly).
import type { RequestOrigin } from '../audit.js';
import { callingCodeOf, isCallingCode } from '../calling-codes.js';
import type { AuthContext } from '../context.js';
import { authError, type AuthErrorCode } from '../errors.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import {
  countCountryHour, countSmsHit, findCountryHour, findSmsDefences, listCountryHours, sumCountrySentSince, throttleCountryHour, upsertSmsDefences,
  type SmsCounterKind, type SmsDefencesRow, type SmsDefencesSettings,
} from '../queries/sms-defences.js';
import type { AuthenticatedApp } from './credentials.js';

const HOUR_MS = 3600 * 1000;
const DAY_MS = 24 * HOUR_MS;
/** Digits dropped from a number to get its prefix: a prefix is a block of 1,000 numbers. */
const PREFIX_DROPPED_DIGITS = 3;

export type SmsDefence = 'allow_list' | 'verification_ratio' | 'daily_cap' | 'prefix_velocity' | 'country_velocity';

export type { SmsDefencesSettings } from '../queries/sms-defences.js';

/** PUT /admin/apps/:app_id/sms-defences. */
export async function setSmsDefences(ctx: AuthContext, appId: string, settings: SmsDefencesSettings): Promise<SmsDefencesRow> {
  const unknown = settings.allowed_calling_codes?.find((code) => !isCallingCode(code));
  if (unknown !== undefined) {
    throw authError('VALIDATION_ERROR', `Invalid field "allowed_calling_codes": "${unknown}" is not a country calling code`, { details: { field: 'allowed_calling_codes' } });
  }
  return upsertSmsDefences(ctx.sql, { app_id: appId, ...settings, now: new Date(ctx.clock.now()) });
}

/** GET /admin/apps/:app_id/sms-defences: the settings, the codes sent today (UTC) and this hour's countries. */
export async function describeSmsDefences(ctx: AuthContext, appId: string): Promise<{ settings: SmsDefencesRow | null; sent_today: number; countries_this_hour: Awaited<ReturnType<typeof listCountryHours>> }> {
  const now = ctx.clock.now();
  return {
    settings: (await findSmsDefences(ctx.sql, appId)) ?? null,
    sent_today: await sumCountrySentSince(ctx.sql, appId, new Date(now - (now % DAY_MS))),
    countries_this_hour: await listCountryHours(ctx.sql, appId, new Date(now - (now % HOUR_MS))),
  };
}

/** A code that passed the defences, to count once it is handed to the delivery (recordSmsSent). */
export interface SmsToSend {
  callingCode: string;
  hour: Date;
}

/**
 * Refuses an SMS code to `phone` (E.164) when a defence of the app trips. Called by a code
 * request after its own rate limits, before the code is stored; the refusal then leaves nothing
 * stored. Returns what recordSmsSent counts after the delivery, or null for an app without
 * defences.
 */
export async function checkSmsDefences(ctx: AuthContext, app: AuthenticatedApp, phone: string, origin: RequestOrigin): Promise<SmsToSend | null> {
  const defences = await findSmsDefences(ctx.sql, app.id);
  if (!defences) return null;
  const nowMs = ctx.clock.now();
  const hour = new Date(nowMs - (nowMs % HOUR_MS));
  const day = new Date(nowMs - (nowMs % DAY_MS));
  const country = callingCodeOf(phone);
  const trip = async (defence: SmsDefence, code: AuthErrorCode, windowEnd: Date, first: boolean, details: Record<string, unknown>): Promise<never> => {
    if (first) {
      await insertAuditEvent(ctx.sql, {
        type: 'sms.defence_tripped', actor: 'app', appId: app.id, ip: origin.ip, userAgent: origin.userAgent,
        details: { defence, calling_code: country, ...details }, now: new Date(nowMs),
      });
    }
    throw authError(code, undefined, { details: code === 'SMS_COUNTRY_NOT_ALLOWED' ? {} : { retryAfterSeconds: Math.max(1, Math.ceil((windowEnd.getTime() - nowMs) / 1000)) } });
  };
  const count = (kind: SmsCounterKind, subject: string, windowStart: Date): Promise<number> =>
    countSmsHit(ctx.sql, { appId: app.id, kind, subject, windowStart, oldestLiveWindow: day });

  if (defences.allowed_calling_codes && !defences.allowed_calling_codes.includes(country)) {
    // Counted per country and hour only to audit the first refusal of each.
    await trip('allow_list', 'SMS_COUNTRY_NOT_ALLOWED', hour, (await count('allow_list', country, hour)) === 1, {});
  }
  if (defences.ratio_min_verified !== null) {
    const stats = await findCountryHour(ctx.sql, app.id, country, hour);
    if (stats?.throttled_at) await trip('verification_ratio', 'SMS_COUNTRY_THROTTLED', new Date(hour.getTime() + HOUR_MS), false, {});
    if (stats && stats.sent >= defences.ratio_min_sent && stats.verified / stats.sent < defences.ratio_min_verified) {
      const first = await throttleCountryHour(ctx.sql, app.id, country, hour, new Date(nowMs));
      await trip('verification_ratio', 'SMS_COUNTRY_THROTTLED', new Date(hour.getTime() + HOUR_MS), first, {
        sent: stats.sent, verified: stats.verified, min_ratio: defences.ratio_min_verified,
      });
    }
  }
  if (defences.prefix_hourly !== null) {
    const prefix = phone.slice(0, -PREFIX_DROPPED_DIGITS);
    const hits = await count('prefix_velocity', prefix, hour);
    if (hits > defences.prefix_hourly) await trip('prefix_velocity', 'SMS_VELOCITY_EXCEEDED', new Date(hour.getTime() + HOUR_MS), hits === defences.prefix_hourly + 1, { prefix, limit: defences.prefix_hourly });
  }
  if (defences.country_hourly !== null) {
    const hits = await count('country_velocity', country, hour);
    if (hits > defences.country_hourly) await trip('country_velocity', 'SMS_VELOCITY_EXCEEDED', new Date(hour.getTime() + HOUR_MS), hits === defences.country_hourly + 1, { limit: defences.country_hourly });
  }
  if (defences.daily_cap !== null) {
    const hits = await count('daily_cap', app.id, day);
    if (hits > defences.daily_cap) await trip('daily_cap', 'SMS_DAILY_CAP_REACHED', new Date(day.getTime() + DAY_MS), hits === defences.daily_cap + 1, { limit: defences.daily_cap });
  }
  return { callingCode: country, hour };
}

/** After the delivery took a code that passed the defences: one more sent in its country's hour. */
export async function recordSmsSent(ctx: AuthContext, app: AuthenticatedApp, sent: SmsToSend): Promise<void> {
  await countCountryHour(ctx.sql, app.id, sent.callingCode, sent.hour, 'sent');
}

/** After a phone login: counts the code as verified for its country's ratio (apps with the guard only). */
export async function recordSmsVerified(ctx: AuthContext, app: AuthenticatedApp, phone: string): Promise<void> {
  const defences = await findSmsDefences(ctx.sql, app.id);
  if (!defences || defences.ratio_min_verified === null) return;
  const nowMs = ctx.clock.now();
  await countCountryHour(ctx.sql, app.id, callingCodeOf(phone), new Date(nowMs - (nowMs % HOUR_MS)), 'verified');
}
