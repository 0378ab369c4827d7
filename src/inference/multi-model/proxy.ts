// Forwarding one request to a model's child server on the loopback (llama-server's
// server_http_proxy): the method, path, query, headers and body go as received (but the tenant
// header, which the router sets itself: tenants/forwarded-tenant.ts); the answer comes
// back with its status and headers, a text/event-stream answer event by event as the child writes
// it (with backpressure: the child is read only as fast as the client takes). When the client
// goes away the upstream request is destroyed at once, so the child cancels its task.
import { request as httpRequest, Agent, type IncomingMessage } from 'node:http';
import { StringDecoder } from 'node:string_decoder';
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { ErrorType, inferenceError } from '../errors.js';
import { injectTraceContext } from '../../telemetry/tracing.js';
import { encodeTenant, TENANT_HEADER } from '../tenants/forwarded-tenant.js';
import type { RequestTenant } from '../tenants/tenancy.js';

/** Request headers not forwarded: the proxy sets its own framing. */
const DROPPED_REQUEST_HEADERS = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'accept-encoding', 'keep-alive', 'upgrade']);

/** Answer headers not forwarded: framing, and CORS (the router answers CORS itself). */
function keptAnswerHeader(name: string): boolean {
  return !['server', 'date', 'connection', 'content-length', 'transfer-encoding', 'keep-alive', 'content-type'].includes(name) && !name.startsWith('access-control-');
}

const agent = new Agent({ keepAlive: true });

function answerHeaders(res: IncomingMessage): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(res.headers)) {
    if (value !== undefined && keptAnswerHeader(name)) out[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

function upstreamFailed(model: string, err: Error) {
  return inferenceError(ErrorType.SERVER, `model '${model}' did not answer: ${err.message}`);
}

/** Sends `req` to the child on `port`, with `tenant` when the router admitted one; resolves when the upstream answer has been relayed. */
export function forward(req: HttpRequest, port: number, model: string, tenant: RequestTenant | null): Promise<HttpResult | void> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.headers)) if (!DROPPED_REQUEST_HEADERS.has(name) && name !== TENANT_HEADER) headers[name] = value;
  // The tenant the router admitted, for fair share in the model process; a client's own value never passes.
  if (tenant) headers[TENANT_HEADER] = encodeTenant(tenant.tenant);
  if (req.body.length > 0) headers['content-length'] = String(req.body.length);
  // Traced, the child's span descends from this request's (its traceparent replaces the client's).
  injectTraceContext(headers);
  const query = req.query.toString();
  const path = query === '' ? req.path : `${req.path}?${query}`;
  return new Promise((resolve, reject) => {
    const upstream = httpRequest({ host: '127.0.0.1', port, method: req.method === 'HEAD' ? 'GET' : req.method, path, headers, agent });
    const onAbort = (): void => {
      upstream.destroy();
      resolve();
    };
    req.signal.addEventListener('abort', onAbort, { once: true });
    const settle = (): void => req.signal.removeEventListener('abort', onAbort);
    upstream.on('error', (err) => {
      settle();
      reject(upstreamFailed(model, err));
    });
    upstream.on('response', (res) => {
      // A client gone before the answer (a conversation's request is forwarded regardless):
      // the child sees the disconnect.
      if (req.signal.aborted) {
        res.destroy();
        settle();
        resolve();
        return;
      }
      const relay = (res.headers['content-type'] ?? '').startsWith('text/event-stream') ? relayStream(req, res) : collect(res);
      relay.then((result) => {
        settle();
        resolve(result);
      }, (err: Error) => {
        settle();
        reject(upstreamFailed(model, err));
      });
    });
    upstream.end(req.body);
  });
}

/** A whole answer, as text with its content type. */
function collect(res: IncomingMessage): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    res.on('data', (chunk: Buffer) => chunks.push(chunk));
    res.on('error', reject);
    res.on('end', () => resolve({
      status: res.statusCode ?? 500,
      headers: answerHeaders(res),
      text: Buffer.concat(chunks).toString('utf8'),
      contentType: res.headers['content-type'] ?? 'text/plain; charset=utf-8',
    }));
  });
}

/** An event stream, relayed chunk by chunk; the child is paused while the client's socket is full. */
async function relayStream(req: HttpRequest, res: IncomingMessage): Promise<void> {
  const stream = req.openEventStream({ status: res.statusCode ?? 200, headers: { ...answerHeaders(res), 'Content-Type': res.headers['content-type']! } });
  const decoder = new StringDecoder('utf8');
  for await (const chunk of res as AsyncIterable<Buffer>) {
    if (stream.closed) {
      res.destroy();
      return;
    }
    const text = decoder.write(chunk);
    if (text !== '') await stream.sendRaw(text);
  }
  const rest = decoder.end();
  if (rest !== '') await stream.sendRaw(rest);
}
