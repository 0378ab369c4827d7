// Who a request belongs to (docs/tenants.md): one tenant, one queue in the engine's admission
// (native/admission.h), one set of limits (rate-limits.ts), one line of usage (usage-meter.ts).
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
  /** > 0: its share of the engine relative to other tenants (default 1). */
  weight: number;
  /** "interactive" (default) is admitted before "batch". */
  priorityClass: PriorityClass;
  limits: TenantLimits;
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
