// Queries on the OAuth clients of apps (migration 0022). `secret_hash` is the SHA-256 of the
// client secret; it never leaves this module's callers in an answer.
import type { Queryable } from '../database/client.js';

export type ClientType = 'confidential' | 'public';
export type TokenEndpointAuthMethod = 'client_secret_basic' | 'client_secret_post' | 'private_key_jwt' | 'none';

export interface OAuthClientRow {
  id: string;
  app_id: string;
  app_slug: string;
  app_name: string;
  /** The app's resources (RFC 8707) its tokens may be for. */
  app_resources: string[];
  /** The app's colour on the sign-in page (#rrggbb), or null (migration 0025). */
  app_color: string | null;
  origin: 'admin' | 'dynamic' | 'metadata_document';
  metadata_url: string | null;
  metadata_expires_at: Date | null;
  /** Gets codes without asking the user (migration 0024). */
  first_party: boolean;
  name: string;
  logo_uri: string | null;
  client_type: ClientType;
  token_endpoint_auth_method: TokenEndpointAuthMethod;
  secret_hash: Buffer | null;
  jwks: { keys: Record<string, unknown>[] } | null;
  redirect_uris: string[];
  post_logout_redirect_uris: string[];
  grant_types: string[];
  scopes: string[];
  created_at: Date;
  updated_at: Date;
}

export interface NewOAuthClient {
  appId: string;
  name: string;
  logoUri: string | null;
  clientType: ClientType;
  tokenEndpointAuthMethod: TokenEndpointAuthMethod;
  secretHash: Buffer | null;
  jwks: { keys: Record<string, unknown>[] } | null;
  redirectUris: string[];
  postLogoutRedirectUris: string[];
  grantTypes: string[];
  scopes: string[];
  now: Date;
  /** Who made it: the admin API, RFC 7591 registration, or a metadata document at `metadataUrl`. */
  origin: 'admin' | 'dynamic' | 'metadata_document';
  /** Default: an admin-made client is first-party, the others are not. */
  firstParty?: boolean;
  metadataUrl?: string;
  metadataExpiresAt?: Date;
}

export async function insertOAuthClient(sql: Queryable, client: NewOAuthClient): Promise<OAuthClientRow> {
  const [row] = await sql<OAuthClientRow[]>`
    with client as (
      insert into oauth_clients (
        app_id, name, logo_uri, client_type, token_endpoint_auth_method, secret_hash, jwks,
        redirect_uris, post_logout_redirect_uris, grant_types, scopes, created_at, updated_at, origin, metadata_url, metadata_expires_at, first_party
      )
      values (
        ${client.appId}, ${client.name}, ${client.logoUri}, ${client.clientType}, ${client.tokenEndpointAuthMethod},
        ${client.secretHash}, ${client.jwks === null ? null : sql.json(client.jwks as never)},
        ${client.redirectUris}::text[], ${client.postLogoutRedirectUris}::text[], ${client.grantTypes}::text[], ${client.scopes}::text[],
        ${client.now}, ${client.now}, ${client.origin}, ${client.metadataUrl ?? null}, ${client.metadataExpiresAt ?? null},
        ${client.firstParty ?? client.origin === 'admin'}
      )
      on conflict (metadata_url) where metadata_url is not null do update
      set name = excluded.name, logo_uri = excluded.logo_uri, redirect_uris = excluded.redirect_uris,
        post_logout_redirect_uris = excluded.post_logout_redirect_uris, grant_types = excluded.grant_types,
        scopes = excluded.scopes, updated_at = excluded.updated_at, metadata_expires_at = excluded.metadata_expires_at
      returning *
    )
    select client.*, a.slug as app_slug, a.name as app_name, a.oauth_resources as app_resources, a.brand_color as app_color
    from client
    join apps a on a.id = client.app_id
  `;
  return row!;
}

/** A client row with its app's slug, name, accepted resources and colour (OAuthClientRow), for a where clause to follow. */
function selectClients(sql: Queryable) {
  return sql`
    select c.*, a.slug as app_slug, a.name as app_name, a.oauth_resources as app_resources, a.brand_color as app_color
    from oauth_clients c
    join apps a on a.id = c.app_id
  `;
}

/** The client with this id, with its app's slug; `id` must be a UUID. */
export async function findOAuthClient(sql: Queryable, id: string): Promise<OAuthClientRow | undefined> {
  const [row] = await sql<OAuthClientRow[]>`
    ${selectClients(sql)}
    where c.id = ${id}
  `;
  return row;
}

export async function listOAuthClients(sql: Queryable, appId: string): Promise<OAuthClientRow[]> {
  return sql<OAuthClientRow[]>`
    ${selectClients(sql)}
    where c.app_id = ${appId}
    order by c.created_at, c.id
  `;
}

export async function deleteOAuthClient(sql: Queryable, appId: string, id: string): Promise<boolean> {
  const deleted = await sql`
    delete from oauth_clients
    where app_id = ${appId} and id = ${id}
  `;
  return deleted.count > 0;
}

/** The client whose client_id is this metadata document URL. */
export async function findOAuthClientByMetadataUrl(sql: Queryable, url: string): Promise<OAuthClientRow | undefined> {
  const [row] = await sql<OAuthClientRow[]>`
    ${selectClients(sql)}
    where c.metadata_url = ${url}
  `;
  return row;
}

/** Sets the app's colour on the sign-in page; false when there is no such app. */
export async function updateAppBrandColor(sql: Queryable, appId: string, color: string | null): Promise<boolean> {
  const updated = await sql`
    update apps
    set brand_color = ${color}
    where id = ${appId}
  `;
  return updated.count > 0;
}

/** Sets the resources (RFC 8707) an app's tokens may be for; false when there is no such app. */
export async function updateAppResources(sql: Queryable, appId: string, resources: string[]): Promise<boolean> {
  const updated = await sql`
    update apps
    set oauth_resources = ${resources}::text[]
    where id = ${appId}
  `;
  return updated.count > 0;
}

/** Records a private_key_jwt assertion's jti; false when it was seen before (a replay). */
export async function recordClientAssertion(sql: Queryable, assertion: { clientId: string; jti: string; expiresAt: Date; now: Date }): Promise<boolean> {
  await sql`
    delete from oauth_client_assertions
    where client_id = ${assertion.clientId} and expires_at < ${assertion.now}
  `;
  const inserted = await sql`
    insert into oauth_client_assertions (client_id, jti, expires_at)
    values (${assertion.clientId}, ${assertion.jti}, ${assertion.expiresAt})
    on conflict do nothing
  `;
  return inserted.count > 0;
}
