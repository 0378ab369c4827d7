// Queries on tenants.
import type { Queryable } from '../database/client.js';

export interface TenantRow {
  id: string;
  app_id: string;
  name: string;
  created_at: Date;
}

export async function insertTenant(sql: Queryable, tenant: { appId: string; name: string; now: Date }): Promise<TenantRow> {
  const [row] = await sql<TenantRow[]>`
    insert into tenants (app_id, name, created_at)
    values (${tenant.appId}, ${tenant.name}, ${tenant.now})
    returning id, app_id, name, created_at
  `;
  return row!;
}

/** The tenant if it exists and belongs to the app; a tenant of another app is not found. */
export async function findTenant(sql: Queryable, appId: string, tenantId: string): Promise<TenantRow | undefined> {
  const [row] = await sql<TenantRow[]>`
    select id, app_id, name, created_at
    from tenants
    where id = ${tenantId} and app_id = ${appId}
  `;
  return row;
}

/** Oldest first; `limit` rows after skipping `offset`. */
export async function listTenants(sql: Queryable, appId: string, page: { limit: number; offset: number }): Promise<TenantRow[]> {
  return sql<TenantRow[]>`
    select id, app_id, name, created_at
    from tenants
    where app_id = ${appId}
    order by created_at, id
    limit ${page.limit} offset ${page.offset}
  `;
}
