// Queries on second factors (migration 0032): TOTP keys, recovery codes, policies, and the
// challenges of code logins waiting for their second factor.
import type { Queryable } from '../database/client.js';

export type SecondFactorPolicy = 'off' | 'optional' | 'required';

export interface TotpFactorRow {
  user_id: string;
  secret_sealed: Buffer;
  confirmed_at: Date | null;
  last_used_step: string | null;
  failed_attempts: number;
  locked_until: Date | null;
}

export async function lockTotpFactor(sql: Queryable, userId: string): Promise<TotpFactorRow | undefined> {
  const [row] = await sql<TotpFactorRow[]>`
    select user_id, secret_sealed, confirmed_at, last_used_step, failed_attempts, locked_until
    from totp_factors where user_id = ${userId}
    for update
  `;
  return row;
}

/** The user's factor without a lock (to read it, as the page's enrolment does to show a pending key again). */
export async function findTotpFactor(sql: Queryable, userId: string): Promise<TotpFactorRow | undefined> {
  const [row] = await sql<TotpFactorRow[]>`
    select user_id, secret_sealed, confirmed_at, last_used_step, failed_attempts, locked_until
    from totp_factors where user_id = ${userId}
  `;
  return row;
}

export async function hasConfirmedTotp(sql: Queryable, userId: string): Promise<boolean> {
  const rows = await sql`select 1 from totp_factors where user_id = ${userId} and confirmed_at is not null`;
  return rows.length > 0;
}

/** A new unconfirmed key, replacing an unconfirmed one; undefined when a confirmed one exists. */
export async function upsertPendingTotp(sql: Queryable, userId: string, secretSealed: Buffer, now: Date): Promise<boolean> {
  const rows = await sql`
    insert into totp_factors (user_id, secret_sealed, created_at)
    values (${userId}, ${secretSealed}, ${now})
    on conflict (user_id) do update
    set secret_sealed = excluded.secret_sealed, created_at = excluded.created_at, failed_attempts = 0, locked_until = null, last_used_step = null
    where totp_factors.confirmed_at is null
    returning user_id
  `;
  return rows.length > 0;
}

/** An accepted code: its step recorded (never accepted again), the failure count reset; confirms a pending key. */
export async function recordTotpSuccess(sql: Queryable, userId: string, step: number, now: Date): Promise<void> {
  await sql`
    update totp_factors
    set last_used_step = ${step}, failed_attempts = 0, locked_until = null, confirmed_at = coalesce(confirmed_at, ${now})
    where user_id = ${userId}
  `;
}

/** A wrong code; from `maxFailures` in a row on, the factor is locked until `lockedUntil`. Commits on its own. */
export async function recordTotpFailure(sql: Queryable, userId: string, maxFailures: number, lockedUntil: Date): Promise<void> {
  await sql`
    update totp_factors
    set failed_attempts = failed_attempts + 1,
        locked_until = case when failed_attempts + 1 >= ${maxFailures} then ${lockedUntil} else locked_until end
    where user_id = ${userId}
  `;
}

export async function deleteSecondFactor(sql: Queryable, userId: string): Promise<boolean> {
  await sql`delete from recovery_codes where user_id = ${userId}`;
  const rows = await sql`delete from totp_factors where user_id = ${userId} returning user_id`;
  return rows.length > 0;
}

export async function replaceRecoveryCodes(sql: Queryable, userId: string, hashes: Buffer[]): Promise<void> {
  await sql`delete from recovery_codes where user_id = ${userId}`;
  for (const hash of hashes) await sql`insert into recovery_codes (user_id, code_hash) values (${userId}, ${hash})`;
}

/** Uses one recovery code up; false when it is unknown or used. */
export async function useRecoveryCode(sql: Queryable, userId: string, hash: Buffer, now: Date): Promise<boolean> {
  const rows = await sql`
    update recovery_codes set used_at = ${now}
    where user_id = ${userId} and code_hash = ${hash} and used_at is null
    returning user_id
  `;
  return rows.length > 0;
}

/** The app's policy and, when given, the tenant's (null where none is set). */
export async function findSecondFactorPolicies(sql: Queryable, appId: string, tenantId: string | null): Promise<{ app: SecondFactorPolicy | null; tenant: SecondFactorPolicy | null }> {
  const rows = await sql<{ tenant_id: string | null; policy: SecondFactorPolicy }[]>`
    select tenant_id, policy from second_factor_policies
    where app_id = ${appId} and (tenant_id is null or tenant_id = ${tenantId})
  `;
  return { app: rows.find((r) => r.tenant_id === null)?.policy ?? null, tenant: rows.find((r) => r.tenant_id !== null)?.policy ?? null };
}

export async function listSecondFactorPolicies(sql: Queryable, appId: string): Promise<{ tenant_id: string | null; policy: SecondFactorPolicy }[]> {
  return sql<{ tenant_id: string | null; policy: SecondFactorPolicy }[]>`
    select tenant_id, policy from second_factor_policies where app_id = ${appId} order by tenant_id nulls first
  `;
}

/** Sets (or with null removes) the policy of the app (tenantId null) or of one of its tenants. */
export async function setSecondFactorPolicy(sql: Queryable, appId: string, tenantId: string | null, policy: SecondFactorPolicy | null, now: Date): Promise<void> {
  if (policy === null) {
    await sql`delete from second_factor_policies where app_id = ${appId} and tenant_id is not distinct from ${tenantId}`;
    return;
  }
  await sql`
    insert into second_factor_policies (app_id, tenant_id, policy, updated_at)
    values (${appId}, ${tenantId}, ${policy}, ${now})
    on conflict (app_id, tenant_id) do update set policy = excluded.policy, updated_at = excluded.updated_at
  `;
}

export interface SecondFactorChallengeRow {
  token_hash: Buffer;
  app_id: string;
  user_id: string;
  amr: string[];
  requested_tenant_id: string | null;
  attempts: number;
  expires_at: Date;
}

export async function insertSecondFactorChallenge(sql: Queryable, challenge: {
  tokenHash: Buffer; appId: string; userId: string; amr: string[]; requestedTenantId: string | null; now: Date; expiresAt: Date;
}): Promise<void> {
  await sql`
    insert into second_factor_challenges (token_hash, app_id, user_id, amr, requested_tenant_id, created_at, expires_at)
    values (${challenge.tokenHash}, ${challenge.appId}, ${challenge.userId}, ${challenge.amr}, ${challenge.requestedTenantId}, ${challenge.now}, ${challenge.expiresAt})
  `;
}

/**
 * Spends one attempt of a live challenge and returns it (committed on its own, before any code
 * is compared: however many guesses arrive at once, at most `maxAttempts` are compared).
 */
export async function spendChallengeAttempt(sql: Queryable, appId: string, tokenHash: Buffer, now: Date, maxAttempts: number): Promise<SecondFactorChallengeRow | undefined> {
  const [row] = await sql<SecondFactorChallengeRow[]>`
    update second_factor_challenges set attempts = attempts + 1
    where token_hash = ${tokenHash} and app_id = ${appId} and expires_at > ${now} and attempts < ${maxAttempts}
    returning token_hash, app_id, user_id, amr, requested_tenant_id, attempts, expires_at
  `;
  return row;
}

/** The live challenge without spending an attempt (enrolment steps). */
export async function findChallenge(sql: Queryable, appId: string, tokenHash: Buffer, now: Date): Promise<SecondFactorChallengeRow | undefined> {
  const [row] = await sql<SecondFactorChallengeRow[]>`
    select token_hash, app_id, user_id, amr, requested_tenant_id, attempts, expires_at
    from second_factor_challenges
    where token_hash = ${tokenHash} and app_id = ${appId} and expires_at > ${now}
  `;
  return row;
}

/** Takes the challenge (deletes it); false when another request took it first. */
export async function takeChallenge(sql: Queryable, tokenHash: Buffer): Promise<boolean> {
  const rows = await sql`delete from second_factor_challenges where token_hash = ${tokenHash} returning token_hash`;
  return rows.length > 0;
}
