// The inference HTTP server: opens the port at once (health answers 503 while loading), loads
// the model and its engine off the event loop, then serves the route table below.
import type { Route } from '../http/router.js';
import { DEFAULT_CORS, type CorsPolicy } from '../http/cors.js';
import { startHttpServer } from '../http/server.js';
import { corsProxyRoutes } from './cors-proxy-routes.js';
import { ToolsService, type ToolsOptions } from './server-tools/tools-service.js';
import { toolsRoutes } from './server-tools/tools-routes.js';
import type { NativeServerParams, PoolingName } from '../native/binding.js';
import { LLAMA_SERVER_DEFAULTS, type GenerationDefaults } from './service/generation.js';
import { ApiKeys } from './access/api-key.js';
import { checkKey, readOnlyMount, type RouteContext } from './guards.js';
import { inferenceRoutes } from './routes.js';
import { streamRoutes } from './streams/stream-routes.js';
import { StreamSessions } from './streams/stream-sessions.js';
import { formatInferenceError } from './errors.js';
import { DEFAULT_OVERLOAD_LIFO_MS, DEFAULT_PREFILL_BUDGET_MS, type RuntimeOptions } from './options.js';
import { loadInferenceService, type ServiceLoadOptions } from './service/load.js';
import type { ChatSettings, InferenceService } from './service/service.js';
import { ServiceHost } from './service/host.js';
import { webTransport, withVertexRoutes, type TransportOptions } from './transport.js';

export interface InferenceServerOptions extends TransportOptions {
  runtime: RuntimeOptions;
  host: string;
  port: number;
  parallel: number;
  /** A generating slot whose context is full drops old tokens instead of stopping (llama-server's --context-shift). */
  contextShift?: boolean;
  /** llama-server's --cache-ram: MiB of host memory for the prompt cache (-1 no limit, 0 off; default 8192 as there). */
  promptCacheMib?: number;
  /** llama-server's --cache-idle-slots (default on). */
  cacheIdleSlots?: boolean;
  /** llama-server's -sp / --special: generated special tokens keep their text. */
  special?: boolean;
  /** llama-server's --kv-unified-per-slot: the most tokens one slot may hold. */
  slotContextMax?: number;
  /** llama-server's -bs: the context runs sampler chains in its graph (requests opt in with backend_sampling, default from the flag). */
  backendSampling?: boolean;
  /** --prefill-budget: tokens per step while any slot is generating (chunked prefill); 0 = none. Default: the engine's (512, or 0 where the build has a GPU device). */
  prefillBudget?: number;
  /** --prefill-budget-ms: chunked prefill's time target per step while any slot is generating; 0 = none. Default 1000. */
  prefillBudgetMs?: number;
  /** --overload-lifo-ms: once the oldest request waiting for a slot has waited this long, the newest is served first; 0 = always oldest first. Default 1000. */
  overloadLifoMs?: number;
  /** --burst-wait-ms: an idle server that receives requests waits for more while they keep coming, until none came for this long. Default: the engine's (4, or 0 where the build has a GPU device). */
  burstWaitMs?: number;
  /** One KV pool shared by the slots (default); false gives each slot n_ctx / parallel, as llama-server's --no-kv-unified. */
  kvUnified?: boolean;
  /** --prefix-sharing / --no-prefix-sharing: prompts share prefixes across slots' KV cells; default on with a unified pool. */
  prefixSharing?: boolean;
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
  /** Extra bearer-token check (e.g. --auth-app); true admits the request like a valid API key. */
  acceptBearer?: (authorization: string | undefined) => Promise<boolean>;
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

function serviceLoadOptions(options: InferenceServerOptions): ServiceLoadOptions {
  return {
    runtime: options.runtime,
    parallel: options.parallel,
    contextShift: options.contextShift ?? false,
    promptCacheMib: options.promptCacheMib ?? 8192,
    cacheIdleSlots: options.cacheIdleSlots ?? true,
    special: options.special ?? false,
    slotContextMax: options.slotContextMax ?? 0,
    backendSampling: options.backendSampling ?? false,
    ...(options.prefillBudget !== undefined ? { prefillBudget: options.prefillBudget } : {}),
    prefillBudgetMs: options.prefillBudgetMs ?? DEFAULT_PREFILL_BUDGET_MS,
    overloadLifoMs: options.overloadLifoMs ?? DEFAULT_OVERLOAD_LIFO_MS,
    ...(options.burstWaitMs !== undefined ? { burstWaitMs: options.burstWaitMs } : {}),
    kvUnified: options.kvUnified ?? true,
    ...(options.prefixSharing !== undefined ? { prefixSharing: options.prefixSharing } : {}),
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
  const host = new ServiceHost((onProgress) => loadInferenceService(loadOptions, onProgress, () => closed), (options.sleepIdleSeconds ?? -1) * 1000, options.onProgress);
  const ctx: RouteContext = { host, keys: new ApiKeys(options.apiKeys), acceptBearer: options.acceptBearer };
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
    },
  };
}
