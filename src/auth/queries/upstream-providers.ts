// Queries on an app's upstream identity providers and their authorization requests in flight
// (migration 0030).
import type { Queryable } from '../database/client.js';
import type { UpstreamKind } from '../upstream/presets.js';

export interface UpstreamProviderRow {
  id: string;
  app_id: string;
  kind: UpstreamKind;
  label: string;
  client_id: string;
  client_secret_sealed: Buffer | null;
  discovery_url: string | null;
  scopes: string[];
  redirect_uris: string[];
  trusted_email_domains: string[];
  /** Kind-specific; Apple's private key sealed as `private_key_sealed` (base64). */
  settings: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
}

export interface UpstreamProviderFields {
  kind: UpstreamKind;
  label: string;
  clientId: string;
  clientSecretSealed: Buffer | null;
  discoveryUrl: string | null;
  scopes: string[];
  redirectUris: string[];
  trustedEmailDomains: string[];
  settings: Record<string, unknown>;
}

export async function insertUpstreamProvider(sql: Queryable, provider: UpstreamProviderFields & { id: string; appId: string; now: Date }): Promise<UpstreamProviderRow> {
  const [row] = await sql<UpstreamProviderRow[]>`
    insert into upstream_providers (
      id, app_id, kind, label, client_id, client_secret_sealed, discovery_url, scopes, redirect_uris, trusted_email_domains, settings, created_at, updated_at
    )
    values (
      ${provider.id}, ${provider.appId}, ${provider.kind}, ${provider.label}, ${provider.clientId}, ${provider.clientSecretSealed},
      ${provider.discoveryUrl}, ${provider.scopes}, ${provider.redirectUris}, ${provider.trustedEmailDomains},
      ${sql.json(provider.settings as Record<string, string>)}, ${provider.now}, ${provider.now}
    )
    returning *
  `;
  return row!;
}

/** Replaces every field; the sealed secret only when `clientSecretSealed` is given (undefined keeps it). */
export async function updateUpstreamProvider(sql: Queryable, provider: Omit<UpstreamProviderFields, 'kind' | 'clientSecretSealed'> & {
  id: string; appId: string; clientSecretSealed: Buffer | null | undefined; now: Date;
}): Promise<UpstreamProviderRow | undefined> {
  const keepSecret = provider.clientSecretSealed === undefined;
  const [row] = await sql<UpstreamProviderRow[]>`
    update upstream_providers
    set label = ${provider.label},
        client_id = ${provider.clientId},
        client_secret_sealed = case when ${keepSecret} then client_secret_sealed else ${provider.clientSecretSealed ?? null}::bytea end,
        discovery_url = ${provider.discoveryUrl},
        scopes = ${provider.scopes},
        redirect_uris = ${provider.redirectUris},
        trusted_email_domains = ${provider.trustedEmailDomains},
        settings = ${sql.json(provider.settings as Record<string, string>)},
        updated_at = ${provider.now}
    where id = ${provider.id} and app_id = ${provider.appId}
    returning *
  `;
  return row;
}

export async function findUpstreamProvider(sql: Queryable, appId: string, id: string): Promise<UpstreamProviderRow | undefined> {
  const [row] = await sql<UpstreamProviderRow[]>`
    select * from upstream_providers
    where id = ${id} and app_id = ${appId}
  `;
  return row;
}

export async function listUpstreamProviders(sql: Queryable, appId: string): Promise<UpstreamProviderRow[]> {
  return sql<UpstreamProviderRow[]>`
    select * from upstream_providers
    where app_id = ${appId}
    order by created_at, id
  `;
}

export async function deleteUpstreamProvider(sql: Queryable, appId: string, id: string): Promise<boolean> {
  const rows = await sql`
    delete from upstream_providers
    where id = ${id} and app_id = ${appId}
    returning id
  `;
  return rows.length > 0;
}

export interface UpstreamFlowRow {
  state: string;
  app_id: string;
  provider_id: string;
  nonce: string;
  code_verifier: string;
  redirect_uri: string;
  link_user_id: string | null;
  expires_at: Date;
}

export async function insertUpstreamFlow(sql: Queryable, flow: {
  state: string; appId: string; providerId: string; nonce: string; codeVerifier: string; redirectUri: string; linkUserId: string | null; now: Date; expiresAt: Date;
}): Promise<void> {
  await sql`
    insert into upstream_flows (state, app_id, provider_id, nonce, code_verifier, redirect_uri, link_user_id, created_at, expires_at)
    values (${flow.state}, ${flow.appId}, ${flow.providerId}, ${flow.nonce}, ${flow.codeVerifier}, ${flow.redirectUri}, ${flow.linkUserId}, ${flow.now}, ${flow.expiresAt})
  `;
}

/**
 * Takes (deletes and returns) the app's live flow with this state: one callback per flow, so a
 * replayed callback finds nothing. Expired flows of the app are deleted on the way.
 */
export async function takeUpstreamFlow(sql: Queryable, appId: string, state: string, now: Date): Promise<UpstreamFlowRow | undefined> {
  const [row] = await sql<UpstreamFlowRow[]>`
    with expired as (
      delete from upstream_flows where app_id = ${appId} and expires_at <= ${now}
    )
    delete from upstream_flows
    where state = ${state} and app_id = ${appId} and expires_at > ${now}
    returning state, app_id, provider_id, nonce, code_verifier, redirect_uri, link_user_id, expires_at
  `;
  return row;
}
