// Access tokens: RS256 JWTs valid 30 minutes, with the claims sub, app_id (the app's slug), iss,
// aud (the app's slug), iat, exp, tenant_id and roles. Signing uses node:crypto directly (its
// asynchronous form runs on the libuv thread pool, off the event loop); verifying uses jose with
// the algorithm pinned to RS256 and keys resolved only by kid, so `alg: none`, HS256, and
// `jwk`/`jku`/`x5u` headers never pick the key.
import { sign } from 'node:crypto';
import { errors, jwtVerify, type JWTHeaderParameters, type JWTVerifyGetKey } from 'jose';
import { bearerToken } from '../../http/bearer.js';
import { authError } from '../errors.js';
import { ACCESS_TOKEN_TTL_SECONDS, MAX_TOKEN_CHARS } from '../limits.js';
import { isRoleName, type RoleName } from '../roles.js';
import type { SigningKey } from './signing-key-ring.js';
import type { VerifiedToken, VerifiedTokenCache } from './verified-token-cache.js';

export interface AccessTokenClaims {
  /** User UUID. */
  sub: string;
  /** App slug. */
  app_id: string;
  iss: string;
  /** App slug, equal to app_id. */
  aud: string;
  /** Unix seconds. */
  iat: number;
  /** Unix seconds, iat + 1800. */
  exp: number;
  tenant_id: string | null;
  roles: RoleName[];
}

export interface AccessTokenSubject {
  userId: string;
  appSlug: string;
  /** The `aud` claim when not the app slug: a resource indicator (RFC 8707) the token is for. */
  audience?: string;
  tenantId: string | null;
  roles: RoleName[];
}

/**
 * Signs the token of a subject issued at `nowMs`. `extra` claims (an OAuth client's client_id
 * and scope) come after today's and never replace one of them.
 */
export function signAccessToken(key: SigningKey, issuer: string, subject: AccessTokenSubject, nowMs: number, extra?: Readonly<Record<string, unknown>>): Promise<string> {
  const iat = Math.floor(nowMs / 1000);
  const claims: AccessTokenClaims = {
    sub: subject.userId,
    app_id: subject.appSlug,
    iss: issuer,
    aud: subject.audience ?? subject.appSlug,
    iat,
    exp: iat + ACCESS_TOKEN_TTL_SECONDS,
    tenant_id: subject.tenantId,
    roles: subject.roles,
  };
  return signJwt(key, extra ? { ...extra, ...claims } : claims);
}

/** Signs a JWT's claims with RS256 under the key's header (access tokens, id_tokens). */
export function signJwt(key: SigningKey, claims: object): Promise<string> {
  const signingInput = `${key.encodedHeader}.${Buffer.from(JSON.stringify(claims)).toString('base64url')}`;
  return new Promise((resolve, reject) => {
    sign('sha256', Buffer.from(signingInput), key.privateKey, (error, signature) => {
      if (error) reject(error);
      else resolve(`${signingInput}.${signature.toString('base64url')}`);
    });
  });
}

export interface VerifyAccessTokenOptions {
  /** Resolves the public key of a JWS header (by kid); never from the token itself. */
  getKey: JWTVerifyGetKey;
  issuer: string;
  /** When given, `aud` and `app_id` must both equal this app slug, as a verifying backend checks. */
  appSlug?: string;
  /**
   * A resource server's identifier (RFC 8707): a token of the app (`app_id` = appSlug) whose
   * `aud` is this resource is accepted too. Without it, `aud` must equal `app_id`.
   */
  resource?: string;
  /** Verification instant (ms); defaults to the system clock. */
  nowMs?: number;
  /** Tokens verified before with these same options (issuer, appSlug); see VerifiedTokenCache. */
  cache?: VerifiedTokenCache<AccessTokenClaims>;
}

/** Allowed clock difference between the issuing and the verifying machine, in seconds. */
const CLOCK_TOLERANCE_SECONDS = 5;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Verifies a compact JWS and returns its claims (a frozen object). Throws HttpError 401
 * TOKEN_EXPIRED when the signature is good but `exp` has passed, and 401 TOKEN_INVALID for
 * everything else (bad signature, wrong algorithm, unknown kid, wrong iss/aud/app_id, not yet
 * valid, bad claims). With a cache, a token that passed before skips the signature and the
 * time-independent checks, provided its key still resolves to the same key object.
 */
export async function verifyAccessToken(token: string, options: VerifyAccessTokenOptions): Promise<AccessTokenClaims> {
  if (token.length > MAX_TOKEN_CHARS) throw authError('TOKEN_INVALID', 'Malformed access token');
  const nowMs = options.nowMs ?? Date.now();
  const cached = options.cache?.get(token);
  if (cached) {
    if (withinLifetime(cached.claims, nowMs) && await resolvesTo(options.getKey, cached, token)) return cached.claims;
    // Stale (its key no longer resolves to the same object) or outside its lifetime: verified in
    // full below, which refuses it with the right error or stores it again.
    options.cache!.delete(token);
  }
  let key: unknown;
  let verified: { payload: Record<string, unknown>; protectedHeader: JWTHeaderParameters };
  try {
    verified = await jwtVerify(token, async (header, input) => (key = await options.getKey(header, input)), {
      algorithms: ['RS256'],
      issuer: options.issuer,
      audience: options.appSlug === undefined ? undefined : options.resource === undefined ? options.appSlug : [options.appSlug, options.resource],
      requiredClaims: ['sub', 'iat', 'exp', 'aud', 'iss'],
      currentDate: new Date(nowMs),
      clockTolerance: CLOCK_TOLERANCE_SECONDS,
    });
  } catch (error) {
    if (error instanceof errors.JWTExpired) throw authError('TOKEN_EXPIRED');
    throw authError('TOKEN_INVALID', 'Invalid access token', { cause: error });
  }
  const claims = verified.payload as Partial<AccessTokenClaims>;
  const wellFormed = typeof claims.sub === 'string' && UUID.test(claims.sub)
    && typeof claims.app_id === 'string' && (claims.aud === claims.app_id || (options.resource !== undefined && claims.aud === options.resource))
    && (options.appSlug === undefined || claims.app_id === options.appSlug)
    && typeof claims.iat === 'number' && claims.iat <= nowMs / 1000 + CLOCK_TOLERANCE_SECONDS
    && (claims.tenant_id === null || (typeof claims.tenant_id === 'string' && UUID.test(claims.tenant_id)))
    && Array.isArray(claims.roles) && claims.roles.every(isRoleName);
  if (!wellFormed) throw authError('TOKEN_INVALID', 'Invalid access token');
  Object.freeze(claims.roles);
  const frozen = Object.freeze(claims) as AccessTokenClaims;
  options.cache?.set(token, { header: verified.protectedHeader, key, claims: frozen });
  return frozen;
}

/** Whether the resolver still gives the key object that verified a cached token. */
async function resolvesTo(getKey: JWTVerifyGetKey, cached: VerifiedToken<AccessTokenClaims>, token: string): Promise<boolean> {
  const [encodedHeader, payload, signature] = token.split('.');
  try {
    return (await getKey(cached.header, { protected: encodedHeader, payload: payload!, signature: signature! })) === cached.key;
  } catch {
    return false;
  }
}

/**
 * The checks of a verified token that depend on the time, as the full verification makes them
 * (jose's exp and nbf, in whole seconds with the tolerance; ours on iat).
 */
function withinLifetime(claims: AccessTokenClaims & { nbf?: number }, nowMs: number): boolean {
  const now = Math.floor(nowMs / 1000);
  return claims.exp > now - CLOCK_TOLERANCE_SECONDS
    && (claims.nbf === undefined || claims.nbf <= now + CLOCK_TOLERANCE_SECONDS)
    && claims.iat <= nowMs / 1000 + CLOCK_TOLERANCE_SECONDS;
}

const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** Whether a string is shaped like a compact JWS (three base64url parts), within the length cap. */
export function isCompactJws(token: string): boolean {
  return token.length <= MAX_TOKEN_CHARS && COMPACT_JWS.test(token);
}

/**
 * The access token of an `Authorization: Bearer <token>` header. 401 TOKEN_INVALID when the
 * header is absent or not Bearer (src/http/bearer.ts), or when the token is not shaped like a
 * compact JWS.
 */
export function presentedAccessToken(authorization: string | undefined): string {
  const token = bearerToken(authorization);
  if (token === null) throw authError('TOKEN_INVALID', 'Send the access token as "Authorization: Bearer <token>"');
  if (!isCompactJws(token)) throw authError('TOKEN_INVALID', 'Invalid access token');
  return token;
}
