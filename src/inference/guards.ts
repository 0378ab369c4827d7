// How an inference route runs: its guard admits the request and produces the handler's input;
// requests that use the model are counted for /metrics, and those that fail as errors. Read-only
// endpoints are not: scraping /metrics (or polling /props) leaves what it reports unchanged.
// The guards also say whom a request belongs to (its tenant: tenants/tenant.ts): the routes that
// use the model admit it against its limits, give it to the handler with the service (Admitted)
// and hold it until the handler finishes (tenants/tenancy.ts). The router (multi-model/routes.ts)
// uses the same key and tenant guards without a service.
import { HttpError } from '../http/errors.js';
import type { HttpRequest, HttpResult } from '../http/request.js';
import type { Method, Route } from '../http/router.js';
import { invalidApiKey, presentedKey, type ApiKeys } from './access/api-key.js';
import type { AcceptBearer } from './access/auth-bridge.js';
import type { ServiceHost, ServiceView } from './service/host.js';
import type { InferenceService } from './service/service.js';
import { decodeTenant, TENANT_HEADER } from './tenants/forwarded-tenant.js';
import type { RequestTenant, Tenancy } from './tenants/tenancy.js';
import type { Tenant } from './tenants/tenant.js';
import type { TenantTable } from './tenants/tenant-table.js';

/** What the key check consults. */
export interface KeyContext {
  keys: ApiKeys;
  /** Extra bearer-credential check (--auth-app): an identity admits the request like a valid API key. */
  acceptBearer?: AcceptBearer;
}

/** What the tenant of a request is found with. */
export interface TenantContext extends KeyContext {
  tenants: TenantTable;
  /** A router's model process: the tenant comes from the router's header (tenants/forwarded-tenant.ts). */
  forwardedTenants?: boolean;
}

/** What the key and tenant guards consult (a single-model server's and a router's). */
export interface AdmissionContext extends TenantContext {
  tenancy: Tenancy;
}

/** What the guards of a single-model server consult. */
export interface RouteContext extends AdmissionContext {
  host: ServiceHost;
}

/** Admits a request and produces the handler's input; throws catalog errors. */
export interface Guard<I, C = RouteContext> {
  readonly name: string;
  admit(ctx: C, req: HttpRequest): Promise<I> | I;
  /** Requests through this guard use the model: counted in /metrics' requests_total. */
  readonly counted?: boolean;
  /** Called once the handler has finished with an admitted input. */
  done?(ctx: C, input: I, req: HttpRequest): void;
}

/** What the apiKey guard gives its handler: the loaded service and the request's admitted tenant. */
export interface Admitted {
  service: InferenceService;
  /** Put on the request's tasks (fair share) and metering them: InferenceService.startAll, .embed. */
  tenant: RequestTenant;
}

export type InferenceHandler<I> = (input: I, req: HttpRequest) => Promise<HttpResult | void> | HttpResult | void;

/** No credentials, answered while the model loads: the handler gets the host. */
export const publicAccess: Guard<ServiceHost> = {
  name: 'public',
  admit: (ctx) => ctx.host,
};

/** The Authorization header, or an X-Api-Key given without one as a bearer credential. */
function bearerHeader(req: Pick<HttpRequest, 'headers'>): string | undefined {
  const auth = req.headers['authorization'];
  if (auth !== undefined) return auth;
  const key = req.headers['x-api-key'];
  return key === undefined ? undefined : `Bearer ${key}`;
}

/**
 * Whom the request's credential names: the anonymous tenant when no key is required, a key of
 * --api-key / --api-key-file, or (--auth-app) an access token or an auth-server API key;
 * otherwise 401 (403 for a token without the role).
 */
export async function identify(ctx: TenantContext, req: Pick<HttpRequest, 'headers'>): Promise<Tenant> {
  if (ctx.forwardedTenants) {
    const forwarded = decodeTenant(req.headers[TENANT_HEADER]);
    if (forwarded) return forwarded;
  }
  if (!ctx.keys.enabled && !ctx.acceptBearer) return ctx.tenants.anonymous();
  const index = ctx.keys.enabled ? ctx.keys.indexOf(presentedKey(req)) : -1;
  if (index >= 0) return ctx.tenants.forKey(index);
  const identity = ctx.acceptBearer ? await ctx.acceptBearer(bearerHeader(req)) : null;
  if (identity?.kind === 'access-token') return ctx.tenants.forToken(identity.tenantId, identity.subject, identity.appSlug);
  if (identity?.kind === 'api-key') return ctx.tenants.forIssuedKey(identity.keyId, identity.tenantId, identity.appSlug, identity.settings);
  throw invalidApiKey();
}

/** An API key (--api-key) or, with --auth-app, an access token of that app; admits all without either. */
export async function checkKey(ctx: KeyContext, req: Pick<HttpRequest, 'headers'>): Promise<void> {
  if (!ctx.keys.enabled && !ctx.acceptBearer) return;
  if (ctx.keys.enabled && ctx.keys.matches(presentedKey(req))) return;
  if (ctx.acceptBearer && (await ctx.acceptBearer(bearerHeader(req)))) return;
  throw invalidApiKey();
}

/**
 * The service's view, or its 503 while the model first loads: answered before the key is checked,
 * as llama-server answers it, and with a limited tenant's rate-limit headers when the request's
 * credential names one (a wrong or missing one changes nothing: still the 503, with no headers).
 */
async function viewWhileLoading(ctx: RouteContext, req: HttpRequest): Promise<ServiceView> {
  try {
    return ctx.host.view();
  } catch (unavailable) {
    const tenant = await identify(ctx, req).catch(() => null);
    if (tenant) ctx.tenancy.annotate(tenant, req);
    throw unavailable;
  }
}

/** The credential's tenant admitted against its limits (429 over one); the caller owes it Tenancy.end. */
async function admitTenant(ctx: AdmissionContext, req: HttpRequest): Promise<RequestTenant> {
  return ctx.tenancy.admit(await identify(ctx, req), req);
}

/**
 * For endpoints that use the model: 503 while it first loads, then the key and the tenant's
 * limits (429 over one); the handler gets the loaded service (a sleeping one is loaded again
 * first) and the admitted tenant, and holds both until it finishes.
 */
export const apiKey: Guard<Admitted> = {
  name: 'api-key',
  counted: true,
  admit: async (ctx, req) => {
    await viewWhileLoading(ctx, req);
    const tenant = await admitTenant(ctx, req);
    try {
      return { service: await ctx.host.acquire(), tenant };
    } catch (err) {
      ctx.tenancy.end(tenant, null);
      throw err;
    }
  },
  done: (ctx, { service, tenant }) => {
    ctx.host.release();
    ctx.tenancy.end(tenant, service.alias);
  },
};

/** For read-only endpoints: 503 while the model first loads, then the key; never wakes a sleeping service. */
export const apiKeyReadOnly: Guard<ServiceView> = {
  name: 'api-key-read-only',
  admit: async (ctx, req) => {
    await viewWhileLoading(ctx, req);
    ctx.tenancy.annotate(await identify(ctx, req), req);
    return ctx.host.view();
  },
};

/** The router's public routes (/health): no credentials. */
export const routerPublic: Guard<null, AdmissionContext> = {
  name: 'router-public',
  admit: () => null,
};

/** The router's routes answered by itself or read-only: the key; a limited tenant's rate-limit headers. */
export const routerKey: Guard<Tenant, AdmissionContext> = {
  name: 'router-key',
  admit: async (ctx, req) => {
    const tenant = await identify(ctx, req);
    ctx.tenancy.annotate(tenant, req);
    return tenant;
  },
};

/**
 * The router's routes that use a model: the key, then the tenant's limits (429 over one), held
 * until the answer is relayed; the handler forwards the tenant to the model process.
 */
export const routerTenant: Guard<RequestTenant, AdmissionContext> = {
  name: 'router-tenant',
  admit: admitTenant,
  done: (ctx, tenant) => ctx.tenancy.end(tenant, null),
};

/** Mounts a handler behind a server's access rule (single-model: the read-only key guard; router: its key check). */
export type Mount = (method: Method, path: string, handler: (req: HttpRequest) => Promise<HttpResult | void> | HttpResult | void) => Route;

/** The single-model server's Mount: the API key, never waking a sleeping model. */
export function readOnlyMount(ctx: RouteContext): Mount {
  return (method, path, handler) => inferenceRoute(ctx, method, path, apiKeyReadOnly, (_, req) => handler(req));
}

/** The router's Mount: its key check (routerKey). */
export function routerMount(ctx: AdmissionContext): Mount {
  return (method, path, handler) => guardedRoute(ctx, method, path, routerKey, (_, req) => handler(req));
}

export function inferenceRoute<I>(ctx: RouteContext, method: Method, path: string, guard: Guard<I>, handler: InferenceHandler<I>): Route {
  return guardedRoute(ctx, method, path, guard, handler, ctx.host.counters);
}

/** A route behind `guard`; `counters`: where a counted guard's requests and errors are counted. */
export function guardedRoute<I, C>(ctx: C, method: Method, path: string, guard: Guard<I, C>, handler: InferenceHandler<I>, counters?: { requests: number; errors: number }): Route {
  const counted = guard.counted === true ? counters : undefined;
  return {
    method,
    path,
    handler: async (req) => {
      if (counted) counted.requests++;
      try {
        const input = await guard.admit(ctx, req);
        try {
          return await handler(input, req);
        } finally {
          guard.done?.(ctx, input, req);
        }
      } catch (err) {
        if (counted) counted.errors++;
        // RFC 9728 section 5.1: a 401 names where the protected resource's metadata is (--auth-app).
        const challenge = (ctx as { acceptBearer?: AcceptBearer }).acceptBearer?.challenge;
        if (challenge && err instanceof HttpError && err.status === 401) req.setResponseHeader('WWW-Authenticate', challenge);
        throw err;
      }
    },
  };
}
