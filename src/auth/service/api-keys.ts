// API keys of an app (admin API) and their verification. Creating, rotating and revoking a key
// records its audit event (api_key.created, .rotated, .revoked; the webhook outbox follows from
// it, migration 0015) in the change's transaction; no event carries the key. A rotation or
// revocation tells the in-process verifiers to forget the key (tokens/api-key-verifier.ts):
// those of this service as soon as it commits, before the admin's answer; those of every other
// thread and instance on the database by a NOTIFY sent with the commit, so a few milliseconds
// later (and should a notification be lost with its connection, their cache TTL still bounds it).
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import {
  findLiveApiKeyByHash, insertApiKey, notifyApiKeyChanged, listApiKeys as selectApiKeys, lockApiKey, setApiKeyRevokedAt, touchApiKey, updateApiKeyHash,
  type ApiKeyIdentityRow, type ApiKeyRow,
} from '../queries/api-keys.js';
import { findTenant } from '../queries/tenants.js';
import type { RoleName } from '../roles.js';
import { apiKeyLimits, generateApiKey, hashApiKey, hasApiKeyFormat, type ApiKeyIdentity } from '../tokens/api-key.js';
import { getApp } from './admin.js';
import { isUuid } from './credentials.js';
import { checkTenantSettings, type TenantSettings } from '../../inference/tenants/tenant.js';

/** A key's last_used_at is written at most this often per key by one process (and by all: touchApiKey). */
export const API_KEY_TOUCH_INTERVAL_MS = 60_000;

/** A new key: who it is, and its tenant's settings (checked as the inference server checks every tenant's). */
export interface NewApiKeySettings extends TenantSettings {
  name: string;
  tenantId: string | null;
  role: RoleName;
  expiresAt: Date | null;
}

/** Creates a key; the key is returned here and never again. 404 APP_NOT_FOUND, TENANT_NOT_FOUND; 400 for a past expiry. */
export async function createApiKey(ctx: AuthContext, appId: string, settings: NewApiKeySettings, origin: RequestOrigin): Promise<{ key: ApiKeyRow; secret: string }> {
  try {
    checkTenantSettings({ weight: settings.weight, priorityClass: settings.priorityClass, limits: settings.limits }, 'key');
  } catch (err) {
    throw authError('VALIDATION_ERROR', `Invalid settings: ${(err as Error).message}`);
  }
  const app = await getApp(ctx, appId);
  const now = new Date(ctx.clock.now());
  if (settings.expiresAt && settings.expiresAt.getTime() <= now.getTime()) {
    throw authError('VALIDATION_ERROR', 'Invalid field "expires_at": expected an instant in the future', { details: { field: 'expires_at' } });
  }
  const { key: secret, hash, displayPrefix } = generateApiKey();
  const key = await ctx.sql.begin(async (tx) => {
    // The tenant's row is not locked: the foreign key (tenant_id, app_id) refuses a tenant deleted meanwhile.
    if (settings.tenantId !== null && !(await findTenant(tx, app.id, settings.tenantId))) throw authError('TENANT_NOT_FOUND');
    const row = await insertApiKey(tx, {
      appId: app.id, tenantId: settings.tenantId, name: settings.name, role: settings.role, keyHash: hash, displayPrefix,
      concurrentRequests: settings.limits.concurrentRequests ?? null, requestsPerMinute: settings.limits.requestsPerMinute ?? null,
      tokensPerMinute: settings.limits.tokensPerMinute ?? null, weight: settings.weight, priorityClass: settings.priorityClass,
      expiresAt: settings.expiresAt, now,
    });
    await insertAuditEvent(tx, {
      ...adminAudit(origin, now), type: 'api_key.created', appId: app.id,
      details: { key_id: row.id, name: row.name, tenant_id: row.tenant_id, role: row.role, display_prefix: row.display_prefix },
    });
    return row;
  });
  return { key, secret };
}

export async function listApiKeys(ctx: AuthContext, appId: string): Promise<ApiKeyRow[]> {
  return selectApiKeys(ctx.sql, (await getApp(ctx, appId)).id);
}

/**
 * Gives the key a new secret, returned here only; id and settings stay. The old secret stops
 * matching when this commits. 404 API_KEY_NOT_FOUND, 409 API_KEY_REVOKED.
 */
export async function rotateApiKey(ctx: AuthContext, appId: string, keyId: string, origin: RequestOrigin): Promise<{ key: ApiKeyRow; secret: string }> {
  const app = await getApp(ctx, appId);
  const now = new Date(ctx.clock.now());
  const { key: secret, hash, displayPrefix } = generateApiKey();
  const key = await ctx.sql.begin(async (tx) => {
    const current = isUuid(keyId) ? await lockApiKey(tx, app.id, keyId) : undefined;
    if (!current) throw authError('API_KEY_NOT_FOUND');
    if (current.revoked_at) throw authError('API_KEY_REVOKED');
    const row = await updateApiKeyHash(tx, current.id, { keyHash: hash, displayPrefix, now });
    await insertAuditEvent(tx, {
      ...adminAudit(origin, now), type: 'api_key.rotated', appId: app.id,
      details: { key_id: row.id, name: row.name, display_prefix: row.display_prefix },
    });
    await notifyApiKeyChanged(tx, row.id);
    return row;
  });
  ctx.apiKeyChanges.publish(key.id);
  return { key, secret };
}

/** Revokes the key (idempotent: a revoked key keeps its first revoked_at and is audited once). 404 API_KEY_NOT_FOUND. */
export async function revokeApiKey(ctx: AuthContext, appId: string, keyId: string, origin: RequestOrigin): Promise<ApiKeyRow> {
  const app = await getApp(ctx, appId);
  const now = new Date(ctx.clock.now());
  const key = await ctx.sql.begin(async (tx) => {
    const current = isUuid(keyId) ? await lockApiKey(tx, app.id, keyId) : undefined;
    if (!current) throw authError('API_KEY_NOT_FOUND');
    if (current.revoked_at) return current;
    const row = await setApiKeyRevokedAt(tx, current.id, now);
    await insertAuditEvent(tx, { ...adminAudit(origin, now), type: 'api_key.revoked', appId: app.id, details: { key_id: row.id, name: row.name } });
    await notifyApiKeyChanged(tx, row.id);
    return row;
  });
  ctx.apiKeyChanges.publish(key.id);
  return key;
}

/** The identity of a live key (not revoked, not expired at the service's clock), or null. One query; writes nothing. */
export async function findApiKeyIdentity(ctx: AuthContext, key: string): Promise<ApiKeyIdentity | null> {
  if (!hasApiKeyFormat(key)) return null;
  const row = await findLiveApiKeyByHash(ctx.sql, hashApiKey(key), new Date(ctx.clock.now()));
  return row ? identityOf(row) : null;
}

/** The identity of a presented key, which then counts as used; 401 API_KEY_INVALID for a missing, unknown, revoked or expired key. */
export async function introspectApiKey(ctx: AuthContext, key: string | null): Promise<ApiKeyIdentity> {
  const identity = key === null ? null : await findApiKeyIdentity(ctx, key);
  if (!identity) throw authError('API_KEY_INVALID');
  markApiKeyUsed(ctx, identity.keyId);
  return identity;
}

/**
 * Records that the key was used. Verifiers call this on every accepted request, so it must not
 * cost a write each time: this process writes a key's last_used_at once per
 * API_KEY_TOUCH_INTERVAL_MS at most (the map below), and the statement itself skips a row
 * written less than a minute ago (by another process). The write is not awaited by the caller's
 * request; a failed one is logged and tried again on a later use.
 */
export function markApiKeyUsed(ctx: AuthContext, keyId: string): void {
  const nowMs = ctx.clock.now();
  const last = ctx.apiKeyTouches.get(keyId);
  if (last !== undefined && nowMs - last < API_KEY_TOUCH_INTERVAL_MS) return;
  ctx.apiKeyTouches.set(keyId, nowMs);
  // Bounded: past 10,000 keys the map starts over, costing at most one extra write per key.
  if (ctx.apiKeyTouches.size > 10_000) ctx.apiKeyTouches.clear();
  touchApiKey(ctx.sql, keyId, new Date(nowMs)).catch((error: unknown) => {
    ctx.apiKeyTouches.delete(keyId);
    ctx.logError(authError('INTERNAL', 'last_used_at of an API key could not be written', { cause: error }), { method: 'VERIFY', path: 'api-key' });
  });
}

function identityOf(row: ApiKeyIdentityRow): ApiKeyIdentity {
  return {
    keyId: row.id,
    appId: row.app_id,
    appSlug: row.app_slug,
    name: row.name,
    tenantId: row.tenant_id,
    role: row.role as RoleName,
    limits: apiKeyLimits(row),
    weight: row.weight,
    priorityClass: row.priority_class,
    expiresAt: row.expires_at?.toISOString() ?? null,
  };
}

function adminAudit(origin: RequestOrigin, now: Date) {
  return { actor: 'admin' as const, ip: origin.ip, userAgent: origin.userAgent, now };
}
