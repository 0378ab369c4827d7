// llama-server's transport flags (--ssl-key-file/--ssl-cert-file, --reuse-port, -to,
// --sse-ping-interval, --path), its web page and Vertex AI's prediction protocol (AIP_MODE), applied to whichever port this server answers
// on: one model's server or the router in front of many, as llama-server applies them in both.
import type { Route } from '../http/router.js';
import type { HttpServerOptions } from '../http/server.js';
import { openStaticDirectory } from '../http/static-directory.js';
import { chatPageRoutes } from './web-ui.js';
import type { Mount } from './guards.js';
import { vertexRoutes, type VertexSettings } from './vertex-predict.js';

export interface TransportOptions {
  /** --ssl-key-file, --ssl-cert-file: HTTPS. */
  tls?: { keyFile: string; certFile: string };
  /** --reuse-port: SO_REUSEPORT; without it a second server on the port fails to start. */
  reusePort?: boolean;
  /** -to/--timeout in seconds: llama-server's read/write timeout on a connection (0 none; default none). */
  timeoutSeconds?: number;
  /** --sse-ping-interval in seconds (default 30, as llama-server; <= 0 never). */
  ssePingIntervalSeconds?: number;
  /** --path: serve this directory's files at the root (instead of the chat page). */
  publicPath?: string;
  /** AIP_MODE=PREDICTION: Vertex AI's prediction protocol (vertex-predict.ts). */
  vertex?: VertexSettings;
}

/** The routes with Vertex AI's prediction routes added when the protocol is on; `mount` applies the server's access rule. */
export function withVertexRoutes(routes: Route[], options: TransportOptions & { apiPrefix: string }, mount: Mount): Route[] {
  return options.vertex ? [...routes, ...vertexRoutes(routes, options.vertex, options.apiPrefix, mount)] : routes;
}

type TransportHttpOptions = Pick<HttpServerOptions, 'tls' | 'reusePort' | 'timeoutSeconds' | 'ssePingIntervalSeconds' | 'staticDirectory'>;

/**
 * The page routes and the transport part of startHttpServer's options. As llama-server: the chat
 * page at `<prefix>/` while the page is on (--ui, the default), --path's files in its place (only
 * while the page is on). Throws when --path is not a directory or the page was not built.
 */
export async function webTransport(options: TransportOptions & { webui?: boolean; apiPrefix: string }): Promise<{ pageRoutes: Route[]; http: TransportHttpOptions }> {
  const servePublicPath = Boolean(options.webui && options.publicPath);
  const staticDirectory = servePublicPath ? await openStaticDirectory(options.publicPath!, `${options.apiPrefix}/`) : undefined;
  return {
    pageRoutes: options.webui && !servePublicPath ? chatPageRoutes(options.apiPrefix) : [],
    http: {
      ...(options.tls ? { tls: options.tls } : {}),
      reusePort: options.reusePort ?? false,
      timeoutSeconds: options.timeoutSeconds ?? 0,
      ssePingIntervalSeconds: options.ssePingIntervalSeconds ?? 30,
      ...(staticDirectory ? { staticDirectory } : {}),
    },
  };
}
