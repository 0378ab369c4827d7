// GET or POST /oauth/userinfo (OpenID Connect Core section 5.3): the claims of the access
// token's user that its scope releases. The token must have been granted `openid`.
import type { HttpResult } from '../../http/request.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { findUser } from '../queries/users.js';
import type { AccessTokenClaims } from '../tokens/access-token.js';
import { userClaims } from './id-token.js';

export async function userinfo(ctx: AuthContext, claims: AccessTokenClaims & { scope?: unknown }): Promise<HttpResult> {
  const scopes = typeof claims.scope === 'string' ? claims.scope.split(' ') : [];
  if (!scopes.includes('openid')) throw authError('INSUFFICIENT_SCOPE', 'The access token was not granted the openid scope');
  const user = await findUser(ctx.sql, claims.sub);
  if (!user || user.deleted_at) throw authError('TOKEN_INVALID', 'The user of this token no longer exists');
  return { body: { sub: user.id, ...userClaims(user, scopes) } };
}
