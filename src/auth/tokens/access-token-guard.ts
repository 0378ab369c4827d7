// Verifies this service's access tokens for a protected backend route, e.g. inference-server
// started with `--auth-app SLUG [--auth-role ROLE]`.
//
// Contract of the returned guard: given the request's Authorization header value (or undefined),
// it resolves with the token's claims when the header is `Bearer <JWT>`, the JWT is RS256 signed
// by one of the service's published keys, `iss` equals `issuer`, `aud` and `app_id` equal
// `appSlug` (a token issued for one app is refused by every other), it is not expired, and, when `role` is set, the token's
// role in its tenant is that role or a higher one (owner > admin > staff > viewer). Otherwise it
// rejects with an HttpError (src/http/errors.ts) whose status and code come from the auth error
// catalog: 401 TOKEN_INVALID (missing/malformed header, bad signature, wrong iss/aud/app_id, ...),
// 401 TOKEN_EXPIRED, or 403 INSUFFICIENT_ROLE. It never touches the database: revoking a session
// does not invalidate access tokens already issued (they are stateless and short-lived). A token it accepted before
// skips the signature check (VerifiedTokenCache) as long as its key resolves to the same object.
import { createLocalJWKSet, createRemoteJWKSet, type JSONWebKeySet, type JWTVerifyGetKey } from 'jose';
import type { Clock } from '../clock.js';
import { authError } from '../errors.js';
import { VERIFIED_TOKEN_CACHE_ENTRIES } from '../limits.js';
import { isRoleName, ROLE_NAMES, ROLE_RANK, type RoleName } from '../roles.js';
import { presentedAccessToken, verifyAccessToken, type AccessTokenClaims } from './access-token.js';
import { VerifiedTokenCache } from './verified-token-cache.js';

/** Where the guard finds the service's public keys. */
export type AccessTokenKeys =
  /** The auth service's JWKS URL (`<issuer>/.well-known/jwks.json`), fetched and cached by jose; unknown kids trigger a refetch. */
  | { jwksUrl: string | URL }
  /** A fixed key set. */
  | { jwks: JSONWebKeySet }
  /** A key resolver; in the same process as the service use `AuthService.accessTokenKeys`. */
  | { getKey: JWTVerifyGetKey };

export interface AccessTokenGuardOptions {
  /** The app slug this backend serves; tokens of other apps are rejected. */
  appSlug: string;
  /** This backend's resource identifier (RFC 8707): the app's tokens whose aud is it are accepted too. */
  resource?: string;
  /** Minimum role required in the token's tenant; undefined accepts any signed-in user of the app. */
  role?: RoleName;
  /** The auth service's issuer URL (the `iss` claim). */
  issuer: string;
  keys: AccessTokenKeys;
  /** Access tokens whose verification the guard remembers (default VERIFIED_TOKEN_CACHE_ENTRIES; 0: none). */
  cacheSize?: number;
  /** For tests; defaults to the system clock. */
  clock?: Clock;
}

export type AccessTokenGuard = (authorization: string | undefined) => Promise<AccessTokenClaims>;

export function createAccessTokenGuard(options: AccessTokenGuardOptions): AccessTokenGuard {
  if (options.role !== undefined && !isRoleName(options.role)) {
    throw new Error(`unknown role "${options.role}"; expected one of ${ROLE_NAMES.join(', ')}`);
  }
  const getKey = keyResolver(options.keys);
  const required = options.role === undefined ? 0 : ROLE_RANK[options.role];
  const cache = new VerifiedTokenCache<AccessTokenClaims>(options.cacheSize ?? VERIFIED_TOKEN_CACHE_ENTRIES);
  return async (authorization) => {
    const claims = await verifyAccessToken(presentedAccessToken(authorization), {
      getKey,
      issuer: options.issuer,
      appSlug: options.appSlug,
      ...(options.resource === undefined ? {} : { resource: options.resource }),
      nowMs: options.clock?.now(),
      cache,
    });
    if (required > 0 && !claims.roles.some((role) => ROLE_RANK[role] >= required)) {
      throw authError('INSUFFICIENT_ROLE', `This route requires the role "${options.role}" or higher`);
    }
    return claims;
  };
}

function keyResolver(keys: AccessTokenKeys): JWTVerifyGetKey {
  if ('getKey' in keys) return keys.getKey;
  if ('jwks' in keys) return createLocalJWKSet(keys.jwks);
  return createRemoteJWKSet(new URL(keys.jwksUrl));
}
