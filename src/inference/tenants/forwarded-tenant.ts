// Router mode (docs/tenants.md, "Router mode"): the router admits each request's tenant (its
// limits hold across the model processes) and forwards the tenant to the model process in an
// internal header, so that fair share works inside each process. The router removes the header
// from what clients send; a router's model process (started as one: server.ts routerChild) takes
// the tenant from it.
import { checkTenantSettings, type Tenant } from './tenant.js';

export const TENANT_HEADER = 'x-inference-server-tenant';

/** The header's value: the tenant's id, key, app, weight and class (its limits stay in the router). */
export function encodeTenant(tenant: Tenant): string {
  return encodeURIComponent(JSON.stringify({ id: tenant.id, key: tenant.key, appSlug: tenant.appSlug, weight: tenant.weight, priorityClass: tenant.priorityClass }));
}

/** The tenant a router forwarded, without limits; null when the header is absent or malformed. */
export function decodeTenant(value: string | undefined): Tenant | null {
  if (value === undefined) return null;
  try {
    const { id, key, appSlug, ...settings } = JSON.parse(decodeURIComponent(value)) as Record<string, unknown>;
    if (typeof id !== 'string' || typeof key !== 'string') return null;
    const { weight, priorityClass } = checkTenantSettings(settings, 'forwarded tenant');
    if (weight === undefined || priorityClass === undefined) return null;
    return { id, key, appSlug: typeof appSlug === 'string' ? appSlug : null, weight, priorityClass, limits: {} };
  } catch {
    return null;
  }
}
