// Who a request belongs to (docs/tenants.md): one tenant, one queue in the engine's admission
// (native/admission.h), one set of limits (rate-limits.ts), one line of usage (usage-meter.ts).
// A tenant's settings come from --tenants, an auth-server API key (created by the auth service,
// carried by its identity) or, in a router's model process, the router's header; each source
// checks them with checkTenantSettings, the one rule for their bounds.
import type { PriorityClass } from '../../native/binding.js';

/** A tenant's limits; an absent field is no limit. */
export interface TenantLimits {
  /** Requests of the tenant in progress at once. */
  concurrentRequests?: number;
  /** Requests admitted in any 60 seconds. */
  requestsPerMinute?: number;
  /** Prompt and completion tokens used in any 60 seconds, checked when a request is admitted. */
  tokensPerMinute?: number;
}

/** How a tenant ranks in the engine's admission, and its limits. */
export interface TenantSettings {
  /** > 0 and <= TENANT_WEIGHT_MAX: its share of the engine relative to other tenants (default 1). */
  weight: number;
  /** "interactive" (default) is admitted before "batch". */
  priorityClass: PriorityClass;
  limits: TenantLimits;
}

/** The largest weight (the engine's task parser refuses a larger tenantWeight too). */
export const TENANT_WEIGHT_MAX = 100;

export const PRIORITY_CLASSES: readonly PriorityClass[] = ['interactive', 'batch'];

export const LIMIT_FIELDS = ['concurrentRequests', 'requestsPerMinute', 'tokensPerMinute'] as const;

/** Settings that break a bound; the message names where and the field. */
export class TenantSettingsError extends Error {}

/**
 * The one check of tenant settings, each field optional: weight a number above 0 and at most
 * TENANT_WEIGHT_MAX, priorityClass "interactive" or "batch", each limit an integer of 1 or more.
 * `where` prefixes the messages ("f.json: keys.key-1"); `also`: other fields the caller allows
 * and checks itself. Throws TenantSettingsError.
 */
export function checkTenantSettings(value: unknown, where: string, also: readonly string[] = []): Partial<TenantSettings> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TenantSettingsError(`${where}: must be an object`);
  const entry = value as Record<string, unknown>;
  for (const field of Object.keys(entry)) {
    if (field !== 'weight' && field !== 'priorityClass' && field !== 'limits' && !also.includes(field)) throw new TenantSettingsError(`${where}: unknown field "${field}"`);
  }
  const out: Partial<TenantSettings> = {};
  const weight = entry['weight'];
  if (weight !== undefined) {
    if (typeof weight !== 'number' || !Number.isFinite(weight) || weight <= 0 || weight > TENANT_WEIGHT_MAX) {
      throw new TenantSettingsError(`${where}.weight: must be a number above 0 and at most ${TENANT_WEIGHT_MAX}`);
    }
    out.weight = weight;
  }
  const cls = entry['priorityClass'];
  if (cls !== undefined) {
    if (cls !== 'interactive' && cls !== 'batch') throw new TenantSettingsError(`${where}.priorityClass: must be "interactive" or "batch"`);
    out.priorityClass = cls;
  }
  if (entry['limits'] !== undefined) out.limits = checkLimits(entry['limits'], `${where}.limits`);
  return out;
}

/** Checks a limits object: each field an integer of 1 or more (undefined: absent). Throws TenantSettingsError. */
function checkLimits(value: unknown, where: string): TenantLimits {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new TenantSettingsError(`${where}: must be an object`);
  const limits: TenantLimits = {};
  for (const [field, n] of Object.entries(value)) {
    if (!(LIMIT_FIELDS as readonly string[]).includes(field)) throw new TenantSettingsError(`${where}: unknown field "${field}"`);
    if (n === undefined) continue;
    if (typeof n !== 'number' || !Number.isInteger(n) || n < 1) throw new TenantSettingsError(`${where}.${field}: must be an integer of 1 or more`);
    limits[field as keyof TenantLimits] = n;
  }
  return limits;
}

/** The tenant of one request. No field holds a secret. */
export interface Tenant extends TenantSettings {
  /**
   * The tenant: a key's label ("key-1" for the first key of --api-key/--api-key-file, or the name
   * --tenants gives it), an access token's tenant_id (else its sub), an auth-server key's tenantId
   * (else "key:<keyId>"), or "anonymous" when no key is required.
   */
  id: string;
  /** The credential, as usage labels it: a key's label, an auth-server key's id, "access-token", or "anonymous". */
  key: string;
  /** The auth-service app of a token or an auth-server key; null otherwise. */
  appSlug: string | null;
}

export const ANONYMOUS = 'anonymous';

export const DEFAULT_SETTINGS: TenantSettings = { weight: 1, priorityClass: 'interactive', limits: {} };

/** True when any limit applies to the tenant. */
export function isLimited(limits: TenantLimits): boolean {
  return limits.concurrentRequests !== undefined || limits.requestsPerMinute !== undefined || limits.tokensPerMinute !== undefined;
}
