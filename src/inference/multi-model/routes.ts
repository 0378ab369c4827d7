// Router mode's route table: every route of the single-model server, forwarded to the model a
// request names, plus the model list and its management routes. As in single-model mode,
// /health is public and every other route needs the API key (or an --auth-app token) when set.
//   forward      POST: the body's "model" (a multipart upload's form field); GET: ?model=
//   here         answered by the router itself
import type { HttpRequest, HttpResult } from '../../http/request.js';
import type { Handler, Method, Route } from '../../http/router.js';
import type { ApiKeys } from '../access/api-key.js';
import { checkKey } from '../guards.js';
import type { RouterHandlers } from './handlers.js';

export interface RouterAccess {
  keys: ApiKeys;
  acceptBearer?: (authorization: string | undefined) => Promise<boolean>;
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

export function withKey(access: RouterAccess, handler: Handler): Handler {
  return async (req: HttpRequest) => {
    await checkKey(access, req);
    return handler(req);
  };
}

const health = (): HttpResult => ({ body: { status: 'ok' } });

export function routerRoutes(h: RouterHandlers, access: RouterAccess, apiPrefix = ''): Route[] {
  const route = (method: Method, path: string, handler: Handler): Route => ({ method, path: apiPrefix + path, handler: withKey(access, handler) });
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
    ...FORWARDED_POSTS.map((path) => route('POST', path, h.proxyPost)),
  ];
}
