// API keys issued by the admin for an app (migration 0020): the key's format, its hash, and the
// identity a verified key stands for. A key is `lak_` and 32 random bytes in base64url (47
// characters); the service stores its SHA-256 (no slow hash needed for 256 random bits) and its
// first API_KEY_DISPLAY_CHARS characters, which reveal 48 of the bits, for lists.
import { createHash, randomBytes } from 'node:crypto';
import type { RoleName } from '../roles.js';

/** How every API key of this service begins (secret scanners and logs can recognise one). */
export const AUTH_API_KEY_PREFIX = 'lak_';
/** Characters of a key kept for display: the prefix and 8 of the random ones. */
export const API_KEY_DISPLAY_CHARS = 12;
const KEY_FORMAT = /^lak_[A-Za-z0-9_-]{43}$/;

/** Who calls with a key, as the inference server schedules and meters it. */
export interface ApiKeyIdentity {
  keyId: string;
  appId: string;
  appSlug: string;
  name: string;
  /** The tenant the key serves; null: the app as a whole. */
  tenantId: string | null;
  role: RoleName;
  /** Absent: no limit of that kind. */
  limits: { concurrentRequests?: number; requestsPerMinute?: number; tokensPerMinute?: number };
  /** Share of the server relative to other keys (> 0, at most 100; default 1). */
  weight: number;
  priorityClass: 'interactive' | 'batch';
  /** ISO 8601; null: never expires. */
  expiresAt: string | null;
}

export function generateApiKey(): { key: string; hash: Buffer; displayPrefix: string } {
  const key = `${AUTH_API_KEY_PREFIX}${randomBytes(32).toString('base64url')}`;
  return { key, hash: hashApiKey(key), displayPrefix: key.slice(0, API_KEY_DISPLAY_CHARS) };
}

export function hashApiKey(key: string): Buffer {
  return createHash('sha256').update(key, 'utf8').digest();
}

/** True for a string of the keys' format (anything else is refused without a lookup). */
export function hasApiKeyFormat(key: string): boolean {
  return KEY_FORMAT.test(key);
}

/** The identity in the introspection answer's JSON (snake_case, as every route of the service). */
export function apiKeyIdentityJson(identity: ApiKeyIdentity): Record<string, unknown> {
  return {
    key_id: identity.keyId,
    app_id: identity.appId,
    app_slug: identity.appSlug,
    name: identity.name,
    tenant_id: identity.tenantId,
    role: identity.role,
    limits: {
      ...(identity.limits.concurrentRequests !== undefined ? { concurrent_requests: identity.limits.concurrentRequests } : {}),
      ...(identity.limits.requestsPerMinute !== undefined ? { requests_per_minute: identity.limits.requestsPerMinute } : {}),
      ...(identity.limits.tokensPerMinute !== undefined ? { tokens_per_minute: identity.limits.tokensPerMinute } : {}),
    },
    weight: identity.weight,
    priority_class: identity.priorityClass,
    expires_at: identity.expiresAt,
  };
}

/** A key's limits from their snake_case columns or JSON fields (null or absent: no limit). */
export function apiKeyLimits(from: { concurrent_requests?: number | null; requests_per_minute?: number | null; tokens_per_minute?: number | null }): ApiKeyIdentity['limits'] {
  return {
    ...(from.concurrent_requests != null ? { concurrentRequests: from.concurrent_requests } : {}),
    ...(from.requests_per_minute != null ? { requestsPerMinute: from.requests_per_minute } : {}),
    ...(from.tokens_per_minute != null ? { tokensPerMinute: from.tokens_per_minute } : {}),
  };
}

/** The inverse of apiKeyIdentityJson; throws on an answer of another shape. */
export function apiKeyIdentityFromJson(json: any): ApiKeyIdentity {
  const limits = json?.limits ?? {};
  const identity: ApiKeyIdentity = {
    keyId: json.key_id,
    appId: json.app_id,
    appSlug: json.app_slug,
    name: json.name,
    tenantId: json.tenant_id ?? null,
    role: json.role,
    limits: apiKeyLimits(limits),
    weight: json.weight,
    priorityClass: json.priority_class,
    expiresAt: json.expires_at ?? null,
  };
  if (typeof identity.keyId !== 'string' || typeof identity.appSlug !== 'string' || typeof identity.weight !== 'number') {
    throw new Error('the introspection answer is not an API key identity');
  }
  return identity;
}
