// Queries on an app's upstream identity providers and their authorization requests in flight
// (migration 0030).
import type { Queryable } from '../database/client.js';
import type { RoleName } from '../roles.js';
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
  /** Enterprise SSO (migration 0033): the tenant whose provider this is, the role of a first sign-in, whether the tenant's domains must use it. */
  tenant_id: string | null;
  default_role: RoleName | null;
  require_sso: boolean;
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
  defaultRole: RoleName | null;
  requireSso: boolean;
}

export async function insertUpstreamProvider(sql: Queryable, provider: UpstreamProviderFields & { id: string; appId: string; tenantId: string | null; now: Date }): Promise<UpstreamProviderRow | undefined> {
  const [row] = await sql<UpstreamProviderRow[]>`
    insert into upstream_providers (
      id, app_id, kind, label, client_id, client_secret_sealed, discovery_url, scopes, redirect_uris, trusted_email_domains, settings,
      tenant_id, default_role, require_sso, created_at, updated_at
    )
    values (
      ${provider.id}, ${provider.appId}, ${provider.kind}, ${provider.label}, ${provider.clientId}, ${provider.clientSecretSealed},
      ${provider.discoveryUrl}, ${provider.scopes}, ${provider.redirectUris}, ${provider.trustedEmailDomains},
      ${sql.json(provider.settings as Record<string, string>)}, ${provider.tenantId}, ${provider.defaultRole}, ${provider.requireSso}, ${provider.now}, ${provider.now}
    )
    on conflict (tenant_id) where tenant_id is not null do nothing
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
        default_role = ${provider.defaultRole},
        require_sso = ${provider.requireSso},
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

/** The SSO provider of the tenant that verified this e-mail domain in the app, if any. */
export async function findSsoProviderOfDomain(sql: Queryable, appId: string, domain: string): Promise<UpstreamProviderRow | undefined> {
  const [row] = await sql<UpstreamProviderRow[]>`
    select p.*
    from tenant_domains d
    join upstream_providers p on p.tenant_id = d.tenant_id
    where d.app_id = ${appId} and d.domain = ${domain} and d.verified_at is not null
  `;
  return row;
}

/** The verified domains of a tenant. */
export async function listVerifiedDomainsOfTenant(sql: Queryable, tenantId: string): Promise<string[]> {
  const rows = await sql<{ domain: string }[]>`select domain from tenant_domains where tenant_id = ${tenantId} and verified_at is not null order by domain`;
  return rows.map((r) => r.domain);
}
