// RFC 7591 dynamic registration at POST /oauth/register, for agents (MCP clients) that meet this
// provider for the first time: off unless configured (config.ts OAuthOpenClientsConfig). Its
// clients join the configured app, are public or secret clients like any other, and may ask
// only for the standard scopes (an app's own scopes are its admin's to grant). Clients named by
// a metadata document URL: metadata-document-clients.ts.
import { timingSafeEqual, createHash } from 'node:crypto';
import type { HttpRequest } from '../../http/request.js';
import { bearerToken } from '../../http/bearer.js';
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { findAppBySlug } from '../queries/apps.js';
import type { OAuthClientRow } from '../queries/oauth-clients.js';
import { createClient, clientJson, type ClientRegistration } from './clients.js';
import { STANDARD_SCOPES } from './scopes.js';

/**
 * POST /oauth/register (RFC 7591): 201 with the client's metadata, `client_id`,
 * `client_id_issued_at`, and for a secret client `client_secret` (never expiring). 401
 * invalid_token without the configured initial access token; 400 invalid_client_metadata or
 * invalid_redirect_uri for metadata that does not hold together. Unknown fields are ignored.
 */
export async function registerClient(ctx: AuthContext, req: HttpRequest, origin: RequestOrigin): Promise<Record<string, unknown>> {
  const open = ctx.oauthOpenClients!;
  if (open.initialAccessToken !== undefined) {
    const presented = bearerToken(req.headers.authorization) ?? '';
    const matches = timingSafeEqual(sha256(presented), sha256(open.initialAccessToken));
    if (!matches) throw authError('INVALID_TOKEN', 'Registration needs the initial access token as a Bearer token');
  }
  const app = await findAppBySlug(ctx.sql, open.appSlug);
  if (!app) throw authError('INVALID_CLIENT_METADATA', 'Registration is not available: its app does not exist');
  const body = jsonObject(req.body);
  const registration = registrationOf(body);
  const { client, secret } = await createClient(ctx, app.id, registration, origin, { origin: 'dynamic' });
  return registrationResponse(client, secret);
}

/** The RFC 7591 fields this provider reads; wrong types are invalid_client_metadata. */
function registrationOf(body: Record<string, unknown>): ClientRegistration {
  const strings = (name: string): string[] | undefined => {
    const value = body[name];
    if (value === undefined) return undefined;
    if (!Array.isArray(value) || value.length > 20 || !value.every((item) => typeof item === 'string' && item.length <= 2000)) {
      throw authError('INVALID_CLIENT_METADATA', `Invalid field "${name}": an array of strings`, { details: { field: name } });
    }
    return value as string[];
  };
  const text = (name: string, max: number): string | undefined => {
    const value = body[name];
    if (value === undefined) return undefined;
    if (typeof value !== 'string' || value.length > max || /[\x00-\x1f\x7f]/.test(value)) throw authError('INVALID_CLIENT_METADATA', `Invalid field "${name}"`, { details: { field: name } });
    return value;
  };
  const method = text('token_endpoint_auth_method', 40) ?? 'client_secret_basic';
  if (!['client_secret_basic', 'client_secret_post', 'none'].includes(method)) {
    throw authError('INVALID_CLIENT_METADATA', 'Invalid field "token_endpoint_auth_method": client_secret_basic, client_secret_post or none', { details: { field: 'token_endpoint_auth_method' } });
  }
  const responseTypes = strings('response_types');
  if (responseTypes && responseTypes.some((type) => type !== 'code')) {
    throw authError('INVALID_CLIENT_METADATA', 'Invalid field "response_types": only "code"', { details: { field: 'response_types' } });
  }
  const redirectUris = strings('redirect_uris') ?? [];
  if (redirectUris.length === 0) throw authError('INVALID_REDIRECT_URI', 'Invalid field "redirect_uris": at least one is required', { details: { field: 'redirect_uris' } });
  const scope = text('scope', 1000);
  return {
    name: text('client_name', 200) || 'Unnamed client',
    client_type: method === 'none' ? 'public' : 'confidential',
    token_endpoint_auth_method: method as ClientRegistration['token_endpoint_auth_method'],
    redirect_uris: redirectUris,
    post_logout_redirect_uris: strings('post_logout_redirect_uris') ?? [],
    grant_types: (strings('grant_types') ?? ['authorization_code']).filter((grant) => grant !== 'client_credentials' || method !== 'none'),
    // Asked scopes outside the standard ones are dropped (RFC 7591 section 2: the server may
    // register fewer); the answer says which were registered.
    scopes: scope === undefined ? [...STANDARD_SCOPES] : scope.split(' ').filter((token) => (STANDARD_SCOPES as readonly string[]).includes(token)),
    ...(text('logo_uri', 2000) ? { logo_uri: text('logo_uri', 2000)! } : {}),
  };
}

function registrationResponse(client: OAuthClientRow, secret: string | null): Record<string, unknown> {
  const json = clientJson(client);
  return {
    client_id: json.client_id,
    client_id_issued_at: Math.floor(client.created_at.getTime() / 1000),
    ...(secret === null ? {} : { client_secret: secret, client_secret_expires_at: 0 }),
    client_name: client.name,
    redirect_uris: client.redirect_uris,
    post_logout_redirect_uris: client.post_logout_redirect_uris,
    grant_types: client.grant_types,
    response_types: ['code'],
    token_endpoint_auth_method: client.token_endpoint_auth_method,
    scope: client.scopes.join(' '),
    ...(client.logo_uri ? { logo_uri: client.logo_uri } : {}),
  };
}

function jsonObject(body: Buffer): Record<string, unknown> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.toString('utf8'));
  } catch {
    throw authError('INVALID_CLIENT_METADATA', 'Send the client metadata as a JSON object');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw authError('INVALID_CLIENT_METADATA', 'Send the client metadata as a JSON object');
  return parsed as Record<string, unknown>;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
