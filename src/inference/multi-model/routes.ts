// Router mode's route table: every route of the single-model server, forwarded to the model a
// request names, plus the model list and its management routes. As in single-model mode,
// /health is public and every other route needs the API key (or an --auth-app token) when set.
//   forward      POST: the body's "model" (a multipart upload's form field); GET: ?model=
//                POSTs use a model: their tenant is admitted against its limits (withTenant)
//   here         answered by the router itself
import type { HttpRequest, HttpResult } from '../../http/request.js';
import type { Handler, Method, Route } from '../../http/router.js';
import { identify, type TenantContext } from '../guards.js';
import type { Tenancy } from '../tenants/tenancy.js';
import type { RouterHandlers } from './handlers.js';

/** What the router's guards consult: the keys, the tenants, and their limits (held here, across the model processes). */
export interface RouterAccess extends TenantContext {
  tenancy: Tenancy;
}

/** Every POST route of the single-model server; each is forwarded to the model its body names. */
const FORWARDED_POSTS = [
  '/completion', '/completions', '/infill', '/v1/completions', '/v1/chat/completions', '/chat/completions',
  '/v1/responses', '/responses', '/props', '/slots/:id_slot', '/tokenize', '/detokenize', '/apply-template',
  '/lora-adapters', '/v1/embeddings', '/embeddings', '/embedding', '/v1/rerank', '/rerank', '/v1/reranking', '/reranking',
  '/chat/completions/input_tokens', '/v1/chat/completions/input_tokens', '/responses/input_tokens', '/v1/responses/input_tokens',
  '/v1/messages', '/v1/messages/count_tokens', '/v1/audio/transcriptions', '/audio/transcriptions',
] as const;

/** GET routes of the single-model server forwarded to the model named by ?model=. */
const FORWARDED_GETS = ['/metrics', '/slots', '/lora-adapters'] as const;

/** A route answered by the router or read-only: the key; a limited tenant's rate-limit headers. */
export function withKey(access: RouterAccess, handler: Handler): Handler {
  return async (req: HttpRequest) => {
    access.tenancy.annotate(await identify(access, req), req);
    return handler(req);
  };
}

/**
 * A route that uses a model: the key, then the tenant's limits (429 over one), held until the
 * answer is relayed; the proxy forwards the tenant to the model process (tenants/forwarded-tenant.ts).
 */
export function withTenant(access: RouterAccess, handler: Handler): Handler {
  return async (req: HttpRequest) => {
    access.tenancy.admit(await identify(access, req), req);
    try {
      return await handler(req);
    } finally {
      access.tenancy.end(req, null);
    }
  };
}

const health = (): HttpResult => ({ body: { status: 'ok' } });

export function routerRoutes(h: RouterHandlers, access: RouterAccess, apiPrefix = ''): Route[] {
  const route = (method: Method, path: string, handler: Handler): Route => ({ method, path: apiPrefix + path, handler: withKey(access, handler) });
  const used = (method: Method, path: string, handler: Handler): Route => ({ method, path: apiPrefix + path, handler: withTenant(access, handler) });
  return [
    { method: 'GET', path: `${apiPrefix}/health`, handler: health },
    { method: 'GET', path: `${apiPrefix}/v1/health`, handler: health },
    route('GET',  '/props',         h.props),
    route('GET',  '/models',        h.listModels),
    route('GET',  '/v1/models',     h.listModels),
    route('POST', '/models/load',   h.loadModel),
    route('POST', '/models/unload', h.unloadModel),
    route('GET',  '/models/sse',    h.modelEvents),
    route('POST', '/models',        h.addModel),
    route('DELETE', '/models',      h.removeModel),
    ...FORWARDED_GETS.map((path) => route('GET', path, h.proxyGet)),
    ...FORWARDED_POSTS.map((path) => used('POST', path, h.proxyPost)),
  ];
}
