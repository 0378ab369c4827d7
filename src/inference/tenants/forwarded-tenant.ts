// Router mode (docs/tenants.md, "Router mode"): the router admits each request's tenant (its
// limits hold across the model processes) and forwards the tenant to the model process in an
// internal header, so that fair share works inside each process. The router removes the header
// from what clients send; a model process (ROUTER_CHILD_ENV) takes the tenant from it.
import type { Tenant } from './tenant.js';

export const TENANT_HEADER = 'x-inference-server-tenant';

/** The header's value: the tenant's id, key, app, weight and class (its limits stay in the router). */
export function encodeTenant(tenant: Tenant): string {
  return encodeURIComponent(JSON.stringify({ id: tenant.id, key: tenant.key, appSlug: tenant.appSlug, weight: tenant.weight, priorityClass: tenant.priorityClass }));
}

/** The tenant a router forwarded, without limits; null when the header is absent or malformed. */
export function decodeTenant(value: string | undefined): Tenant | null {
  if (value === undefined) return null;
  try {
    const t = JSON.parse(decodeURIComponent(value)) as Partial<Tenant>;
    if (typeof t.id !== 'string' || typeof t.key !== 'string' || typeof t.weight !== 'number' || !(t.weight > 0)) return null;
    if (t.priorityClass !== 'interactive' && t.priorityClass !== 'batch') return null;
    return { id: t.id, key: t.key, appSlug: typeof t.appSlug === 'string' ? t.appSlug : null, weight: t.weight, priorityClass: t.priorityClass, limits: {} };
  } catch {
    return null;
  }
}
