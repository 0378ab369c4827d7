// Router mode's route table: every route of the single-model server, forwarded to the model a
// request names, plus the model list and its management routes. As in single-model mode,
// /health is public and every other route needs the API key (or an --auth-app token) when set.
//   forward      POST: the body's "model" (a multipart upload's form field); GET: ?model=
//                POSTs use a model: their tenant is admitted against its limits (routerTenant, guards.ts)
//   here         answered by the router itself
import type { Handler, Method, Route } from '../../http/router.js';
import { guardedRoute, routerMount, routerTenant, type AdmissionContext } from '../guards.js';
import type { RouterHandlers } from './handlers.js';

/** What the router's guards consult: the keys, the tenants, and their limits (held here, across the model processes). */
export type RouterAccess = AdmissionContext;

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

const health = (): { body: { status: string } } => ({ body: { status: 'ok' } });

export function routerRoutes(h: RouterHandlers, access: RouterAccess, apiPrefix = ''): Route[] {
  // route: behind routerKey, the key (a limited tenant's headers); used: behind routerTenant, the
  // key and the tenant's limits, the admitted tenant forwarded with the request (tenants/forwarded-tenant.ts).
  const keyed = routerMount(access);
  const route = (method: Method, path: string, handler: Handler): Route => keyed(method, apiPrefix + path, handler);
  const used = (method: Method, path: string): Route => guardedRoute(access, method, apiPrefix + path, routerTenant, h.proxyPost);
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
    ...FORWARDED_POSTS.map((path) => used('POST', path)),
  ];
}
