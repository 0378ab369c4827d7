// The provider's routes: discovery, the authorization and token endpoints, the sign-in page's
// forms, userinfo, logout, and the admin API of an app's OAuth clients.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { Type } from '@sinclair/typebox';
import { authError } from '../errors.js';
import { updateAppBrandColor, updateAppResources } from '../queries/oauth-clients.js';
import type { Guard } from '../respond.js';
import { getApp } from '../service/admin.js';
import { CreateOAuthClientBody } from '../schemas.js';
import { registerClient } from './registration.js';
import type { AccessTokenClaims } from '../tokens/access-token.js';
import { authorize, consent, passkeyOptions, pickTenant, signInCode, signInContinue, signInEmail, signInEnrolTotp, signInPasskey, signInSecondFactor, signInUpstream, upstreamCallback, upstreamFormPost, upstreamFormPostContinue } from './authorize.js';
import { SIGN_IN_SCRIPT } from './sign-in-script.js';
import { listUserConsents, revokeConsent } from './consents.js';
import type { ConsentRevokeBody, SessionsBody } from '../schemas.js';
import type { AuthenticatedApp } from '../service/credentials.js';
import { isUuid } from '../service/credentials.js';
import { presentedSession } from '../service/user-sessions.js';
import { clientJson, createClient, deleteClient, getClient, listClients, type ClientRegistration } from './clients.js';
import { endSession } from './logout.js';
import { GRANT_TYPES, STANDARD_SCOPES } from './scopes.js';
import { exchangeToken, type TokenRequest } from './token.js';
import { userinfo } from './userinfo.js';

type NoInput = Record<string, never>;
const createClientBody = compileBody(CreateOAuthClientBody);
const brandingBody = compileBody(Type.Object({ color: Type.Union([Type.String({ pattern: '^#[0-9a-fA-F]{6}$' }), Type.Null()]) }, { additionalProperties: false }));
const resourcesBody = compileBody(Type.Object({ resources: Type.Array(Type.String({ minLength: 1, maxLength: 2000, pattern: '^[^\\x00-\\x20\\x7F]+$' }), { maxItems: 20 }) }, { additionalProperties: false }));

/**
 * The provider's part of the discovery documents (OpenID Connect Discovery 1.0 and RFC 8414 name
 * the same fields): /.well-known/openid-configuration and /.well-known/oauth-authorization-server.
 */
export function providerMetadata(ctx: AuthContext): Record<string, unknown> {
  const issuer = ctx.issuer;
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
    ...(ctx.oauthOpenClients?.registration ? { registration_endpoint: `${issuer}/oauth/register` } : {}),
    client_id_metadata_document_supported: ctx.oauthOpenClients?.metadataDocuments ?? false,
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

/** POST /oauth/sign-in/second-factor (form): 303 to the client with a code (or the tenant or consent page), or the second-factor form with an error. */
export function handleSignInSecondFactor(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return signInSecondFactor(ctx, req);
}

/** POST /oauth/sign-in/second-factor/enroll (form): the recovery codes page, or the enrol form with an error. */
export function handleSignInEnrolTotp(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return signInEnrolTotp(ctx, req);
}

/** POST /oauth/sign-in/continue (form): after the recovery codes, the tenant or consent page or 303 to the client with a code. */
export function handleSignInContinue(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return signInContinue(ctx, req);
}

/** POST /oauth/sign-in/passkey/options (form, from the page's script): 200 `{ceremony_id, options}`, or `{message}` in words. */
export function handlePasskeyOptions(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return passkeyOptions(ctx, req);
}

/** POST /oauth/sign-in/passkey (form): 303 to the client with a code (or the tenant or consent page), or the address page with an error. */
export function handleSignInPasskey(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return signInPasskey(ctx, req);
}

/** POST /oauth/sign-in/upstream (form): 303 to the identity provider, or the address page with an error. */
export function handleSignInUpstream(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return signInUpstream(ctx, req);
}

/** GET /oauth/upstream/callback: the provider's redirect back; then as after a code (303 to the client, or the tenant or consent page), or the address page with an error. */
export function handleUpstreamCallback(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return upstreamCallback(ctx, req);
}

/** POST /oauth/upstream/callback (a provider's form_post): a page that hands the answer back to the browser as a form of this site. */
export async function handleUpstreamFormPost(_ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return upstreamFormPost(req);
}

/** POST /oauth/upstream/callback/continue (form): as GET /oauth/upstream/callback, with the answer in the form. */
export function handleUpstreamFormPostContinue(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return upstreamFormPostContinue(ctx, req);
}

/** GET /oauth/sign-in.js: the page's script (the passkey ceremony). */
export async function handleSignInScript(): Promise<HttpResult> {
  return { contentType: 'text/javascript; charset=utf-8', headers: { 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' }, text: SIGN_IN_SCRIPT };
}

/** POST /oauth/tenant (form): the tenant picked; then the consent page or 303 to the client with a code. */
export function handlePickTenant(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return pickTenant(ctx, req);
}

/** POST /oauth/consent (form): 303 to the client with a code (allow) or access_denied (deny). */
export function handleConsent(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return consent(ctx, req);
}

/** POST /auth/consents `{app_id, app_secret, refresh_token}` → 200 `{consents: [{client_id, client_name, scopes, granted_at}]}`: the user's, in this app. */
export async function handleListOwnConsents(ctx: AuthContext, { app, body }: { app: AuthenticatedApp; body: SessionsBody }): Promise<HttpResult> {
  const { userId } = await presentedSession(ctx, app, body.refresh_token);
  return { body: { consents: await listUserConsents(ctx, userId, app.id) } };
}

/** POST /auth/consents/revoke `{app_id, app_secret, refresh_token, client_id}` → 200 `{sessions_revoked}`. */
export async function handleRevokeOwnConsent(ctx: AuthContext, { app, body }: { app: AuthenticatedApp; body: ConsentRevokeBody }, req: HttpRequest): Promise<HttpResult> {
  const { userId } = await presentedSession(ctx, app, body.refresh_token);
  return { body: { sessions_revoked: await revokeConsent(ctx, userId, body.client_id, app.id, 'app', requestOrigin(ctx, req)) } };
}

/** GET /admin/users/:user_id/consents → 200 `{user_id, consents: [...]}` (every app). */
export async function handleListUserConsents(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const userId = req.params.user_id!;
  if (!isUuid(userId)) throw authError('USER_NOT_FOUND');
  return { body: { user_id: userId.toLowerCase(), consents: await listUserConsents(ctx, userId.toLowerCase(), null) } };
}

/** DELETE /admin/users/:user_id/consents?client_id=... → 200 `{sessions_revoked}`. */
export async function handleRevokeUserConsent(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const userId = req.params.user_id!;
  const clientId = req.query.get('client_id');
  if (!isUuid(userId)) throw authError('USER_NOT_FOUND');
  if (!clientId) throw authError('VALIDATION_ERROR', 'Query parameter "client_id" is required');
  return { body: { sessions_revoked: await revokeConsent(ctx, userId.toLowerCase(), clientId, null, 'admin', requestOrigin(ctx, req)) } };
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

/** POST /oauth/register (RFC 7591; only when configured) → 201 the registered client. */
export async function handleRegister(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return { status: 201, body: await registerClient(ctx, req, requestOrigin(ctx, req)) };
}

/** POST /oauth/register's guard: 404 unless registration is on; errors in the RFC 7591 shape. */
export const registration: Guard<NoInput> = {
  name: 'registration',
  errorFormat: 'oauth',
  authenticate: async (ctx) => {
    if (!ctx.oauthOpenClients?.registration) throw authError('NOT_FOUND');
    return {};
  },
};

/** PUT /admin/apps/:app_id/oauth-resources `{resources: [url, ...]}` → 200 `{app_id, resources}`: what its tokens may be for (RFC 8707). */
export async function handlePutResources(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const { resources } = resourcesBody.parse(req);
  const app = await getApp(ctx, req.params.app_id!);
  for (const resource of resources) {
    let url: URL | null = null;
    try { url = new URL(resource); } catch { /* refused below */ }
    if (!url || (url.protocol !== 'https:' && url.protocol !== 'http:') || resource.includes('#')) {
      throw authError('VALIDATION_ERROR', `Invalid field "resources": "${resource}" is not an absolute http(s) URI without a fragment`, { details: { field: 'resources' } });
    }
  }
  const unique = [...new Set(resources)];
  await updateAppResources(ctx.sql, app.id, unique);
  return { body: { app_id: app.id, resources: unique } };
}

/** PUT /admin/apps/:app_id/branding `{color: "#rrggbb" | null}` → 200 `{app_id, color}`: the app's colour on the sign-in page. */
export async function handlePutBranding(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const { color } = brandingBody.parse(req);
  const app = await getApp(ctx, req.params.app_id!);
  const normalised = color === null ? null : color.toLowerCase();
  await updateAppBrandColor(ctx.sql, app.id, normalised);
  return { body: { app_id: app.id, color: normalised } };
}

/** GET /admin/apps/:app_id/oauth-resources → 200 `{app_id, resources}`. */
export async function handleGetResources(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  const [row] = await ctx.sql<{ oauth_resources: string[] }[]>`select oauth_resources from apps where id = ${app.id}`;
  return { body: { app_id: app.id, resources: row!.oauth_resources } };
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
