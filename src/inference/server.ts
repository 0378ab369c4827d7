// The inference HTTP server: opens the port at once (health answers 503 while loading), loads
// the model and its engine off the event loop, then serves the route table below.
import type { Route } from '../http/router.js';
import { DEFAULT_CORS, type CorsPolicy } from '../http/cors.js';
import { startHttpServer } from '../http/server.js';
import { corsProxyRoutes } from './cors-proxy-routes.js';
import { ToolsService, type ToolsOptions } from './server-tools/tools-service.js';
import { toolsRoutes } from './server-tools/tools-routes.js';
import type { EngineSettings, NativeServerParams, PoolingName } from '../native/binding.js';
import { LLAMA_SERVER_DEFAULTS, type GenerationDefaults } from './service/generation.js';
import { ApiKeys } from './access/api-key.js';
import type { AcceptBearer, UsageRecorder } from './access/auth-bridge.js';
import { Tenancy, type UsageReporter } from './tenants/tenancy.js';
import { TenantTable, type TenantsFile } from './tenants/tenant-table.js';
import type { TenantLimits } from './tenants/tenant.js';
import { startUsageFlush } from './tenants/usage-flush.js';
import { defaultReplicaName, FleetLimits } from './tenants/fleet-limits.js';
import type { KvEventsOptions, KvEventsService } from './kv-events/kv-events-service.js';
import type { FleetStore } from './tenants/fleet-store.js';
import { checkKey, readOnlyMount, type RouteContext } from './guards.js';
import { inferenceRoutes } from './routes.js';
import { streamRoutes } from './streams/stream-routes.js';
import { StreamSessions } from './streams/stream-sessions.js';
import { formatInferenceError } from './errors.js';
import type { RuntimeOptions } from './options.js';
import { loadInferenceService, type ServiceLoadOptions } from './service/load.js';
import type { ChatSettings, InferenceService } from './service/service.js';
import { ServiceHost } from './service/host.js';
import { webTransport, withVertexRoutes, type TransportOptions } from './transport.js';

/** The tenants' settings (tenants/tenant-table.ts). */
export interface TenantOptions {
  /** --tenants FILE, read. */
  file?: TenantsFile;
  /** --tenant-rpm, --tenant-tpm, --tenant-concurrency: every tenant's limits unless the file sets its own. */
  defaultLimits?: TenantLimits;
}

export interface InferenceServerOptions extends TransportOptions {
  runtime: RuntimeOptions;
  host: string;
  port: number;
  parallel: number;
  /**
   * What the command line decides of the engine (server-config.ts engineSettings), passed to it
   * unchanged: absent fields take the engine's defaults (native/engine-params.cpp), except the
   * prompt cache, which a server has by default as llama-server (its --cache-ram default, 8192 MiB).
   */
  engine?: EngineSettings;
  alias?: string;
  apiKeys: string[];
  metrics: boolean;
  /** Cross-origin access (--cors-*); llama-server's defaults when absent. */
  cors?: CorsPolicy;
  /** Chat reasoning and prefill rules; llama-server's defaults when absent. */
  chat?: Partial<ChatSettings>;
  /** -v: `__verbose` in OpenAI answers. */
  verbose?: boolean;
  /** --spm-infill: /infill prompts in suffix/prefix/middle order. */
  spmInfill?: boolean;
  /** --embd-normalize: the default embd_normalize of /embedding. */
  embdNormalize?: number;
  /** -a a,b: every name of the model (the first is reported as its id); --tags: informational. */
  aliases?: string[];
  tags?: string[];
  /** --no-mmproj-offload: keep the projector on the CPU. */
  mmprojUseGpu?: boolean;
  /** --host a,b: the addresses after the first, on the same port. */
  extraHosts?: string[];
  /** --api-prefix: every inference route under this path prefix. */
  apiPrefix?: string;
  /** --sleep-idle-seconds: unload the model after this long without a request using it; <= 0 never. */
  sleepIdleSeconds?: number;
  /** GET /slots (default on; llama-server's --no-slots turns it off). */
  slots?: boolean;
  /** POST /props (llama-server's --props; default off). */
  props?: boolean;
  /** Server default for n_predict (-n); -1 = unlimited. */
  nPredict: number;
  maxBodyBytes: number;
  /** --embedding: serve embeddings (and refuse completions), as llama-server. */
  embedding?: boolean;
  /** --rerank: serve reranking; the model must be a reranker (rank pooling). */
  rerank?: boolean;
  /** --pooling: none, mean, cls, last or rank; default the model's own. */
  pooling?: PoolingName;
  /** LoRA adapters to load, with their initial scales (--lora, --lora-scaled, --lora-init-without-apply). */
  loras?: Array<{ path: string; scale: number }>;
  /** -mm: a multimodal projector for the model. */
  mmproj?: string;
  /** Fetch http(s) image URLs given in chat messages; off by default. */
  allowRemoteMedia?: boolean;
  /** --media-path: chat images may name files under this directory (file://). */
  mediaPath?: string;
  /** --slot-save-path: POST /slots/{id}?action=save|restore reads and writes files in this directory only. */
  slotSavePath?: string;
  /** Sampling defaults of requests (llama-server's sampling flags); llama-server's own by default. */
  generation?: GenerationDefaults;
  /** A chat template (name or Jinja source) instead of the model's. */
  chatTemplate?: string;
  /** Default chat_template_kwargs. */
  templateKwargs?: Record<string, unknown>;
  /** llama-server's parsed command line: its model flags apply as there. */
  serverParams?: NativeServerParams;
  /** Extra bearer-credential check (e.g. --auth-app): an identity admits the request like a valid API key. */
  acceptBearer?: AcceptBearer;
  /** --tenants FILE and --tenant-rpm/-tpm/-concurrency: the tenants' settings (docs/tenants.md). */
  tenants?: TenantOptions;
  /** Where hourly usage goes (tenants/usage-flush.ts): the mounted auth service's usage table (--auth), or auth-server over HTTP. */
  usageRecorder?: UsageRecorder;
  /** The auth service's database (--auth): tenants' limits held with every replica that shares it (tenants/fleet-limits.ts). */
  fleetStore?: FleetStore;
  /** --kv-events: the KV-cache events of the loaded model (kv-events/kv-events-service.ts). */
  kvEvents?: KvEventsOptions;
  /** This replica's name in the fleet's counts (default: host name, process id and a random suffix). */
  replicaName?: string;
  /**
   * Set once at start-up when a router started this process as a model process: each request's
   * tenant is the one the router admitted and forwarded (tenants/forwarded-tenant.ts), and what
   * the tenants use is reported to the router (multi-model/child-link.ts), which holds their limits.
   */
  routerChild?: { usage: UsageReporter };
  /** Serve the chat page at GET / (inference-server does unless --no-webui). */
  webui?: boolean;
  /** --log-prompts-dir: each completion request's prompt is written to a file in this directory. */
  promptsLogDir?: string;
  /** --ui-mcp-proxy: GET/POST /cors-proxy forward to the URL given (403 without it, as llama-server). */
  corsProxy?: boolean;
  /** --tools / -ag and --tools-runtime: GET/POST /tools call the built-in tools (403 without any, as llama-server). */
  tools?: ToolsOptions;
  /** Routes mounted as they are (e.g. --auth); they do their own authentication. */
  extraRoutes?: Route[];
  onProgress?: (progress: number) => void;
  log?: (line: string) => void;
}

export interface InferenceServer {
  readonly port: number;
  /** The loaded service's life: loading, ready, asleep. */
  readonly host: ServiceHost;
  /** Resolves when the model is loaded and the engine runs; rejects if loading fails. */
  readonly ready: Promise<InferenceService>;
  close(): Promise<void>;
}

/** llama-server's --cache-ram default (MiB). */
const LLAMA_SERVER_CACHE_RAM_MIB = 8192;

function serviceLoadOptions(options: InferenceServerOptions): ServiceLoadOptions {
  return {
    runtime: options.runtime,
    parallel: options.parallel,
    engine: { promptCacheMib: LLAMA_SERVER_CACHE_RAM_MIB, ...options.engine, ...(options.kvEvents ? { cacheEvents: true } : {}) },
    alias: options.alias,
    nPredict: options.nPredict,
    embedding: options.embedding ?? false,
    rerank: options.rerank ?? false,
    pooling: options.pooling,
    loras: options.loras ?? [],
    mmproj: options.mmproj,
    ...(options.slotSavePath ? { slotSavePath: options.slotSavePath } : {}),
    ...(options.promptsLogDir ? { promptsLogDir: options.promptsLogDir } : {}),
    media: { allowRemote: options.allowRemoteMedia ?? false, ...(options.mediaPath ? { mediaPath: options.mediaPath } : {}) },
    generation: options.generation ?? LLAMA_SERVER_DEFAULTS,
    ...(options.chatTemplate ? { chatTemplate: options.chatTemplate } : {}),
    templateKwargs: options.templateKwargs ?? {},
    spmInfill: options.spmInfill ?? false,
    chat: { reasoningFormat: 'deepseek', enableThinking: undefined, prefillAssistant: true, reasoningBudget: -1, reasoningBudgetMessage: '', useJinja: true, skipChatParsing: false, ...options.chat },
    verbose: options.verbose ?? false,
    embdNormalize: options.embdNormalize ?? 2,
    aliases: options.aliases ?? (options.alias ? [options.alias] : []),
    tags: options.tags ?? [],
    mmprojUseGpu: options.mmprojUseGpu ?? true,
    ...(options.serverParams ? { serverParams: options.serverParams } : {}),
  };
}

export async function startInferenceServer(options: InferenceServerOptions): Promise<InferenceServer> {
  const log = options.log ?? (() => {});
  let closed = false;
  const loadOptions = serviceLoadOptions(options);
  const host = new ServiceHost((onProgress) => loadInferenceService(loadOptions, onProgress, () => closed), (options.sleepIdleSeconds ?? -1) * 1000, options.onProgress, options.kvEvents?.rule.blockSize);
  // Before the model loads, so that its first load publishes AllBlocksCleared.
  // zeromq is loaded only when asked for.
  const kvEvents: KvEventsService | null = options.kvEvents ? await (await import('./kv-events/kv-events-service.js')).KvEventsService.start(host, options.kvEvents) : null;
  const fleet = options.fleetStore ? new FleetLimits(options.fleetStore, options.replicaName ?? defaultReplicaName(), { log }) : null;
  await fleet?.start();
  const tenancy = new Tenancy(Date.now, options.routerChild?.usage ?? null, fleet);
  const ctx: RouteContext = {
    host,
    keys: new ApiKeys(options.apiKeys),
    ...(options.acceptBearer ? { acceptBearer: options.acceptBearer } : {}),
    tenants: new TenantTable(options.apiKeys.length, options.tenants?.file, options.tenants?.defaultLimits),
    tenancy,
    forwardedTenants: options.routerChild !== undefined,
  };
  const usageFlush = options.usageRecorder ? startUsageFlush(tenancy.usage, options.usageRecorder, { log }) : null;
  const apiPrefix = options.apiPrefix ?? '';
  // As llama-server: an unknown tool or an unusable --tools-runtime fails the start.
  const tools = ToolsService.wanted(options.tools) ? await ToolsService.start(options.tools, log) : null;
  const streams = new StreamSessions();
  const routes = [
    ...inferenceRoutes(ctx, { metrics: options.metrics, slots: options.slots ?? true, props: options.props ?? false, apiPrefix, streams }),
    ...streamRoutes(readOnlyMount(ctx), streams, apiPrefix),
    ...corsProxyRoutes(readOnlyMount(ctx), { enabled: options.corsProxy ?? false, apiPrefix, timeoutSeconds: 600 }),
    ...toolsRoutes(readOnlyMount(ctx), tools, apiPrefix),
    ...(options.extraRoutes ?? []),
  ];
  const web = await webTransport({ ...options, apiPrefix });

  const http = await startHttpServer({
    host: options.host,
    port: options.port,
    ...(options.extraHosts ? { extraHosts: options.extraHosts } : {}),
    routes: withVertexRoutes([...routes, ...web.pageRoutes], { ...options, apiPrefix }, readOnlyMount(ctx)),
    formatError: formatInferenceError,
    maxBodyBytes: options.maxBodyBytes,
    cors: options.cors ?? DEFAULT_CORS,
    admitUnrouted: (headers) => checkKey(ctx, { headers }),
    ...web.http,
    logError: (error, req) => log(`error: ${req.method} ${req.path}: ${error.message}${error.cause ? ` (${String((error.cause as Error).stack ?? error.cause)})` : ''}`),
  });
  const ready = host.start();
  ready.catch(() => {});
  return {
    port: http.port,
    host,
    ready,
    async close() {
      closed = true;
      http.close();
      streams.close();
      await Promise.all([host.close(), tools?.close()]);
      // The last usage, the hour in progress included, once no request runs any more.
      await usageFlush?.stop();
      await fleet?.stop();
      kvEvents?.close();
    },
  };
}
