// Queries on roles: one role per (user, tenant), the tenant fixing the app.
import type { Queryable } from '../database/client.js';
import type { RoleName } from '../roles.js';

export interface RoleRow {
  tenant_id: string;
  role: RoleName;
}

/** Assigns or replaces the user's role in the tenant. The first assignment's time is kept. */
export async function upsertRole(sql: Queryable, grant: { appId: string; userId: string; tenantId: string; role: RoleName; now: Date }): Promise<void> {
  await sql`
    insert into roles (user_id, tenant_id, app_id, role, assigned_at)
    values (${grant.userId}, ${grant.tenantId}, ${grant.appId}, ${grant.role}, ${grant.now})
    on conflict (user_id, tenant_id) do update
    set role = excluded.role
  `;
}

/** Removes the user's role in the tenant; returns the removed role, if there was one. */
export async function deleteRole(sql: Queryable, appId: string, userId: string, tenantId: string): Promise<RoleName | undefined> {
  const [row] = await sql<{ role: RoleName }[]>`
    delete from roles
    where user_id = ${userId} and tenant_id = ${tenantId} and app_id = ${appId}
    returning role
  `;
  return row?.role;
}

/** The user's roles in the app, oldest assignment first (the default tenant comes first). */
export async function listRolesOfUser(sql: Queryable, appId: string, userId: string): Promise<RoleRow[]> {
  return sql<RoleRow[]>`
    select tenant_id, role
    from roles
    where app_id = ${appId} and user_id = ${userId}
    order by assigned_at, tenant_id
  `;
}
