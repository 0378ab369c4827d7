// Queries on refresh families (sessions) and their tokens. Invariant: every write to a family's
// tokens happens in a transaction that first locked the family row, so reading
// `current_token_id` from the locked row tells which token is live without racing.
import type { Queryable } from '../database/client.js';
import type { RoleRow } from './roles.js';

export type RevokedReason = 'logout' | 'reuse' | 'revoke_user' | 'user_deleted';

export interface NewRefreshToken {
  id: string;
  hash: Buffer;
  expiresAt: Date;
}

/** Creates a session and its first token in one statement. */
export async function insertRefreshFamily(sql: Queryable, family: {
  id: string; appId: string; userId: string; tenantId: string | null; now: Date; expiresAt: Date; token: NewRefreshToken;
  /** A session started by an OAuth code exchange: its client, the scope granted, the browser session (migration 0022). */
  grant?: { clientId: string; scope: string; browserSessionId: string | null; resource: string | null };
  /** The session's sign-in methods (migration 0032). */
  amr?: string[] | null;
}): Promise<void> {
  await sql`
    with family as (
      insert into refresh_families (id, app_id, user_id, tenant_id, current_token_id, created_at, expires_at, client_id, scope, browser_session_id, resource, amr)
      values (
        ${family.id}, ${family.appId}, ${family.userId}, ${family.tenantId}, ${family.token.id}, ${family.now}, ${family.expiresAt},
        ${family.grant?.clientId ?? null}, ${family.grant?.scope ?? null}, ${family.grant?.browserSessionId ?? null}, ${family.grant?.resource ?? null}, ${family.amr ?? null}
      )
      returning id
    )
    insert into refresh_tokens (id, family_id, parent_id, token_hash, state, issued_at, expires_at)
    select ${family.token.id}, family.id, null, ${family.token.hash}, 'active', ${family.now}, ${family.token.expiresAt}
    from family
  `;
}

/** What revocation needs to decide, read under the family's row lock. */
export interface LockedRefreshSession {
  token_id: string;
  family_id: string;
  user_id: string;
  current_token_id: string;
  revoked_at: Date | null;
}

/**
 * Finds the token of this app by hash and locks its family (`for update of f`). When the call
 * had to wait for the lock, PostgreSQL re-reads the family row, so `current_token_id` and
 * `revoked_at` are the committed values of whoever held it; the token's id never changes. A
 * token of another app is not found.
 */
export async function lockRefreshSession(sql: Queryable, tokenHash: Buffer, appId: string): Promise<LockedRefreshSession | undefined> {
  const [row] = await sql<LockedRefreshSession[]>`
    select t.id as token_id, f.id as family_id, f.user_id, f.current_token_id, f.revoked_at
    from refresh_tokens t
    join refresh_families f on f.id = t.family_id
    where t.token_hash = ${tokenHash} and f.app_id = ${appId}
    for update of f
  `;
  return row;
}

export type RotationOutcome = 'invalid_credentials' | 'rotated' | 'not_found' | 'user_deleted' | 'reuse' | 'revoked' | 'expired' | 'tenant_not_found' | 'rate_limited';

export interface RotationResult {
  outcome: RotationOutcome;
  /** Set when rotated. */
  app_slug: string | null;
  /** Set when rotated. */
  user_id: string | null;
  /** The tenant the session remembers after this refresh (set when rotated). */
  remembered_tenant_id: string | null;
  /** The user's roles in the app, oldest assignment first (set when rotated). */
  roles: RoleRow[] | null;
  /** Set when rate_limited: the end of the family's window. */
  retry_at?: Date | null;
  /** How the user signed in (RFC 8176 values) as the family recorded it; set when rotated (null: none recorded). */
  amr: string[] | null;
}

/**
 * Checks the app's credentials, then rotates the presented token or detects its reuse: one call
 * of the rotate_refresh_token function (migrations/functions/rotate_refresh_token.sql: it records the audit event and answers the session's amr), i.e. one round trip and one transaction
 * holding the family's row lock. On `reuse` the family and its live token are revoked and that
 * is committed; on `rotated` the child token is the family's new live token (expiring after
 * `childLifetimeMs`, capped at the session's end). Nothing is written on `invalid_credentials`.
 */
export async function rotateRefreshToken(sql: Queryable, rotation: {
  appId: string; secretHash: Buffer; tokenHash: Buffer; requestedTenantId: string | null;
  child: { id: string; hash: Buffer }; now: Date; childLifetimeMs: number;
  /** Recorded with the audit event of a rotation or a reuse. */
  origin: { ip: string; userAgent: string | null };
  /** The rule refresh_family: the family's rotations per window (rate_limited beyond). */
  familyLimit: { maxHits: number; windowSeconds: number };
}): Promise<RotationResult> {
  const [row] = await sql<RotationResult[]>`
    select outcome, app_slug, user_id, remembered_tenant_id, roles, retry_at, amr
    from rotate_refresh_token(
      ${rotation.appId}, ${rotation.secretHash}, ${rotation.tokenHash}, ${rotation.requestedTenantId},
      ${rotation.child.id}, ${rotation.child.hash}, ${rotation.now},
      make_interval(secs => ${rotation.childLifetimeMs / 1000}),
      ${rotation.origin.ip}, ${rotation.origin.userAgent},
      ${rotation.familyLimit.maxHits}, make_interval(secs => ${rotation.familyLimit.windowSeconds})
    )
  `;
  return row!;
}

/**
 * Revokes one locked family and its live token. Runs after lockRefreshSession in the same
 * transaction, so this statement sees a live token committed by a rotation that held the lock.
 */
export async function revokeRefreshFamily(sql: Queryable, revocation: {
  familyId: string; currentTokenId: string; now: Date; reason: RevokedReason;
}): Promise<void> {
  await sql`
    with family as (
      update refresh_families
      set revoked_at = ${revocation.now}, revoked_reason = ${revocation.reason}
      where id = ${revocation.familyId} and revoked_at is null
    )
    update refresh_tokens
    set state = 'revoked'
    where id = ${revocation.currentTokenId} and state = 'active'
  `;
}

/**
 * Locks the user's live families (of one app, or of every app when appId is null) in id order,
 * so two revocations of the same user cannot deadlock. Returns their live tokens. (No join here:
 * when the lock waits for a rotation, PostgreSQL re-reads only the family row, and a joined token
 * row from the statement's snapshot would no longer match the new current_token_id, dropping
 * the family from the result.)
 */
export async function lockLiveFamiliesOfUser(sql: Queryable, userId: string, appId: string | null): Promise<{ id: string; current_token_id: string }[]> {
  return appId === null
    ? sql<{ id: string; current_token_id: string }[]>`
        select id, current_token_id
        from refresh_families
        where user_id = ${userId} and revoked_at is null
        order by id
        for update
      `
    : sql<{ id: string; current_token_id: string }[]>`
        select id, current_token_id
        from refresh_families
        where app_id = ${appId} and user_id = ${userId} and revoked_at is null
        order by id
        for update
      `;
}

/**
 * Revokes families locked by lockLiveFamiliesOfUser and their live tokens. Returns how many of
 * them were active at `now`: their live token (whose expiry is capped at the session's end) had
 * not expired. A new statement, so it sees the live tokens committed by rotations that held the
 * locks before.
 */
export async function revokeRefreshFamilies(sql: Queryable, revocation: {
  familyIds: string[]; currentTokenIds: string[]; now: Date; reason: RevokedReason;
}): Promise<number> {
  const revoked = await sql<{ active: boolean }[]>`
    with families as (
      update refresh_families
      set revoked_at = ${revocation.now}, revoked_reason = ${revocation.reason}
      where id = any(${revocation.familyIds}::uuid[]) and revoked_at is null
    )
    update refresh_tokens
    set state = 'revoked'
    where id = any(${revocation.currentTokenIds}::uuid[]) and state = 'active'
    returning expires_at > ${revocation.now} as active
  `;
  return revoked.filter((token) => token.active).length;
}

/** What introspection and revocation need to know of any refresh token, whichever app it belongs to. */
export interface RefreshTokenStatus {
  app_id: string;
  user_id: string;
  family_id: string;
  issued_at: Date;
  /** The token's own expiry (already capped at the session's end). */
  expires_at: Date;
  /** The family's live token: not rotated. */
  is_current: boolean;
  family_revoked_at: Date | null;
  family_expires_at: Date;
  user_deleted_at: Date | null;
}

/** The token with this hash, of any app, without locking anything; undefined when unknown. */
export async function findRefreshTokenStatus(sql: Queryable, tokenHash: Buffer): Promise<RefreshTokenStatus | undefined> {
  const [row] = await sql<RefreshTokenStatus[]>`
    select f.app_id, f.user_id, f.id as family_id, t.issued_at, t.expires_at,
      t.id = f.current_token_id as is_current,
      f.revoked_at as family_revoked_at, f.expires_at as family_expires_at,
      u.deleted_at as user_deleted_at
    from refresh_tokens t
    join refresh_families f on f.id = t.family_id
    join users u on u.id = f.user_id
    where t.token_hash = ${tokenHash}
  `;
  return row;
}

/** A live session (refresh family) as its user and the admin see it. */
export interface SessionRow {
  id: string;
  app_id: string;
  app_slug: string;
  created_at: Date;
  /** Issue time of the live token: the login, or the last refresh. */
  last_used_at: Date;
  /** When the live token expires (capped at the session's end); a refresh moves it. */
  expires_at: Date;
  ip: string | null;
  user_agent: string | null;
}

/**
 * The user's live sessions (not revoked, live token not expired at `now`), of one app or of
 * every app when appId is null, most recently used first. ip and user_agent are those of the
 * family's latest login or refresh audit event: a live token is at most 30 days old, so that
 * event is within the default 90-day retention (null when a shorter retention purged it).
 */
export async function listLiveSessionsOfUser(sql: Queryable, userId: string, appId: string | null, now: Date): Promise<SessionRow[]> {
  return sql<SessionRow[]>`
    select f.id, f.app_id, a.slug as app_slug, f.created_at, t.issued_at as last_used_at, t.expires_at, e.ip, e.user_agent
    from refresh_families f
    join refresh_tokens t on t.id = f.current_token_id
    join apps a on a.id = f.app_id
    left join lateral (
      select ip, user_agent
      from audit_events
      where user_id = f.user_id and family_id = f.id and type in ('login.succeeded', 'token.refreshed')
      order by id desc
      limit 1
    ) e on true
    where f.user_id = ${userId} and f.revoked_at is null and t.expires_at > ${now}
      ${appId === null ? sql`` : sql`and f.app_id = ${appId}`}
    order by t.issued_at desc, f.id
  `;
}

/**
 * Locks one family of the user (of one app, or any app when appId is null) by id; undefined when
 * the user has no such family (another user's session is not found). After a wait for the lock
 * PostgreSQL re-reads the row: current_token_id and revoked_at are the committed values.
 */
export async function lockFamilyOfUser(sql: Queryable, familyId: string, userId: string, appId: string | null): Promise<{ id: string; app_id: string; current_token_id: string; revoked_at: Date | null } | undefined> {
  const [row] = await sql<{ id: string; app_id: string; current_token_id: string; revoked_at: Date | null }[]>`
    select id, app_id, current_token_id, revoked_at
    from refresh_families
    where id = ${familyId} and user_id = ${userId}
      ${appId === null ? sql`` : sql`and app_id = ${appId}`}
    for update
  `;
  return row;
}
