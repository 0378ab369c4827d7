// POST /auth/roles/assign and POST /auth/roles/revoke.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { isRoleName, ROLE_NAMES } from '../roles.js';
import type { RoleAssignBody, RoleRevokeBody } from '../schemas.js';
import type { AuthenticatedApp } from '../service/credentials.js';
import { assignRole, revokeRole } from '../service/roles.js';

type AppInput<B> = { app: AuthenticatedApp; body: B };

/** 200 `{user_id, tenant_id, role}`: the role now held. */
export async function handleRoleAssign(ctx: AuthContext, { app, body }: AppInput<RoleAssignBody>, req: HttpRequest): Promise<HttpResult> {
  if (!isRoleName(body.role)) {
    throw authError('VALIDATION_ERROR', `Invalid field "role": expected one of ${ROLE_NAMES.join(', ')}`, { details: { field: 'role' } });
  }
  const userId = body.user_id.toLowerCase();
  const tenantId = body.tenant_id.toLowerCase();
  await assignRole(ctx, app, { userId, tenantId, role: body.role }, requestOrigin(ctx, req));
  return { body: { user_id: userId, tenant_id: tenantId, role: body.role } };
}

/** 200 `{user_id, tenant_id, role: null, previous_role}`; previous_role is null when there was none. */
export async function handleRoleRevoke(ctx: AuthContext, { app, body }: AppInput<RoleRevokeBody>, req: HttpRequest): Promise<HttpResult> {
  const userId = body.user_id.toLowerCase();
  const tenantId = body.tenant_id.toLowerCase();
  const previous = await revokeRole(ctx, app, { userId, tenantId }, requestOrigin(ctx, req));
  return { body: { user_id: userId, tenant_id: tenantId, role: null, previous_role: previous } };
}
