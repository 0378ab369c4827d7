// Router mode's route table: every route of the single-model server, forwarded to the model a
// request names, plus the model list and its management routes. As in single-model mode,
// /health is public and every other route needs the API key (or an --auth-app token) when set.
//   forward      POST: the body's "model" (a multipart upload's form field); GET: ?model=
//                POSTs use a model: their tenant is admitted against its limits (routerTenant, guards.ts)
//   here         answered by the router itself
import type { Handler, Method, Route } from '../../http/router.js';
import { guardedRoute, routerKey, routerPublic, routerTenant, type AdmissionContext, type Guard, type InferenceHandler } from '../guards.js';
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

/** A handler that needs only the request, behind a guard whose input it leaves. */
const requestOnly = (handler: Handler): InferenceHandler<unknown> => (_, req) => handler(req);

export function routerRoutes(h: RouterHandlers, access: RouterAccess, apiPrefix = ''): Route[] {
  // The guards (guards.ts), one on each line: publicAccess none; routerKey the key (a limited
  // tenant's headers); routerTenant the key and the tenant's limits, the admitted tenant being
  // the proxy's input, forwarded with the request (tenants/forwarded-tenant.ts).
  const route = <I>(method: Method, path: string, guard: Guard<I, AdmissionContext>, handler: InferenceHandler<I>): Route =>
    guardedRoute(access, method, apiPrefix + path, guard, handler);
  return [
    route('GET',    '/health',        routerPublic, requestOnly(health)),
    route('GET',    '/v1/health',     routerPublic, requestOnly(health)),
    route('GET',    '/props',         routerKey,    requestOnly(h.props)),
    route('GET',    '/models',        routerKey,    requestOnly(h.listModels)),
    route('GET',    '/v1/models',     routerKey,    requestOnly(h.listModels)),
    route('POST',   '/models/load',   routerKey,    requestOnly(h.loadModel)),
    route('POST',   '/models/unload', routerKey,    requestOnly(h.unloadModel)),
    route('GET',    '/models/sse',    routerKey,    requestOnly(h.modelEvents)),
    route('POST',   '/models',        routerKey,    requestOnly(h.addModel)),
    route('DELETE', '/models',        routerKey,    requestOnly(h.removeModel)),
    ...FORWARDED_GETS.map((path) => route('GET', path, routerKey, requestOnly(h.proxyGet))),
    ...FORWARDED_POSTS.map((path) => route('POST', path, routerTenant, h.proxyPost)),
  ];
}
