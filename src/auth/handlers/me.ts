// GET /auth/me: the claims of the presented access token, nothing from the database.
import type { HttpResult } from '../../http/request.js';
import type { AuthContext } from '../context.js';
import type { AccessTokenClaims } from '../tokens/access-token.js';

/** 200 `{user_id, app_id, tenant_id, roles}`. */
export async function handleMe(_ctx: AuthContext, { claims }: { claims: AccessTokenClaims }): Promise<HttpResult> {
  return { body: { user_id: claims.sub, app_id: claims.app_id, tenant_id: claims.tenant_id, roles: claims.roles } };
}
