// The sessions API: POST /auth/sessions, /auth/sessions/revoke, /auth/sessions/revoke-others
// (the app's backend for its user), GET and DELETE /admin/users/:user_id/sessions[/:session_id].
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import type { SessionEndBody, SessionsBody } from '../schemas.js';
import type { AuthenticatedApp } from '../service/credentials.js';
import { endOtherSessions, endOwnSession, endUserSession, listOwnSessions, listUserSessions } from '../service/user-sessions.js';

type AppInput<B> = { app: AuthenticatedApp; body: B };

/** 200 `{sessions: [{id, app_id, app_slug, created_at, last_used_at, expires_at, ip, user_agent, current}]}`. */
export async function handleListOwnSessions(ctx: AuthContext, { app, body }: AppInput<SessionsBody>): Promise<HttpResult> {
  return { body: { sessions: await listOwnSessions(ctx, app, body.refresh_token) } };
}

/** 200 `{success: true}`. */
export async function handleEndOwnSession(ctx: AuthContext, { app, body }: AppInput<SessionEndBody>, req: HttpRequest): Promise<HttpResult> {
  await endOwnSession(ctx, app, body.refresh_token, body.session_id, requestOrigin(ctx, req));
  return { body: { success: true } };
}

/** 200 `{sessions_revoked: n}`. */
export async function handleEndOtherSessions(ctx: AuthContext, { app, body }: AppInput<SessionsBody>, req: HttpRequest): Promise<HttpResult> {
  return { body: { sessions_revoked: await endOtherSessions(ctx, app, body.refresh_token, requestOrigin(ctx, req)) } };
}

/** 200 `{user_id, sessions: [...]}` (without `current`). */
export async function handleListUserSessions(ctx: AuthContext, _: Record<string, never>, req: HttpRequest): Promise<HttpResult> {
  const userId = req.params.user_id!;
  return { body: { user_id: userId, sessions: await listUserSessions(ctx, userId) } };
}

/** 200 `{success: true}`. */
export async function handleEndUserSession(ctx: AuthContext, _: Record<string, never>, req: HttpRequest): Promise<HttpResult> {
  await endUserSession(ctx, req.params.user_id!, req.params.session_id!, requestOrigin(ctx, req));
  return { body: { success: true } };
}
