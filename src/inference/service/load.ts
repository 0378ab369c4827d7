// Loading what a server serves: the model, its LoRA adapters and projector, and the engine over
// them, as one InferenceService. Everything loaded so far is freed when a later step fails.
import { basename } from 'node:path';
import { native, PoolingType, type EngineSettings, type NativeLoraAdapter, type NativeModel, type NativeServerParams, type NativeVision, type PoolingName } from '../../native/binding.js';
import type { GenerationDefaults } from './generation.js';
import type { MediaPolicy } from './media.js';
import { InferenceEngine } from '../engine/engine.js';
import { contextSize, type RuntimeOptions } from '../options.js';
import { defaultDiskCacheMib, diskCacheIdentity } from './disk-cache.js';
import { LoraRegistry } from './lora-registry.js';
import { InferenceService, type ChatSettings } from './service.js';

export interface ServiceLoadOptions {
  runtime: RuntimeOptions;
  parallel: number;
  /** What the command line decides of the engine, passed to Engine.create unchanged. */
  engine: EngineSettings;
  alias?: string;
  nPredict: number;
  /** --embedding / --rerank: an engine that embeds (and refuses completions). */
  embedding: boolean;
  rerank: boolean;
  pooling?: PoolingName;
  loras: Array<{ path: string; scale: number }>;
  mmproj?: string;
  media: MediaPolicy;
  /** --slot-save-path. */
  slotSavePath?: string;
  /** --log-prompts-dir. */
  promptsLogDir?: string;
  generation: GenerationDefaults;
  chatTemplate?: string;
  templateKwargs: Record<string, unknown>;
  spmInfill: boolean;
  chat: ChatSettings;
  verbose: boolean;
  embdNormalize: number;
  aliases: string[];
  tags: string[];
  mmprojUseGpu: boolean;
  /** llama-server's parsed command line: its model flags apply as there. */
  serverParams?: NativeServerParams;
}

export interface ServiceLoad {
  promise: Promise<InferenceService>;
  /** Aborts loading the model weights; the promise then rejects. */
  cancel(): void;
}

/** `isCancelled` is checked once the weights are in, for a server closed while they loaded. */
export function loadInferenceService(options: ServiceLoadOptions, onProgress: (progress: number) => void, isCancelled: () => boolean): ServiceLoad {
  const { runtime } = options;
  const handle = native.Model.load(runtime.model, { nGpuLayers: runtime.nGpuLayers, useMmap: runtime.useMmap, ...(options.serverParams ? { serverParams: options.serverParams } : {}) }, onProgress);
  const promise = handle.promise.then(async (model) => {
    const loaded: Array<{ dispose(): void }> = [model];
    try {
      if (isCancelled()) throw new Error('server closed while loading');
      checkReranker(options, model);
      const adapters: NativeLoraAdapter[] = [];
      for (const spec of options.loras) {
        adapters.push(await native.LoraAdapter.load(model, spec.path));
        loaded.unshift(adapters.at(-1)!);
      }
      let vision: NativeVision | null = null;
      if (options.mmproj) {
        vision = await native.Vision.load(model, options.mmproj, {
          nThreads: runtime.threads,
          useGpu: runtime.nGpuLayers !== 0 && options.mmprojUseGpu,
          ...(options.serverParams ? { serverParams: options.serverParams } : {}),
        });
        loaded.unshift(vision);
      }
      const engine = await InferenceEngine.create(model, {
        embeddings: options.embedding || options.rerank,
        pooling: options.rerank ? PoolingType.rank : options.pooling ? PoolingType[options.pooling] : -1,
        loras: adapters,
        ...(vision ? { vision } : {}),
        nCtx: contextSize(runtime.ctxSize, model.metadata().nCtxTrain),
        nParallel: options.parallel,
        nBatch: runtime.batchSize,
        nUbatch: runtime.ubatchSize,
        nThreads: runtime.threads,
        nThreadsBatch: runtime.threadsBatch,
        flashAttn: runtime.flashAttn,
        ...(options.serverParams ? { serverParams: options.serverParams } : {}),
        ...options.engine,
        ...(await diskCacheSettings(options)),
      });
      return new InferenceService(model, vision, engine, {
        modelPath: runtime.model,
        alias: options.alias ?? basename(runtime.model),
        defaultNPredict: options.nPredict,
        media: options.media,
        ...(options.slotSavePath ? { slotSavePath: options.slotSavePath } : {}),
        ...(options.promptsLogDir ? { promptsLogDir: options.promptsLogDir } : {}),
        generation: options.generation,
        ...(options.chatTemplate ? { chatTemplate: options.chatTemplate } : {}),
        templateKwargs: options.templateKwargs,
        spmInfill: options.spmInfill,
        chat: options.chat,
        verbose: options.verbose,
        embdNormalize: options.embdNormalize,
        aliases: options.aliases,
        tags: options.tags,
      }, new LoraRegistry(options.loras));
    } catch (err) {
      // Children before their model (the list is kept in that order).
      for (const resource of loaded) resource.dispose();
      throw err;
    }
  });
  return { promise, cancel: () => handle.cancel() };
}

/** --cache-disk: the files' identity, and the default budget when none was given. */
async function diskCacheSettings(options: ServiceLoadOptions): Promise<{ cacheDiskIdentity?: string; cacheDiskMib?: number }> {
  const dir = options.engine.cacheDisk;
  if (dir === undefined || options.embedding || options.rerank) return {};
  return {
    cacheDiskIdentity: await diskCacheIdentity(options.runtime.model, options.loras.map((l) => l.path)),
    cacheDiskMib: options.engine.cacheDiskMib ?? (await defaultDiskCacheMib(dir)),
  };
}

function checkReranker(options: ServiceLoadOptions, model: NativeModel): void {
  const { poolingType } = model.metadata();
  if (options.rerank && poolingType !== PoolingType.rank) {
    throw new Error(`${options.runtime.model} is not a reranker (its pooling type is ${poolingType ?? 'unset'}, rank is ${PoolingType.rank}): --rerank needs a model with rank pooling and a classification head`);
  }
}
