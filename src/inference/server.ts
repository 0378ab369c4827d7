// The inference HTTP server: opens the port at once (health answers 503 while loading), loads
// the model and its engine off the event loop, then serves the route table below.
import type { HttpRequest, HttpResult } from '../http/request.js';
import type { Route } from '../http/router.js';
import { startHttpServer } from '../http/server.js';
import { native } from '../native/binding.js';
import { ApiKeys, invalidApiKey, presentedKey } from './api-key.js';
import { InferenceEngine } from './engine.js';
import { formatInferenceError } from './errors.js';
import { contextSize, type RuntimeOptions } from './options.js';
import { completionRoute } from './routes/completion.js';
import { infillRoute } from './routes/infill.js';
import { healthRoute, metricsRoute, modelsRoute, propsRoute, slotsRoute, type RequestCounters } from './routes/info.js';
import { chatCompletionsRoute, textCompletionsRoute } from './routes/openai.js';
import { applyTemplateRoute, detokenizeRoute, tokenizeRoute } from './routes/tokenize.js';
import { listLoraRoute, setLoraRoute } from './routes/lora.js';
import { LoraRegistry } from './lora.js';
import { nativeEmbeddingRoute, openaiEmbeddingsRoute, rerankRoute } from './routes/embeddings.js';
import { InferenceService } from './service.js';
import { ServerState } from './state.js';
import { chatPageRoutes } from './web-ui.js';
import { basename } from 'node:path';

export interface InferenceServerOptions {
  runtime: RuntimeOptions;
  host: string;
  port: number;
  parallel: number;
  /** A generating slot whose context is full drops old tokens instead of stopping (llama-server's --context-shift). */
  contextShift?: boolean;
  alias?: string;
  apiKeys: string[];
  metrics: boolean;
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
  /** Extra bearer-token check (e.g. --auth-app); true admits the request like a valid API key. */
  acceptBearer?: (authorization: string | undefined) => Promise<boolean>;
  /** Serve the chat page at GET / (inference-server does unless --no-webui). */
  webui?: boolean;
  /** Routes mounted as they are (e.g. --auth); they do their own authentication. */
  extraRoutes?: Route[];
  onProgress?: (progress: number) => void;
  log?: (line: string) => void;
}

export interface InferenceServer {
  readonly port: number;
  readonly state: ServerState;
  /** Resolves when the model is loaded and the engine runs; rejects if loading fails. */
  readonly ready: Promise<InferenceService>;
  close(): Promise<void>;
}

export const POOLING_TYPES = { none: 0, mean: 1, cls: 2, last: 3, rank: 4 } as const;
export type PoolingName = keyof typeof POOLING_TYPES;

type Handler = (req: HttpRequest) => Promise<HttpResult | void> | HttpResult | void;

export async function startInferenceServer(options: InferenceServerOptions): Promise<InferenceServer> {
  const state = new ServerState();
  const keys = new ApiKeys(options.apiKeys);
  const counters: RequestCounters = { requests: 0, errors: 0 };
  const log = options.log ?? (() => {});

  // Every route but health: 503 while loading comes first, then the key (or bearer token).
  const guarded = (handler: Handler): Handler => async (req) => {
    counters.requests++;
    try {
      state.ready();
      if (keys.enabled || options.acceptBearer) {
        const keyOk = keys.enabled && keys.matches(presentedKey(req));
        if (!keyOk && !(options.acceptBearer && (await options.acceptBearer(req.headers['authorization'])))) throw invalidApiKey();
      }
      return await handler(req);
    } catch (err) {
      counters.errors++;
      throw err;
    }
  };

  const health = healthRoute(state);
  const completion = guarded(completionRoute(state));
  const chat = guarded(chatCompletionsRoute(state));
  const text = guarded(textCompletionsRoute(state));
  const models = guarded(modelsRoute(state));
  const tokenize = guarded(tokenizeRoute(state));
  const embeddings = guarded(openaiEmbeddingsRoute(state));
  const embedding = guarded(nativeEmbeddingRoute(state));
  const rerank = guarded(rerankRoute(state));
  const detokenize = guarded(detokenizeRoute(state));
  const routes: Route[] = [
    { method: 'GET', path: '/health', handler: health },
    { method: 'GET', path: '/v1/health', handler: health },
    { method: 'POST', path: '/completion', handler: completion },
    { method: 'POST', path: '/completions', handler: completion },
    { method: 'POST', path: '/infill', handler: guarded(infillRoute(state)) },
    { method: 'POST', path: '/v1/completions', handler: text },
    { method: 'POST', path: '/v1/chat/completions', handler: chat },
    { method: 'POST', path: '/chat/completions', handler: chat },
    { method: 'GET', path: '/v1/models', handler: models },
    { method: 'GET', path: '/models', handler: models },
    { method: 'GET', path: '/props', handler: guarded(propsRoute(state)) },
    { method: 'GET', path: '/slots', handler: guarded(slotsRoute(state)) },
    { method: 'POST', path: '/tokenize', handler: tokenize },
    { method: 'POST', path: '/detokenize', handler: detokenize },
    { method: 'POST', path: '/apply-template', handler: guarded(applyTemplateRoute(state)) },
    { method: 'GET', path: '/lora-adapters', handler: guarded(listLoraRoute(state)) },
    { method: 'POST', path: '/lora-adapters', handler: guarded(setLoraRoute(state)) },
    { method: 'POST', path: '/v1/embeddings', handler: embeddings },
    { method: 'POST', path: '/embeddings', handler: embedding },
    { method: 'POST', path: '/embedding', handler: embedding },
    { method: 'POST', path: '/v1/rerank', handler: rerank },
    { method: 'POST', path: '/rerank', handler: rerank },
    { method: 'POST', path: '/v1/reranking', handler: rerank },
    { method: 'POST', path: '/reranking', handler: rerank },
    ...(options.metrics ? [{ method: 'GET' as const, path: '/metrics', handler: guarded(metricsRoute(state, counters)) }] : []),
    ...(options.extraRoutes ?? []),
    ...(options.webui ? chatPageRoutes() : []),
  ];

  const http = await startHttpServer({
    host: options.host,
    port: options.port,
    routes,
    formatError: formatInferenceError,
    maxBodyBytes: options.maxBodyBytes,
    defaultHeaders: { 'Access-Control-Allow-Origin': '*' },
    // llama-server's defaults (--cors-methods is not offered here).
    preflightHeaders: { 'Access-Control-Allow-Credentials': 'false', 'Access-Control-Allow-Methods': 'GET, POST, DELETE, OPTIONS', 'Access-Control-Allow-Headers': '*' },
    logError: (error, req) => log(`error: ${req.method} ${req.path}: ${error.message}${error.cause ? ` (${String((error.cause as Error).stack ?? error.cause)})` : ''}`),
  });

  let loadHandle: { cancel(): void } | null = null;
  let closed = false;
  const ready = (async () => {
    const handle = native.Model.load(options.runtime.model, { nGpuLayers: options.runtime.nGpuLayers, useMmap: options.runtime.useMmap }, (p) => {
      state.progress = p;
      options.onProgress?.(p);
    });
    loadHandle = handle;
    const model = await handle.promise;
    loadHandle = null;
    if (closed) {
      model.dispose();
      throw new Error('server closed while loading');
    }
    const metadata = model.metadata();
    if (options.rerank && metadata.poolingType !== POOLING_TYPES.rank) {
      model.dispose();
      throw new Error(`${options.runtime.model} is not a reranker (its pooling type is ${metadata.poolingType ?? 'unset'}, rank is ${POOLING_TYPES.rank}): --rerank needs a model with rank pooling and a classification head`);
    }
    const loraSpecs = options.loras ?? [];
    const adapters = [];
    try {
      for (const spec of loraSpecs) adapters.push(await native.LoraAdapter.load(model, spec.path));
    } catch (err) {
      for (const a of adapters) a.dispose();
      model.dispose();
      throw err;
    }
    let vision = null;
    if (options.mmproj) {
      try {
        vision = await native.Vision.load(model, options.mmproj, { nThreads: options.runtime.threads, useGpu: options.runtime.nGpuLayers !== 0 });
      } catch (err) {
        for (const a of adapters) a.dispose();
        model.dispose();
        throw err;
      }
    }
    const embeddingMode = Boolean(options.embedding || options.rerank);
    const pooling = options.rerank ? POOLING_TYPES.rank : options.pooling ? POOLING_TYPES[options.pooling] : -1;
    const engine = await InferenceEngine.create(model, {
      embeddings: embeddingMode,
      pooling,
      loras: adapters,
      ...(vision ? { vision } : {}),
      nCtx: contextSize(options.runtime.ctxSize, metadata.nCtxTrain),
      nParallel: options.parallel,
      nBatch: options.runtime.batchSize,
      nUbatch: options.runtime.ubatchSize,
      nThreads: options.runtime.threads,
      nThreadsBatch: options.runtime.threadsBatch,
      flashAttn: options.runtime.flashAttn,
      kvUnified: true,
      contextShift: options.contextShift ?? false,
    });
    const service = new InferenceService(model, vision, engine, {
      modelPath: options.runtime.model,
      alias: options.alias ?? basename(options.runtime.model),
      defaultNPredict: options.nPredict,
      allowRemoteMedia: options.allowRemoteMedia ?? false,
    }, new LoraRegistry(loraSpecs));
    state.setReady(service);
    return service;
  })();
  ready.catch(() => {});

  return {
    port: http.port,
    state,
    ready,
    async close() {
      closed = true;
      http.close();
      (loadHandle as { cancel(): void } | null)?.cancel();
      await ready.catch(() => {});
      const service = state.take();
      if (service) await service.dispose();
    },
  };
}
