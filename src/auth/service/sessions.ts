// Sessions: a login starts a refresh family; each refresh rotates its token; replaying a rotated
// token revokes the family; logout and revoke-user revoke families. Every decision about a
// family is made in one transaction that holds the family's row lock, so a family revoked by
// one request can never be rotated by another: every refresh token issued for it was issued
// before the revocation and is dead after it.
import { randomUUID } from 'node:crypto';
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import type { TransactionSql } from '../database/client.js';
import { authError, type AuthErrorCode } from '../errors.js';
import { ACCESS_TOKEN_TTL_SECONDS, REFRESH_TOKEN_TTL_MS, SESSION_LIFETIME_MS } from '../limits.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import { takeAppRefreshRate } from '../queries/rate-limit-counters.js';
import { findMember } from '../queries/users.js';
import { insertRefreshFamily, lockLiveFamiliesOfUser, lockRefreshSession, revokeRefreshFamilies, revokeRefreshFamily, rotateRefreshToken, type RotationOutcome } from '../queries/refresh-tokens.js';
import type { RoleRow } from '../queries/roles.js';
import type { RoleName } from '../roles.js';
import { signAccessToken } from '../tokens/access-token.js';
import { generateRefreshToken, hashRefreshToken } from '../tokens/refresh-token.js';
import type { AuthenticatedApp, PresentedCredentials } from './credentials.js';
import { rateLimited } from './rate-limit-enforcement.js';

/** The body of a successful login or refresh. */
export interface SessionTokens {
  access_token: string;
  refresh_token: string;
  user_id: string;
  expires_in: number;
  token_type: 'Bearer';
}

export interface TenantChoice {
  /** tenant_id claim: null when the user has no role in the app. */
  tenantId: string | null;
  /** roles claim: the user's role in that tenant, or []. */
  roles: RoleName[];
  /** What the session remembers: the tenant the caller chose explicitly, if any. */
  remembered: string | null;
}

/**
 * Which tenant a token is for. An explicitly requested tenant must be one where the user has a
 * role (else 404 TENANT_NOT_FOUND) and is remembered by the session. Without a request, the
 * remembered tenant is used while the user still has a role there; otherwise the tenant of the
 * user's oldest role assignment; with no role at all, null and [].
 */
export function chooseTenant(roles: RoleRow[], requested: string | null | undefined, remembered: string | null): TenantChoice {
  if (requested) {
    const match = roles.find((r) => r.tenant_id === requested.toLowerCase());
    if (!match) throw authError('TENANT_NOT_FOUND', 'The tenant does not exist in this app or the user has no role in it');
    return { tenantId: match.tenant_id, roles: [match.role], remembered: match.tenant_id };
  }
  const current = (remembered && roles.find((r) => r.tenant_id === remembered)) || roles[0];
  return current
    ? { tenantId: current.tenant_id, roles: [current.role], remembered }
    : { tenantId: null, roles: [], remembered };
}

/**
 * Starts a session for a user who just logged in, inside the caller's transaction: a new family
 * (absolute expiry now + 1 year) with its first token, and a signed access token.
 */
export async function startSession(tx: TransactionSql, ctx: AuthContext, session: {
  app: AuthenticatedApp; userId: string; familyId: string; tenant: TenantChoice; nowMs: number;
  /** A session of an OAuth client (provider/token.ts): recorded on the family, its claims added to the access token. */
  grant?: { clientId: string; publicClientId: string; scope: string; browserSessionId: string | null; resource: string | null };
  /** How the user signed in (RFC 8176 values): recorded on the family, the `amr` claim of each of its access tokens. */
  amr?: string[];
}): Promise<SessionTokens> {
  const now = new Date(session.nowMs);
  const refresh = generateRefreshToken();
  const tokenId = randomUUID();
  const expiresAt = new Date(session.nowMs + SESSION_LIFETIME_MS);
  await insertRefreshFamily(tx, {
    id: session.familyId,
    appId: session.app.id,
    userId: session.userId,
    tenantId: session.tenant.remembered,
    now,
    expiresAt,
    token: { id: tokenId, hash: refresh.hash, expiresAt: new Date(Math.min(session.nowMs + REFRESH_TOKEN_TTL_MS, expiresAt.getTime())) },
    grant: session.grant,
    amr: session.amr ?? null,
  });
  const claims = {
    ...(session.grant ? { client_id: session.grant.publicClientId, scope: session.grant.scope, ...(session.grant.resource ? { aud: session.grant.resource } : {}) } : {}),
    ...(session.amr?.length ? { amr: session.amr } : {}),
  };
  return issueTokens(ctx, session.app, session.userId, session.tenant, refresh.token, session.nowMs, claims);
}

/** The error answered for each refusal of rotate_refresh_token. */
const REFUSALS: Record<Exclude<RotationOutcome, 'rotated' | 'rate_limited'>, [AuthErrorCode, string?]> = {
  invalid_credentials: ['TOKEN_INVALID', 'Invalid app credentials'],
  not_found: ['TOKEN_INVALID', 'Invalid refresh token'],
  user_deleted: ['USER_DELETED'],
  reuse: ['TOKEN_REUSE'],
  revoked: ['TOKEN_REVOKED'],
  expired: ['TOKEN_INVALID', 'The refresh token has expired; log in again'],
  tenant_not_found: ['TENANT_NOT_FOUND', 'The tenant does not exist in this app or the user has no role in it'],
};

/**
 * POST /auth/refresh. One statement (rotateRefreshToken) checks the app credentials (401
 * TOKEN_INVALID) and, in one transaction holding the family lock: rotates a live token and
 * returns its child; treats a rotated token as a replay, revoking the family and its live token
 * (401 TOKEN_REUSE, committed before answering); refuses a revoked live token (401
 * TOKEN_REVOKED), an expired token or session (401 TOKEN_INVALID), a soft-deleted user (403
 * USER_DELETED). The access token is signed after the commit with the roles read under the lock;
 * `claims` are added to it (an OAuth client's, provider/token.ts).
 */
export async function refreshSession(ctx: AuthContext, credentials: PresentedCredentials, presented: string, requestedTenant: string | null | undefined, origin: RequestOrigin, claims?: Record<string, string>): Promise<SessionTokens> {
  const hash = hashRefreshToken(presented);
  const nowMs = ctx.clock.now();
  const child = generateRefreshToken();
  const childId = randomUUID();
  const requested = requestedTenant ? requestedTenant.toLowerCase() : null;
  // The app's rate in a statement of its own, which commits at once: the counter is one row
  // per app, and holding its lock through the rotation's transaction would serialise the app.
  const appLimit = ctx.rateLimits.refresh_app;
  const appBlocked = await takeAppRefreshRate(ctx.sql, { ...credentials, ...appLimit, now: new Date(nowMs) });
  if (appBlocked) throw rateLimited(appBlocked, nowMs);
  const result = await rotateRefreshToken(ctx.sql, {
    appId: credentials.appId,
    secretHash: credentials.secretHash,
    // A string that cannot be a refresh token still runs the query, so that a wrong secret is
    // reported as such, whatever the token; its hash matches nothing.
    tokenHash: hash ?? NO_TOKEN_HASH,
    requestedTenantId: requested,
    child: { id: childId, hash: child.hash },
    now: new Date(nowMs),
    childLifetimeMs: REFRESH_TOKEN_TTL_MS,
    origin,
    familyLimit: ctx.rateLimits.refresh_family,
  });
  if (result.outcome === 'rate_limited') throw rateLimited(result.retry_at!, nowMs);
  if (result.outcome !== 'rotated') {
    const [code, message] = REFUSALS[result.outcome];
    throw authError(code, message);
  }
  const app = { id: credentials.appId, slug: result.app_slug! };
  // rotate_refresh_token checked the requested tenant before rotating, but reads the roles in a
  // later statement: a role revoked in between must not turn a committed rotation into an error
  // (the client would never get the new refresh token, and its old one is now a replay). The
  // token is then chosen as if no tenant had been asked for, from the roles that were read.
  const stillHeld = requested !== null && result.roles!.some((role) => role.tenant_id === requested);
  const tenant = chooseTenant(result.roles!, stillHeld ? requested : null, result.remembered_tenant_id);
  // The session's sign-in methods stay in every token of the family (rotate_refresh_token read them under the lock).
  const amr = result.amr;
  return issueTokens(ctx, app, result.user_id!, tenant, child.token, nowMs, { ...claims, ...(amr?.length ? { amr } : {}) });
}

/** Stands in for the hash of a string that cannot be a refresh token (32 bytes, as the column requires). */
const NO_TOKEN_HASH = Buffer.alloc(32);

/** POST /auth/revoke: revokes the token's family. Idempotent; 401 TOKEN_INVALID for a token this app never issued. */
export async function revokeSession(ctx: AuthContext, app: AuthenticatedApp, presented: string, origin: RequestOrigin): Promise<void> {
  const hash = hashRefreshToken(presented);
  if (!hash || !(await revokeFamilyOfToken(ctx, app, hash, origin))) throw authError('TOKEN_INVALID', 'Invalid refresh token');
}

/**
 * Revokes the family of the refresh token with this hash, if this app issued it (any token of
 * the family, rotated ones included, names it). Returns false when the app has no such token.
 */
export async function revokeFamilyOfToken(ctx: AuthContext, app: AuthenticatedApp, hash: Buffer, origin: RequestOrigin): Promise<boolean> {
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    const session = await lockRefreshSession(tx, hash, app.id);
    if (!session) return false;
    if (!session.revoked_at) {
      await revokeRefreshFamily(tx, { familyId: session.family_id, currentTokenId: session.current_token_id, now, reason: 'logout' });
      await insertAuditEvent(tx, {
        type: 'session.revoked', actor: 'app', appId: app.id, userId: session.user_id, familyId: session.family_id,
        ip: origin.ip, userAgent: origin.userAgent, now,
      });
    }
    return true;
  });
}

/** POST /auth/revoke-user: revokes every family of the user in the app; returns how many were active. */
export async function revokeUserSessions(ctx: AuthContext, app: AuthenticatedApp, userId: string, origin: RequestOrigin): Promise<number> {
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    if (!(await findMember(tx, app.id, userId))) throw authError('USER_NOT_FOUND');
    const revoked = await revokeLiveFamilies(tx, userId, app.id, now, 'revoke_user');
    await insertAuditEvent(tx, {
      type: 'user.sessions_revoked', actor: 'app', appId: app.id, userId, ip: origin.ip, userAgent: origin.userAgent,
      details: { sessions_revoked: revoked }, now,
    });
    return revoked;
  });
}

/**
 * Revokes the user's unrevoked families of one app (or all apps when appId is null) and returns
 * how many were active (the `sessions_revoked` of revoke-user: active families only). Expired
 * sessions are revoked too, without being counted, so that any refresh after this is 401
 * TOKEN_REVOKED until the user logs in again.
 */
export async function revokeLiveFamilies(tx: TransactionSql, userId: string, appId: string | null, now: Date, reason: 'revoke_user' | 'user_deleted'): Promise<number> {
  const families = await lockLiveFamiliesOfUser(tx, userId, appId);
  if (families.length === 0) return 0;
  return revokeRefreshFamilies(tx, {
    familyIds: families.map((f) => f.id),
    currentTokenIds: families.map((f) => f.current_token_id),
    now,
    reason,
  });
}

/**
 * Signs the access token of a session; `claims` are added to today's (an OAuth client's
 * client_id and scope; the session's amr), and their `aud`, a resource indicator, replaces the
 * app slug as audience.
 */
export async function issueTokens(ctx: AuthContext, app: AuthenticatedApp, userId: string, tenant: TenantChoice, refreshToken: string, nowMs: number, claims?: Record<string, unknown>): Promise<SessionTokens> {
  const { aud, ...extra } = claims ?? {};
  const accessToken = await signAccessToken(ctx.keys.signingKey(), ctx.issuer, {
    userId, appSlug: app.slug, tenantId: tenant.tenantId, roles: tenant.roles, ...(typeof aud === 'string' ? { audience: aud } : {}),
  }, nowMs, Object.keys(extra).length > 0 ? extra : undefined);
  return { access_token: accessToken, refresh_token: refreshToken, user_id: userId, expires_in: ACCESS_TOKEN_TTL_SECONDS, token_type: 'Bearer' };
}
