// How an inference route runs: its guard admits the request and produces the handler's input;
// every routed request is counted for /metrics, and those that fail as errors.
import type { HttpRequest, HttpResult } from '../http/request.js';
import type { Method, Route } from '../http/router.js';
import { invalidApiKey, presentedKey, type ApiKeys } from './access/api-key.js';
import type { InferenceService } from './service/service.js';
import type { ServerState } from './state.js';

/** What the guards consult. */
export interface RouteContext {
  state: ServerState;
  keys: ApiKeys;
  /** Extra bearer-token check (--auth-app): true admits the request like a valid API key. */
  acceptBearer?: (authorization: string | undefined) => Promise<boolean>;
}

/** Admits a request and produces the handler's input; throws catalog errors. */
export interface Guard<I> {
  readonly name: string;
  admit(ctx: RouteContext, req: HttpRequest): Promise<I> | I;
}

export type InferenceHandler<I> = (input: I, req: HttpRequest) => Promise<HttpResult | void> | HttpResult | void;

/** No credentials, answered while the model loads: the handler gets the server state. */
export const publicAccess: Guard<ServerState> = {
  name: 'public',
  admit: (ctx) => ctx.state,
};

/**
 * 503 while the model loads, then an API key (--api-key) or, with --auth-app, an access token
 * of that app: the handler gets the loaded service. Without keys or --auth-app it admits all.
 */
export const apiKey: Guard<InferenceService> = {
  name: 'api-key',
  admit: async (ctx, req) => {
    const service = ctx.state.ready();
    if (!ctx.keys.enabled && !ctx.acceptBearer) return service;
    if (ctx.keys.enabled && ctx.keys.matches(presentedKey(req))) return service;
    if (ctx.acceptBearer && (await ctx.acceptBearer(req.headers['authorization']))) return service;
    throw invalidApiKey();
  },
};

export function inferenceRoute<I>(ctx: RouteContext, method: Method, path: string, guard: Guard<I>, handler: InferenceHandler<I>): Route {
  const counters = ctx.state.counters;
  return {
    method,
    path,
    handler: async (req) => {
      counters.requests++;
      try {
        return await handler(await guard.admit(ctx, req), req);
      } catch (err) {
        counters.errors++;
        throw err;
      }
    },
  };
}
