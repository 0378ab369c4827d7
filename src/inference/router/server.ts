// inference-server in router mode (started without -m): one HTTP port in front of many models,
// each served by its own child inference-server on the loopback (model-registry.ts). The port
// opens at once; models load when a request names them (or on POST /models/load).
import { DEFAULT_CORS, type CorsPolicy } from '../../http/cors.js';
import type { Route } from '../../http/router.js';
import { startHttpServer } from '../../http/server.js';
import { ApiKeys } from '../access/api-key.js';
import { formatInferenceError } from '../errors.js';
import { chatPageRoutes } from '../web-ui.js';
import { routerHandlers } from './handlers.js';
import { ModelRegistry, type RegistryOptions } from './model-registry.js';
import { routerRoutes } from './routes.js';

export interface RouterServerOptions extends Omit<RegistryOptions, 'loadTimeoutMs' | 'fakeTiming'> {
  host: string;
  port: number;
  extraHosts?: string[];
  apiKeys: string[];
  acceptBearer?: (authorization: string | undefined) => Promise<boolean>;
  apiPrefix?: string;
  cors?: CorsPolicy;
  maxBodyBytes: number;
  /** --models-autoload (default true). */
  autoload: boolean;
  buildInfo: string;
  webui?: boolean;
  extraRoutes?: Route[];
  /** Default 600 s. */
  loadTimeoutMs?: number;
  fakeTiming?: boolean;
}

export interface RouterServer {
  readonly port: number;
  readonly registry: ModelRegistry;
  /** Stops listening, then every model's child (waiting for them to exit). */
  close(): Promise<void>;
}

export async function startRouterServer(options: RouterServerOptions): Promise<RouterServer> {
  const registry = new ModelRegistry({
    readSpecs: options.readSpecs,
    modelsMax: options.modelsMax,
    command: options.command,
    childArgs: options.childArgs,
    loadTimeoutMs: options.loadTimeoutMs ?? 600_000,
    fakeTiming: options.fakeTiming ?? false,
    log: options.log,
  });
  const closing = new AbortController();
  const handlers = routerHandlers(registry, { autoload: options.autoload, buildInfo: options.buildInfo, closing: closing.signal });
  const apiPrefix = options.apiPrefix ?? '';
  const http = await startHttpServer({
    host: options.host,
    port: options.port,
    ...(options.extraHosts ? { extraHosts: options.extraHosts } : {}),
    routes: [
      ...routerRoutes(handlers, { keys: new ApiKeys(options.apiKeys), ...(options.acceptBearer ? { acceptBearer: options.acceptBearer } : {}) }, apiPrefix),
      ...(options.extraRoutes ?? []),
      ...(options.webui ? chatPageRoutes(apiPrefix) : []),
    ],
    formatError: formatInferenceError,
    maxBodyBytes: options.maxBodyBytes,
    cors: options.cors ?? DEFAULT_CORS,
    logError: (error, req) => options.log(`error: ${req.method} ${req.path}: ${error.message}${error.cause ? ` (${String((error.cause as Error).stack ?? error.cause)})` : ''}`),
  });
  try {
    registry.loadStartupModels();
  } catch (err) {
    http.close();
    await registry.close();
    throw err;
  }
  return {
    port: http.port,
    registry,
    async close() {
      closing.abort();
      http.close();
      await registry.close();
    },
  };
}
