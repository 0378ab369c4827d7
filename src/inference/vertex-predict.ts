// Google Cloud Vertex AI's prediction protocol, as llama-server serves it (server-http.cpp,
// register_gcp_compat): with AIP_MODE=PREDICTION the server listens on AIP_HTTP_PORT (default
// 8080, in place of --port), answers GET AIP_HEALTH_ROUTE as /health when that is set, and POST
// AIP_PREDICT_ROUTE (default /predict) with {"instances": [...]}: each instance is the body of
// another route, named by its "@requestFormat" (a camelCase alias of the route's path, e.g.
// "chatCompletions" for /v1/chat/completions, or the path itself), run without streaming; the
// answer is {"predictions": [...]}, each the route's JSON answer (an error object for one that
// failed), in the instances' order. The instances run concurrently.
// https://cloud.google.com/vertex-ai/docs/predictions/custom-container-requirements
import type { Route } from '../http/router.js';
import type { HttpRequest, HttpResult } from '../http/request.js';
import { HttpError } from '../http/errors.js';
import { badRequest, formatInferenceError, inferenceError, ErrorType } from './errors.js';
import type { Mount } from './guards.js';

export interface VertexSettings {
  /** AIP_HTTP_PORT: the port to listen on. */
  port: number;
  /** AIP_HEALTH_ROUTE: a GET alias of /health; "" for none. */
  healthRoute: string;
  /** AIP_PREDICT_ROUTE: the prediction route. */
  predictRoute: string;
}

/** As llama-server: an instance count above this is a 400. */
export const MAX_INSTANCES = 128;

/** The settings from the environment; null unless AIP_MODE is PREDICTION. Throws on a bad port. */
export function vertexSettings(env: NodeJS.ProcessEnv): VertexSettings | null {
  if (env['AIP_MODE'] !== 'PREDICTION') return null;
  const route = (name: string, fallback: string): string => {
    const value = env[name] ?? '';
    if (value === '') return fallback;
    return value.startsWith('/') ? value : `/${value}`;
  };
  const portText = env['AIP_HTTP_PORT'] || '8080';
  const port = Number(portText);
  if (!/^\d+$/.test(portText) || port > 65535) throw new Error(`AIP_HTTP_PORT: expected a port number, got "${portText}"`);
  return { port, healthRoute: route('AIP_HEALTH_ROUTE', ''), predictRoute: route('AIP_PREDICT_ROUTE', '/predict') };
}

/** A route's "@requestFormat" alias: "/v1/chat/completions" -> "chatCompletions", "/apply-template" -> "applyTemplate". */
export function requestFormatOf(path: string): string {
  let s = path.startsWith('/v1') ? path.slice(3) : path;
  if (s.startsWith('/')) s = s.slice(1);
  let out = '';
  let cap = false;
  for (const c of s) {
    if (c === ':') break;
    if (c === '/' || c === '-' || c === '_') cap = true;
    else {
      out += cap ? c.toUpperCase() : c;
      cap = false;
    }
  }
  return out;
}

/**
 * The routes the protocol adds to `routes` (paths already carrying `apiPrefix`): the predict route
 * behind the server's access rule (`mount`; its instances then pass their own routes' guards
 * with the same headers), the health alias public as /health. Throws when the predict route is
 * one of `routes`, as llama-server refuses to start.
 */
export function vertexRoutes(routes: readonly Route[], settings: VertexSettings, apiPrefix: string, mount: Mount): Route[] {
  if (routes.some((r) => r.path === settings.predictRoute)) {
    throw new Error(`AIP_PREDICT_ROUTE=${settings.predictRoute} conflicts with an existing route`);
  }
  // By alias and by path; the first route of a path or alias wins, as the first registered does there.
  const byName = new Map<string, Route>();
  for (const route of routes) {
    if (!route.path.startsWith(apiPrefix)) continue;
    const path = route.path.slice(apiPrefix.length);
    if (!byName.has(requestFormatOf(path))) byName.set(requestFormatOf(path), route);
    if (!path.includes(':') && !byName.has(path)) byName.set(path, route);
  }
  const added: Route[] = [mount('POST', settings.predictRoute, (req) => predict(req, byName))];
  if (settings.healthRoute !== '') {
    const health = routes.find((r) => r.method === 'GET' && r.path === `${apiPrefix}/health`);
    if (health) added.push({ method: 'GET', path: settings.healthRoute, handler: health.handler });
  }
  return added;
}

async function predict(req: HttpRequest, byName: ReadonlyMap<string, Route>): Promise<HttpResult> {
  let data: unknown;
  try {
    data = JSON.parse(req.body.toString('utf8'));
  } catch (err) {
    throw badRequest(`Invalid JSON body: ${(err as Error).message}`);
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) throw badRequest('request body must be a JSON object');
  const instances = (data as { instances?: unknown }).instances;
  if (!Array.isArray(instances)) throw badRequest('request body must include an array field named instances');
  if (instances.length > MAX_INSTANCES) throw badRequest(`instances array exceeds maximum size of ${MAX_INSTANCES}`);
  const predictions = await Promise.all(instances.map((instance) => runInstance(req, byName, instance)));
  return { body: { predictions } };
}

/** One instance's answer: the route's JSON body, or an error object; never throws. */
async function runInstance(req: HttpRequest, byName: ReadonlyMap<string, Route>, instance: unknown): Promise<unknown> {
  try {
    if (typeof instance !== 'object' || instance === null || Array.isArray(instance)) throw badRequest('each instance must be a JSON object');
    const { '@requestFormat': format, ...payload } = instance as Record<string, unknown>;
    if (typeof format !== 'string') throw badRequest('each instance must include a string @requestFormat');
    const route = byName.get(format);
    if (!route) throw badRequest(`no handler registered for @requestFormat: ${format}`);
    if ('stream' in payload) payload['stream'] = false;
    const result = await route.handler(internalRequest(req, route, payload));
    if (!result) throw badRequest('predict route does not support streaming responses');
    return predictionOf(result);
  } catch (thrown) {
    const error = thrown instanceof HttpError ? thrown : inferenceError(ErrorType.SERVER, (thrown as Error)?.message ?? 'unknown error');
    return formatInferenceError(error).body;
  }
}

/** The request a route sees for an instance: the predict request's headers and signal, the instance as its body. */
function internalRequest(req: HttpRequest, route: Route, payload: Record<string, unknown>): HttpRequest {
  return {
    method: route.method,
    path: route.path,
    get query() {
      return new URLSearchParams();
    },
    params: {},
    headers: req.headers,
    body: Buffer.from(JSON.stringify(payload)),
    get signal() {
      return req.signal;
    },
    remoteAddress: req.remoteAddress,
    openEventStream: () => {
      throw badRequest('predict route does not support streaming responses');
    },
    streamStarted: false,
    setResponseHeader: (name, value) => req.setResponseHeader(name, value),
  };
}

/** A route's answer as a prediction: its JSON body, text (parsed when it is JSON), or null when empty. */
function predictionOf(result: HttpResult): unknown {
  if (result.body !== undefined) return result.body;
  const text = result.text ?? (result.bytes ? Buffer.from(result.bytes).toString('utf8') : '');
  if (text === '') return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}
