// Enterprise SSO per tenant. A tenant brings its own OpenID Connect provider (an upstream
// provider with tenant_id: Okta, Entra ID, Google Workspace, Keycloak) and claims e-mail
// domains, each proven by a DNS TXT record (sso/domain-proof.ts). A verified domain belongs to
// one tenant of the app (409 DOMAIN_CLAIMED for the second). Then:
// - home-realm discovery: POST /auth/sso/discover names the provider of an address's domain, and
//   the app starts the usual upstream flow with it;
// - the tenant's verified domains are domains its provider is trusted for (joining an existing
//   user by a verified address, upstream-sign-in.ts);
// - the first sign-in through it gives the user the provider's default_role in the tenant, and
//   the token is for that tenant unless the login asked for another;
// - with require_sso, code and passkey logins of addresses in its verified domains are refused
//   (403 SSO_REQUIRED), so leaving the company's directory ends access here too.
import { randomBytes, randomUUID } from 'node:crypto';
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { isUniqueViolation, type Queryable } from '../database/client.js';
import { authError } from '../errors.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import { findTenant, type TenantRow } from '../queries/tenants.js';
import {
  deleteTenantDomain, findTenantDomain, findVerifiedDomain, insertTenantDomain, listTenantDomains, markDomainVerified, type TenantDomainRow,
} from '../queries/tenant-domains.js';
import { findSsoProviderOfDomain } from '../queries/upstream-providers.js';
import { DnsUnavailable, PROOF_RECORD_PREFIX, PROOF_VALUE_PREFIX } from '../sso/domain-proof.js';
import type { AuthenticatedApp } from './credentials.js';
import { isUuid } from './credentials.js';

export interface TenantDomainJson {
  id: string;
  tenant_id: string;
  domain: string;
  verified_at: string | null;
  verification: { type: 'TXT'; name: string; value: string };
  created_at: string;
}

const DOMAIN = /^[a-z0-9]([a-z0-9-]{0,62})(\.[a-z0-9]([a-z0-9-]{0,62}))+$/;

/** POST /admin/apps/:app_id/tenants/:tenant_id/domains: 201 the claim with the TXT record to publish. */
export async function claimDomain(ctx: AuthContext, appId: string, tenantId: string, domain: string): Promise<TenantDomainJson> {
  const tenant = await tenantOf(ctx, appId, tenantId);
  const name = domain.trim().toLowerCase().replace(/\.$/, '');
  if (name.length > 253 || !DOMAIN.test(name)) throw authError('VALIDATION_ERROR', 'Invalid field "domain": a domain name such as example.com', { details: { field: 'domain' } });
  const owner = await findVerifiedDomain(ctx.sql, appId, name);
  if (owner && owner.tenant_id !== tenant.id) throw authError('DOMAIN_CLAIMED');
  const row = await insertTenantDomain(ctx.sql, { id: randomUUID(), appId, tenantId: tenant.id, domain: name, token: randomBytes(24).toString('base64url'), now: new Date(ctx.clock.now()) });
  return domainJson(row);
}

/**
 * POST .../domains/:domain_id/verify: looks the TXT record up now. 409 DOMAIN_NOT_VERIFIED when
 * it is absent, 409 DOMAIN_CLAIMED when another tenant verified the domain first, 502
 * DNS_UNAVAILABLE when the resolver fails.
 */
export async function verifyDomain(ctx: AuthContext, appId: string, tenantId: string, domainId: string, origin: RequestOrigin): Promise<TenantDomainJson> {
  const tenant = await tenantOf(ctx, appId, tenantId);
  const row = isUuid(domainId) ? await findTenantDomain(ctx.sql, tenant.id, domainId.toLowerCase()) : undefined;
  if (!row) throw authError('DOMAIN_NOT_FOUND');
  if (row.verified_at) return domainJson(row);
  let values: string[];
  try {
    values = await ctx.domainProof.txt(`${PROOF_RECORD_PREFIX}${row.domain}`);
  } catch (error) {
    if (error instanceof DnsUnavailable) throw authError('DNS_UNAVAILABLE', undefined, { cause: error });
    throw error;
  }
  if (!values.includes(`${PROOF_VALUE_PREFIX}${row.verification_token}`)) throw authError('DOMAIN_NOT_VERIFIED');
  const now = new Date(ctx.clock.now());
  try {
    return await ctx.sql.begin(async (tx) => {
      const verified = await markDomainVerified(tx, row.id, now);
      await insertAuditEvent(tx, {
        type: 'sso.domain_verified', actor: 'admin', appId, ip: origin.ip, userAgent: origin.userAgent, now,
        details: { tenant_id: tenant.id, domain: row.domain },
      });
      return domainJson(verified);
    });
  } catch (error) {
    if (isUniqueViolation(error)) throw authError('DOMAIN_CLAIMED');
    throw error;
  }
}

export async function listDomains(ctx: AuthContext, appId: string, tenantId: string): Promise<TenantDomainJson[]> {
  const tenant = await tenantOf(ctx, appId, tenantId);
  return (await listTenantDomains(ctx.sql, tenant.id)).map(domainJson);
}

export async function removeDomain(ctx: AuthContext, appId: string, tenantId: string, domainId: string): Promise<void> {
  const tenant = await tenantOf(ctx, appId, tenantId);
  if (!isUuid(domainId) || !(await deleteTenantDomain(ctx.sql, tenant.id, domainId.toLowerCase()))) throw authError('DOMAIN_NOT_FOUND');
}

/** POST /auth/sso/discover: the tenant provider an address must (or may) sign in with. */
export async function discoverRealm(ctx: AuthContext, app: AuthenticatedApp, email: string): Promise<{ sso: false } | { sso: true; provider_id: string; tenant_id: string; label: string; required: boolean }> {
  const provider = await findSsoProviderOfDomain(ctx.sql, app.id, domainOf(email));
  if (!provider) return { sso: false };
  return { sso: true, provider_id: provider.id, tenant_id: provider.tenant_id!, label: provider.label, required: provider.require_sso };
}

/** 403 SSO_REQUIRED when the address's domain is verified by a tenant that requires its provider. */
export async function refuseIfSsoRequired(sql: Queryable, appId: string, email: string | null): Promise<void> {
  if (!email) return;
  const provider = await findSsoProviderOfDomain(sql, appId, domainOf(email));
  if (provider?.require_sso) throw authError('SSO_REQUIRED');
}

function domainOf(email: string): string {
  return email.slice(email.lastIndexOf('@') + 1).toLowerCase();
}

async function tenantOf(ctx: AuthContext, appId: string, tenantId: string): Promise<TenantRow> {
  const tenant = isUuid(tenantId) ? await findTenant(ctx.sql, appId, tenantId.toLowerCase()) : undefined;
  if (!tenant) throw authError('TENANT_NOT_FOUND');
  return tenant;
}

function domainJson(row: TenantDomainRow): TenantDomainJson {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    domain: row.domain,
    verified_at: row.verified_at?.toISOString() ?? null,
    verification: { type: 'TXT', name: `${PROOF_RECORD_PREFIX}${row.domain}`, value: `${PROOF_VALUE_PREFIX}${row.verification_token}` },
    created_at: row.created_at.toISOString(),
  };
}
