// The uWebSockets.js adapter: the only module that touches uWS. It reads bodies with a size
// cap, routes, runs handlers, maps thrown errors through the product's ErrorFormatter and
// never lets an exception escape a uWS callback.
import { STATUS_CODES } from 'node:http';
import uWS from 'uWebSockets.js';
import { HttpError, HttpLayerCode, toHttpError, type ErrorFormatter } from './errors.js';
import { createEventStream, type EventStream } from './event-stream.js';
import type { HttpRequest, HttpResult } from './request.js';
import { Router, type Route } from './router.js';

export interface HttpServerOptions {
  host: string;
  /** 0 picks a free port; the chosen one is in `HttpServer.port`. */
  port: number;
  routes: readonly Route[];
  formatError: ErrorFormatter;
  /** Largest accepted request body in bytes; larger bodies get 413. */
  maxBodyBytes: number;
  /** Headers added to every response (e.g. CORS). */
  defaultHeaders?: Record<string, string>;
  /**
   * Headers of the answer to a CORS preflight: with them, OPTIONS on any path is answered 200
   * with no body, before routing (and so before any authentication, which browsers do not
   * send with a preflight). Without them, OPTIONS is routed like any other method.
   */
  preflightHeaders?: Record<string, string>;
  /** Receives internal errors (500s) with their causes; never shown to clients. */
  logError?: (error: HttpError, req: { method: string; path: string }) => void;
}

export interface HttpServer {
  readonly port: number;
  /** Stops listening and closes open connections. */
  close(): void;
}

/** True when uWS loaded its native binary rather than its slow JavaScript fallback. */
export function uwsIsNative(): boolean {
  return typeof uWS.App === 'function' && uWS.App.toString().includes('[native code]');
}

const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const EMPTY_BODY = Buffer.alloc(0);

function statusLine(status: number): string {
  return `${status} ${STATUS_CODES[status] ?? 'Unknown'}`;
}

export async function startHttpServer(options: HttpServerOptions): Promise<HttpServer> {
  if (!uwsIsNative()) {
    throw new Error('uWebSockets.js did not load its native binary (it fell back to a JavaScript shim); refusing to start');
  }
  const router = new Router(options.routes);
  const defaultHeaders = Object.entries(options.defaultHeaders ?? {});
  const app = uWS.App();

  app.any('/*', (res, req) => {
    // The uWS HttpRequest is only valid during this synchronous callback: copy everything first.
    const method = req.getCaseSensitiveMethod().toUpperCase();
    const path = req.getUrl();
    const queryString = req.getQuery() ?? '';
    const headers: Record<string, string> = Object.create(null);
    req.forEach((key, value) => {
      headers[key] = key in headers ? `${headers[key]}, ${value}` : value;
    });

    // The AbortController is made only when a handler asks for the signal (most never do).
    let abort: AbortController | null = null;
    let aborted = false;
    let finished = false; // the response has ended or the client is gone: no more writes
    // onAborted must be registered before any asynchronous step, or uWS terminates the process.
    res.onAborted(() => {
      finished = true;
      aborted = true;
      abort?.abort();
    });
    const signal = (): AbortSignal => {
      if (!abort) {
        abort = new AbortController();
        if (aborted) abort.abort();
      }
      return abort.signal;
    };
    // Read now: the socket address is gone once the response has ended.
    const remoteAddress = Buffer.from(res.getRemoteAddressAsText()).toString();

    // HEAD is answered as GET, without the body (its Content-Length is the GET body's).
    const isHead = method === 'HEAD';
    const writeResult = (result: HttpResult, closeConnection = false): void => {
      if (finished) return;
      finished = true;
      const status = result.status ?? 200;
      const isText = result.text !== undefined;
      const payload = isText ? result.text! : result.body === undefined ? '' : JSON.stringify(result.body);
      res.cork(() => {
        res.writeStatus(statusLine(status));
        for (const [k, v] of defaultHeaders) res.writeHeader(k, v);
        if (payload !== '' || result.body !== undefined) {
          res.writeHeader('Content-Type', isText ? (result.contentType ?? 'text/plain; charset=utf-8') : 'application/json; charset=utf-8');
        }
        for (const [k, v] of Object.entries(result.headers ?? {})) res.writeHeader(k, v);
        if (isHead) res.endWithoutBody(Buffer.byteLength(payload), closeConnection);
        else res.end(payload, closeConnection);
      });
    };

    const writeError = (thrown: unknown): void => {
      const error = toHttpError(thrown);
      if (error.status === 500) options.logError?.(error, { method, path });
      const { status, body } = options.formatError(error);
      const extra: Record<string, string> = error.code === HttpLayerCode.METHOD_NOT_ALLOWED && error.details.allow
        ? { Allow: String(error.details.allow) } : {};
      // After a 413 the rest of the body is still in flight: close instead of reading it.
      writeResult({ status, body, headers: extra }, error.status === 413);
    };

    if (method === 'OPTIONS' && options.preflightHeaders) {
      writeResult({ status: 200, headers: options.preflightHeaders });
      return;
    }
    const match = router.find(isHead ? 'GET' : method, path);
    if (match.kind !== 'found') {
      writeError(match.kind === 'not-found'
        ? new HttpError(404, HttpLayerCode.NOT_FOUND, `No route for ${method} ${path}`)
        : new HttpError(405, HttpLayerCode.METHOD_NOT_ALLOWED, `Method ${method} is not allowed on ${path}`, { allow: match.allowed.join(', ') }));
      return;
    }

    let stream: EventStream | null = null;
    // An event stream's status line and headers, until its first write sends them. While they
    // are unsent, a handler that throws is still answered with a plain error response.
    let streamHead: (() => void) | null = null;
    const sendStreamHead = (): void => {
      const head = streamHead;
      streamHead = null;
      head?.();
    };
    const run = async (body: Buffer): Promise<void> => {
      let query: URLSearchParams | null = null;
      const request: HttpRequest = {
        method,
        path,
        get query() {
          return (query ??= new URLSearchParams(queryString));
        },
        params: match.params,
        headers,
        body,
        get signal() {
          return signal();
        },
        remoteAddress,
        openEventStream(init = {}) {
          if (stream) return stream;
          if (finished) throw new HttpError(499, 'CLIENT_CLOSED', 'Client closed the connection');
          // Called only inside res.cork.
          streamHead = () => {
            res.writeStatus(statusLine(init.status ?? 200));
            for (const [k, v] of defaultHeaders) res.writeHeader(k, v);
            res.writeHeader('Content-Type', 'text/event-stream');
            res.writeHeader('Cache-Control', 'no-cache');
            for (const [k, v] of Object.entries(init.headers ?? {})) res.writeHeader(k, v);
          };
          stream = createEventStream({
            write: (chunk) => {
              let ok = true;
              res.cork(() => {
                sendStreamHead();
                ok = res.write(chunk);
              });
              return ok;
            },
            whenWritable: (ready) => {
              if (finished) return ready();
              const onAbort = (): void => ready();
              signal().addEventListener('abort', onAbort, { once: true });
              res.onWritable(() => {
                signal().removeEventListener('abort', onAbort);
                ready();
                return true;
              });
            },
            end: () => {
              finished = true;
              res.cork(() => {
                sendStreamHead();
                res.end();
              });
            },
            isOpen: () => !finished,
          });
          return stream;
        },
      };
      try {
        const result = await match.handler(request);
        if (stream) (stream as EventStream).end();
        else writeResult(result ?? { status: 204 });
      } catch (thrown) {
        if (stream && streamHead === null) {
          const error = toHttpError(thrown);
          if (error.status === 500) options.logError?.(error, { method, path });
          const s = stream as EventStream;
          await s.send(JSON.stringify(options.formatError(error).body));
          s.end();
        } else {
          writeError(thrown);
        }
      }
    };

    if (!METHODS_WITH_BODY.has(method)) {
      void run(EMPTY_BODY);
      return;
    }
    const declared = Number(headers['content-length'] ?? '0');
    if (declared > options.maxBodyBytes) {
      writeError(new HttpError(413, HttpLayerCode.BODY_TOO_LARGE, `Request body exceeds ${options.maxBodyBytes} bytes`));
      return;
    }
    const chunks: Buffer[] = [];
    let received = 0;
    res.onData((chunk, isLast) => {
      if (finished) return;
      received += chunk.byteLength;
      if (received > options.maxBodyBytes) {
        chunks.length = 0;
        writeError(new HttpError(413, HttpLayerCode.BODY_TOO_LARGE, `Request body exceeds ${options.maxBodyBytes} bytes`));
        return;
      }
      // The ArrayBuffer is only valid during this callback: copy it.
      chunks.push(Buffer.copyBytesFrom(new Uint8Array(chunk)));
      if (isLast) void run(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received));
    });
  });

  const listenSocket = await new Promise<uWS.us_listen_socket>((resolve, reject) => {
    app.listen(options.host, options.port, (socket) => {
      if (socket) resolve(socket);
      else reject(new Error(`cannot listen on ${options.host}:${options.port} (address in use or not permitted)`));
    });
  });
  const port = uWS.us_socket_local_port(listenSocket as unknown as uWS.us_socket);
  return {
    port,
    close() {
      uWS.us_listen_socket_close(listenSocket);
      (app as unknown as { close?: () => void }).close?.();
    },
  };
}
