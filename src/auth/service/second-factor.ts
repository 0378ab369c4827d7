// A second factor: TOTP (RFC 6238: SHA-1, 6 digits, 30-second steps, by `otpauth`) with ten
// single-use recovery codes, enrolled from a signed-in session (or, when the policy requires a
// factor the user lacks, from the login's second-factor challenge).
//
// Policy, per app and per tenant: off, optional (asked of users who enrolled), required (asked
// of everyone; a user without a factor enrolls before the login completes). The stricter of the
// app's and the login's tenant's applies. A code login whose policy asks for it answers a
// challenge instead of tokens; POST /auth/second-factor/verify with a TOTP code or a recovery
// code completes it. The provider's hosted sign-in page asks the same challenge, bound to its
// sign-in request (pageSecondFactorChallenge). A passkey login with user verification is two
// factors already and is never asked; an upstream sign-in is the provider's to secure.
//
// Guessing is bounded twice: a challenge allows CHALLENGE_MAX_ATTEMPTS codes (each attempt is
// spent, and committed, before the code is compared), and TOTP_MAX_FAILURES wrong codes in a row
// lock the user's factor for TOTP_LOCK_MS, across challenges (429 RATE_LIMITED). A code is
// accepted for the previous, current or next step, never for a step at or before the last
// accepted one, so a code seen over a shoulder or replayed is refused.
//
// `amr` (RFC 8176) of the tokens: a code by e-mail `otp`, by SMS `sms`; with TOTP or a recovery
// code `otp` and `mfa` are added; a passkey `hwk` and `mfa`; an upstream provider `fed` (this
// service's value: RFC 8176 names none for federation).
import { createHash, createHmac, randomBytes, randomUUID } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import type { Queryable, TransactionSql } from '../database/client.js';
import { authError } from '../errors.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import { listRolesOfUser } from '../queries/roles.js';
import {
  deleteSecondFactor, findChallenge, findSecondFactorPolicies, findTotpFactor, hasConfirmedTotp, insertSecondFactorChallenge, listSecondFactorPolicies, lockTotpFactor,
  recordTotpFailure, recordTotpSuccess, replaceRecoveryCodes, setSecondFactorPolicy, spendChallengeAttempt, takeChallenge, upsertPendingTotp, useRecoveryCode,
  type SecondFactorChallengeRow, type SecondFactorPolicy, type TotpFactorRow,
} from '../queries/second-factor.js';
import { findTenant } from '../queries/tenants.js';
import { findUser, lockUser } from '../queries/users.js';
import { seal, unseal } from '../tokens/sealed-box.js';
import { getApp } from './admin.js';
import { isUuid, type AuthenticatedApp } from './credentials.js';
import { chooseTenant, startSession, type SessionTokens } from './sessions.js';
import { presentedSession } from './user-sessions.js';

export const CHALLENGE_TTL_MS = 5 * 60 * 1000;
export const CHALLENGE_MAX_ATTEMPTS = 5;
export const TOTP_MAX_FAILURES = 10;
export const TOTP_LOCK_MS = 15 * 60 * 1000;
const RECOVERY_CODE_COUNT = 10;
const STEP_MS = 30_000;
const POLICY_RANK: Record<SecondFactorPolicy, number> = { off: 0, optional: 1, required: 2 };

/** The answer of a code login that needs its second factor. */
export interface SecondFactorPending {
  second_factor: { token: string; methods: ('totp' | 'recovery_code')[]; enrollment_required: boolean; expires_in: number };
}

/**
 * Who is acting on a factor: the user of a live session, or the login waiting on a challenge (by
 * its token on the JSON API, by its hash on the hosted page).
 */
export type FactorHolder = { refreshToken: string } | { challengeToken: string } | { challengeHash: Buffer };

/**
 * Inside a first factor's transaction, once the tenant is chosen: the challenge to answer when
 * the policy asks for a second factor, or null when the login may complete now.
 */
export async function secondFactorChallengeIfDue(tx: TransactionSql, ctx: AuthContext, login: {
  appId: string; userId: string; tenantId: string | null; requestedTenant: string | null | undefined; amr: string[]; nowMs: number;
}): Promise<SecondFactorPending | null> {
  const policies = await findSecondFactorPolicies(tx, login.appId, login.tenantId);
  const policy = stricter(policies.app ?? 'off', policies.tenant ?? 'off');
  if (policy === 'off') return null;
  const enrolled = await hasConfirmedTotp(tx, login.userId);
  if (policy === 'optional' && !enrolled) return null;
  const token = `sfa_${randomBytes(32).toString('base64url')}`;
  await insertSecondFactorChallenge(tx, {
    tokenHash: sha256(token), appId: login.appId, userId: login.userId, amr: login.amr,
    requestedTenantId: login.requestedTenant ? login.requestedTenant.toLowerCase() : null,
    now: new Date(login.nowMs), expiresAt: new Date(login.nowMs + CHALLENGE_TTL_MS),
  });
  return { second_factor: { token, methods: enrolled ? ['totp', 'recovery_code'] : [], enrollment_required: !enrolled, expires_in: CHALLENGE_TTL_MS / 1000 } };
}

/**
 * Inside the hosted sign-in page's first factor: the page's challenge when a second factor is
 * due (secondFactorOwed), or null. `enrolled` false: the policy requires a factor the user lacks,
 * to be enrolled before the sign-in completes (as on the JSON API). The page keeps only the
 * challenge's hash, on its sign-in request (bound to the browser's cookie and the form's CSRF
 * token); no token leaves the server.
 */
export async function pageSecondFactorChallenge(tx: TransactionSql, login: {
  appId: string; userId: string; amr: string[]; nowMs: number;
}): Promise<{ challengeHash: Buffer; enrolled: boolean } | null> {
  const owed = await secondFactorOwed(tx, login.appId, login.userId);
  if (!owed) return null;
  const challengeHash = sha256(randomBytes(32).toString('base64url'));
  await insertSecondFactorChallenge(tx, {
    tokenHash: challengeHash, appId: login.appId, userId: login.userId, amr: login.amr, requestedTenantId: null,
    now: new Date(login.nowMs), expiresAt: new Date(login.nowMs + CHALLENGE_TTL_MS),
  });
  return { challengeHash, enrolled: owed.enrolled };
}

/**
 * Whether a sign-in of this user on the hosted page owes a second factor, and whether the user
 * has one: the page asks before the tenant is chosen, so the strictest policy of the app and of
 * every tenant the user has a role in applies (required; or optional, for a user who enrolled).
 */
export async function secondFactorOwed(sql: Queryable, appId: string, userId: string): Promise<{ enrolled: boolean } | null> {
  const tenants = [null, ...(await listRolesOfUser(sql, appId, userId)).map((role) => role.tenant_id)];
  const policies = await Promise.all(tenants.map((tenant) => findSecondFactorPolicies(sql, appId, tenant)));
  const policy = policies.reduce<SecondFactorPolicy>((strictest, p) => stricter(strictest, stricter(p.app ?? 'off', p.tenant ?? 'off')), 'off');
  if (policy === 'off') return null;
  const enrolled = await hasConfirmedTotp(sql, userId);
  return policy === 'optional' && !enrolled ? null : { enrolled };
}

/** True while the challenge of `challengeHash` is live and has attempts left (the page asks again, or starts over). */
export async function challengeUsable(ctx: AuthContext, appId: string, challengeHash: Buffer): Promise<boolean> {
  const challenge = await findChallenge(ctx.sql, appId, challengeHash, new Date(ctx.clock.now()));
  return challenge !== undefined && challenge.attempts < CHALLENGE_MAX_ATTEMPTS;
}

/**
 * What a completed second factor leads to, in the transaction that uses the challenge up: a
 * session of the JSON API, or the hosted page's browser session. `amr` is the challenge's first
 * factor with `otp` and `mfa` added; `familyId` is recorded with login.succeeded.
 */
export type AfterSecondFactor<T> = (tx: TransactionSql, login: { userId: string; requestedTenant: string | null; amr: string[]; nowMs: number }) => Promise<{ familyId: string | null; result: T }>;

/**
 * POST /auth/second-factor/verify: a TOTP code or a recovery code for the challenge, then the
 * session. 401 SECOND_FACTOR_INVALID (unknown, expired or used-up challenge; wrong, reused or
 * used code; no factor enrolled), 429 RATE_LIMITED while the factor is locked, 403 USER_DELETED.
 */
export async function completeSecondFactor(ctx: AuthContext, app: AuthenticatedApp, input: {
  challengeToken: string; code?: string; recoveryCode?: string; origin: RequestOrigin;
}): Promise<SessionTokens> {
  return completeSecondFactorThen(ctx, app, sha256(input.challengeToken), input, input.origin, sessionOfLogin(ctx, app));
}

/** completeSecondFactor for the challenge of `challengeHash`, followed by `then` (the hosted page's browser session). */
export async function completeSecondFactorThen<T>(ctx: AuthContext, app: AuthenticatedApp, challengeHash: Buffer, proof: { code?: string; recoveryCode?: string },
  origin: RequestOrigin, then: AfterSecondFactor<T>): Promise<T> {
  const nowMs = ctx.clock.now();
  const challenge = await spendChallengeAttempt(ctx.sql, app.id, challengeHash, new Date(nowMs), CHALLENGE_MAX_ATTEMPTS);
  if (!challenge) throw authError('SECOND_FACTOR_INVALID', 'The challenge is unknown, expired or used up; log in again');
  return withFactorCheck(ctx, app, challenge.user_id, origin, 'login', async (tx, factor) => {
    if (!factor?.confirmed_at) throw authError('SECOND_FACTOR_INVALID', 'The user has no second factor; enroll one');
    const method = await checkFactor(ctx, tx, factor, { code: proof.code, recoveryCode: proof.recoveryCode }, nowMs);
    return finishLogin(tx, app, challenge, nowMs, method, origin, then);
  });
}

/** POST /auth/second-factor/totp/enroll: a new key for the user (unconfirmed until a code proves it). 409 SECOND_FACTOR_ALREADY_ENROLLED. */
export async function startTotpEnrollment(ctx: AuthContext, app: AuthenticatedApp, holder: FactorHolder): Promise<{ secret: string; otpauth_uri: string }> {
  const userId = await holderUser(ctx, app, holder);
  const user = (await findUser(ctx.sql, userId))!;
  const secret = new Secret({ size: 20 });
  const sealed = seal(ctx.secondFactor.secretKey, Buffer.from(secret.base32), userId);
  if (!(await upsertPendingTotp(ctx.sql, userId, sealed, new Date(ctx.clock.now())))) throw authError('SECOND_FACTOR_ALREADY_ENROLLED');
  const totp = new TOTP({ issuer: app.slug, label: user.email ?? user.phone ?? user.id, secret, algorithm: 'SHA1', digits: 6, period: 30 });
  return { secret: secret.base32, otpauth_uri: totp.toString() };
}

/**
 * The hosted page's enrolment during a login that requires a factor: the key waiting for its
 * first code (the same one again when the page is shown again, so a key already added to an
 * authenticator stays right), or a new one.
 */
export async function pendingOrNewTotpKey(ctx: AuthContext, app: AuthenticatedApp, challengeHash: Buffer): Promise<{ secret: string; otpauth_uri: string }> {
  const userId = await holderUser(ctx, app, { challengeHash });
  const factor = await findTotpFactor(ctx.sql, userId);
  if (!factor || factor.confirmed_at) return startTotpEnrollment(ctx, app, { challengeHash });
  const user = (await findUser(ctx.sql, userId))!;
  const secret = Secret.fromBase32(unseal(ctx.secondFactor.secretKey, factor.secret_sealed, userId).toString());
  const totp = new TOTP({ issuer: app.slug, label: user.email ?? user.phone ?? user.id, secret, algorithm: 'SHA1', digits: 6, period: 30 });
  return { secret: secret.base32, otpauth_uri: totp.toString() };
}

/**
 * POST /auth/second-factor/totp/confirm: the first code from the authenticator confirms the key
 * and returns ten recovery codes (shown once). With a challenge token the waiting login
 * completes too and the tokens come with them. 404 SECOND_FACTOR_NOT_ENROLLED when no key is
 * pending, 401 SECOND_FACTOR_INVALID for a wrong code.
 */
export async function confirmTotpEnrollment(ctx: AuthContext, app: AuthenticatedApp, holder: FactorHolder, code: string, origin: RequestOrigin): Promise<{ recovery_codes: string[] } & Partial<SessionTokens>> {
  const { recoveryCodes, result } = await confirmTotpEnrollmentThen(ctx, app, holder, code, origin, sessionOfLogin(ctx, app));
  return { recovery_codes: recoveryCodes, ...result };
}

/** confirmTotpEnrollment with `then` completing a waiting login (the hosted page's browser session); result undefined without a challenge. */
export async function confirmTotpEnrollmentThen<T>(ctx: AuthContext, app: AuthenticatedApp, holder: FactorHolder, code: string, origin: RequestOrigin,
  then: AfterSecondFactor<T>): Promise<{ recoveryCodes: string[]; result: T | undefined }> {
  const nowMs = ctx.clock.now();
  let challenge: SecondFactorChallengeRow | undefined;
  let userId: string;
  if ('refreshToken' in holder) {
    userId = (await presentedSession(ctx, app, holder.refreshToken)).userId;
  } else {
    challenge = await spendChallengeAttempt(ctx.sql, app.id, challengeHashOf(holder), new Date(nowMs), CHALLENGE_MAX_ATTEMPTS);
    if (!challenge) throw authError('SECOND_FACTOR_INVALID', 'The challenge is unknown, expired or used up; log in again');
    userId = challenge.user_id;
  }
  return withFactorCheck(ctx, app, userId, origin, challenge ? 'login' : 'enrolment', async (tx, factor) => {
    if (!factor || factor.confirmed_at) throw authError('SECOND_FACTOR_NOT_ENROLLED', 'No TOTP key is waiting for confirmation; start the enrolment');
    await checkFactor(ctx, tx, factor, { code }, nowMs);
    const recoveryCodes = Array.from({ length: RECOVERY_CODE_COUNT }, newRecoveryCode);
    await replaceRecoveryCodes(tx, userId, recoveryCodes.map((c) => recoveryCodeHash(ctx, userId, c)));
    await insertAuditEvent(tx, { ...appEvent(app, origin, nowMs), type: 'second_factor.enrolled', userId, details: { method: 'totp' } });
    const result = challenge ? await finishLogin(tx, app, challenge, nowMs, 'totp', origin, then) : undefined;
    return { recoveryCodes, result };
  });
}

/** POST /auth/second-factor/totp/remove: needs a current code or a recovery code. 404 SECOND_FACTOR_NOT_ENROLLED. */
export async function removeTotp(ctx: AuthContext, app: AuthenticatedApp, refreshToken: string, proof: { code?: string; recoveryCode?: string }, origin: RequestOrigin): Promise<void> {
  const { userId } = await presentedSession(ctx, app, refreshToken);
  const nowMs = ctx.clock.now();
  await withFactorCheck(ctx, app, userId, origin, 'removal', async (tx, factor) => {
    if (!factor?.confirmed_at) throw authError('SECOND_FACTOR_NOT_ENROLLED');
    await checkFactor(ctx, tx, factor, proof, nowMs);
    await deleteSecondFactor(tx, userId);
    await insertAuditEvent(tx, { ...appEvent(app, origin, nowMs), type: 'second_factor.removed', userId, details: { method: 'totp' } });
  });
}

/** DELETE /admin/users/:user_id/second-factor: the admin's reset (a user who lost the authenticator and the codes). */
export async function resetSecondFactor(ctx: AuthContext, userId: string, origin: RequestOrigin): Promise<{ reset: boolean }> {
  if (!isUuid(userId)) throw authError('USER_NOT_FOUND');
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    const user = await lockUser(tx, userId.toLowerCase());
    if (!user) throw authError('USER_NOT_FOUND');
    const removed = await deleteSecondFactor(tx, user.id);
    if (removed) {
      await insertAuditEvent(tx, { type: 'second_factor.reset', actor: 'admin', userId: user.id, ip: origin.ip, userAgent: origin.userAgent, now, details: { method: 'totp' } });
    }
    return { reset: removed };
  });
}

/** GET /admin/apps/:app_id/second-factor-policy. */
export async function getSecondFactorPolicies(ctx: AuthContext, appId: string): Promise<{ policy: SecondFactorPolicy; tenants: { tenant_id: string; policy: SecondFactorPolicy }[] }> {
  const app = await getApp(ctx, appId);
  const rows = await listSecondFactorPolicies(ctx.sql, app.id);
  return {
    policy: rows.find((r) => r.tenant_id === null)?.policy ?? 'off',
    tenants: rows.filter((r) => r.tenant_id !== null).map((r) => ({ tenant_id: r.tenant_id!, policy: r.policy })),
  };
}

/** PUT the app's policy (tenantId null) or a tenant's (null policy: the tenant follows the app). */
export async function putSecondFactorPolicy(ctx: AuthContext, appId: string, tenantId: string | null, policy: SecondFactorPolicy | null): Promise<void> {
  const app = await getApp(ctx, appId);
  if (tenantId !== null && !(isUuid(tenantId) && (await findTenant(ctx.sql, app.id, tenantId.toLowerCase())))) throw authError('TENANT_NOT_FOUND');
  await setSecondFactorPolicy(ctx.sql, app.id, tenantId?.toLowerCase() ?? null, policy, new Date(ctx.clock.now()));
}

class WrongFactor extends Error {}

/**
 * Runs `step` in a transaction holding the user's factor row; a wrong code (WrongFactor) rolls
 * it back, is counted against the factor in a statement of its own, recorded, and answered 401.
 */
async function withFactorCheck<T>(ctx: AuthContext, app: AuthenticatedApp, userId: string, origin: RequestOrigin, during: 'login' | 'enrolment' | 'removal',
  step: (tx: TransactionSql, factor: TotpFactorRow | undefined) => Promise<T>): Promise<T> {
  const nowMs = ctx.clock.now();
  try {
    return await ctx.sql.begin(async (tx): Promise<T> => {
      const factor = await lockTotpFactor(tx, userId);
      if (factor?.locked_until && factor.locked_until.getTime() > nowMs) {
        throw authError('RATE_LIMITED', 'Too many wrong codes; the second factor is locked for a while', { details: { retryAfterSeconds: Math.ceil((factor.locked_until.getTime() - nowMs) / 1000) } });
      }
      return step(tx, factor);
    }) as T;
  } catch (error) {
    if (!(error instanceof WrongFactor)) throw error;
    await recordTotpFailure(ctx.sql, userId, TOTP_MAX_FAILURES, new Date(nowMs + TOTP_LOCK_MS));
    await insertAuditEvent(ctx.sql, { ...appEvent(app, origin, nowMs), type: 'login.failed', userId, details: { method: 'second_factor', during, reason: 'SECOND_FACTOR_INVALID' } });
    throw authError('SECOND_FACTOR_INVALID');
  }
}

/** Checks a TOTP code (recording its step) or uses a recovery code up; throws WrongFactor. */
async function checkFactor(ctx: AuthContext, tx: TransactionSql, factor: TotpFactorRow, proof: { code?: string; recoveryCode?: string }, nowMs: number): Promise<'totp' | 'recovery_code'> {
  if (proof.code !== undefined) {
    const secret = unseal(ctx.secondFactor.secretKey, factor.secret_sealed, factor.user_id).toString();
    const step = acceptedStep(secret, proof.code, nowMs, factor.last_used_step === null ? null : Number(factor.last_used_step));
    if (step === null) throw new WrongFactor();
    await recordTotpSuccess(tx, factor.user_id, step, new Date(nowMs));
    return 'totp';
  }
  if (proof.recoveryCode !== undefined && (await useRecoveryCode(tx, factor.user_id, recoveryCodeHash(ctx, factor.user_id, proof.recoveryCode), new Date(nowMs)))) {
    return 'recovery_code';
  }
  throw new WrongFactor();
}

/**
 * The step of a code valid within one step of now, or null; a step at or before the last
 * accepted one is refused (RFC 6238 section 5.2: a verifier must not accept a code twice).
 */
export function acceptedStep(secretBase32: string, code: string, nowMs: number, lastUsedStep: number | null): number | null {
  const totp = new TOTP({ secret: Secret.fromBase32(secretBase32), algorithm: 'SHA1', digits: 6, period: 30 });
  const delta = totp.validate({ token: code, timestamp: nowMs, window: 1 });
  if (delta === null) return null;
  const step = Math.floor(nowMs / STEP_MS) + delta;
  return lastUsedStep !== null && step <= lastUsedStep ? null : step;
}

async function finishLogin<T>(tx: TransactionSql, app: AuthenticatedApp, challenge: SecondFactorChallengeRow, nowMs: number, method: 'totp' | 'recovery_code',
  origin: RequestOrigin, then: AfterSecondFactor<T>): Promise<T> {
  if (!(await takeChallenge(tx, challenge.token_hash))) throw authError('SECOND_FACTOR_INVALID', 'The challenge was used by another request');
  const user = await lockUser(tx, challenge.user_id);
  if (!user || user.deleted_at) throw authError('USER_DELETED');
  const amr = [...new Set([...challenge.amr, 'otp', 'mfa'])];
  const { familyId, result } = await then(tx, { userId: user.id, requestedTenant: challenge.requested_tenant_id, amr, nowMs });
  await insertAuditEvent(tx, { ...appEvent(app, origin, nowMs), type: 'login.succeeded', userId: user.id, familyId, details: { method: 'code', second_factor: method } });
  return result;
}

/** The JSON API's end of a login's second factor: a session in the tenant asked for (or the default). */
function sessionOfLogin(ctx: AuthContext, app: AuthenticatedApp): AfterSecondFactor<SessionTokens> {
  return async (tx, login) => {
    const tenant = chooseTenant(await listRolesOfUser(tx, app.id, login.userId), login.requestedTenant, null);
    const familyId = randomUUID();
    return { familyId, result: await startSession(tx, ctx, { app, userId: login.userId, familyId, tenant, nowMs: login.nowMs, amr: login.amr }) };
  };
}

function challengeHashOf(holder: { challengeToken: string } | { challengeHash: Buffer }): Buffer {
  return 'challengeHash' in holder ? holder.challengeHash : sha256(holder.challengeToken);
}

async function holderUser(ctx: AuthContext, app: AuthenticatedApp, holder: FactorHolder): Promise<string> {
  if ('refreshToken' in holder) return (await presentedSession(ctx, app, holder.refreshToken)).userId;
  const challenge = await findChallenge(ctx.sql, app.id, challengeHashOf(holder), new Date(ctx.clock.now()));
  if (!challenge) throw authError('SECOND_FACTOR_INVALID', 'The challenge is unknown, expired or used up; log in again');
  return challenge.user_id;
}

function stricter(a: SecondFactorPolicy, b: SecondFactorPolicy): SecondFactorPolicy {
  return POLICY_RANK[a] >= POLICY_RANK[b] ? a : b;
}

/** Ten characters of RFC 4648 base32, lower case, as xxxxx-xxxxx. */
function newRecoveryCode(): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz234567';
  const chars = [...randomBytes(10)].map((byte) => alphabet[byte & 31]).join('');
  return `${chars.slice(0, 5)}-${chars.slice(5)}`;
}

function recoveryCodeHash(ctx: AuthContext, userId: string, code: string): Buffer {
  return createHmac('sha256', ctx.secondFactor.codeHashKey).update(`${userId}\n${code.replace(/[\s-]/g, '').toLowerCase()}`).digest();
}

function sha256(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

function appEvent(app: AuthenticatedApp, origin: RequestOrigin, nowMs: number) {
  return { actor: 'app' as const, appId: app.id, ip: origin.ip, userAgent: origin.userAgent, now: new Date(nowMs) };
}
