// The sessions API: a user's live sessions (refresh families), listed with the current one marked,
// one of them ended, or all but the current one ended; the admin does the same for any user. The
// user acts through the app's backend, which holds the session's refresh token (an HttpOnly cookie
// or a server-side store, never localStorage or a URL): the app credentials and that token identify
// the user and the current session, so no access-token claim names a session. Ending a session is a
// revocation: the same row lock, audit events (`session.revoked`, `user.sessions_revoked`) and so
// the same webhooks.
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import { findRefreshTokenStatus, listLiveSessionsOfUser, lockFamilyOfUser, lockLiveFamiliesOfUser, revokeRefreshFamilies, revokeRefreshFamily, type SessionRow } from '../queries/refresh-tokens.js';
import { findUser } from '../queries/users.js';
import { hashRefreshToken } from '../tokens/refresh-token.js';
import type { AuthenticatedApp } from './credentials.js';
import { isUuid } from './credentials.js';

export interface SessionJson {
  id: string;
  app_id: string;
  app_slug: string;
  created_at: string;
  last_used_at: string;
  expires_at: string;
  ip: string | null;
  user_agent: string | null;
  /** Only in the user's own list: the session of the presented refresh token. */
  current?: boolean;
}

/**
 * The session of a presented refresh token, which must be the live token of a live session of
 * this app: 401 TOKEN_INVALID (unknown, another app's, rotated or expired), 401 TOKEN_REVOKED,
 * 403 USER_DELETED. Read without a lock: the family id it returns never changes, and each
 * operation below locks what it changes.
 */
export async function presentedSession(ctx: AuthContext, app: AuthenticatedApp, presented: string): Promise<{ userId: string; familyId: string }> {
  const hash = hashRefreshToken(presented);
  const status = hash ? await findRefreshTokenStatus(ctx.sql, hash) : undefined;
  if (!status || status.app_id !== app.id) throw authError('TOKEN_INVALID', 'Invalid refresh token');
  if (status.user_deleted_at) throw authError('USER_DELETED');
  if (status.family_revoked_at) throw authError('TOKEN_REVOKED');
  if (!status.is_current) throw authError('TOKEN_INVALID', 'The refresh token was rotated; present the live one');
  if (status.expires_at.getTime() <= ctx.clock.now()) throw authError('TOKEN_INVALID', 'The refresh token has expired; log in again');
  return { userId: status.user_id, familyId: status.family_id };
}

/** POST /auth/sessions: the user's live sessions in this app, the presented one `current`. */
export async function listOwnSessions(ctx: AuthContext, app: AuthenticatedApp, presented: string): Promise<SessionJson[]> {
  const { userId, familyId } = await presentedSession(ctx, app, presented);
  const rows = await listLiveSessionsOfUser(ctx.sql, userId, app.id, new Date(ctx.clock.now()));
  return rows.map((row) => ({ ...sessionJson(row), current: row.id === familyId }));
}

/**
 * POST /auth/sessions/revoke: ends one session of the user in this app (the current one too:
 * that is a logout). Idempotent for an ended one; 404 SESSION_NOT_FOUND for an id that is not a
 * session of this user in this app, another user's included.
 */
export async function endOwnSession(ctx: AuthContext, app: AuthenticatedApp, presented: string, sessionId: string, origin: RequestOrigin): Promise<void> {
  const { userId } = await presentedSession(ctx, app, presented);
  await endSession(ctx, { userId, appId: app.id, sessionId, actor: 'app', reason: 'logout', origin });
}

/**
 * POST /auth/sessions/revoke-others: ends every live session of the user in this app but the
 * current one; returns how many were active. The families are locked in id order (as
 * revoke-user does), so this cannot deadlock with another revocation of the same user.
 */
export async function endOtherSessions(ctx: AuthContext, app: AuthenticatedApp, presented: string, origin: RequestOrigin): Promise<number> {
  const { userId, familyId } = await presentedSession(ctx, app, presented);
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    const others = (await lockLiveFamiliesOfUser(tx, userId, app.id)).filter((family) => family.id !== familyId);
    const revoked = others.length === 0 ? 0 : await revokeRefreshFamilies(tx, {
      familyIds: others.map((f) => f.id), currentTokenIds: others.map((f) => f.current_token_id), now, reason: 'revoke_user',
    });
    await insertAuditEvent(tx, {
      type: 'user.sessions_revoked', actor: 'app', appId: app.id, userId, familyId, ip: origin.ip, userAgent: origin.userAgent,
      details: { sessions_revoked: revoked, kept_session_id: familyId }, now,
    });
    return revoked;
  });
}

/** GET /admin/users/:user_id/sessions: the user's live sessions in every app. 404 USER_NOT_FOUND. */
export async function listUserSessions(ctx: AuthContext, userId: string): Promise<SessionJson[]> {
  if (!isUuid(userId) || !(await findUser(ctx.sql, userId))) throw authError('USER_NOT_FOUND', 'The user does not exist');
  return (await listLiveSessionsOfUser(ctx.sql, userId, null, new Date(ctx.clock.now()))).map(sessionJson);
}

/** DELETE /admin/users/:user_id/sessions/:session_id: ends one session of the user. 404 USER_NOT_FOUND, SESSION_NOT_FOUND. */
export async function endUserSession(ctx: AuthContext, userId: string, sessionId: string, origin: RequestOrigin): Promise<void> {
  if (!isUuid(userId) || !(await findUser(ctx.sql, userId))) throw authError('USER_NOT_FOUND', 'The user does not exist');
  await endSession(ctx, { userId, appId: null, sessionId, actor: 'admin', reason: 'revoke_user', origin });
}

/**
 * Revokes one family of the user under its row lock, and records `session.revoked` when it was
 * live (ending an ended session changes nothing and records nothing). A rotation waiting for the
 * same lock then finds it revoked; one that held it first left its new token current, which
 * this statement revokes.
 */
async function endSession(ctx: AuthContext, end: {
  userId: string; appId: string | null; sessionId: string; actor: 'app' | 'admin'; reason: 'logout' | 'revoke_user'; origin: RequestOrigin;
}): Promise<void> {
  if (!isUuid(end.sessionId)) throw authError('SESSION_NOT_FOUND');
  const now = new Date(ctx.clock.now());
  await ctx.sql.begin(async (tx) => {
    const family = await lockFamilyOfUser(tx, end.sessionId.toLowerCase(), end.userId, end.appId);
    if (!family) throw authError('SESSION_NOT_FOUND');
    if (family.revoked_at) return;
    await revokeRefreshFamily(tx, { familyId: family.id, currentTokenId: family.current_token_id, now, reason: end.reason });
    await insertAuditEvent(tx, {
      type: 'session.revoked', actor: end.actor, appId: family.app_id, userId: end.userId, familyId: family.id,
      ip: end.origin.ip, userAgent: end.origin.userAgent, details: { ended_by: end.actor === 'app' ? 'user' : 'admin' }, now,
    });
  });
}

function sessionJson(row: SessionRow): SessionJson {
  return {
    id: row.id,
    app_id: row.app_id,
    app_slug: row.app_slug,
    created_at: row.created_at.toISOString(),
    last_used_at: row.last_used_at.toISOString(),
    expires_at: row.expires_at.toISOString(),
    ip: row.ip,
    user_agent: row.user_agent,
  };
}
