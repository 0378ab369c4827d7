// The admin's changes to an existing OAuth client (migration 0022's table): its editable fields,
// and a new secret hash. Each returns the client as findOAuthClient does, or undefined when the
// app has no such client.
import type { Queryable } from '../database/client.js';
import type { OAuthClientRow } from './oauth-clients.js';

export interface OAuthClientChanges {
  appId: string;
  id: string;
  name: string;
  logoUri: string | null;
  redirectUris: string[];
  postLogoutRedirectUris: string[];
  grantTypes: string[];
  scopes: string[];
  firstParty: boolean;
  now: Date;
}

export async function updateOAuthClient(sql: Queryable, changes: OAuthClientChanges): Promise<OAuthClientRow | undefined> {
  const [row] = await sql<OAuthClientRow[]>`
    with client as (
      update oauth_clients
      set name = ${changes.name}, logo_uri = ${changes.logoUri}, redirect_uris = ${changes.redirectUris}::text[],
        post_logout_redirect_uris = ${changes.postLogoutRedirectUris}::text[], grant_types = ${changes.grantTypes}::text[],
        scopes = ${changes.scopes}::text[], first_party = ${changes.firstParty}, updated_at = ${changes.now}
      where app_id = ${changes.appId} and id = ${changes.id}
      returning *
    )
    select client.*, a.slug as app_slug, a.name as app_name, a.oauth_resources as app_resources, a.brand_color as app_color
    from client
    join apps a on a.id = client.app_id
  `;
  return row;
}

export async function setOAuthClientSecretHash(sql: Queryable, appId: string, id: string, secretHash: Buffer, now: Date): Promise<OAuthClientRow | undefined> {
  const [row] = await sql<OAuthClientRow[]>`
    with client as (
      update oauth_clients
      set secret_hash = ${secretHash}, updated_at = ${now}
      where app_id = ${appId} and id = ${id} and secret_hash is not null
      returning *
    )
    select client.*, a.slug as app_slug, a.name as app_name, a.oauth_resources as app_resources, a.brand_color as app_color
    from client
    join apps a on a.id = client.app_id
  `;
  return row;
}
