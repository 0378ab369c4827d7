// POST /oauth/token: the grants of OAuth 2.1 this provider issues.
//   authorization_code  one use: in one transaction holding the code's row lock, the code is
//                       checked (client, redirect URI, PKCE S256, expiry) and used up, and a
//                       session (refresh family) of the client starts; a replay of a used code
//                       revokes that session and is refused.
//   refresh_token       rotated through the refresh families (rotate_refresh_token: rotation,
//                       reuse detection); only the client the session belongs to may refresh it.
//   client_credentials  an app backend's own token: sub is the client, no tenant, no roles.
// Every refusal is an RFC 6749 section 5.2 error and issues nothing.
import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { HttpError } from '../../http/errors.js';
import type { HttpRequest } from '../../http/request.js';
import { requestOrigin, type RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { ACCESS_TOKEN_TTL_SECONDS } from '../limits.js';
import { basicCredentials } from '../oauth-request.js';
import { findAppCredentials } from '../queries/apps.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import type { OAuthClientRow } from '../queries/oauth-clients.js';
import { findFamilyGrant, lockAuthorizationCode, markAuthorizationCodeUsed } from '../queries/oauth-grants.js';
import { revokeRefreshFamilies } from '../queries/refresh-tokens.js';
import { listRolesOfUser } from '../queries/roles.js';
import { findUser } from '../queries/users.js';
import type { Guard } from '../respond.js';
import { refreshSession, startSession, chooseTenant } from '../service/sessions.js';
import { signAccessToken } from '../tokens/access-token.js';
import { hashRefreshToken } from '../tokens/refresh-token.js';
import { allowsGrant, authenticateClient, publicClientId, type PresentedClient } from './clients.js';
import { parseForm } from './form.js';
import { signIdToken } from './id-token.js';
import { parseScope } from './scopes.js';

const TOKEN_PARAMETERS = [
  'grant_type', 'code', 'redirect_uri', 'code_verifier', 'refresh_token', 'scope', 'resource',
  'client_id', 'client_secret', 'client_assertion', 'client_assertion_type',
] as const;
const JWT_BEARER_ASSERTION = 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer';
/** RFC 7636 section 4.1: 43 to 128 unreserved characters. */
const CODE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

export interface TokenRequest {
  client: OAuthClientRow;
  form: Map<string, string>;
}

/** The token endpoint's client authentication; errors in the RFC 6749 shape (invalid_client 401 with WWW-Authenticate). */
export const tokenClient: Guard<TokenRequest> = {
  name: 'token-client',
  errorFormat: 'oauth',
  authenticate: async (ctx, req) => {
    const form = parseForm(req, TOKEN_PARAMETERS);
    return { client: await authenticateClient(ctx, presentedClient(req, form), `${ctx.issuer}/oauth/token`), form };
  },
};

/** How the client authenticated: exactly one method (RFC 6749 section 2.3: never two). */
function presentedClient(req: HttpRequest, form: Map<string, string>): PresentedClient {
  const basic = basicCredentials(req.headers.authorization);
  const assertion = form.get('client_assertion');
  const posted = form.get('client_secret');
  const methods = [basic !== null, assertion !== undefined, posted !== undefined].filter(Boolean).length;
  if (methods > 1) throw authError('VALIDATION_ERROR', 'Authenticate the client by one method only');
  if (basic) {
    if (form.has('client_id') && form.get('client_id') !== basic.clientId) throw authError('VALIDATION_ERROR', 'client_id differs from the Basic credentials');
    return { method: 'secret', clientId: basic.clientId, secret: basic.clientSecret };
  }
  if (assertion !== undefined) {
    if (form.get('client_assertion_type') !== JWT_BEARER_ASSERTION) throw authError('VALIDATION_ERROR', `client_assertion_type must be ${JWT_BEARER_ASSERTION}`);
    return { method: 'private_key_jwt', clientId: form.get('client_id'), assertion };
  }
  const clientId = form.get('client_id');
  if (!clientId) throw authError('TOKEN_INVALID', 'Client authentication is required');
  return posted !== undefined ? { method: 'secret', clientId, secret: posted } : { method: 'none', clientId };
}

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  scope: string;
  refresh_token?: string;
  id_token?: string;
}

export async function exchangeToken(ctx: AuthContext, { client, form }: TokenRequest, req: HttpRequest): Promise<TokenResponse> {
  const grant = form.get('grant_type');
  if (!grant) throw authError('VALIDATION_ERROR', 'grant_type is required');
  const origin = requestOrigin(ctx, req);
  switch (grant) {
    case 'authorization_code':
      if (!allowsGrant(client, 'authorization_code')) throw authError('UNAUTHORIZED_CLIENT', 'This client may not use authorization_code');
      return exchangeCode(ctx, client, form, origin);
    case 'refresh_token':
      if (!allowsGrant(client, 'refresh_token')) throw authError('UNAUTHORIZED_CLIENT', 'This client may not use refresh_token');
      return refreshGrant(ctx, client, form, origin);
    case 'client_credentials':
      if (!allowsGrant(client, 'client_credentials')) throw authError('UNAUTHORIZED_CLIENT', 'This client may not use client_credentials');
      return clientCredentials(ctx, client, form);
    default:
      throw authError('UNSUPPORTED_GRANT_TYPE', `grant_type "${grant}" is not supported`);
  }
}

async function exchangeCode(ctx: AuthContext, client: OAuthClientRow, form: Map<string, string>, origin: RequestOrigin): Promise<TokenResponse> {
  const code = form.get('code');
  if (!code) throw authError('VALIDATION_ERROR', 'code is required');
  const verifier = form.get('code_verifier');
  if (verifier === undefined) throw authError('VALIDATION_ERROR', 'code_verifier is required (PKCE)');
  const hash = createHash('sha256').update(code, 'utf8').digest();
  const nowMs = ctx.clock.now();
  const now = new Date(nowMs);
  const app = { id: client.app_id, slug: client.app_slug };
  // A replay is refused after its transaction commits the revocation: thrown from inside, it would roll it back.
  const outcome = await ctx.sql.begin(async (tx) => {
    const row = await lockAuthorizationCode(tx, hash);
    if (!row) return { refused: 'The authorization code is invalid' } as const;
    if (row.used_at !== null) {
      // RFC 6749 section 4.1.2: a code used twice revokes the tokens it was exchanged for.
      const families = row.family_id ? await tx<{ id: string; current_token_id: string }[]>`
        select id, current_token_id from refresh_families where id = ${row.family_id} and revoked_at is null for update
      ` : [];
      if (families.length > 0) {
        await revokeRefreshFamilies(tx, { familyIds: families.map((f) => f.id), currentTokenIds: families.map((f) => f.current_token_id), now, reason: 'reuse' });
      }
      await insertAuditEvent(tx, {
        type: 'oauth.code_replayed', actor: 'app', appId: row.app_id, userId: row.user_id, familyId: row.family_id,
        ip: origin.ip, userAgent: origin.userAgent, details: { client_id: client.id }, now,
      });
      return { refused: 'The authorization code was already used; the tokens it gave are revoked' } as const;
    }
    if (row.client_id !== client.id) return { refused: 'The authorization code was issued to another client' } as const;
    if (row.expires_at.getTime() <= nowMs) return { refused: 'The authorization code has expired' } as const;
    if (form.get('redirect_uri') !== row.redirect_uri) return { refused: 'redirect_uri differs from the authorization request\'s' } as const;
    // RFC 8707: the token request may name the resource again, but not another one.
    if (form.has('resource') && form.get('resource') !== row.resource) return { refused: 'resource differs from the authorization request\'s', target: true } as const;
    if (!CODE_VERIFIER.test(verifier) || !timingSafeEqual(Buffer.from(s256(verifier)), Buffer.from(row.code_challenge))) {
      return { refused: 'The code_verifier does not match the code_challenge (PKCE S256)' } as const;
    }
    const user = await findUser(tx, row.user_id);
    if (!user || user.deleted_at) return { refused: 'The user is deleted' } as const;
    const roles = await listRolesOfUser(tx, row.app_id, row.user_id);
    const tenant = chooseTenant(roles, row.tenant_id, null);
    const familyId = randomUUID();
    const tokens = await startSession(tx, ctx, {
      app, userId: row.user_id, familyId, tenant: { ...tenant, remembered: row.tenant_id }, nowMs,
      // The access tokens say how the user signed in, as the id_token does (and as the JSON API's do).
      amr: row.amr,
      grant: { clientId: client.id, publicClientId: publicClientId(client), scope: row.scope, browserSessionId: row.browser_session_id, resource: row.resource },
    });
    await markAuthorizationCodeUsed(tx, hash, familyId, now);
    await insertAuditEvent(tx, {
      type: 'oauth.code_exchanged', actor: 'app', appId: row.app_id, userId: row.user_id, familyId,
      ip: origin.ip, userAgent: origin.userAgent, details: { client_id: client.id, scope: row.scope }, now,
    });
    return { tokens, row, user } as const;
  });
  if ('refused' in outcome) throw authError('target' in outcome ? 'INVALID_TARGET' : 'INVALID_GRANT', outcome.refused);
  const { tokens, row, user } = outcome;
  const scopes = row.scope.split(' ');
  const response: TokenResponse = {
    access_token: tokens.access_token,
    token_type: 'Bearer',
    expires_in: ACCESS_TOKEN_TTL_SECONDS,
    scope: row.scope,
  };
  if (allowsGrant(client, 'refresh_token')) response.refresh_token = tokens.refresh_token;
  if (scopes.includes('openid')) {
    response.id_token = await signIdToken(ctx, {
      userId: row.user_id, clientId: publicClientId(client), nonce: row.nonce, authTime: row.auth_time, amr: row.amr,
      browserSessionId: row.browser_session_id, accessToken: tokens.access_token, scopes, user,
    }, nowMs);
  }
  return response;
}

/** Refusals of a rotation, as the token endpoint names them (RFC 6749 section 5.2: invalid_grant). */
const INVALID_GRANT_CODES = new Set(['TOKEN_INVALID', 'TOKEN_REUSE', 'TOKEN_REVOKED', 'USER_DELETED', 'TENANT_NOT_FOUND']);

async function refreshGrant(ctx: AuthContext, client: OAuthClientRow, form: Map<string, string>, origin: RequestOrigin): Promise<TokenResponse> {
  const presented = form.get('refresh_token');
  if (!presented) throw authError('VALIDATION_ERROR', 'refresh_token is required');
  const hash = hashRefreshToken(presented);
  const grant = hash ? await findFamilyGrant(ctx.sql, hash) : undefined;
  if (!grant || grant.client_id !== client.id) throw authError('INVALID_GRANT', 'The refresh token is invalid or was issued to another client');
  const granted = (grant.scope ?? '').split(' ').filter((s) => s !== '');
  const asked = form.has('scope') ? parseScope(form.get('scope')!) : granted;
  if (asked === null || asked.some((scope) => !granted.includes(scope))) throw authError('INVALID_SCOPE', 'A refresh cannot widen the scope granted');
  if (form.has('resource') && form.get('resource') !== grant.resource) throw authError('INVALID_TARGET', 'A refresh keeps the resource of its session');
  // The rotation checks the app's credentials in its own statement: the client was authenticated
  // above, and its app's stored secret hash stands for them.
  const app = await findAppCredentials(ctx.sql, client.app_id);
  if (!app) throw authError('INVALID_GRANT', 'The refresh token is invalid');
  try {
    const claims = { client_id: publicClientId(client), scope: grant.scope ?? '', ...(grant.resource ? { aud: grant.resource } : {}) };
    const tokens = await refreshSession(ctx, { appId: app.id, secretHash: app.secret_hash }, presented, null, origin, claims);
    return { access_token: tokens.access_token, token_type: 'Bearer', expires_in: ACCESS_TOKEN_TTL_SECONDS, scope: grant.scope ?? '', refresh_token: tokens.refresh_token };
  } catch (error) {
    if (error instanceof HttpError && INVALID_GRANT_CODES.has(error.code)) throw authError('INVALID_GRANT', error.message);
    throw error;
  }
}

/** An app backend's token: the client is the subject; scopes are the client's own (no OpenID Connect ones). */
async function clientCredentials(ctx: AuthContext, client: OAuthClientRow, form: Map<string, string>): Promise<TokenResponse> {
  const allowed = client.scopes.filter((scope) => !USER_SCOPES.has(scope));
  const asked = form.has('scope') ? parseScope(form.get('scope')!) : allowed;
  if (asked === null || asked.some((scope) => !allowed.includes(scope))) throw authError('INVALID_SCOPE', 'The scope is not allowed for this client\'s own tokens');
  const scope = asked.join(' ');
  const resource = form.get('resource');
  if (resource !== undefined && !client.app_resources.includes(resource)) throw authError('INVALID_TARGET', 'The resource is not one this app\'s tokens may be for');
  const accessToken = await signAccessToken(ctx.keys.signingKey(), ctx.issuer, {
    userId: client.id, appSlug: client.app_slug, tenantId: null, roles: [], ...(resource ? { audience: resource } : {}),
  }, ctx.clock.now(), { client_id: client.id, scope });
  return { access_token: accessToken, token_type: 'Bearer', expires_in: ACCESS_TOKEN_TTL_SECONDS, scope };
}

/** Scopes about a user, which a client's own token cannot carry. */
const USER_SCOPES = new Set(['openid', 'profile', 'email', 'phone', 'offline_access']);

function s256(verifier: string): string {
  return createHash('sha256').update(verifier, 'ascii').digest('base64url');
}
