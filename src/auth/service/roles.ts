// Role assignment. Writes apply immediately; tokens already issued keep their claims, and the
// new role appears in the next login or refresh.
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import { deleteRole, upsertRole } from '../queries/roles.js';
import { findTenant } from '../queries/tenants.js';
import { findMember } from '../queries/users.js';
import type { RoleName } from '../roles.js';
import type { AuthenticatedApp } from './credentials.js';

/** POST /auth/roles/assign: 404 USER_NOT_FOUND (not a member of the app), 403 USER_DELETED, 404 TENANT_NOT_FOUND. */
export async function assignRole(ctx: AuthContext, app: AuthenticatedApp, grant: { userId: string; tenantId: string; role: RoleName }, origin: RequestOrigin): Promise<void> {
  const now = new Date(ctx.clock.now());
  await ctx.sql.begin(async (tx) => {
    const user = await findMember(tx, app.id, grant.userId);
    if (!user) throw authError('USER_NOT_FOUND');
    if (user.deleted_at) throw authError('USER_DELETED');
    if (!(await findTenant(tx, app.id, grant.tenantId))) throw authError('TENANT_NOT_FOUND');
    await upsertRole(tx, { appId: app.id, userId: grant.userId, tenantId: grant.tenantId, role: grant.role, now });
    await insertAuditEvent(tx, {
      type: 'role.assigned', actor: 'app', appId: app.id, userId: grant.userId, ip: origin.ip, userAgent: origin.userAgent,
      details: { tenant_id: grant.tenantId, role: grant.role }, now,
    });
  });
}

/**
 * POST /auth/roles/revoke: removes the user's role in the tenant; returns the removed role, or
 * null when the user had none (still 200: the requested state holds). Works for soft-deleted
 * users too, since removing access is always safe.
 */
export async function revokeRole(ctx: AuthContext, app: AuthenticatedApp, target: { userId: string; tenantId: string }, origin: RequestOrigin): Promise<RoleName | null> {
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    if (!(await findMember(tx, app.id, target.userId))) throw authError('USER_NOT_FOUND');
    if (!(await findTenant(tx, app.id, target.tenantId))) throw authError('TENANT_NOT_FOUND');
    const previous = await deleteRole(tx, app.id, target.userId, target.tenantId);
    if (previous) {
      await insertAuditEvent(tx, {
        type: 'role.revoked', actor: 'app', appId: app.id, userId: target.userId, ip: origin.ip, userAgent: origin.userAgent,
        details: { tenant_id: target.tenantId, previous_role: previous }, now,
      });
    }
    return previous ?? null;
  });
}
