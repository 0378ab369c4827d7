// POST /oauth/revoke (RFC 7009) and POST /oauth/introspect (RFC 7662): the standard endpoints
// that gateways and resource servers already speak, authenticated as the app (oauthClient).
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import type { OAuthTokenRequest } from '../oauth-request.js';
import type { AuthenticatedApp } from '../service/credentials.js';
import { introspectToken, revokeToken } from '../service/oauth-tokens.js';

type ClientInput = { app: AuthenticatedApp; request: OAuthTokenRequest };

/** 200 with an empty body, whether or not the token was live (RFC 7009 section 2.2). */
export async function handleTokenRevocation(ctx: AuthContext, { app, request }: ClientInput, req: HttpRequest): Promise<HttpResult> {
  await revokeToken(ctx, app, request.token, requestOrigin(ctx, req));
  return { status: 200, text: '' };
}

/** 200 `{"active": false}` or `{"active": true, ...metadata}` (RFC 7662 section 2.2). */
export async function handleTokenIntrospection(ctx: AuthContext, { app, request }: ClientInput): Promise<HttpResult> {
  return { body: await introspectToken(ctx, app, request.token) };
}
