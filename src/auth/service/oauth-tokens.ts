// Token revocation (RFC 7009) and introspection (RFC 7662) for an authenticated app. The two
// kinds of token are told apart by their shape, not by token_type_hint (the hint only saves a
// lookup, and RFC 7009 says to search every type when it is wrong): refresh tokens are opaque
// `rt_...` strings, access tokens compact JWS. Access tokens are stateless (verified without the
// database: a backend checks the signature and claims alone), so they cannot be revoked one by one: revoking one is the RFC's
// `unsupported_token_type`, and revoking its session's refresh token is how a client logs out.
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { findRefreshTokenStatus } from '../queries/refresh-tokens.js';
import { isCompactJws, verifyAccessToken, type AccessTokenClaims } from '../tokens/access-token.js';
import { hashRefreshToken } from '../tokens/refresh-token.js';
import type { AuthenticatedApp } from './credentials.js';
import { revokeFamilyOfToken } from './sessions.js';

/** An RFC 7662 answer: `{active: false}` alone, or the token's metadata. */
export type Introspection = { active: false } | ({ active: true } & Record<string, unknown>);

/**
 * RFC 7009: revokes the session of a refresh token this app was issued (its whole family, as
 * POST /auth/revoke). An unknown, malformed, expired or already revoked token is no error (RFC
 * 7009 section 2.2: the client's goal is reached). A live token of another app is 400
 * UNAUTHORIZED_CLIENT (section 2.1: the request is refused, the token stays valid), as Ory's
 * fosite answers; a live access token of this app is 400 UNSUPPORTED_TOKEN_TYPE (section 2.2.1).
 */
export async function revokeToken(ctx: AuthContext, app: AuthenticatedApp, token: string, origin: RequestOrigin): Promise<void> {
  const hash = hashRefreshToken(token);
  if (hash) {
    if (await revokeFamilyOfToken(ctx, app, hash, origin)) return;
    const other = await findRefreshTokenStatus(ctx.sql, hash);
    if (other && isLive(other, ctx.clock.now())) throw authError('UNAUTHORIZED_CLIENT');
    return;
  }
  const claims = await verifiedAccessToken(ctx, token, undefined);
  if (!claims) return;
  throw authError(claims.app_id === app.slug ? 'UNSUPPORTED_TOKEN_TYPE' : 'UNAUTHORIZED_CLIENT');
}

/**
 * RFC 7662: the metadata of a token this app was issued and that is active now, else
 * `{active: false}` and nothing more (expired, revoked, rotated, of a deleted user, of another
 * app, unknown or malformed alike: section 2.2 forbids telling them apart).
 */
export async function introspectToken(ctx: AuthContext, app: AuthenticatedApp, token: string): Promise<Introspection> {
  const nowMs = ctx.clock.now();
  const hash = hashRefreshToken(token);
  if (hash) {
    const status = await findRefreshTokenStatus(ctx.sql, hash);
    if (!status || status.app_id !== app.id || !isLive(status, nowMs)) return { active: false };
    return {
      active: true,
      token_type: 'refresh_token',
      client_id: app.id,
      sub: status.user_id,
      iss: ctx.issuer,
      iat: Math.floor(status.issued_at.getTime() / 1000),
      exp: Math.floor(status.expires_at.getTime() / 1000),
    };
  }
  const claims = await verifiedAccessToken(ctx, token, app.slug);
  if (!claims) return { active: false };
  return {
    active: true,
    token_type: 'Bearer',
    client_id: app.id,
    sub: claims.sub,
    aud: claims.aud,
    iss: claims.iss,
    iat: claims.iat,
    exp: claims.exp,
    app_id: claims.app_id,
    tenant_id: claims.tenant_id,
    roles: claims.roles,
  };
}

/** A refresh token that would rotate now: the family's live token, unexpired, session live, user not deleted. */
function isLive(status: { is_current: boolean; family_revoked_at: Date | null; expires_at: Date; family_expires_at: Date; user_deleted_at: Date | null }, nowMs: number): boolean {
  return status.is_current && status.family_revoked_at === null && status.user_deleted_at === null
    && status.expires_at.getTime() > nowMs && status.family_expires_at.getTime() > nowMs;
}

/**
 * The claims of an access token signed by this service and valid now (for `appSlug` when
 * given), or null for anything else. The /auth/me cache is not used: its entries were verified
 * without an audience.
 */
async function verifiedAccessToken(ctx: AuthContext, token: string, appSlug: string | undefined): Promise<AccessTokenClaims | null> {
  if (!isCompactJws(token)) return null;
  try {
    return await verifyAccessToken(token, {
      getKey: ctx.keys.resolveKey,
      issuer: ctx.issuer,
      appSlug,
      nowMs: ctx.clock.now(),
    });
  } catch {
    return null;
  }
}
