// Login by one-time code. Requesting a code never reveals whether the user exists (the answer
// depends only on the throttles); verifying spends one attempt before comparing, so at most
// OTP_MAX_ATTEMPTS guesses are ever compared against one code, however many arrive in parallel.
import { createHmac, randomInt, randomUUID, timingSafeEqual } from 'node:crypto';
import { HttpError } from '../../http/errors.js';
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import type { TransactionSql } from '../database/client.js';
import { authError } from '../errors.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import { OTP_MAX_ATTEMPTS, OTP_TTL_MS, OTP_WINDOW_MS } from '../limits.js';
import { cancelOtpCode, consumeOtpCode, recordOtpAttempt, storeOtpCode, takeAppSendQuota, type OtpDestination } from '../queries/otp-codes.js';
import { findAppMessageTemplate } from '../queries/message-templates.js';
import { listRolesOfUser } from '../queries/roles.js';
import { templateOf } from '../otp/templates.js';
import type { RateLimitRule } from '../rate-limit-rules.js';
import type { RateLimitCount } from '../respond.js';
import { identifierOf } from './identity.js';
import { checkSmsDefences, recordSmsSent, recordSmsVerified } from './sms-defences.js';
import { findOrInsertUser, upsertMembership, type Identifier } from '../queries/users.js';
import type { AuthenticatedApp } from './credentials.js';
import { acceptInvitationsOnSignIn } from './invitations.js';
import { refuseIfSsoRequired } from './tenant-sso.js';
import { secondFactorChallengeIfDue, type SecondFactorPending } from './second-factor.js';
import { chooseTenant, startSession, type SessionTokens } from './sessions.js';

/**
 * POST /auth/otp/request: stores a new code for the destination (replacing any previous one),
 * records `otp.sent` with it, and hands it to the delivery with the app's texts. 429
 * RATE_LIMITED when a rate-limit rule (per address, per IP), the destination's or the app's send
 * throttle refuses; 502 OTP_DELIVERY_FAILED when the delivery fails (the code is then dropped
 * and `otp.delivery_failed` recorded).
 */
export async function requestOtp(ctx: AuthContext, app: AuthenticatedApp, identifier: Identifier, origin: RequestOrigin): Promise<void> {
  const code = randomInt(0, 1_000_000).toString().padStart(6, '0');
  const destination = destinationOf(app, identifier);
  const codeHash = hashOtpCode(ctx.otp.hashKey, destination, code);
  // An address of a domain whose tenant requires its own provider gets no code (403 SSO_REQUIRED).
  if (identifier.channel === 'email') await refuseIfSsoRequired(ctx.sql, app.id, identifier.value);
  const sms = identifier.channel === 'phone' ? await checkSmsDefences(ctx, app, identifier.value, origin) : null;
  const nowMs = ctx.clock.now();
  const { limits } = ctx.otp;
  const template = await ctx.sql.begin(async (tx) => {
    const stored = await storeOtpCode(tx, {
      ...destination,
      codeHash,
      now: new Date(nowMs),
      expiresAt: new Date(nowMs + OTP_TTL_MS),
      resendAfter: new Date(nowMs - limits.resendIntervalMs),
    });
    if (!stored) throw authError('RATE_LIMITED', 'A code was sent to this destination too recently; retry later');
    const withinQuota = await takeAppSendQuota(tx, { appId: app.id, now: new Date(nowMs), windowStartsAfter: new Date(nowMs - OTP_WINDOW_MS), appHourly: limits.appHourly });
    if (!withinQuota) throw authError('RATE_LIMITED', 'This app has sent too many codes this hour; retry later');
    await insertAuditEvent(tx, { ...auditOf(app, identifier, origin, nowMs), type: 'otp.sent' });
    const own = await findAppMessageTemplate(tx, app.id);
    return templateOf(own.name, own);
  });
  try {
    await ctx.otp.delivery.send({ channel: identifier.channel, to: identifier.value, code, appId: app.id, template });
  } catch (error) {
    await cancelOtpCode(ctx.sql, { ...destination, codeHash });
    await insertAuditEvent(ctx.sql, { ...auditOf(app, identifier, origin, ctx.clock.now()), type: 'otp.delivery_failed' });
    throw authError('OTP_DELIVERY_FAILED', undefined, { cause: error });
  }
  if (sms) await recordSmsSent(ctx, app, sms);
}

/**
 * POST /auth/otp/verify: checks the code, then in one transaction uses it up, finds or creates
 * the user, records the app membership and `login.succeeded`, and starts a session. 429
 * RATE_LIMITED when a rate-limit rule (per address, per IP) refuses (nothing else happens); 401
 * OTP_INVALID for a wrong, expired, used or burned code; 403 USER_DELETED; 404 TENANT_NOT_FOUND
 * for a requested tenant where the user has no role (the code then stays usable, its attempt
 * counted). Each refusal after the rate limits is recorded as `login.failed`.
 */
export async function verifyOtp(ctx: AuthContext, app: AuthenticatedApp, identifier: Identifier, code: string, requestedTenant: string | null | undefined, origin: RequestOrigin): Promise<SessionTokens | SecondFactorPending> {
  return verifyOtpThen<SessionTokens | SecondFactorPending>(ctx, app, identifier, code, origin, async (tx, userId, nowMs) => {
    const tenant = chooseTenant(await listRolesOfUser(tx, app.id, userId), requestedTenant, null);
    // RFC 8176: `otp` for a code by e-mail, `sms` for one by SMS.
    const amr = [identifier.channel === 'email' ? 'otp' : 'sms'];
    const pending = await secondFactorChallengeIfDue(tx, ctx, { appId: app.id, userId, tenantId: tenant.tenantId, requestedTenant, amr, nowMs });
    if (pending) return { familyId: null, result: pending, secondFactorPending: true };
    const familyId = randomUUID();
    return { familyId, result: await startSession(tx, ctx, { app, userId, familyId, tenant, nowMs, amr }) };
  });
}

/**
 * What a verified code leads to, inside verifyOtpThen's transaction: a session of the JSON API,
 * or the hosted sign-in page's browser session (provider/sign-in.ts). `familyId` is recorded
 * with login.succeeded.
 */
export type AfterOtpVerified<T> = (tx: TransactionSql, userId: string, nowMs: number) => Promise<{
  familyId: string | null;
  result: T;
  /** The login waits for its second factor: `login.second_factor_required` is recorded instead of `login.succeeded`. */
  secondFactorPending?: boolean;
}>;

/**
 * The code check of verifyOtp, with its refusals, rate and audit trail, followed by `then` in
 * the transaction that uses the code up, finds or creates the user and records the membership.
 */
export async function verifyOtpThen<T>(ctx: AuthContext, app: AuthenticatedApp, identifier: Identifier, code: string, origin: RequestOrigin, then: AfterOtpVerified<T>): Promise<T> {
  const destination = destinationOf(app, identifier);
  const codeHash = hashOtpCode(ctx.otp.hashKey, destination, code);
  const nowMs = ctx.clock.now();
  const now = new Date(nowMs);
  const audit = auditOf(app, identifier, origin, nowMs);
  try {
    // A code sent before the tenant required SSO does not get around it.
    if (identifier.channel === 'email') await refuseIfSsoRequired(ctx.sql, app.id, identifier.value);
    const stored = await recordOtpAttempt(ctx.sql, { ...destination, now, maxAttempts: OTP_MAX_ATTEMPTS });
    if (!stored || !timingSafeEqual(stored, codeHash)) throw authError('OTP_INVALID');
    const tokens = await ctx.sql.begin(async (tx): Promise<T> => {
      if (!(await consumeOtpCode(tx, { ...destination, codeHash }))) throw authError('OTP_INVALID');
      const user = await findOrInsertUser(tx, identifier, now);
      if (user.deleted_at) throw authError('USER_DELETED');
      await upsertMembership(tx, app.id, user.id, now);
      // The code proved the address: its pending invitations into the app's tenants are accepted now.
      await acceptInvitationsOnSignIn(tx, app.id, user, origin, now);
      const { familyId, result, secondFactorPending } = await then(tx, user.id, nowMs);
      await insertAuditEvent(tx, { ...audit, type: secondFactorPending ? 'login.second_factor_required' : 'login.succeeded', userId: user.id, familyId });
      return result;
    });
    if (identifier.channel === 'phone') await recordSmsVerified(ctx, app, identifier.value);
    return tokens as T;
  } catch (error) {
    // The transaction rolled back: the failure is recorded on its own.
    if (error instanceof HttpError && error.status < 500) {
      await insertAuditEvent(ctx.sql, { ...audit, type: 'login.failed', details: { ...audit.details, reason: error.code } });
    }
    throw error;
  }
}

/** The audit fields of a login step: the app acting, the address concerned. */
function auditOf(app: AuthenticatedApp, identifier: Identifier, origin: RequestOrigin, nowMs: number) {
  return {
    actor: 'app' as const,
    appId: app.id,
    ip: origin.ip,
    userAgent: origin.userAgent,
    details: { channel: identifier.channel, destination: identifier.value },
    now: new Date(nowMs),
  };
}

/**
 * Counts a rate-limit rule per address within its app (the normalised e-mail address or phone
 * number of the body; 400 VALIDATION_ERROR for one that is neither), for the route table.
 */
export function perAddress(rule: RateLimitRule): RateLimitCount<{ app: AuthenticatedApp; body: { email?: string; phone?: string } }> {
  return { rule, subject: ({ app, body }) => addressSubject(destinationOf(app, identifierOf(body))) };
}

/** The subject of the per-address rules: the address within its app. */
function addressSubject(destination: OtpDestination): string {
  return `${destination.appId}:${destination.channel}:${destination.destination}`;
}

function destinationOf(app: AuthenticatedApp, identifier: Identifier): OtpDestination {
  return { appId: app.id, channel: identifier.channel, destination: identifier.value };
}

/** HMAC over app, channel, destination and code: a leaked table does not give codes away. */
export function hashOtpCode(key: Buffer, destination: OtpDestination, code: string): Buffer {
  return createHmac('sha256', key).update(`${destination.appId}\n${destination.channel}\n${destination.destination}\n${code}`).digest();
}
