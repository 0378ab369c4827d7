// Queries on tenants' e-mail domains (migration 0033).
import type { Queryable } from '../database/client.js';

export interface TenantDomainRow {
  id: string;
  app_id: string;
  tenant_id: string;
  domain: string;
  verification_token: string;
  verified_at: Date | null;
  created_at: Date;
}

/** Adds the claim, or returns the tenant's existing claim of the domain. */
export async function insertTenantDomain(sql: Queryable, claim: { id: string; appId: string; tenantId: string; domain: string; token: string; now: Date }): Promise<TenantDomainRow> {
  const [row] = await sql<TenantDomainRow[]>`
    insert into tenant_domains (id, app_id, tenant_id, domain, verification_token, created_at)
    values (${claim.id}, ${claim.appId}, ${claim.tenantId}, ${claim.domain}, ${claim.token}, ${claim.now})
    on conflict (tenant_id, domain) do update set domain = excluded.domain
    returning *
  `;
  return row!;
}

/** The tenant that verified the domain in the app, if any. */
export async function findVerifiedDomain(sql: Queryable, appId: string, domain: string): Promise<TenantDomainRow | undefined> {
  const [row] = await sql<TenantDomainRow[]>`select * from tenant_domains where app_id = ${appId} and domain = ${domain} and verified_at is not null`;
  return row;
}

export async function findTenantDomain(sql: Queryable, tenantId: string, id: string): Promise<TenantDomainRow | undefined> {
  const [row] = await sql<TenantDomainRow[]>`select * from tenant_domains where tenant_id = ${tenantId} and id = ${id}`;
  return row;
}

export async function listTenantDomains(sql: Queryable, tenantId: string): Promise<TenantDomainRow[]> {
  return sql<TenantDomainRow[]>`select * from tenant_domains where tenant_id = ${tenantId} order by created_at, domain`;
}

export async function markDomainVerified(sql: Queryable, id: string, now: Date): Promise<TenantDomainRow> {
  const [row] = await sql<TenantDomainRow[]>`update tenant_domains set verified_at = coalesce(verified_at, ${now}) where id = ${id} returning *`;
  return row!;
}

export async function deleteTenantDomain(sql: Queryable, tenantId: string, id: string): Promise<boolean> {
  const rows = await sql`delete from tenant_domains where tenant_id = ${tenantId} and id = ${id} returning id`;
  return rows.length > 0;
}
