// The error catalog of the auth service: every code it answers with, its HTTP status and the
// default client message. Handlers throw `authError(code)`; the route wrapper (respond.ts) turns
// it into `{"error": {"code", "message"}}`. Causes are logged, never returned.
import { HttpError } from '../http/errors.js';

export const AUTH_ERRORS = {
  // The service's core vocabulary: token, user, tenant and validation failures.
  TOKEN_INVALID: { status: 401, message: 'The token or the app credentials are invalid' },
  TOKEN_EXPIRED: { status: 401, message: 'The access token has expired' },
  TOKEN_REVOKED: { status: 401, message: 'The refresh token was revoked; log in again' },
  TOKEN_REUSE: { status: 401, message: 'The refresh token was already used; the whole session is revoked' },
  USER_DELETED: { status: 403, message: 'The user is deleted' },
  USER_NOT_FOUND: { status: 404, message: 'The user does not exist in this app' },
  TENANT_NOT_FOUND: { status: 404, message: 'The tenant does not exist in this app' },
  VALIDATION_ERROR: { status: 400, message: 'The request body is invalid' },
  // Login, limits, admin, sessions, passkeys and the other routes around them.
  OTP_INVALID: { status: 401, message: 'The code is wrong, expired or used up' },
  RATE_LIMITED: { status: 429, message: 'Too many requests; retry later' },
  OTP_DELIVERY_FAILED: { status: 502, message: 'The code could not be delivered; retry later' },
  INSUFFICIENT_ROLE: { status: 403, message: 'The token does not carry the required role' },
  ADMIN_KEY_INVALID: { status: 401, message: 'The X-Admin-Key header is missing or wrong' },
  APP_NOT_FOUND: { status: 404, message: 'The app does not exist' },
  APP_SLUG_TAKEN: { status: 409, message: 'An app with this slug already exists' },
  SESSION_NOT_FOUND: { status: 404, message: 'The user has no such session' },
  PASSKEY_INVALID: { status: 401, message: 'The passkey response could not be verified' },
  PASSKEY_CREDENTIAL_ID_TOO_LONG: { status: 400, message: 'The credential id in the authenticator data is longer than 1023 bytes' },
  PASSKEY_CREDENTIAL_ID_MISMATCH: { status: 400, message: 'The credential id in the authenticator data differs from the response\'s id' },
  PASSKEY_NOT_FOUND: { status: 404, message: 'The user has no such passkey' },
  PASSKEYS_NOT_CONFIGURED: { status: 409, message: 'The app has no relying party set for passkeys' },
  SMS_COUNTRY_NOT_ALLOWED: { status: 403, message: 'The app does not send codes to numbers of this country' },
  SMS_COUNTRY_THROTTLED: { status: 429, message: 'Codes to this country are paused for the rest of the hour; retry later' },
  SMS_DAILY_CAP_REACHED: { status: 429, message: 'The app has sent its SMS codes for today; retry tomorrow' },
  SMS_VELOCITY_EXCEEDED: { status: 429, message: 'Too many codes to numbers like this one; retry later' },
  WEBHOOK_NOT_FOUND: { status: 404, message: 'The app has no such webhook endpoint' },
  WEBHOOK_DELIVERY_NOT_FOUND: { status: 404, message: 'The app has no such webhook delivery' },
  API_KEY_NOT_FOUND: { status: 404, message: 'The app has no such API key' },
  API_KEY_REVOKED: { status: 409, message: 'The API key is revoked; create a new one' },
  API_KEY_INVALID: { status: 401, message: 'The API key is unknown, revoked or expired' },
  UPSTREAM_PROVIDER_NOT_FOUND: { status: 404, message: 'The app has no such identity provider' },
  UPSTREAM_CALLBACK_INVALID: { status: 401, message: 'The sign-in with the identity provider could not be verified; start it again' },
  UPSTREAM_UNAVAILABLE: { status: 502, message: 'The identity provider could not be reached or answered wrongly; retry later' },
  IDENTITY_NOT_FOUND: { status: 404, message: 'The user has no such linked identity' },
  IDENTITY_LINKED_TO_ANOTHER_USER: { status: 409, message: 'This identity is already linked to another user' },
  LAST_SIGN_IN_METHOD: { status: 409, message: 'This is the user\'s last way to sign in; add another first' },
  INVITATION_NOT_FOUND: { status: 404, message: 'The tenant has no such invitation, or the token is unknown' },
  INVITATION_PENDING: { status: 409, message: 'This address already has a pending invitation to the tenant' },
  INVITATION_NOT_PENDING: { status: 409, message: 'The invitation was already accepted, revoked or expired' },
  INVITATION_EXPIRED: { status: 410, message: 'The invitation has expired; ask for a new one' },
  INVITATION_FOR_ANOTHER_ADDRESS: { status: 403, message: 'The invitation is for another address; sign in as the invited address' },
  INVITATION_DELIVERY_FAILED: { status: 502, message: 'The invitation could not be delivered; retry later' },
  SECOND_FACTOR_INVALID: { status: 401, message: 'The second-factor code is wrong, reused, or the challenge is expired or used up' },
  SECOND_FACTOR_ALREADY_ENROLLED: { status: 409, message: 'The user already has a confirmed TOTP factor; remove it first' },
  SECOND_FACTOR_NOT_ENROLLED: { status: 404, message: 'The user has no such TOTP factor' },
  TENANT_SSO_EXISTS: { status: 409, message: 'The tenant already has an identity provider' },
  DOMAIN_NOT_FOUND: { status: 404, message: 'The tenant has no such domain' },
  DOMAIN_CLAIMED: { status: 409, message: 'Another tenant of the app has verified this domain' },
  DOMAIN_NOT_VERIFIED: { status: 409, message: 'The DNS TXT record that proves the domain was not found; add it and retry' },
  DNS_UNAVAILABLE: { status: 502, message: 'The DNS lookup failed; retry later' },
  SSO_REQUIRED: { status: 403, message: 'This address belongs to an organisation that signs in with its own identity provider' },
  // The OAuth token endpoints (RFC 7009 revocation, RFC 7662 introspection); see OAUTH_ERROR_NAMES.
  UNSUPPORTED_TOKEN_TYPE: { status: 400, message: 'Access tokens are not revocable; revoke the refresh token of the session' },
  UNAUTHORIZED_CLIENT: { status: 400, message: 'The token was issued to another client' },
  // The provider (src/auth/provider): RFC 6749 section 5.2 and OpenID Connect Core names, sent lower-case on its endpoints.
  INVALID_GRANT: { status: 400, message: 'The authorization code or refresh token is invalid, expired, used or issued to another client' },
  INVALID_SCOPE: { status: 400, message: 'The scope asked for is unknown or not allowed for this client' },
  UNSUPPORTED_GRANT_TYPE: { status: 400, message: 'The grant type is not supported or not allowed for this client' },
  INVALID_TOKEN: { status: 401, message: 'The initial access token is missing or wrong' },
  INVALID_TARGET: { status: 400, message: 'The resource asked for is not one this app\'s tokens may be for (RFC 8707)' },
  INSUFFICIENT_SCOPE: { status: 403, message: 'The access token was not granted the scope this endpoint needs' },
  INVALID_CLIENT_METADATA: { status: 400, message: 'The client metadata is invalid' },
  INVALID_REDIRECT_URI: { status: 400, message: 'A redirect URI is invalid' },
  CONSENT_NOT_FOUND: { status: 404, message: 'The user has given this client no consent' },
  OAUTH_CLIENT_NOT_FOUND: { status: 404, message: 'The app has no such OAuth client' },
  // Raised by the shared HTTP layer (src/http) before or while reading the body.
  MALFORMED_JSON: { status: 400, message: 'The request body is not valid JSON' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'Send the body as application/json' },
  BODY_TOO_LARGE: { status: 413, message: 'The request body is too large' },
  NOT_FOUND: { status: 404, message: 'No such route' },
  METHOD_NOT_ALLOWED: { status: 405, message: 'Method not allowed on this route' },
  INTERNAL: { status: 500, message: 'Internal server error' },
} as const satisfies Record<string, { status: number; message: string }>;

export type AuthErrorCode = keyof typeof AUTH_ERRORS;

/** An HttpError with a catalog code; `message` defaults to the catalog's. */
export function authError(code: AuthErrorCode, message?: string, options?: { cause?: unknown; details?: Record<string, unknown> }): HttpError {
  const entry = AUTH_ERRORS[code];
  return new HttpError(entry.status, code, message ?? entry.message, options?.details ?? {}, { cause: options?.cause });
}

/**
 * Normalises anything thrown into a catalog error. HttpErrors of the HTTP layer keep their
 * status and code (they are in the catalog); an HttpError with a code outside the catalog, and
 * anything else (a PostgresError, a bug), becomes 500 INTERNAL so that no SQL text or stack
 * reaches a client.
 */
export function toAuthError(thrown: unknown): HttpError {
  if (thrown instanceof HttpError && thrown.code in AUTH_ERRORS && thrown.status === AUTH_ERRORS[thrown.code as AuthErrorCode].status) {
    return thrown;
  }
  return authError('INTERNAL', undefined, { cause: thrown });
}

/** The body of every auth error response. */
export function authErrorBody(error: HttpError): { error: { code: string; message: string } } {
  return { error: { code: error.code, message: error.message } };
}

/**
 * The RFC 6749 (section 5.2) `error` value of each catalog code on the OAuth token endpoints,
 * which answer `{"error": "<name>", "error_description": "<message>"}` as RFC 7009 and RFC 7662
 * require. Wrong client credentials are `invalid_client`, anything wrong with the request is
 * `invalid_request`; a code without an RFC name keeps its catalog status and is sent lower-case.
 */
const OAUTH_ERROR_NAMES: Partial<Record<AuthErrorCode, string>> = {
  TOKEN_INVALID: 'invalid_client',
  VALIDATION_ERROR: 'invalid_request',
  MALFORMED_JSON: 'invalid_request',
  UNSUPPORTED_MEDIA_TYPE: 'invalid_request',
  BODY_TOO_LARGE: 'invalid_request',
  UNSUPPORTED_TOKEN_TYPE: 'unsupported_token_type',
  UNAUTHORIZED_CLIENT: 'unauthorized_client',
  INTERNAL: 'server_error',
};

/** Status and body of a catalog error on an OAuth endpoint (RFC 6749 section 5.2). */
export function oauthErrorResponse(error: HttpError): { status: number; body: { error: string; error_description: string } } {
  const name = OAUTH_ERROR_NAMES[error.code as AuthErrorCode] ?? error.code.toLowerCase();
  // RFC 6749: a request refused for its form (even 413/415 at the HTTP level) is 400 invalid_request.
  const status = name === 'invalid_request' ? 400 : error.status;
  return { status, body: { error: name, error_description: error.message } };
}

/** ErrorFormatter for startHttpServer: errors raised outside auth handlers (404, 405, 413). */
export function formatAuthError(error: HttpError): { status: number; body: unknown } {
  const normalised = toAuthError(error);
  return { status: normalised.status, body: authErrorBody(normalised) };
}
