// How an inference route runs: its guard admits the request and produces the handler's input;
// requests that use the model are counted for /metrics, and those that fail as errors. Read-only
// endpoints are not: scraping /metrics (or polling /props) leaves what it reports unchanged.
import type { HttpRequest, HttpResult } from '../http/request.js';
import type { Method, Route } from '../http/router.js';
import { invalidApiKey, presentedKey, type ApiKeys } from './access/api-key.js';
import type { ServiceHost, ServiceView } from './service/host.js';
import type { InferenceService } from './service/service.js';

/** What the guards consult. */
export interface RouteContext {
  host: ServiceHost;
  keys: ApiKeys;
  /** Extra bearer-token check (--auth-app): true admits the request like a valid API key. */
  acceptBearer?: (authorization: string | undefined) => Promise<boolean>;
}

/** Admits a request and produces the handler's input; throws catalog errors. */
export interface Guard<I> {
  readonly name: string;
  admit(ctx: RouteContext, req: HttpRequest): Promise<I> | I;
  /** Requests through this guard use the model: counted in /metrics' requests_total. */
  readonly counted?: boolean;
  /** Called once the handler has finished with an admitted input. */
  done?(ctx: RouteContext, input: I): void;
}

export type InferenceHandler<I> = (input: I, req: HttpRequest) => Promise<HttpResult | void> | HttpResult | void;

/** No credentials, answered while the model loads: the handler gets the host. */
export const publicAccess: Guard<ServiceHost> = {
  name: 'public',
  admit: (ctx) => ctx.host,
};

/** An API key (--api-key) or, with --auth-app, an access token of that app; admits all without either. */
export async function checkKey(ctx: Pick<RouteContext, 'keys' | 'acceptBearer'>, req: Pick<HttpRequest, 'headers'>): Promise<void> {
  if (!ctx.keys.enabled && !ctx.acceptBearer) return;
  if (ctx.keys.enabled && ctx.keys.matches(presentedKey(req))) return;
  if (ctx.acceptBearer && (await ctx.acceptBearer(req.headers['authorization']))) return;
  throw invalidApiKey();
}

/**
 * For endpoints that use the model: 503 while it first loads, then the key; the handler gets
 * the loaded service (a sleeping one is loaded again first) and holds it until it finishes.
 */
export const apiKey: Guard<InferenceService> = {
  name: 'api-key',
  counted: true,
  admit: async (ctx, req) => {
    ctx.host.view();
    await checkKey(ctx, req);
    return ctx.host.acquire();
  },
  done: (ctx) => ctx.host.release(),
};

/** For read-only endpoints: 503 while the model first loads, then the key; never wakes a sleeping service. */
export const apiKeyReadOnly: Guard<ServiceView> = {
  name: 'api-key-read-only',
  admit: async (ctx, req) => {
    ctx.host.view();
    await checkKey(ctx, req);
    return ctx.host.view();
  },
};

/** Mounts a handler behind a server's access rule (single-model: the read-only key guard; router: its key check). */
export type Mount = (method: Method, path: string, handler: (req: HttpRequest) => Promise<HttpResult | void> | HttpResult | void) => Route;

/** The single-model server's Mount: the API key, never waking a sleeping model. */
export function readOnlyMount(ctx: RouteContext): Mount {
  return (method, path, handler) => inferenceRoute(ctx, method, path, apiKeyReadOnly, (_, req) => handler(req));
}

export function inferenceRoute<I>(ctx: RouteContext, method: Method, path: string, guard: Guard<I>, handler: InferenceHandler<I>): Route {
  const counters = ctx.host.counters;
  return {
    method,
    path,
    handler: async (req) => {
      if (guard.counted) counters.requests++;
      try {
        const input = await guard.admit(ctx, req);
        try {
          return await handler(input, req);
        } finally {
          guard.done?.(ctx, input);
        }
      } catch (err) {
        if (guard.counted) counters.errors++;
        throw err;
      }
    },
  };
}
