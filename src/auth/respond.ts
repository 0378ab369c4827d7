// How an auth route runs: a guard authenticates the request, the handler does the work, and
// every outcome, errors included, is answered here in the auth format
// (`{"error": {"code", "message"}}`) with `Cache-Control: no-store`. Handlers therefore never
// depend on the host server's ErrorFormatter: the same routes answer the same way in
// auth-server and when mounted in inference-server.
import type { Static, TSchema } from '@sinclair/typebox';
import type { CryptoKey } from 'jose';
import type { HttpError } from '../http/errors.js';
import type { HttpRequest, HttpResult } from '../http/request.js';
import type { Method, Route } from '../http/router.js';
import { compileBody } from '../http/validation.js';
import { requestOrigin, type RequestOrigin } from './audit.js';
import type { AuthContext } from './context.js';
import { authError, authErrorBody, oauthErrorResponse, toAuthError } from './errors.js';
import { MAX_BODY_BYTES } from './limits.js';
import { parseOAuthTokenRequest, type OAuthTokenRequest } from './oauth-request.js';
import { recordRejectedAdminKey } from './service/admin.js';
import type { RateLimitRule } from './rate-limit-rules.js';
import { countRateLimitHits, enforceRateLimits, refuseIfBlocked } from './service/rate-limit-enforcement.js';
import { authenticateApp, checkAdminKey, presentedCredentials, type AuthenticatedApp, type PresentedCredentials } from './service/credentials.js';
import { presentedAccessToken, verifyAccessToken, type AccessTokenClaims } from './tokens/access-token.js';

/** Token and credential responses must not be stored by browsers or proxies. */
export const NO_STORE: Readonly<Record<string, string>> = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };

/** Authenticates a request and produces the handler's input; throws catalog errors. */
export interface Guard<I> {
  readonly name: string;
  /** `oauth`: errors are answered in the RFC 6749 shape (oauthErrorResponse) instead of the catalog's. */
  readonly errorFormat?: 'oauth';
  authenticate(ctx: AuthContext, req: HttpRequest): Promise<I>;
}

export type AuthHandler<I> = (ctx: AuthContext, input: I, req: HttpRequest) => Promise<HttpResult>;

/** No credentials (JWKS, discovery). */
export const publicAccess: Guard<Record<string, never>> = {
  name: 'public',
  authenticate: async () => ({}),
};

/**
 * `X-Admin-Key` equal to the configured admin key (constant-time). The body, if any, is the
 * handler's to parse. A wrong key is recorded and counted against the client's IP (rule
 * admin_key_failure_ip); an IP at that limit is 429 before its key is compared.
 */
export const adminKey: Guard<Record<string, never>> = {
  name: 'admin-key',
  authenticate: async (ctx, req) => {
    const origin = requestOrigin(ctx, req);
    // An IP that sent too many wrong keys is refused before its key is even compared.
    await refuseIfBlocked(ctx, 'admin_key_failure_ip', origin.ip);
    try {
      checkAdminKey(ctx.adminKeyHash, req.headers['x-admin-key']);
    } catch (error) {
      await recordRejectedAdminKey(ctx, origin, req);
      // The answer is the 401 either way; the count decides the next requests.
      await countRateLimitHits(ctx, [{ rule: 'admin_key_failure_ip', subject: origin.ip }]);
      throw error;
    }
    return {};
  },
};

/** `Authorization: Bearer <access token>` of any app, verified against this service's keys. */
export const bearer: Guard<{ claims: AccessTokenClaims }> = {
  name: 'bearer',
  authenticate: async (ctx, req) => ({
    claims: await verifyAccessToken(presentedAccessToken(req.headers.authorization), {
      getKey: (header) => verificationKey(ctx, header.kid),
      issuer: ctx.issuer,
      nowMs: ctx.clock.now(),
      cache: ctx.verifiedTokens,
    }),
  }),
};

/** A rate-limit rule and the subject it counts, named from the authenticated request. */
export interface RateLimitCount<I> {
  readonly rule: RateLimitRule;
  subject(input: I, origin: RequestOrigin): string;
}

/** Counts the rule per client IP (the audit trail's IP: the peer, or X-Forwarded-For with trustProxy). */
export function perClientIp(rule: RateLimitRule): RateLimitCount<unknown> {
  return { rule, subject: (_, origin) => origin.ip };
}

/**
 * Runs `guard` (400/415 and 401 first), then counts one hit of each rule for its subject, all in
 * one statement: 429 RATE_LIMITED with Retry-After when any is over its limit, before the handler
 * runs. Written on the route's line, so the route table shows every route's limits.
 */
export function limited<I>(guard: Guard<I>, ...counts: RateLimitCount<NoInfer<I>>[]): Guard<I> {
  return {
    name: `${guard.name} (${counts.map((count) => count.rule).join(', ')})`,
    ...(guard.errorFormat ? { errorFormat: guard.errorFormat } : {}),
    authenticate: async (ctx, req) => {
      const input = await guard.authenticate(ctx, req);
      const origin = requestOrigin(ctx, req);
      await enforceRateLimits(ctx, counts.map((count) => ({ rule: count.rule, subject: count.subject(input, origin) })));
      return input;
    },
  };
}

/**
 * app_id and app_secret in the JSON body. The whole body is validated against `schema` (which
 * includes the credentials) first: 400/415 before 401.
 */
export function appSecret<S extends TSchema>(schema: S): Guard<{ app: AuthenticatedApp; body: Static<S> }> {
  const validator = compileBody(schema);
  return {
    name: 'app-secret',
    authenticate: async (ctx, req) => {
      const body = validator.parse(req) as Static<S> & { app_id: string; app_secret: string };
      return { app: await authenticateApp(ctx.sql, body.app_id, body.app_secret), body };
    },
  };
}

/**
 * app_id and app_secret in the JSON body, checked by the handler's own statement instead of a
 * query of their own: the guard validates the body and hashes the secret, and the handler must
 * pass `credentials` to a query that verifies them before it has any effect (for
 * /auth/refresh, rotate_refresh_token does, so the whole refresh is one round trip). The
 * answer for wrong credentials is the same 401 TOKEN_INVALID as appSecret's.
 */
export function appSecretInQuery<S extends TSchema>(schema: S): Guard<{ credentials: PresentedCredentials; body: Static<S> }> {
  const validator = compileBody(schema);
  return {
    name: 'app-secret-in-query',
    authenticate: async (_ctx, req) => {
      const body = validator.parse(req) as Static<S> & { app_id: string; app_secret: string };
      return { credentials: presentedCredentials(body.app_id, body.app_secret), body };
    },
  };
}

/**
 * The OAuth client of RFC 6749 section 2.3.1, i.e. the app, authenticated by Basic credentials
 * or client_id and client_secret in the form body; the form's token parameters. Errors are
 * answered as RFC 6749 section 5.2 says (`invalid_client` 401 with WWW-Authenticate,
 * `invalid_request` 400, ...).
 */
export const oauthClient: Guard<{ app: AuthenticatedApp; request: OAuthTokenRequest }> = {
  name: 'oauth-client',
  errorFormat: 'oauth',
  authenticate: async (ctx, req) => {
    const request = parseOAuthTokenRequest(req);
    return { app: await authenticateApp(ctx.sql, request.clientId, request.clientSecret), request };
  },
};

/** One line of the route table: method, path, guard, handler. */
export function authRoute<I>(ctx: AuthContext, method: Method, path: string, guard: Guard<I>, handler: AuthHandler<I>): Route {
  return {
    method,
    path,
    handler: async (req) => {
      try {
        if (req.body.length > MAX_BODY_BYTES) throw authError('BODY_TOO_LARGE', `The request body exceeds ${MAX_BODY_BYTES} bytes`);
        const result = await handler(ctx, await guard.authenticate(ctx, req), req);
        return { ...result, headers: { ...NO_STORE, ...result.headers } };
      } catch (thrown) {
        return errorResult(ctx, thrown, req, guard.errorFormat);
      }
    },
  };
}

function errorResult(ctx: AuthContext, thrown: unknown, req: HttpRequest, format?: 'oauth'): HttpResult {
  const error: HttpError = toAuthError(thrown);
  if (error.status >= 500) ctx.logError(error, { method: req.method, path: req.path });
  const headers: Record<string, string> = { ...NO_STORE };
  if (error.status === 429) {
    // A rate-limit rule or SMS defence knows when its window ends; the OTP resend throttle waits one interval.
    const retryAfter = error.details.retryAfterSeconds;
    headers['Retry-After'] = String(typeof retryAfter === 'number' ? retryAfter : Math.ceil(ctx.otp.limits.resendIntervalMs / 1000));
  }
  if (format === 'oauth') {
    const { status, body } = oauthErrorResponse(error);
    // RFC 6749 section 5.2: a 401 invalid_client names the scheme the client may authenticate with.
    if (status === 401) headers['WWW-Authenticate'] = 'Basic realm="auth-server", charset="UTF-8"';
    return { status, headers, body };
  }
  return { status: error.status, headers, body: authErrorBody(error) };
}

async function verificationKey(ctx: AuthContext, kid: unknown): Promise<CryptoKey> {
  const key = await ctx.keys.verificationKey(kid);
  if (!key) throw authError('TOKEN_INVALID', 'Unknown signing key');
  return key;
}
