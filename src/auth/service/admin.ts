// Administration behind X-Admin-Key: apps, tenants, user soft-delete, signing-key rotation.
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { isUniqueViolation } from '../database/client.js';
import { authError } from '../errors.js';
import { insertAuditEvent, type NewAuditEvent } from '../queries/audit-events.js';
import { findAppMessageTemplate, upsertAppMessageTemplate, type MessageTemplateRow } from '../queries/message-templates.js';
import { findApp, findAppBySlug, insertApp, listApps as selectApps, updateAppSecret, type AppRow } from '../queries/apps.js';
import { findTenant, insertTenant, listTenants as selectTenants, type TenantRow } from '../queries/tenants.js';
import { listSigningKeys as selectSigningKeys, type SigningKeySummary } from '../queries/signing-keys.js';
import { findUser, findUserByIdentifier, lockUser, setUserDeletedAt, type UserRow } from '../queries/users.js';
import { APP_SLUG_PATTERN } from '../schemas.js';
import { generateAppSecret, isUuid } from './credentials.js';
import { identifierOf } from './identity.js';
import { revokeLiveFamilies } from './sessions.js';

const SLUG = new RegExp(APP_SLUG_PATTERN);

/** Creates an app; the secret is returned here and never again. 409 APP_SLUG_TAKEN. */
export async function createApp(ctx: AuthContext, app: { slug: string; name: string }, origin: RequestOrigin): Promise<{ app: AppRow; secret: string }> {
  const { secret, hash } = generateAppSecret();
  const now = new Date(ctx.clock.now());
  try {
    const row = await ctx.sql.begin(async (tx) => {
      const inserted = await insertApp(tx, { slug: app.slug, name: app.name, secretHash: hash, now });
      await insertAuditEvent(tx, { ...adminAudit(origin, now), type: 'app.created', appId: inserted.id, details: { slug: inserted.slug } });
      return inserted;
    });
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

/** The app named by its id or its slug; 404 APP_NOT_FOUND when neither names one. */
export async function getAppByIdOrSlug(ctx: AuthContext, value: string): Promise<AppRow> {
  if (isUuid(value)) return getApp(ctx, value);
  const app = SLUG.test(value) ? await findAppBySlug(ctx.sql, value) : undefined;
  if (!app) throw authError('APP_NOT_FOUND');
  return app;
}

export function listApps(ctx: AuthContext): Promise<AppRow[]> {
  return selectApps(ctx.sql);
}

/** Replaces the app's secret; the old one stops working at once. */
export async function rotateAppSecret(ctx: AuthContext, appId: string, origin: RequestOrigin): Promise<{ app: AppRow; secret: string }> {
  if (!isUuid(appId)) throw authError('APP_NOT_FOUND');
  const { secret, hash } = generateAppSecret();
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    const app = await updateAppSecret(tx, appId, hash, now);
    if (!app) throw authError('APP_NOT_FOUND');
    await insertAuditEvent(tx, { ...adminAudit(origin, now), type: 'app.secret_rotated', appId: app.id });
    return { app, secret };
  });
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
export async function revokeUserSessions(ctx: AuthContext, userId: string, origin: RequestOrigin): Promise<number> {
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    const user = isUuid(userId) ? await lockUser(tx, userId) : undefined;
    if (!user) throw authError('USER_NOT_FOUND', 'The user does not exist');
    const revoked = await revokeLiveFamilies(tx, userId, null, now, 'revoke_user');
    await insertAuditEvent(tx, { ...adminAudit(origin, now), type: 'user.sessions_revoked', userId, details: { sessions_revoked: revoked } });
    return revoked;
  });
}

export function listSigningKeys(ctx: AuthContext): Promise<SigningKeySummary[]> {
  return selectSigningKeys(ctx.sql);
}

/**
 * Soft-deletes a user: deleted_at is set and every live session of the user, in every app, is
 * revoked. Roles and memberships are kept. Idempotent (deleting again keeps the first time).
 */
export async function softDeleteUser(ctx: AuthContext, userId: string, origin: RequestOrigin): Promise<{ user: UserRow; sessionsRevoked: number }> {
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    const user = isUuid(userId) ? await lockUser(tx, userId) : undefined;
    if (!user) throw authError('USER_NOT_FOUND', 'The user does not exist');
    const deleted = user.deleted_at ? user : (await setUserDeletedAt(tx, userId, now))!;
    const sessionsRevoked = await revokeLiveFamilies(tx, userId, null, now, 'user_deleted');
    if (!user.deleted_at) {
      await insertAuditEvent(tx, { ...adminAudit(origin, now), type: 'user.deleted', userId, details: { sessions_revoked: sessionsRevoked } });
    }
    return { user: deleted, sessionsRevoked };
  });
}

/** Restores a soft-deleted user. Revoked sessions stay revoked: the user logs in again. Idempotent. */
export async function restoreUser(ctx: AuthContext, userId: string, origin: RequestOrigin): Promise<UserRow> {
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    const user = isUuid(userId) ? await lockUser(tx, userId) : undefined;
    if (!user) throw authError('USER_NOT_FOUND', 'The user does not exist');
    if (!user.deleted_at) return user;
    await insertAuditEvent(tx, { ...adminAudit(origin, now), type: 'user.restored', userId });
    return (await setUserDeletedAt(tx, userId, null))!;
  });
}

/** Rotates the signing keys (SigningKeyRing.rotate), recording the rotation in its transaction. */
export function rotateSigningKeys(ctx: AuthContext, origin: RequestOrigin): Promise<{ kid: string; retiredKid: string | null }> {
  return ctx.keys.rotate(async (tx, rotated) => {
    await insertAuditEvent(tx, {
      ...adminAudit(origin, new Date(ctx.clock.now())), type: 'signing_key.rotated',
      details: { kid: rotated.kid, retired_kid: rotated.retiredKid },
    });
  });
}

export const SENDER = /^(?:[^<>@"]{1,100} <[^\s<>@]+@[^\s<>@]+\.[^\s<>@]+>|[^\s<>@]+@[^\s<>@]+\.[^\s<>@]+)$/;

/** The app's own message template fields (null where the default applies). */
export async function getMessageTemplates(ctx: AuthContext, appId: string): Promise<MessageTemplateRow> {
  const app = await getApp(ctx, appId);
  const { name: _name, ...own } = await findAppMessageTemplate(ctx.sql, app.id);
  return own;
}

/** Replaces the app's message template fields; 400 for a sender that is not an address, a text without {{code}}. */
export async function setMessageTemplates(ctx: AuthContext, appId: string, template: MessageTemplateRow): Promise<MessageTemplateRow> {
  const app = await getApp(ctx, appId);
  if (template.email_from !== null && !SENDER.test(template.email_from)) {
    throw authError('VALIDATION_ERROR', 'Invalid field "email_from": expected login@example.com or Example <login@example.com>', { details: { field: 'email_from' } });
  }
  for (const field of ['email_text', 'sms_text'] as const) {
    if (template[field] !== null && !template[field]!.includes('{{code}}')) {
      throw authError('VALIDATION_ERROR', `Invalid field "${field}": the text must contain {{code}}`, { details: { field } });
    }
  }
  await upsertAppMessageTemplate(ctx.sql, app.id, template, new Date(ctx.clock.now()));
  return template;
}

/** Records a request refused for its X-Admin-Key (no key, or a wrong one). */
export async function recordRejectedAdminKey(ctx: AuthContext, origin: RequestOrigin, request: { method: string; path: string }): Promise<void> {
  await insertAuditEvent(ctx.sql, {
    type: 'admin.key_rejected', actor: 'anonymous', ip: origin.ip, userAgent: origin.userAgent,
    details: { method: request.method, path: request.path }, now: new Date(ctx.clock.now()),
  });
}

/** The audit fields of an admin action. */
function adminAudit(origin: RequestOrigin, now: Date): Omit<NewAuditEvent, 'type'> {
  return { actor: 'admin', ip: origin.ip, userAgent: origin.userAgent, now };
}
