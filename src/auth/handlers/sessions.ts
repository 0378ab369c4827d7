// POST /auth/refresh, POST /auth/revoke, POST /auth/revoke-user.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import type { RefreshBody, RevokeBody, RevokeUserBody } from '../schemas.js';
import type { AuthenticatedApp, PresentedCredentials } from '../service/credentials.js';
import { refreshSession, revokeSession, revokeUserSessions } from '../service/sessions.js';

type AppInput<B> = { app: AuthenticatedApp; body: B };

/** 200 with the same body as a login: the new access and refresh tokens. */
export async function handleRefresh(ctx: AuthContext, { credentials, body }: { credentials: PresentedCredentials; body: RefreshBody }, req: HttpRequest): Promise<HttpResult> {
  return { body: await refreshSession(ctx, credentials, body.refresh_token, body.tenant_id, requestOrigin(ctx, req)) };
}

/** 200 `{success: true}`, also for a token whose family is already revoked. */
export async function handleRevoke(ctx: AuthContext, { app, body }: AppInput<RevokeBody>, req: HttpRequest): Promise<HttpResult> {
  await revokeSession(ctx, app, body.refresh_token, requestOrigin(ctx, req));
  return { body: { success: true } };
}

/** 200 `{sessions_revoked: n}`. */
export async function handleRevokeUser(ctx: AuthContext, { app, body }: AppInput<RevokeUserBody>, req: HttpRequest): Promise<HttpResult> {
  return { body: { sessions_revoked: await revokeUserSessions(ctx, app, body.user_id.toLowerCase(), requestOrigin(ctx, req)) } };
}
