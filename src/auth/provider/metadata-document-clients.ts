// Client ID Metadata Documents as clients: a client_id that is an https URL (when configured,
// config.ts OAuthOpenClientsConfig) is resolved to a public client of the configured app, stored
// with its document's cache lifetime and fetched again once that passes
// (client-metadata-document.ts fences the fetch). Such a client may ask only for the standard
// scopes (an app's own scopes are its admin's to grant).
import type { AuthContext } from '../context.js';
import { findAppBySlug } from '../queries/apps.js';
import { findOAuthClientByMetadataUrl, insertOAuthClient, type OAuthClientRow } from '../queries/oauth-clients.js';
import { fetchMetadataDocument, isMetadataDocumentUrl, MetadataDocumentError } from './client-metadata-document.js';
import { checkRedirectUri } from './redirect-uris.js';
import { STANDARD_SCOPES } from './scopes.js';

const DEFAULT_METADATA_TIMEOUT_MS = 5000;

/**
 * The client whose client_id is a metadata document URL: the stored copy while its cache
 * lifetime lasts, else the document fetched again (and the copy updated). Undefined when
 * metadata documents are off or the client_id is not such a URL; MetadataDocumentError when the
 * document cannot be used (private address, redirect, too big, too slow, another client_id,
 * metadata that does not hold together).
 */
export async function metadataDocumentClient(ctx: AuthContext, clientId: string): Promise<OAuthClientRow | undefined> {
  const open = ctx.oauthOpenClients;
  if (!open?.metadataDocuments) return undefined;
  const allowPrivate = open.allowPrivateMetadataHosts ?? false;
  if (!isMetadataDocumentUrl(clientId, allowPrivate)) return undefined;
  const nowMs = ctx.clock.now();
  const stored = await findOAuthClientByMetadataUrl(ctx.sql, clientId);
  if (stored && stored.metadata_expires_at && stored.metadata_expires_at.getTime() > nowMs) return stored;
  const app = await findAppBySlug(ctx.sql, open.appSlug);
  if (!app) throw new MetadataDocumentError('metadata document clients have no app');
  const { document, expiresAtMs } = await fetchMetadataDocument(clientId, { allowPrivate, timeoutMs: open.metadataTimeoutMs ?? DEFAULT_METADATA_TIMEOUT_MS, nowMs, caPem: open.metadataCaPem });
  const method = document.token_endpoint_auth_method ?? 'none';
  if (method !== 'none') throw new MetadataDocumentError('a metadata document client must use token_endpoint_auth_method "none"');
  const redirectUris = document.redirect_uris;
  if (!Array.isArray(redirectUris) || redirectUris.length === 0 || redirectUris.length > 20 || !redirectUris.every((uri) => typeof uri === 'string')) {
    throw new MetadataDocumentError('the metadata document needs redirect_uris');
  }
  try {
    redirectUris.forEach((uri) => checkRedirectUri(uri as string, 'redirect_uris'));
  } catch (error) {
    throw new MetadataDocumentError(error instanceof Error ? error.message : 'invalid redirect_uris');
  }
  const grants = Array.isArray(document.grant_types) ? document.grant_types.filter((g): g is string => g === 'authorization_code' || g === 'refresh_token') : ['authorization_code'];
  const name = typeof document.client_name === 'string' && document.client_name.length > 0 ? document.client_name.slice(0, 200) : new URL(clientId).host;
  const scope = typeof document.scope === 'string' ? document.scope.split(' ').filter((s) => (STANDARD_SCOPES as readonly string[]).includes(s)) : [...STANDARD_SCOPES];
  const now = new Date(nowMs);
  return insertOAuthClient(ctx.sql, {
    appId: app.id, name, logoUri: null, clientType: 'public', tokenEndpointAuthMethod: 'none', secretHash: null, jwks: null,
    redirectUris: redirectUris as string[], postLogoutRedirectUris: [], grantTypes: grants.length > 0 ? grants : ['authorization_code'], scopes: scope, now,
    origin: 'metadata_document', metadataUrl: clientId, metadataExpiresAt: new Date(expiresAtMs),
  });
}
