// The provider's routes: discovery, the authorization and token endpoints, the sign-in page's
// forms, userinfo, logout, and the admin API of an app's OAuth clients.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { CreateOAuthClientBody } from '../schemas.js';
import type { AccessTokenClaims } from '../tokens/access-token.js';
import { authorize, signInCode, signInEmail } from './authorize.js';
import { clientJson, createClient, deleteClient, getClient, listClients, type ClientRegistration } from './clients.js';
import { endSession } from './logout.js';
import { GRANT_TYPES, STANDARD_SCOPES } from './scopes.js';
import { exchangeToken, type TokenRequest } from './token.js';
import { userinfo } from './userinfo.js';

type NoInput = Record<string, never>;
const createClientBody = compileBody(CreateOAuthClientBody);

/**
 * The provider's part of the discovery documents (OpenID Connect Discovery 1.0 and RFC 8414 name
 * the same fields): /.well-known/openid-configuration and /.well-known/oauth-authorization-server.
 */
export function providerMetadata(issuer: string): Record<string, unknown> {
  return {
    authorization_endpoint: `${issuer}/oauth/authorize`,
    token_endpoint: `${issuer}/oauth/token`,
    userinfo_endpoint: `${issuer}/oauth/userinfo`,
    end_session_endpoint: `${issuer}/oauth/logout`,
    scopes_supported: [...STANDARD_SCOPES],
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: [...GRANT_TYPES],
    subject_types_supported: ['public'],
    token_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post', 'private_key_jwt', 'none'],
    token_endpoint_auth_signing_alg_values_supported: ['RS256', 'PS256', 'ES256', 'EdDSA'],
    code_challenge_methods_supported: ['S256'],
    authorization_response_iss_parameter_supported: true,
    prompt_values_supported: ['none', 'login', 'consent', 'select_account'],
    claims_supported: ['sub', 'iss', 'aud', 'exp', 'iat', 'auth_time', 'nonce', 'amr', 'at_hash', 'sid', 'email', 'email_verified', 'phone_number', 'phone_number_verified'],
    request_parameter_supported: false,
    request_uri_parameter_supported: false,
  };
}

/** GET /oauth/authorize: a redirect to the client (code or error), the sign-in page, or an error page. */
export function handleAuthorize(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return authorize(ctx, req);
}

/** POST /oauth/sign-in/email (form): the page asking for the code, or the address form with an error. */
export function handleSignInEmail(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return signInEmail(ctx, req);
}

/** POST /oauth/sign-in/code (form): 303 to the client with a code, or the code form with an error. */
export function handleSignInCode(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return signInCode(ctx, req);
}

/** POST /oauth/token (form) → 200 `{access_token, token_type, expires_in, scope, refresh_token?, id_token?}`. */
export async function handleToken(ctx: AuthContext, input: TokenRequest, req: HttpRequest): Promise<HttpResult> {
  return { body: await exchangeToken(ctx, input, req) };
}

/** GET|POST /oauth/userinfo with a bearer access token granted openid → 200 `{sub, ...}`. */
export function handleUserinfo(ctx: AuthContext, { claims }: { claims: AccessTokenClaims }): Promise<HttpResult> {
  return userinfo(ctx, claims);
}

/** GET /oauth/logout: 303 to the registered post_logout_redirect_uri, or the signed-out page. */
export function handleEndSession(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return endSession(ctx, req);
}

/** POST /admin/apps/:app_id/oauth-clients → 201 the client, with `client_secret` once for a secret client. */
export async function handleCreateClient(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const body = createClientBody.parse(req) as ClientRegistration;
  const { client, secret } = await createClient(ctx, req.params.app_id!, body, requestOrigin(ctx, req));
  return { status: 201, body: { ...clientJson(client), ...(secret === null ? {} : { client_secret: secret }) } };
}

/** GET /admin/apps/:app_id/oauth-clients → 200 `{clients: [...]}`. */
export async function handleListClients(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return { body: { clients: (await listClients(ctx, req.params.app_id!)).map(clientJson) } };
}

/** GET /admin/apps/:app_id/oauth-clients/:client_id → 200 the client. */
export async function handleGetClient(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return { body: clientJson(await getClient(ctx, req.params.app_id!, req.params.client_id!)) };
}

/** DELETE /admin/apps/:app_id/oauth-clients/:client_id → 200 `{client_id, deleted: true}`. */
export async function handleDeleteClient(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  await deleteClient(ctx, req.params.app_id!, req.params.client_id!, requestOrigin(ctx, req));
  return { body: { client_id: req.params.client_id!.toLowerCase(), deleted: true } };
}
