// The OAuth clients of an app, made on the admin API: what each may do (grant types, scopes,
// redirect URIs) and how it authenticates at the token endpoint. A confidential client holds a
// secret ("cs_" + 32 random bytes, shown once; its SHA-256 stored) or a JWK Set for
// private_key_jwt; a public client (a single-page or native app) holds nothing and relies on PKCE.
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createLocalJWKSet, errors as joseErrors, jwtVerify, type JSONWebKeySet } from 'jose';
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import {
  deleteOAuthClient, findOAuthClient, insertOAuthClient, listOAuthClients, recordClientAssertion,
  type ClientType, type OAuthClientRow, type TokenEndpointAuthMethod,
} from '../queries/oauth-clients.js';
import { getApp } from '../service/admin.js';
import { isUuid } from '../service/credentials.js';
import { MetadataDocumentError } from './client-metadata-document.js';
import { metadataDocumentClient } from './metadata-document-clients.js';
import { checkRedirectUri } from './redirect-uris.js';
import { GRANT_TYPES, STANDARD_SCOPES, isScopeToken, type GrantType } from './scopes.js';

export interface ClientRegistration {
  name: string;
  logo_uri?: string;
  client_type?: ClientType;
  token_endpoint_auth_method?: TokenEndpointAuthMethod;
  jwks?: JSONWebKeySet;
  redirect_uris?: string[];
  post_logout_redirect_uris?: string[];
  grant_types?: string[];
  scopes?: string[];
  /** False: the user is asked for consent (default true for the admin API's clients). */
  first_party?: boolean;
}

export const SECRET_METHODS: readonly TokenEndpointAuthMethod[] = ['client_secret_basic', 'client_secret_post'];
const DUMMY_HASH = createHash('sha256').update('no such client').digest();

/**
 * Registers a client of the app; 201 with `client_secret` once for a secret client. 400
 * INVALID_CLIENT_METADATA / INVALID_REDIRECT_URI for metadata that does not hold together (a
 * public client with a secret method or client_credentials, authorization_code without a
 * redirect URI, an unknown grant type or a malformed scope).
 */
export async function createClient(ctx: AuthContext, appId: string, registration: ClientRegistration, origin: RequestOrigin, made: ClientOrigin = { origin: 'admin' }): Promise<{ client: OAuthClientRow; secret: string | null }> {
  const app = await getApp(ctx, appId);
  const clientType = registration.client_type ?? 'confidential';
  const method = registration.token_endpoint_auth_method ?? (clientType === 'public' ? 'none' : 'client_secret_basic');
  if ((clientType === 'public') !== (method === 'none')) {
    throw metadataError('token_endpoint_auth_method', clientType === 'public' ? 'a public client authenticates with "none"' : 'a confidential client cannot use "none"');
  }
  if (method === 'private_key_jwt' && !registration.jwks) throw metadataError('jwks', 'private_key_jwt needs the client\'s public keys in "jwks"');
  if (registration.jwks) checkJwks(registration.jwks);
  const { grantTypes, redirectUris, postLogout, scopes } = checkedClientFields(registration, clientType);
  const secret = SECRET_METHODS.includes(method) ? `cs_${randomBytes(32).toString('base64url')}` : null;
  const now = new Date(ctx.clock.now());
  const client = await ctx.sql.begin(async (tx) => {
    const row = await insertOAuthClient(tx, {
      appId: app.id, name: registration.name, logoUri: registration.logo_uri ?? null, clientType, tokenEndpointAuthMethod: method,
      secretHash: secret === null ? null : sha256(secret), jwks: (registration.jwks as OAuthClientRow['jwks']) ?? null,
      redirectUris, postLogoutRedirectUris: postLogout, grantTypes, scopes, now, ...made,
      ...(made.origin === 'admin' && registration.first_party !== undefined ? { firstParty: registration.first_party } : {}),
    });
    await insertAuditEvent(tx, {
      type: 'oauth_client.created', actor: made.origin === 'admin' ? 'admin' : 'anonymous', appId: app.id, ip: origin.ip, userAgent: origin.userAgent,
      details: { client_id: publicClientId(row), name: row.name, client_type: clientType, grant_types: grantTypes, origin: made.origin }, now,
    });
    return row;
  });
  return { client, secret };
}

/**
 * The fields of a registration that hold together for a client of this type (creation and the
 * admin's edits, client-changes.ts): 400 INVALID_CLIENT_METADATA / INVALID_REDIRECT_URI otherwise.
 */
export function checkedClientFields(registration: ClientRegistration, clientType: ClientType): { grantTypes: string[]; redirectUris: string[]; postLogout: string[]; scopes: string[] } {
  const grantTypes = [...new Set(registration.grant_types ?? ['authorization_code', 'refresh_token'])];
  for (const grant of grantTypes) {
    if (!(GRANT_TYPES as readonly string[]).includes(grant)) throw metadataError('grant_types', `"${grant}" is not one of ${GRANT_TYPES.join(', ')}`);
  }
  if (clientType === 'public' && grantTypes.includes('client_credentials')) throw metadataError('grant_types', 'a public client cannot use client_credentials');
  const redirectUris = [...new Set(registration.redirect_uris ?? [])];
  if (grantTypes.includes('authorization_code') && redirectUris.length === 0) throw metadataError('redirect_uris', 'authorization_code needs at least one redirect URI');
  redirectUris.forEach((uri) => checkRedirectUri(uri, 'redirect_uris'));
  const postLogout = [...new Set(registration.post_logout_redirect_uris ?? [])];
  postLogout.forEach((uri) => checkRedirectUri(uri, 'post_logout_redirect_uris'));
  const scopes = [...new Set(registration.scopes ?? STANDARD_SCOPES)];
  for (const scope of scopes) if (!isScopeToken(scope)) throw metadataError('scopes', `"${scope}" is not a scope token`);
  if (registration.logo_uri !== undefined && !/^https:\/\/[^\s]+$/.test(registration.logo_uri)) throw metadataError('logo_uri', 'an https URL');
  return { grantTypes, redirectUris, postLogout, scopes };
}

export async function listClients(ctx: AuthContext, appId: string): Promise<OAuthClientRow[]> {
  return listOAuthClients(ctx.sql, (await getApp(ctx, appId)).id);
}

/** 404 OAUTH_CLIENT_NOT_FOUND unless the app has this client. */
export async function getClient(ctx: AuthContext, appId: string, clientId: string): Promise<OAuthClientRow> {
  const app = await getApp(ctx, appId);
  const client = isUuid(clientId) ? await findOAuthClient(ctx.sql, clientId.toLowerCase()) : undefined;
  if (!client || client.app_id !== app.id) throw authError('OAUTH_CLIENT_NOT_FOUND');
  return client;
}

/** Deletes the client with its codes and sessions (their refresh tokens stop working). */
export async function deleteClient(ctx: AuthContext, appId: string, clientId: string, origin: RequestOrigin): Promise<void> {
  const client = await getClient(ctx, appId, clientId);
  const now = new Date(ctx.clock.now());
  await ctx.sql.begin(async (tx) => {
    if (!(await deleteOAuthClient(tx, client.app_id, client.id))) throw authError('OAUTH_CLIENT_NOT_FOUND');
    await insertAuditEvent(tx, {
      type: 'oauth_client.deleted', actor: 'admin', appId: client.app_id, ip: origin.ip, userAgent: origin.userAgent,
      details: { client_id: client.id, name: client.name }, now,
    });
  });
}

/** How a client came to be (the admin API by default). */
export type ClientOrigin = { origin: 'admin' | 'dynamic' } | { origin: 'metadata_document'; metadataUrl: string; metadataExpiresAt: Date };

/** The client_id the client itself uses: its metadata document URL, or its UUID. */
export function publicClientId(client: OAuthClientRow): string {
  return client.metadata_url ?? client.id;
}

/**
 * The client named by a client_id, or undefined (unknown, not a UUID). A metadata document URL
 * (when they are on) is resolved by metadata-document-clients.ts, which throws MetadataDocumentError when the
 * document cannot be used.
 */
export async function findClient(ctx: AuthContext, clientId: string): Promise<OAuthClientRow | undefined> {
  if (isUuid(clientId)) return findOAuthClient(ctx.sql, clientId.toLowerCase());
  return metadataDocumentClient(ctx, clientId);
}

/** How a client presented itself at the token endpoint (form.ts reads it off the request). */
export type PresentedClient =
  | { method: 'secret'; clientId: string; secret: string }
  | { method: 'private_key_jwt'; clientId: string | undefined; assertion: string }
  | { method: 'none'; clientId: string };

const ASSERTION_ALGORITHMS = ['RS256', 'PS256', 'ES256', 'EdDSA'];

/**
 * Authenticates the client of a token request (RFC 6749 section 2.3, OpenID Connect Core section
 * 9). 401 TOKEN_INVALID (invalid_client) for an unknown client, a wrong secret, a method other
 * than the one the client is registered for (a secret client may use Basic or the form), a bad,
 * expired or replayed assertion, or no credentials from a confidential client.
 */
export async function authenticateClient(ctx: AuthContext, presented: PresentedClient, tokenEndpoint: string): Promise<OAuthClientRow> {
  const clientId = presented.method === 'private_key_jwt' ? presented.clientId ?? unverifiedIssuer(presented.assertion) : presented.clientId;
  const client = clientId === undefined ? undefined : await findClient(ctx, clientId).catch((error: unknown) => {
    throw authError('TOKEN_INVALID', error instanceof MetadataDocumentError ? `The client's metadata document cannot be used: ${error.message}` : 'Invalid client', { cause: error });
  });
  if (presented.method === 'secret') {
    const matches = timingSafeEqual(sha256(presented.secret), client?.secret_hash ?? DUMMY_HASH);
    if (!client || !client.secret_hash || !matches) throw authError('TOKEN_INVALID', 'Invalid client credentials');
    return client;
  }
  if (!client) throw authError('TOKEN_INVALID', 'Invalid client credentials');
  if (presented.method === 'none') {
    if (client.token_endpoint_auth_method !== 'none') throw authError('TOKEN_INVALID', 'This client must authenticate');
    return client;
  }
  if (client.token_endpoint_auth_method !== 'private_key_jwt' || !client.jwks) throw authError('TOKEN_INVALID', 'This client does not authenticate with private_key_jwt');
  const nowMs = ctx.clock.now();
  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jwtVerify(presented.assertion, createLocalJWKSet(client.jwks as JSONWebKeySet), {
      algorithms: ASSERTION_ALGORITHMS,
      issuer: client.id,
      subject: client.id,
      audience: [ctx.issuer, tokenEndpoint],
      requiredClaims: ['exp', 'jti'],
      currentDate: new Date(nowMs),
      clockTolerance: 5,
      maxTokenAge: '10 minutes',
    }));
  } catch (error) {
    const why = error instanceof joseErrors.JWTExpired ? 'The client assertion has expired' : 'Invalid client assertion';
    throw authError('TOKEN_INVALID', why, { cause: error });
  }
  if (typeof payload.jti !== 'string' || payload.jti.length === 0 || payload.jti.length > 200) throw authError('TOKEN_INVALID', 'Invalid client assertion: jti');
  const firstUse = await recordClientAssertion(ctx.sql, {
    clientId: client.id, jti: payload.jti, expiresAt: new Date((payload.exp as number) * 1000), now: new Date(nowMs),
  });
  if (!firstUse) throw authError('TOKEN_INVALID', 'The client assertion was already used');
  return client;
}

/** The `iss` of an assertion sent without client_id, read before verification only to find the client's keys. */
function unverifiedIssuer(assertion: string): string | undefined {
  try {
    const payload = JSON.parse(Buffer.from(assertion.split('.')[1] ?? '', 'base64url').toString('utf8')) as { iss?: unknown };
    return typeof payload.iss === 'string' ? payload.iss : undefined;
  } catch {
    return undefined;
  }
}

/** Whether the client was registered for this grant type. */
export function allowsGrant(client: OAuthClientRow, grant: GrantType): boolean {
  return client.grant_types.includes(grant);
}

/** The client as the admin API shows it (never its secret hash). */
export function clientJson(client: OAuthClientRow): Record<string, unknown> {
  return {
    client_id: publicClientId(client),
    app_id: client.app_id,
    origin: client.origin,
    first_party: client.first_party,
    name: client.name,
    logo_uri: client.logo_uri,
    client_type: client.client_type,
    token_endpoint_auth_method: client.token_endpoint_auth_method,
    jwks: client.jwks,
    redirect_uris: client.redirect_uris,
    post_logout_redirect_uris: client.post_logout_redirect_uris,
    grant_types: client.grant_types,
    scopes: client.scopes,
    created_at: client.created_at.toISOString(),
    updated_at: client.updated_at.toISOString(),
  };
}

function checkJwks(jwks: JSONWebKeySet): void {
  if (!Array.isArray(jwks.keys) || jwks.keys.length === 0 || jwks.keys.length > 10) throw metadataError('jwks', 'a JWK Set with 1 to 10 keys');
  for (const key of jwks.keys) {
    if (typeof key !== 'object' || key === null || typeof key.kty !== 'string') throw metadataError('jwks', 'each key needs "kty"');
    if ('d' in key || 'p' in key || 'k' in key) throw metadataError('jwks', 'public keys only');
  }
}

export function metadataError(field: string, why: string) {
  return authError('INVALID_CLIENT_METADATA', `Invalid field "${field}": ${why}`, { details: { field } });
}

export function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
