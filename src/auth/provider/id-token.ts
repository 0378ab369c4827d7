// The id_token of OpenID Connect Core section 2, signed RS256 by the same key ring as access
// tokens (so the same JWKS verifies it): sub, aud (the client), nonce, auth_time, amr (RFC 8176
// values of the way the user signed in), at_hash (section 3.1.3.6: the left half of the
// access token's SHA-256, base64url), sid (the browser session a logout ends).
import { createHash } from 'node:crypto';
import { errors, jwtVerify } from 'jose';
import type { AuthContext } from '../context.js';
import { ACCESS_TOKEN_TTL_SECONDS } from '../limits.js';
import { signJwt } from '../tokens/access-token.js';
import type { UserRow } from '../queries/users.js';

export interface IdTokenSubject {
  userId: string;
  clientId: string;
  nonce: string | null;
  authTime: Date;
  amr: string[];
  browserSessionId: string | null;
  accessToken: string;
  scopes: string[];
  user: UserRow;
}

export function signIdToken(ctx: AuthContext, subject: IdTokenSubject, nowMs: number): Promise<string> {
  const iat = Math.floor(nowMs / 1000);
  const digest = createHash('sha256').update(subject.accessToken, 'ascii').digest();
  return signJwt(ctx.keys.signingKey(), {
    iss: ctx.issuer,
    sub: subject.userId,
    aud: subject.clientId,
    iat,
    exp: iat + ACCESS_TOKEN_TTL_SECONDS,
    auth_time: Math.floor(subject.authTime.getTime() / 1000),
    ...(subject.nonce === null ? {} : { nonce: subject.nonce }),
    amr: subject.amr,
    at_hash: digest.subarray(0, digest.length / 2).toString('base64url'),
    ...(subject.browserSessionId === null ? {} : { sid: subject.browserSessionId }),
    ...userClaims(subject.user, subject.scopes),
  });
}

/** The claims of the user that the scopes release (OpenID Connect Core section 5.4). */
export function userClaims(user: UserRow, scopes: readonly string[]): Record<string, unknown> {
  const claims: Record<string, unknown> = {};
  if (scopes.includes('email') && user.email !== null) {
    claims.email = user.email;
    // The address was proved by a code sent to it (the only way a user gets one).
    claims.email_verified = true;
  }
  if (scopes.includes('phone') && user.phone !== null) {
    claims.phone_number = user.phone;
    claims.phone_number_verified = true;
  }
  return claims;
}

/**
 * The claims of an id_token this service signed, expired or not (a logout's id_token_hint is
 * often old), or null when its signature, algorithm or issuer is wrong.
 */
export async function verifiedIdTokenHint(ctx: AuthContext, token: string): Promise<Record<string, unknown> | null> {
  try {
    const { payload } = await jwtVerify(token, ctx.keys.resolveKey, { algorithms: ['RS256'], issuer: ctx.issuer, currentDate: new Date(ctx.clock.now()) });
    return payload;
  } catch (error) {
    // jose checks the time claims after the signature and issuer: an expired token is genuine.
    if (error instanceof errors.JWTExpired) return error.payload;
    return null;
  }
}
