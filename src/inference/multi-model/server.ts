// inference-server in router mode (started without -m): one HTTP port in front of many models,
// each served by its own child inference-server on the loopback (model-registry.ts). The port
// opens at once; models load when a request names them (or on POST /models/load).
import { DEFAULT_CORS, type CorsPolicy } from '../../http/cors.js';
import type { Route } from '../../http/router.js';
import { startHttpServer } from '../../http/server.js';
import { ApiKeys } from '../access/api-key.js';
import type { AcceptBearer, UsageRecorder } from '../access/auth-bridge.js';
import type { TenantOptions } from '../server.js';
import { Tenancy } from '../tenants/tenancy.js';
import { TenantTable } from '../tenants/tenant-table.js';
import { startUsageFlush } from '../tenants/usage-flush.js';
import { defaultReplicaName, FleetLimits } from '../tenants/fleet-limits.js';
import type { FleetStore } from '../tenants/fleet-store.js';
import { formatInferenceError } from '../errors.js';
import { webTransport, withVertexRoutes, type TransportOptions } from '../transport.js';
import { ConversationOwners } from './conversation-owners.js';
import { routerHandlers } from './handlers.js';
import { conversationStreamHandlers } from './conversation-streams.js';
import { ModelRegistry, type RegistryOptions } from './model-registry.js';
import { CacheModels } from './cache-models.js';
import { routerRoutes, type RouterAccess } from './routes.js';
import { corsProxyRoutes } from '../cors-proxy-routes.js';
import { checkKey, routerMount } from '../guards.js';
import { toolsRoutes } from '../server-tools/tools-routes.js';
import { ToolsService, type ToolsOptions } from '../server-tools/tools-service.js';

export interface RouterServerOptions extends Omit<RegistryOptions, 'loadTimeoutMs' | 'fakeDelayMs'>, TransportOptions {
  host: string;
  port: number;
  extraHosts?: string[];
  apiKeys: string[];
  acceptBearer?: AcceptBearer;
  /** --tenants FILE and the --tenant-* limits (docs/tenants.md): held by the router across its model processes. */
  tenants?: TenantOptions;
  /** Where the model processes' hourly usage goes (--auth: the mounted service; --auth-issuer: auth-server over HTTP). */
  usageRecorder?: UsageRecorder;
  /** The auth service's database (--auth): tenants' limits held with every replica that shares it (tenants/fleet-limits.ts). */
  fleetStore?: FleetStore;
  apiPrefix?: string;
  cors?: CorsPolicy;
  maxBodyBytes: number;
  /** --models-autoload (default true). */
  autoload: boolean;
  buildInfo: string;
  webui?: boolean;
  extraRoutes?: Route[];
  /** --ui-mcp-proxy: GET/POST /cors-proxy on the router itself, as llama-server's router. */
  corsProxy?: boolean;
  /** --tools / -ag: GET/POST /tools on the router itself, as llama-server's router. */
  tools?: ToolsOptions;
  /** Default 600 s. */
  loadTimeoutMs?: number;
  /** -hft / HF_TOKEN: sent to the hub by POST /models downloads. */
  hfToken?: string;
  /** Where the hub and its cache are (MODEL_ENDPOINT, LLAMA_CACHE, ...); default process.env. */
  env?: Readonly<Record<string, string | undefined>>;
  /** Milliseconds added to every load and proxied request (RegistryOptions.fakeDelayMs); default 0. */
  fakeDelayMs?: number;
}

export interface RouterServer {
  readonly port: number;
  readonly registry: ModelRegistry;
  /** The tenants' limits and the usage the model processes reported (docs/tenants.md, "Router mode"). */
  readonly tenancy: Tenancy;
  /** Stops listening, then every model's child (waiting for them to exit). */
  close(): Promise<void>;
}

export async function startRouterServer(options: RouterServerOptions): Promise<RouterServer> {
  // The tenants' limits and usage, across the model processes: they report what their tenants used.
  const fleet = options.fleetStore ? new FleetLimits(options.fleetStore, defaultReplicaName(), { log: options.log }) : null;
  await fleet?.start();
  const tenancy = new Tenancy(Date.now, null, fleet);
  const registry = new ModelRegistry({
    onUsage: (tokens, entries) => tenancy.takeReport(tokens, entries),
    readSpecs: options.readSpecs,
    modelsMax: options.modelsMax,
    ...(options.spares !== undefined ? { spares: options.spares } : {}),
    command: options.command,
    childArgs: options.childArgs,
    loadTimeoutMs: options.loadTimeoutMs ?? 600_000,
    fakeDelayMs: options.fakeDelayMs ?? 0,
    log: options.log,
  });
  const closing = new AbortController();
  const owners = new ConversationOwners();
  const downloads = new CacheModels(registry, { env: options.env ?? process.env, hfToken: options.hfToken ?? '', userAgent: `inference-server llama-cpp/${options.buildInfo}`, log: options.log });
  const handlers = routerHandlers(registry, { autoload: options.autoload, buildInfo: options.buildInfo, closing: closing.signal }, owners, downloads);
  const streams = conversationStreamHandlers(registry, owners);
  const apiPrefix = options.apiPrefix ?? '';
  const access: RouterAccess = {
    keys: new ApiKeys(options.apiKeys),
    ...(options.acceptBearer ? { acceptBearer: options.acceptBearer } : {}),
    tenants: new TenantTable(options.apiKeys.length, options.tenants?.file, options.tenants?.defaultLimits),
    tenancy,
  };
  const usageFlush = options.usageRecorder ? startUsageFlush(tenancy.usage, options.usageRecorder, { log: options.log }) : null;
  const mount = routerMount(access);
  // As llama-server: an unknown tool or an unusable --tools-runtime fails the start.
  const tools = ToolsService.wanted(options.tools) ? await ToolsService.start(options.tools, options.log) : null;
  const web = await webTransport({ ...options, apiPrefix });
  const http = await startHttpServer({
    host: options.host,
    port: options.port,
    ...(options.extraHosts ? { extraHosts: options.extraHosts } : {}),
    routes: withVertexRoutes([
      ...routerRoutes(handlers, access, apiPrefix),
      mount('GET',    `${apiPrefix}/v1/stream`,         streams.replay),
      mount('DELETE', `${apiPrefix}/v1/stream`,         streams.stop),
      mount('POST',   `${apiPrefix}/v1/streams/lookup`, streams.lookup),
      ...corsProxyRoutes(mount, { enabled: options.corsProxy ?? false, apiPrefix, timeoutSeconds: 600 }),
      ...toolsRoutes(mount, tools, apiPrefix),
      ...(options.extraRoutes ?? []),
      ...web.pageRoutes,
    ], { ...options, apiPrefix }, mount),
    formatError: formatInferenceError,
    maxBodyBytes: options.maxBodyBytes,
    cors: options.cors ?? DEFAULT_CORS,
    admitUnrouted: (headers) => checkKey(access, { headers }),
    ...web.http,
    logError: (error, req) => options.log(`error: ${req.method} ${req.path}: ${error.message}${error.cause ? ` (${String((error.cause as Error).stack ?? error.cause)})` : ''}`),
  });
  try {
    registry.loadStartupModels();
  } catch (err) {
    http.close();
    await Promise.all([registry.close(), tools?.close()]);
    throw err;
  }
  return {
    port: http.port,
    registry,
    tenancy,
    async close() {
      closing.abort();
      http.close();
      await Promise.all([downloads.close(), registry.close(), tools?.close()]);
      await usageFlush?.stop();
      await fleet?.stop();
    },
  };
}
