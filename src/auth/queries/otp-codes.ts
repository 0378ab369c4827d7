// Queries on one-time codes and their send throttles. Every check-and-write is one statement
// (an upsert or update with the condition in its WHERE), so concurrent requests cannot slip past
// a limit: the row lock taken by the write serialises them.
import type { Queryable } from '../database/client.js';

export interface OtpDestination {
  appId: string;
  channel: 'email' | 'phone';
  destination: string;
}

export interface StoreOtpCode extends OtpDestination {
  codeHash: Buffer;
  now: Date;
  expiresAt: Date;
  /** A new code is refused while the previous one was sent after this instant. */
  resendAfter: Date;
}

/**
 * Replaces the destination's code with a new one (attempts reset to 0) unless the previous one
 * was sent after `resendAfter` (the resend interval). Returns false when refused. How many codes
 * an address gets per hour is the rate-limit rule otp_request_address, counted before this.
 */
export async function storeOtpCode(sql: Queryable, code: StoreOtpCode): Promise<boolean> {
  const rows = await sql`
    insert into otp_codes (app_id, channel, destination, code_hash, expires_at, attempts, sent_at)
    values (${code.appId}, ${code.channel}, ${code.destination}, ${code.codeHash}, ${code.expiresAt}, 0, ${code.now})
    on conflict (app_id, channel, destination) do update
    set code_hash = excluded.code_hash,
        expires_at = excluded.expires_at,
        attempts = 0,
        sent_at = excluded.sent_at
    where otp_codes.sent_at <= ${code.resendAfter}
    returning 1
  `;
  return rows.length === 1;
}

/** Counts one send against the app's hourly budget; false when the budget is spent. */
export async function takeAppSendQuota(sql: Queryable, quota: { appId: string; now: Date; windowStartsAfter: Date; appHourly: number }): Promise<boolean> {
  const rows = await sql`
    insert into otp_app_send_windows (app_id, window_started_at, sends_in_window)
    values (${quota.appId}, ${quota.now}, 1)
    on conflict (app_id) do update
    set window_started_at = case
          when otp_app_send_windows.window_started_at <= ${quota.windowStartsAfter} then excluded.window_started_at
          else otp_app_send_windows.window_started_at
        end,
        sends_in_window = case
          when otp_app_send_windows.window_started_at <= ${quota.windowStartsAfter} then 1
          else otp_app_send_windows.sends_in_window + 1
        end
    where otp_app_send_windows.window_started_at <= ${quota.windowStartsAfter}
       or otp_app_send_windows.sends_in_window < ${quota.appHourly}
    returning 1
  `;
  return rows.length === 1;
}

/**
 * Undoes a send that could not be delivered: the code is dropped and the resend interval lifted,
 * while the send still counts in the hourly windows (so failures cannot be retried unboundedly).
 */
export async function cancelOtpCode(sql: Queryable, code: OtpDestination & { codeHash: Buffer }): Promise<void> {
  await sql`
    update otp_codes
    set code_hash = null, sent_at = '-infinity'
    where app_id = ${code.appId} and channel = ${code.channel} and destination = ${code.destination}
      and code_hash = ${code.codeHash}
  `;
}

/**
 * Spends one attempt on the destination's live code and returns the code's hash to compare with;
 * undefined when there is no live code (none sent, used, expired, or its attempts are spent).
 * Counting before comparing is what makes the budget hold under parallel guesses.
 */
export async function recordOtpAttempt(sql: Queryable, attempt: OtpDestination & { now: Date; maxAttempts: number }): Promise<Buffer | undefined> {
  const [row] = await sql<{ code_hash: Buffer }[]>`
    update otp_codes
    set attempts = attempts + 1
    where app_id = ${attempt.appId} and channel = ${attempt.channel} and destination = ${attempt.destination}
      and code_hash is not null
      and expires_at > ${attempt.now}
      and attempts < ${attempt.maxAttempts}
    returning code_hash
  `;
  return row?.code_hash;
}

/** Marks the code used; false when a parallel verification used it first. */
export async function consumeOtpCode(sql: Queryable, code: OtpDestination & { codeHash: Buffer }): Promise<boolean> {
  const rows = await sql`
    update otp_codes
    set code_hash = null
    where app_id = ${code.appId} and channel = ${code.channel} and destination = ${code.destination}
      and code_hash = ${code.codeHash}
    returning 1
  `;
  return rows.length === 1;
}
