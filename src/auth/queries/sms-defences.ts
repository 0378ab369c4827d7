// Queries of the SMS defences (migration 0018): the app's settings, the window counters and the
// per-country sent/verified counts.
import type { Queryable } from '../database/client.js';

/** An app's SMS defences as the admin sets them (null: that defence is off). */
export interface SmsDefencesSettings {
  allowed_calling_codes: string[] | null;
  daily_cap: number | null;
  prefix_hourly: number | null;
  country_hourly: number | null;
  ratio_min_sent: number;
  ratio_min_verified: number | null;
}

export interface SmsDefencesRow extends SmsDefencesSettings {
  app_id: string;
  updated_at: Date;
}

export async function findSmsDefences(sql: Queryable, appId: string): Promise<SmsDefencesRow | undefined> {
  const [row] = await sql<SmsDefencesRow[]>`select * from app_sms_defences where app_id = ${appId}`;
  return row;
}

export async function upsertSmsDefences(sql: Queryable, settings: Omit<SmsDefencesRow, 'updated_at'> & { now: Date }): Promise<SmsDefencesRow> {
  const [row] = await sql<SmsDefencesRow[]>`
    insert into app_sms_defences (app_id, allowed_calling_codes, daily_cap, prefix_hourly, country_hourly, ratio_min_sent, ratio_min_verified, updated_at)
    values (
      ${settings.app_id}, ${settings.allowed_calling_codes}, ${settings.daily_cap}, ${settings.prefix_hourly}, ${settings.country_hourly},
      ${settings.ratio_min_sent}, ${settings.ratio_min_verified}, ${settings.now}
    )
    on conflict (app_id) do update
    set allowed_calling_codes = excluded.allowed_calling_codes, daily_cap = excluded.daily_cap, prefix_hourly = excluded.prefix_hourly,
      country_hourly = excluded.country_hourly, ratio_min_sent = excluded.ratio_min_sent, ratio_min_verified = excluded.ratio_min_verified,
      updated_at = excluded.updated_at
    returning *
  `;
  return row!;
}

export type SmsCounterKind = 'daily_cap' | 'prefix_velocity' | 'country_velocity' | 'allow_list';

/**
 * Counts one hit in the window starting at `windowStart` and returns the hits so far, this one
 * included (one statement: concurrent hits each get their own count, so exactly one request
 * sees limit + 1, the trip). Deletes the app's counters of ended windows on the way.
 */
export async function countSmsHit(sql: Queryable, hit: { appId: string; kind: SmsCounterKind; subject: string; windowStart: Date; oldestLiveWindow: Date }): Promise<number> {
  await sql`delete from sms_send_counters where app_id = ${hit.appId} and window_start < ${hit.oldestLiveWindow}`;
  const [row] = await sql<{ hits: number }[]>`
    insert into sms_send_counters as c (app_id, kind, subject, window_start, hits)
    values (${hit.appId}, ${hit.kind}, ${hit.subject}, ${hit.windowStart}, 1)
    on conflict (app_id, kind, subject, window_start) do update set hits = c.hits + 1
    returning hits
  `;
  return row!.hits;
}

export interface CountryHourRow {
  calling_code: string;
  hour_start: Date;
  sent: number;
  verified: number;
  throttled_at: Date | null;
}

export async function findCountryHour(sql: Queryable, appId: string, callingCode: string, hourStart: Date): Promise<CountryHourRow | undefined> {
  const [row] = await sql<CountryHourRow[]>`
    select calling_code, hour_start, sent, verified, throttled_at
    from sms_country_hours
    where app_id = ${appId} and calling_code = ${callingCode} and hour_start = ${hourStart}
  `;
  return row;
}

/** Marks the country throttled for the hour; true for the one request that set it (the trip). */
export async function throttleCountryHour(sql: Queryable, appId: string, callingCode: string, hourStart: Date, now: Date): Promise<boolean> {
  const updated = await sql`
    update sms_country_hours set throttled_at = ${now}
    where app_id = ${appId} and calling_code = ${callingCode} and hour_start = ${hourStart} and throttled_at is null
  `;
  return updated.count === 1;
}

export async function countCountryHour(sql: Queryable, appId: string, callingCode: string, hourStart: Date, column: 'sent' | 'verified'): Promise<void> {
  await sql`
    insert into sms_country_hours as h (app_id, calling_code, hour_start, sent, verified)
    values (${appId}, ${callingCode}, ${hourStart}, ${column === 'sent' ? 1 : 0}, ${column === 'verified' ? 1 : 0})
    on conflict (app_id, calling_code, hour_start) do update
    set sent = h.sent + ${column === 'sent' ? 1 : 0}, verified = h.verified + ${column === 'verified' ? 1 : 0}
  `;
}

export async function listCountryHours(sql: Queryable, appId: string, hourStart: Date): Promise<CountryHourRow[]> {
  return sql<CountryHourRow[]>`
    select calling_code, hour_start, sent, verified, throttled_at
    from sms_country_hours
    where app_id = ${appId} and hour_start = ${hourStart}
    order by calling_code
  `;
}

/** Codes sent in the app's country hours that start at or after `since` (all countries). */
export async function sumCountrySentSince(sql: Queryable, appId: string, since: Date): Promise<number> {
  const [row] = await sql<{ sent: number }[]>`
    select coalesce(sum(sent), 0)::int as sent from sms_country_hours where app_id = ${appId} and hour_start >= ${since}
  `;
  return row!.sent;
}
