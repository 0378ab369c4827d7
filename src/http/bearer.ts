// The one parser of `Authorization: Bearer <token>` headers (RFC 6750 section 2.1).

/** The scheme, case-insensitive, then one or more spaces, one token of non-space characters, optional trailing spaces. */
const BEARER = /^Bearer +(\S+) *$/i;

/**
 * The token of an `Authorization` header value, or null when the header is absent or is not
 * `Bearer <token>` (another scheme, no token, two tokens, tabs as separators). The token's own
 * syntax is the caller's to check.
 */
export function bearerToken(authorization: string | undefined): string | null {
  if (authorization === undefined) return null;
  return BEARER.exec(authorization)?.[1] ?? null;
}
