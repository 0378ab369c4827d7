// An app's upstream identity providers, managed behind X-Admin-Key. Secrets (the client secret,
// Apple's private key) are sealed at rest like the signing keys (tokens/sealed-box.ts, the row
// id as associated data) and never answered back: a provider's JSON says only whether it has one.
import { createPrivateKey, randomUUID } from 'node:crypto';
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import {
  deleteUpstreamProvider, findUpstreamProvider, insertUpstreamProvider, listUpstreamProviders, updateUpstreamProvider, type UpstreamProviderRow,
} from '../queries/upstream-providers.js';
import type { UpstreamProviderBody } from '../schemas.js';
import { seal, unseal } from '../tokens/sealed-box.js';
import type { UpstreamClientConfig, UpstreamSettings } from '../upstream/client.js';
import { defaultDiscoveryUrl, defaultScopes, type UpstreamKind } from '../upstream/presets.js';
import { findTenant } from '../queries/tenants.js';
import { isRoleName, ROLE_NAMES, type RoleName } from '../roles.js';
import { isUuid } from './credentials.js';

export interface UpstreamProviderJson {
  id: string;
  app_id: string;
  kind: UpstreamKind;
  label: string;
  client_id: string;
  has_client_secret: boolean;
  discovery_url: string | null;
  scopes: string[];
  redirect_uris: string[];
  trusted_email_domains: string[];
  tenant_id: string | null;
  default_role: RoleName | null;
  require_sso: boolean;
  apple?: { team_id: string; key_id: string };
  entra?: { tenants: string[] };
  github?: { web_base_url: string; api_base_url: string };
  created_at: string;
  updated_at: string;
}

/** POST /admin/apps/:app_id/upstream-providers: 201 the provider. */
export async function createUpstreamProvider(ctx: AuthContext, appId: string, body: UpstreamProviderBody, origin: RequestOrigin): Promise<UpstreamProviderJson> {
  const id = randomUUID();
  const fields = checkedFields(body, 'create');
  const tenantId = body.tenant_id === undefined ? null : body.tenant_id.toLowerCase();
  if (tenantId !== null && !(await findTenant(ctx.sql, appId, tenantId))) throw authError('TENANT_NOT_FOUND');
  const now = new Date(ctx.clock.now());
  const row = await ctx.sql.begin(async (tx) => {
    const inserted = await insertUpstreamProvider(tx, {
      ...fields, id, appId, tenantId, now,
      clientSecretSealed: body.client_secret === undefined ? null : sealSecret(ctx, id, body.client_secret),
      settings: sealedSettings(ctx, id, fields.settings),
    });
    if (!inserted) throw authError('TENANT_SSO_EXISTS');
    await insertAuditEvent(tx, adminEvent('upstream_provider.created', appId, origin, now, { provider_id: id, kind: inserted.kind, label: inserted.label }));
    return inserted;
  });
  return upstreamProviderJson(row);
}

/** PUT /admin/apps/:app_id/upstream-providers/:provider_id: replaces it (the kind never changes; no client_secret keeps the stored one). */
export async function replaceUpstreamProvider(ctx: AuthContext, appId: string, providerId: string, body: UpstreamProviderBody, origin: RequestOrigin): Promise<UpstreamProviderJson> {
  const existing = await getUpstreamProviderRow(ctx, appId, providerId);
  if ((body.tenant_id?.toLowerCase() ?? null) !== existing.tenant_id) {
    throw authError('VALIDATION_ERROR', 'Invalid field "tenant_id": a provider stays with its tenant (or with the app)', { details: { field: 'tenant_id' } });
  }
  if (body.kind !== existing.kind) {
    throw authError('VALIDATION_ERROR', `Invalid field "kind": the provider is "${existing.kind}"; create a new provider for another kind`, { details: { field: 'kind' } });
  }
  const fields = checkedFields(body, 'replace', existing);
  const now = new Date(ctx.clock.now());
  const row = await ctx.sql.begin(async (tx) => {
    const updated = await updateUpstreamProvider(tx, {
      ...fields, id: existing.id, appId, now,
      clientSecretSealed: body.client_secret === undefined ? undefined : sealSecret(ctx, existing.id, body.client_secret),
      settings: sealedSettings(ctx, existing.id, fields.settings, existing.settings),
    });
    if (!updated) throw authError('UPSTREAM_PROVIDER_NOT_FOUND');
    await insertAuditEvent(tx, adminEvent('upstream_provider.updated', appId, origin, now, { provider_id: existing.id, kind: updated.kind, label: updated.label }));
    return updated;
  });
  return upstreamProviderJson(row);
}

export async function deleteUpstreamProviderOfApp(ctx: AuthContext, appId: string, providerId: string, origin: RequestOrigin): Promise<void> {
  const now = new Date(ctx.clock.now());
  await ctx.sql.begin(async (tx) => {
    if (!isUuid(providerId) || !(await deleteUpstreamProvider(tx, appId, providerId.toLowerCase()))) throw authError('UPSTREAM_PROVIDER_NOT_FOUND');
    await insertAuditEvent(tx, adminEvent('upstream_provider.deleted', appId, origin, now, { provider_id: providerId.toLowerCase() }));
  });
}

export async function listUpstreamProvidersOfApp(ctx: AuthContext, appId: string): Promise<UpstreamProviderRow[]> {
  return listUpstreamProviders(ctx.sql, appId);
}

/** 404 UPSTREAM_PROVIDER_NOT_FOUND for an unknown id or another app's provider. */
export async function getUpstreamProviderRow(ctx: AuthContext, appId: string, providerId: string): Promise<UpstreamProviderRow> {
  const row = isUuid(providerId) ? await findUpstreamProvider(ctx.sql, appId, providerId.toLowerCase()) : undefined;
  if (!row) throw authError('UPSTREAM_PROVIDER_NOT_FOUND');
  return row;
}

/** POST /admin/apps/:app_id/upstream-providers/:provider_id/test: fetches the discovery document now; 502 when it fails. */
export async function testUpstreamProvider(ctx: AuthContext, appId: string, providerId: string): Promise<{ ok: true; issuer: string; authorization_endpoint: string | null }> {
  const row = await getUpstreamProviderRow(ctx, appId, providerId);
  return { ok: true, ...(await ctx.upstream.clients.check(clientConfigOf(ctx, row))) };
}

/** The provider as the client needs it, its secrets unsealed. */
export function clientConfigOf(ctx: AuthContext, row: UpstreamProviderRow): UpstreamClientConfig {
  const settings: UpstreamSettings = { ...(row.settings as UpstreamSettings) };
  const sealedKey = (row.settings as { private_key_sealed?: string }).private_key_sealed;
  delete (settings as { private_key_sealed?: string }).private_key_sealed;
  if (sealedKey) settings.private_key = unseal(ctx.upstream.secretKey, Buffer.from(sealedKey, 'base64'), `${row.id}:apple-key`).toString('utf8');
  return {
    id: row.id,
    kind: row.kind,
    clientId: row.client_id,
    clientSecret: row.client_secret_sealed ? unseal(ctx.upstream.secretKey, row.client_secret_sealed, row.id).toString('utf8') : null,
    discoveryUrl: row.discovery_url,
    scopes: row.scopes,
    settings,
    updatedAt: row.updated_at,
  };
}

export function upstreamProviderJson(row: UpstreamProviderRow): UpstreamProviderJson {
  const settings = row.settings as UpstreamSettings;
  return {
    id: row.id,
    app_id: row.app_id,
    kind: row.kind,
    label: row.label,
    client_id: row.client_id,
    has_client_secret: row.client_secret_sealed !== null,
    discovery_url: row.discovery_url,
    scopes: row.scopes,
    redirect_uris: row.redirect_uris,
    trusted_email_domains: row.trusted_email_domains,
    tenant_id: row.tenant_id,
    default_role: row.default_role,
    require_sso: row.require_sso,
    ...(row.kind === 'apple' ? { apple: { team_id: settings.team_id!, key_id: settings.key_id! } } : {}),
    ...(row.kind === 'entra' ? { entra: { tenants: settings.tenants ?? [] } } : {}),
    ...(row.kind === 'github' ? { github: { web_base_url: settings.web_base_url!, api_base_url: settings.api_base_url! } } : {}),
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

interface CheckedFields {
  kind: UpstreamKind;
  label: string;
  clientId: string;
  discoveryUrl: string | null;
  scopes: string[];
  redirectUris: string[];
  trustedEmailDomains: string[];
  /** Apple's private key still in clear; sealedSettings seals it. */
  settings: UpstreamSettings;
  defaultRole: RoleName | null;
  requireSso: boolean;
}

/** The body's rules that a schema cannot say; 400 VALIDATION_ERROR naming the field. */
function checkedFields(body: UpstreamProviderBody, mode: 'create' | 'replace', existing?: UpstreamProviderRow): CheckedFields {
  const kind = body.kind;
  const invalid = (field: string, message: string) => authError('VALIDATION_ERROR', `Invalid field "${field}": ${message}`, { details: { field } });
  if (body.tenant_id === undefined && (body.default_role !== undefined || body.require_sso !== undefined)) {
    throw invalid(body.default_role !== undefined ? 'default_role' : 'require_sso', 'only a tenant\'s provider (tenant_id) takes it');
  }
  if (body.default_role !== undefined && !isRoleName(body.default_role)) throw invalid('default_role', `one of ${ROLE_NAMES.join(', ')}`);
  for (const other of ['apple', 'entra', 'github'] as const) {
    if (body[other] !== undefined && other !== kind) throw invalid(other, `only a provider of kind "${other}" takes it`);
  }
  if (kind === 'github' && body.discovery_url !== undefined) throw invalid('discovery_url', 'GitHub has no discovery document; give github.web_base_url and api_base_url for GitHub Enterprise');
  const discoveryUrl = kind === 'github' ? null : body.discovery_url ?? defaultDiscoveryUrl(kind);
  if (kind !== 'github' && !discoveryUrl) throw invalid('discovery_url', 'required for an "oidc" provider');
  if (discoveryUrl) checkUrl(discoveryUrl, 'discovery_url', invalid);
  for (const uri of body.redirect_uris) checkUrl(uri, 'redirect_uris', invalid);
  if (kind === 'apple') {
    if (!body.apple && !(mode === 'replace' && existing)) throw invalid('apple', 'required for Apple: team_id, key_id and private_key (the .p8 file)');
    if (body.client_secret !== undefined) throw invalid('client_secret', 'Apple\'s client secret is a JWT this service signs with apple.private_key');
    if (body.apple) {
      try {
        const key = createPrivateKey(body.apple.private_key);
        if (key.asymmetricKeyType !== 'ec' || key.asymmetricKeyDetails?.namedCurve !== 'prime256v1') throw new Error('not P-256');
      } catch {
        throw invalid('apple', 'private_key is not a P-256 (ES256) private key in PKCS #8 PEM');
      }
    }
  } else if (body.client_secret === undefined && mode === 'create') {
    throw invalid('client_secret', 'required');
  }
  let settings: UpstreamSettings = {};
  if (kind === 'apple') settings = body.apple ? { ...body.apple } : {};
  if (kind === 'entra') settings = { tenants: (body.entra?.tenants ?? []).map((t) => t.toLowerCase()) };
  if (kind === 'github') {
    const web = (body.github?.web_base_url ?? 'https://github.com').replace(/\/+$/, '');
    const api = (body.github?.api_base_url ?? 'https://api.github.com').replace(/\/+$/, '');
    checkUrl(web, 'github', invalid);
    checkUrl(api, 'github', invalid);
    settings = { web_base_url: web, api_base_url: api };
  }
  return {
    kind,
    label: body.label,
    clientId: body.client_id,
    discoveryUrl,
    scopes: body.scopes ?? defaultScopes(kind),
    redirectUris: body.redirect_uris,
    trustedEmailDomains: [...new Set(body.trusted_email_domains ?? [])],
    settings,
    defaultRole: body.default_role === undefined ? null : body.default_role as RoleName,
    requireSso: body.require_sso ?? false,
  };
}

/** https anywhere, http only on this machine; no fragment (a redirect URI: no query either, RFC 6749 3.1.2 allows one but we compare exactly). */
function checkUrl(value: string, field: string, invalid: (field: string, message: string) => Error): void {
  let parsed: URL;
  try { parsed = new URL(value); } catch { throw invalid(field, `"${value}" is not a URL`); }
  const loopback = ['127.0.0.1', 'localhost', '[::1]'].includes(parsed.hostname);
  if (parsed.protocol !== 'https:' && !(parsed.protocol === 'http:' && loopback)) throw invalid(field, `"${value}" must be https (http only for localhost)`);
  if (parsed.hash || parsed.username || parsed.password) throw invalid(field, `"${value}" must have no fragment or credentials`);
  if (field === 'redirect_uris' && parsed.search) throw invalid(field, `"${value}" must have no query`);
}

function sealSecret(ctx: AuthContext, providerId: string, secret: string): Buffer {
  return seal(ctx.upstream.secretKey, Buffer.from(secret, 'utf8'), providerId);
}

/** The settings as stored: Apple's private key sealed (kept from `previous` when not replaced). */
function sealedSettings(ctx: AuthContext, providerId: string, settings: UpstreamSettings, previous?: Record<string, unknown>): Record<string, unknown> {
  const { private_key: privateKey, ...rest } = settings;
  if (privateKey) return { ...rest, private_key_sealed: seal(ctx.upstream.secretKey, Buffer.from(privateKey, 'utf8'), `${providerId}:apple-key`).toString('base64') };
  if (previous && typeof previous.private_key_sealed === 'string') {
    return { team_id: previous.team_id, key_id: previous.key_id, ...rest, private_key_sealed: previous.private_key_sealed };
  }
  return rest;
}

function adminEvent(type: string, appId: string, origin: RequestOrigin, now: Date, details: Record<string, unknown>) {
  return { type, actor: 'admin' as const, appId, ip: origin.ip, userAgent: origin.userAgent, details, now };
}
