// The uWebSockets.js adapter: the only module that touches uWS. Per request it copies what it
// needs from uWS's request, answers CORS preflights, routes, reads the body with its cap
// (body-reader.ts), runs the handler and writes its outcome (response-writer.ts). No exception
// escapes a uWS callback.
import { accessSync, constants } from 'node:fs';
import uWS from 'uWebSockets.js';
import { readBody } from './body-reader.js';
import { IdleWatch } from './idle-watch.js';
import { corsHeaders, preflightHeaders, type CorsPolicy } from './cors.js';
import { HttpError, HttpLayerCode, type ErrorFormatter } from './errors.js';
import type { HttpRequest } from './request.js';
import { requestTracer, type RequestTrace } from './request-trace.js';
import { ResponseWriter, type ResponseSettings } from './response-writer.js';
import { Router, type Handler, type Route, type RouteMatch } from './router.js';
import type { StaticDirectory } from './static-directory.js';

export interface HttpServerOptions {
  host: string;
  /** 0 picks a free port; the chosen one is in `HttpServer.port`. */
  port: number;
  /** More addresses to listen on, on the same port (llama-server's --host a,b). */
  extraHosts?: readonly string[];
  routes: readonly Route[];
  formatError: ErrorFormatter;
  /** Largest accepted request body in bytes; larger bodies get 413. */
  maxBodyBytes: number;
  /**
   * Cross-origin access: with a policy, every response carries its Access-Control-Allow-Origin
   * and OPTIONS on any path is a preflight answered 200 with no body, before any handler (and so
   * before any authentication). Without one, OPTIONS is routed like any other method.
   */
  cors?: CorsPolicy;
  /** Receives internal errors (500s) with their causes; never shown to clients. */
  logError?: (error: HttpError, req: { method: string; path: string }) => void;
  /** HTTPS with this PEM key and certificate (llama-server's --ssl-key-file, --ssl-cert-file). */
  tls?: { keyFile: string; certFile: string };
  /**
   * SO_REUSEPORT: several servers (or workers) may listen on one port; uSockets' default, kept
   * when absent (auth-server's workers share their port so). False makes the port exclusive: a
   * second server on it fails to start, as llama-server's does without --reuse-port.
   */
  reusePort?: boolean;
  /**
   * llama-server's -to/--timeout in seconds (0: none): a request body that sends nothing for this
   * long, or a response whose client takes nothing for this long, has its connection closed.
   */
  timeoutSeconds?: number;
  /** Event streams ping after this many seconds of silence (--sse-ping-interval); <= 0 never. */
  ssePingIntervalSeconds?: number;
  /** Files served for GET/HEAD paths no route answers (llama-server's --path). */
  staticDirectory?: StaticDirectory;
  /**
   * Runs before a request that nothing serves is answered 404 or 405, and throws the error to
   * answer instead: llama-server checks its API key before routing, so a caller without the key
   * cannot learn which paths exist.
   */
  admitUnrouted?: (headers: Readonly<Record<string, string>>) => Promise<void>;
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

/** uSockets' listen options: the default sets SO_REUSEPORT; the exclusive one does not. */
const LIBUS_LISTEN_DEFAULT = 0;
const LIBUS_LISTEN_EXCLUSIVE_PORT = 1;

/** uWS.js's listen(host, port, options, cb), which its typings leave out. */
type ListenWithOptions = (host: string, port: number, options: number, cb: (socket: uWS.us_listen_socket | false) => void) => void;

const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);
const EMPTY_BODY = Buffer.alloc(0);

/** What is copied out of uWS's HttpRequest, which is freed when its synchronous callback returns. */
interface RequestHead {
  method: string;
  path: string;
  queryString: string;
  headers: Record<string, string>;
}

function copyRequestHead(req: uWS.HttpRequest): RequestHead {
  const headers: Record<string, string> = Object.create(null);
  req.forEach((key, value) => {
    headers[key] = key in headers ? `${headers[key]}, ${value}` : value;
  });
  return {
    method: req.getCaseSensitiveMethod().toUpperCase(),
    path: req.getUrl(),
    queryString: req.getQuery() ?? '',
    headers,
  };
}

/** A handler's request: a class, so that a request costs one object and no closures or accessors of its own. */
class HandlerRequest implements HttpRequest {
  private parsedQuery: URLSearchParams | null = null;

  constructor(private readonly head: RequestHead, readonly params: Record<string, string>, readonly body: Buffer, private readonly writer: ResponseWriter) {}

  get method(): string {
    return this.head.method;
  }

  get path(): string {
    return this.head.path;
  }

  get headers(): Record<string, string> {
    return this.head.headers;
  }

  get query(): URLSearchParams {
    return (this.parsedQuery ??= new URLSearchParams(this.head.queryString));
  }

  get signal(): AbortSignal {
    return this.writer.signal;
  }

  get remoteAddress(): string {
    return this.writer.remoteAddress;
  }

  get streamStarted(): boolean {
    return this.writer.streamStarted;
  }

  openEventStream(init?: Parameters<HttpRequest['openEventStream']>[0]): ReturnType<HttpRequest['openEventStream']> {
    return this.writer.openEventStream(init);
  }

  setResponseHeader(name: string, value: string): void {
    this.writer.setHeader(name, value);
  }
}

/** Runs a handler and writes its outcome; never throws. */
async function dispatch(handler: Handler, request: HttpRequest, writer: ResponseWriter): Promise<void> {
  try {
    writer.finish(await handler(request));
  } catch (thrown) {
    await writer.fail(thrown);
  }
}

/** dispatch, in the request's trace context when it is traced. */
function dispatchTraced(trace: RequestTrace | null, handler: Handler, request: HttpRequest, writer: ResponseWriter): Promise<void> {
  return trace ? trace.run(() => dispatch(handler, request, writer)) : dispatch(handler, request, writer);
}

/** The uWS app: HTTPS when key and certificate are given, each checked to be readable first. */
function createApp(tls: HttpServerOptions['tls']): uWS.TemplatedApp {
  if (!tls) return uWS.App();
  for (const [flag, file] of [['--ssl-key-file', tls.keyFile], ['--ssl-cert-file', tls.certFile]] as const) {
    try {
      accessSync(file, constants.R_OK);
    } catch (err) {
      throw new Error(`${flag}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
    }
  }
  try {
    return uWS.SSLApp({ key_file_name: tls.keyFile, cert_file_name: tls.certFile });
  } catch {
    throw new Error(`cannot start HTTPS with --ssl-key-file ${tls.keyFile} and --ssl-cert-file ${tls.certFile}: not a PEM private key and its certificate`);
  }
}

/** Answers a request no route serves: a file of the static directory (GET/HEAD), else 404 or 405 once `admit` lets it through. */
async function answerUnrouted(match: Exclude<RouteMatch, { kind: 'found' }>, head: RequestHead, writer: ResponseWriter, options: HttpServerOptions): Promise<void> {
  const { method, path } = head;
  try {
    if (match.kind === 'not-found' && options.staticDirectory && (method === 'GET' || method === 'HEAD')) {
      const result = await options.staticDirectory.lookup(path, head.headers['if-none-match']);
      if (result) return writer.writeResult(result);
    }
    await options.admitUnrouted?.(head.headers);
    writer.writeError(match.kind === 'not-found'
      ? new HttpError(404, HttpLayerCode.NOT_FOUND, `No route for ${method} ${path}`)
      : new HttpError(405, HttpLayerCode.METHOD_NOT_ALLOWED, `Method ${method} is not allowed on ${path}`, { allow: match.allowed.join(', ') }));
  } catch (thrown) {
    writer.writeError(thrown);
  }
}

export async function startHttpServer(options: HttpServerOptions): Promise<HttpServer> {
  if (!uwsIsNative()) {
    throw new Error('uWebSockets.js did not load its native binary (it fell back to a JavaScript shim); refusing to start');
  }
  const router = new Router(options.routes);
  const timeoutMs = Math.max(0, options.timeoutSeconds ?? 0) * 1000;
  const settings: ResponseSettings = {
    formatError: options.formatError,
    logError: options.logError,
    ssePingIntervalMs: Math.max(0, options.ssePingIntervalSeconds ?? 0) * 1000,
    writeTimeoutMs: timeoutMs,
  };
  const cors = options.cors;
  const preflight = cors ? preflightHeaders(cors) : null;
  const idle = timeoutMs > 0 ? new IdleWatch(timeoutMs) : null;
  const tooLarge = (): HttpError => new HttpError(413, HttpLayerCode.BODY_TOO_LARGE, `Request body exceeds ${options.maxBodyBytes} bytes`);
  const app = createApp(options.tls);

  app.any('/*', (res, req) => {
    const head = copyRequestHead(req);
    const { method, path } = head;
    const headers = cors ? corsHeaders(cors, head.headers['origin']) : [];
    // HEAD is routed as GET; the writer leaves the body out. Routed before the writer is made (both
    // synchronous), so that a traced request's trace names its route's template from the start.
    const match = router.find(method === 'HEAD' ? 'GET' : method, path);
    const trace = requestTracer()?.begin({ method, route: match.kind === 'found' ? match.route : null, headers: head.headers }) ?? null;
    const writer = new ResponseWriter(res, { method, path }, settings, headers, trace);
    if (method === 'OPTIONS' && preflight) {
      writer.writeResult({ status: 200, headers: preflight });
      return;
    }
    if (match.kind !== 'found') {
      void answerUnrouted(match, head, writer, options);
      return;
    }
    if (!METHODS_WITH_BODY.has(method)) {
      void dispatchTraced(trace, match.handler, new HandlerRequest(head, match.params, EMPTY_BODY, writer), writer);
      return;
    }
    readBody(res, Number(head.headers['content-length'] ?? '0'), options.maxBodyBytes, () => !writer.isOpen, (outcome) => {
      if (outcome.kind === 'too-large') writer.writeError(tooLarge());
      else void dispatchTraced(trace, match.handler, new HandlerRequest(head, match.params, outcome.body, writer), writer);
    }, idle ? { watch: idle, onTimeout: () => writer.closeConnection() } : undefined);
  });

  const listen = (host: string, port: number): Promise<uWS.us_listen_socket> => new Promise((resolve, reject) => {
    const listenOptions = (options.reusePort ?? true) ? LIBUS_LISTEN_DEFAULT : LIBUS_LISTEN_EXCLUSIVE_PORT;
    (app.listen as unknown as ListenWithOptions)(host, port, listenOptions, (socket) => {
      if (socket) resolve(socket);
      else reject(new Error(`cannot listen on ${host}:${port} (address in use or not permitted)`));
    });
  });
  const first = await listen(options.host, options.port);
  const port = uWS.us_socket_local_port(first as unknown as uWS.us_socket);
  const sockets = [first];
  // The other addresses listen on the port the first one got (port 0 picks it once).
  try {
    for (const host of options.extraHosts ?? []) sockets.push(await listen(host, port));
  } catch (err) {
    for (const socket of sockets) uWS.us_listen_socket_close(socket);
    throw err;
  }
  return {
    port,
    close() {
      for (const socket of sockets) uWS.us_listen_socket_close(socket);
      (app as unknown as { close?: () => void }).close?.();
      idle?.close();
    },
  };
}
