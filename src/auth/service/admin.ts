// Administration behind X-Admin-Key: apps, tenants, user soft-delete, signing-key rotation.
import type { AuthContext } from '../context.js';
import { isUniqueViolation } from '../db.js';
import { authError } from '../errors.js';
import { findApp, insertApp, listApps as selectApps, updateAppSecret, type AppRow } from '../queries/apps.js';
import { findTenant, insertTenant, listTenants as selectTenants, type TenantRow } from '../queries/tenants.js';
import { listSigningKeys as selectSigningKeys, type SigningKeySummary } from '../queries/signing-keys.js';
import { findUser, findUserByIdentifier, lockUser, setUserDeletedAt, type UserRow } from '../queries/users.js';
import { generateAppSecret, isUuid } from './credentials.js';
import { identifierOf } from './identity.js';
import { revokeLiveFamilies } from './sessions.js';

/** Creates an app; the secret is returned here and never again. 409 APP_SLUG_TAKEN. */
export async function createApp(ctx: AuthContext, app: { slug: string; name: string }): Promise<{ app: AppRow; secret: string }> {
  const { secret, hash } = generateAppSecret();
  try {
    const row = await insertApp(ctx.sql, { slug: app.slug, name: app.name, secretHash: hash, now: new Date(ctx.clock.now()) });
    return { app: row, secret };
  } catch (error) {
    if (isUniqueViolation(error)) throw authError('APP_SLUG_TAKEN');
    throw error;
  }
}

export async function getApp(ctx: AuthContext, appId: string): Promise<AppRow> {
  const app = isUuid(appId) ? await findApp(ctx.sql, appId) : undefined;
  if (!app) throw authError('APP_NOT_FOUND');
  return app;
}

export function listApps(ctx: AuthContext): Promise<AppRow[]> {
  return selectApps(ctx.sql);
}

/** Replaces the app's secret; the old one stops working at once. */
export async function rotateAppSecret(ctx: AuthContext, appId: string): Promise<{ app: AppRow; secret: string }> {
  const { secret, hash } = generateAppSecret();
  const app = isUuid(appId) ? await updateAppSecret(ctx.sql, appId, hash, new Date(ctx.clock.now())) : undefined;
  if (!app) throw authError('APP_NOT_FOUND');
  return { app, secret };
}

/** Creates a tenant in an app found by getApp. */
export async function createTenant(ctx: AuthContext, app: AppRow, name: string): Promise<TenantRow> {
  return insertTenant(ctx.sql, { appId: app.id, name, now: new Date(ctx.clock.now()) });
}

export async function getTenant(ctx: AuthContext, appId: string, tenantId: string): Promise<TenantRow> {
  const app = await getApp(ctx, appId);
  const tenant = isUuid(tenantId) ? await findTenant(ctx.sql, app.id, tenantId) : undefined;
  if (!tenant) throw authError('TENANT_NOT_FOUND');
  return tenant;
}

export async function listTenants(ctx: AuthContext, appId: string, page: { limit: number; offset: number }): Promise<TenantRow[]> {
  const app = await getApp(ctx, appId);
  return selectTenants(ctx.sql, app.id, page);
}

export async function getUser(ctx: AuthContext, userId: string): Promise<UserRow> {
  const user = isUuid(userId) ? await findUser(ctx.sql, userId) : undefined;
  if (!user) throw authError('USER_NOT_FOUND', 'The user does not exist');
  return user;
}

/** The users with this e-mail address or phone number (normalised as at login): none or one. */
export async function findUsers(ctx: AuthContext, query: { email?: string; phone?: string }): Promise<UserRow[]> {
  const user = await findUserByIdentifier(ctx.sql, identifierOf(query));
  return user ? [user] : [];
}

/**
 * Revokes every live session of the user in every app (as revoke-user does for one app), without
 * deleting the user: the next refresh of any of them is 401 TOKEN_REVOKED. Returns the count of
 * active sessions revoked.
 */
export async function revokeUserSessions(ctx: AuthContext, userId: string): Promise<number> {
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    const user = isUuid(userId) ? await lockUser(tx, userId) : undefined;
    if (!user) throw authError('USER_NOT_FOUND', 'The user does not exist');
    return revokeLiveFamilies(tx, userId, null, now, 'revoke_user');
  });
}

export function listSigningKeys(ctx: AuthContext): Promise<SigningKeySummary[]> {
  return selectSigningKeys(ctx.sql);
}

/**
 * Soft-deletes a user: deleted_at is set and every live session of the user, in every app, is
 * revoked. Roles and memberships are kept. Idempotent (deleting again keeps the first time).
 */
export async function softDeleteUser(ctx: AuthContext, userId: string): Promise<{ user: UserRow; sessionsRevoked: number }> {
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    const user = isUuid(userId) ? await lockUser(tx, userId) : undefined;
    if (!user) throw authError('USER_NOT_FOUND', 'The user does not exist');
    const deleted = user.deleted_at ? user : (await setUserDeletedAt(tx, userId, now))!;
    const sessionsRevoked = await revokeLiveFamilies(tx, userId, null, now, 'user_deleted');
    return { user: deleted, sessionsRevoked };
  });
}

/** Restores a soft-deleted user. Revoked sessions stay revoked: the user logs in again. Idempotent. */
export async function restoreUser(ctx: AuthContext, userId: string): Promise<UserRow> {
  return ctx.sql.begin(async (tx) => {
    const user = isUuid(userId) ? await lockUser(tx, userId) : undefined;
    if (!user) throw authError('USER_NOT_FOUND', 'The user does not exist');
    return user.deleted_at ? (await setUserDeletedAt(tx, userId, null))! : user;
  });
}
