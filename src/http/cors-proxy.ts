// llama-server's CORS proxy (--ui-mcp-proxy; server-cors-proxy.h): `GET|POST /cors-proxy?url=`
// sends the request to `url` from the server and streams the answer back, so the browser page can
// reach MCP servers that do not allow its origin. Only headers the page names explicitly are
// forwarded, each as `x-llama-server-proxy-header-<name>: <value>`: the page's own credentials
// (Authorization, Cookie, the API key) never reach the target. As there: http and https only, no
// user:password in the URL, the target's status and headers are passed on except hop-by-hop and
// CORS ones (this server answers CORS itself).
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { HttpError } from './errors.js';
import type { HttpRequest } from './request.js';

export const PROXY_HEADER_PREFIX = 'x-llama-server-proxy-header-';

/** Request headers dropped even when named explicitly (the proxy sets them itself). */
const OWN_REQUEST_HEADERS = new Set(['accept-encoding', 'transfer-encoding', 'content-length', 'host']);

function badTarget(message: string): HttpError {
  return new HttpError(400, 'INVALID_TARGET_URL', message);
}

/** The target of `?url=`, checked as llama-server checks it. */
export function proxyTarget(raw: string | null): URL {
  if (raw === null || raw === '') throw badTarget('invalid target URL: missing url parameter');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw badTarget(`invalid target URL: ${raw}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw badTarget(`unsupported URL scheme in target URL: ${url.protocol.slice(0, -1)}`);
  if (url.hostname === '') throw badTarget('invalid target URL: missing host');
  if (url.password !== '' || url.username !== '') throw badTarget('authentication in target URL is not supported');
  return url;
}

/** The headers sent to the target: only the explicit `x-llama-server-proxy-header-*` ones, renamed. */
export function forwardedHeaders(headers: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers)) {
    if (!key.startsWith(PROXY_HEADER_PREFIX)) continue;
    const name = key.slice(PROXY_HEADER_PREFIX.length);
    if (name === '' || OWN_REQUEST_HEADERS.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/** Response headers of the target not passed on: hop-by-hop, framing, and CORS. */
function passedOn(name: string): boolean {
  return !['server', 'transfer-encoding', 'content-length', 'keep-alive', 'connection', 'content-type'].includes(name) && !name.startsWith('access-control-');
}

/** Streams the target's answer to the client (status, headers, then the body as it comes, with backpressure). */
export async function relayResponse(req: HttpRequest, proxied: ProxiedResponse): Promise<void> {
  const stream = req.openEventStream({
    status: proxied.status,
    headers: { ...proxied.headers, 'Content-Type': proxied.contentType ?? 'text/plain; charset=utf-8' },
    ping: false,
  });
  try {
    for await (const chunk of proxied.body) {
      if (stream.closed) break;
      await stream.sendRaw(chunk as Buffer);
    }
  } catch {
    // The target broke off (or the client left): the answer ends where it stopped, as
    // llama-server's does; no error event may be mixed into a body of another format.
  } finally {
    proxied.body.destroy();
  }
}

export interface ProxiedResponse {
  status: number;
  contentType: string | undefined;
  headers: Record<string, string>;
  body: IncomingMessage;
}

/** Sends the request; rejects with a 502 when the target cannot be reached. Aborted with the client's signal. */
export function proxyRequest(method: 'GET' | 'POST', req: HttpRequest, timeoutMs: number): Promise<ProxiedResponse> {
  const url = proxyTarget(req.query.get('url'));
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    const out = send(url, { method, headers: forwardedHeaders(req.headers), signal: req.signal, timeout: timeoutMs }, (res) => {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(res.headers)) {
        if (value !== undefined && passedOn(name)) headers[name] = Array.isArray(value) ? value.join(', ') : value;
      }
      resolve({ status: res.statusCode ?? 502, contentType: res.headers['content-type'], headers, body: res });
    });
    out.on('timeout', () => out.destroy(new Error(`no answer within ${timeoutMs / 1000} s`)));
    out.on('error', (err) => reject(new HttpError(502, 'BAD_GATEWAY', `proxy error: ${err.message}`)));
    out.end(method === 'POST' ? req.body : undefined);
  });
}
