// The admin's changes to an app's OAuth client after it was made: its editable fields (name,
// logo, redirect and post-logout URIs, grant types, scopes, first-party) and a new secret. The
// client's type, its authentication method and its keys stay what they were made with; a client
// that a metadata document defines is changed by its document, not here (its client_id is its
// URL, which these routes do not name).
import { randomBytes } from 'node:crypto';
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { requestOrigin, type RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import { setOAuthClientSecretHash, updateOAuthClient } from '../queries/oauth-client-changes.js';
import type { OAuthClientRow } from '../queries/oauth-clients.js';
import { UpdateOAuthClientBody } from '../schemas.js';
import { checkedClientFields, clientJson, getClient, metadataError, publicClientId, SECRET_METHODS, sha256 } from './clients.js';

type NoInput = Record<string, never>;
const updateClientBody = compileBody(UpdateOAuthClientBody);

/** Replaces the client's editable fields, checked as on creation; records oauth_client.updated. */
export async function updateClient(ctx: AuthContext, appId: string, clientId: string, body: UpdateOAuthClientBody, origin: RequestOrigin): Promise<OAuthClientRow> {
  const client = await getClient(ctx, appId, clientId);
  const { grantTypes, redirectUris, postLogout, scopes } = checkedClientFields(body, client.client_type);
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    const row = await updateOAuthClient(tx, {
      appId: client.app_id, id: client.id, name: body.name, logoUri: body.logo_uri ?? null, redirectUris, postLogoutRedirectUris: postLogout,
      grantTypes, scopes, firstParty: body.first_party ?? client.first_party, now,
    });
    if (!row) throw authError('OAUTH_CLIENT_NOT_FOUND');
    await insertAuditEvent(tx, {
      type: 'oauth_client.updated', actor: 'admin', appId: row.app_id, ip: origin.ip, userAgent: origin.userAgent,
      details: { client_id: publicClientId(row), name: row.name, grant_types: grantTypes, scopes }, now,
    });
    return row;
  });
}

/**
 * Gives a secret client a new secret (returned here only); the old one stops working at once.
 * 400 INVALID_CLIENT_METADATA for a client without a secret (public, or private_key_jwt).
 */
export async function rotateClientSecret(ctx: AuthContext, appId: string, clientId: string, origin: RequestOrigin): Promise<{ client: OAuthClientRow; secret: string }> {
  const client = await getClient(ctx, appId, clientId);
  if (!SECRET_METHODS.includes(client.token_endpoint_auth_method)) {
    throw metadataError('token_endpoint_auth_method', `a client that authenticates with "${client.token_endpoint_auth_method}" has no secret`);
  }
  const secret = `cs_${randomBytes(32).toString('base64url')}`;
  const now = new Date(ctx.clock.now());
  const row = await ctx.sql.begin(async (tx) => {
    const updated = await setOAuthClientSecretHash(tx, client.app_id, client.id, sha256(secret), now);
    if (!updated) throw authError('OAUTH_CLIENT_NOT_FOUND');
    await insertAuditEvent(tx, {
      type: 'oauth_client.secret_rotated', actor: 'admin', appId: updated.app_id, ip: origin.ip, userAgent: origin.userAgent,
      details: { client_id: publicClientId(updated), name: updated.name }, now,
    });
    return updated;
  });
  return { client: row, secret };
}

/** PUT /admin/apps/:app_id/oauth-clients/:client_id → 200 the client. */
export async function handleUpdateClient(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const body = updateClientBody.parse(req);
  return { body: clientJson(await updateClient(ctx, req.params.app_id!, req.params.client_id!, body, requestOrigin(ctx, req))) };
}

/** POST /admin/apps/:app_id/oauth-clients/:client_id/secret → 200 the client with its new `client_secret` (shown once). */
export async function handleRotateClientSecret(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const { client, secret } = await rotateClientSecret(ctx, req.params.app_id!, req.params.client_id!, requestOrigin(ctx, req));
  return { body: { ...clientJson(client), client_secret: secret } };
}
