// GET/POST /tools, as llama-server mounts them (server-tools.cpp handle_get/handle_post), behind
// the API key. Without --tools both answer 403 feature_disabled. GET lists the enabled tools;
// POST {"tool", "params", "stream"} calls one: its answer with 200 (a tool's own failure is
// {"error": "..."} with 200 too), 400 for a malformed body or parameter, 404 for a tool not
// enabled (or "stream": true for one that cannot stream), 500 for a runtime that cannot be used;
// the error bodies are llama-server's, shapes included (see failure).
// Streamed, the answer is `data: {"chunk": "..."}` events and a last `data: {"done": true}`
// (with "error" when the call failed); a client that leaves stops the tool.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import type { Route } from '../../http/router.js';
import { parseJson } from '../../http/validation.js';
import type { Mount } from '../guards.js';
import { asBoolean, asString, at, ToolParamError, type Json } from './params.js';
import { findTool, ToolLookupError } from './registry.js';
import { describeTool, type ServerTool, type ToolCall, type ToolStream } from './tool.js';
import type { ToolsService } from './tools-service.js';

/** llama-server's answer when no tool is enabled (no `code` field, as there). */
const FEATURE_DISABLED: HttpResult = { status: 403, body: { error: { message: 'this feature is disabled', type: 'feature_disabled' } } };

/**
 * llama-server's error answers here: format_error_response's object, not wrapped in "error"
 * (the handler sends it as is), and a 404 whose body its HTTP layer replaces with "File Not Found".
 */
function failure(err: unknown): HttpResult {
  if (err instanceof ToolLookupError) return { status: 404, body: { error: { message: 'File Not Found', type: 'not_found_error', code: 404 } } };
  if (err instanceof ToolParamError) return { status: 400, body: { code: 400, message: err.message, type: 'invalid_request_error' } };
  return { status: 500, body: { code: 500, message: (err as Error).message, type: 'server_error' } };
}

/** The body's tool name, parameters and stream flag, read in llama-server's order. */
function readBody(req: HttpRequest): { name: string; params: Json; stream: boolean } {
  let body: Json;
  try {
    body = parseJson(req, false) as Json;
  } catch (err) {
    throw new ToolParamError((err as Error).message);
  }
  const name = asString(at(body, 'tool'));
  const obj = body as Record<string, Json>;
  const params = Object.hasOwn(obj, 'params') ? obj['params']! : {};
  const stream = Object.hasOwn(obj, 'stream') ? asBoolean(obj['stream']!) : false;
  return { name, params, stream };
}

async function streamCall(req: HttpRequest, tool: ServerTool, call: ToolCall): Promise<void> {
  const events = req.openEventStream({ status: 200 });
  let sent: Promise<void> = Promise.resolve();
  const stream: ToolStream = {
    push(chunk) {
      if (chunk === '') return;
      const data = JSON.stringify({ chunk });
      sent = sent.then(() => events.send(data));
    },
    alive: () => !req.signal.aborted && !events.closed,
  };
  let error = '';
  try {
    await tool.invoke(call, stream);
  } catch (err) {
    error = (err as Error).message || 'An unknown error occurred';
  }
  await sent;
  await events.send(JSON.stringify(error === '' ? { done: true } : { done: true, error }));
  events.end();
}

async function postTool(service: ToolsService, req: HttpRequest): Promise<HttpResult | void> {
  try {
    const { name, params, stream } = readBody(req);
    const header = (key: string): string => req.headers[key] ?? '';
    const call = await service.prepareCall(params, { cwd: header('x-tool-cwd'), runtime: header('x-tool-runtime'), respType: header('x-resp-type') }, req.signal);
    const tool = findTool(service.tools, name, stream);
    if (stream) return await streamCall(req, tool, call);
    return { status: 200, body: await tool.invoke(call) };
  } catch (err) {
    return failure(err);
  }
}

export function toolsRoutes(mount: Mount, service: ToolsService | null, apiPrefix: string): Route[] {
  const path = `${apiPrefix}/tools`;
  const list = (): HttpResult => (service ? { status: 200, body: service.tools.map(describeTool) } : FEATURE_DISABLED);
  const call = (req: HttpRequest): Promise<HttpResult | void> | HttpResult => (service ? postTool(service, req) : FEATURE_DISABLED);
  return [mount('GET', path, list), mount('POST', path, call)];
}
