// Command-line options shared by inference-server and inference-cli, spelled as llama-server's
// and llama-cli's flags so that their users feel at home.
import { UsageError, type FlagSpec, type ParsedFlags } from '../cli/flags.js';

/** Flags shared by the server and the CLI (model and runtime). */
export const MODEL_FLAGS = [
  { names: ['-m', '--model'], kind: 'string', key: 'model', help: 'model file (GGUF)', env: 'LLAMA_ARG_MODEL' },
  { names: ['-c', '--ctx-size'], kind: 'int', key: 'ctxSize', help: 'context size in tokens (default: training context, at most 8192; 0 = training context)', env: 'LLAMA_ARG_CTX_SIZE' },
  { names: ['-ngl', '--gpu-layers', '--n-gpu-layers'], kind: 'string', key: 'gpuLayers', help: 'layers to offload to the GPU: a number, "all" or "auto"', env: 'LLAMA_ARG_N_GPU_LAYERS' },
  { names: ['--layer-window'], kind: 'string', key: 'layerWindow', help: '"auto": as many layers on the GPU as its free memory holds (all on CPU without a GPU)' },
  { names: ['-t', '--threads'], kind: 'int', key: 'threads', help: 'threads for generation (default: math cores)', env: 'LLAMA_ARG_THREADS' },
  { names: ['-tb', '--threads-batch'], kind: 'int', key: 'threadsBatch', help: 'threads for prompt processing (default: --threads)' },
  { names: ['-b', '--batch-size'], kind: 'int', key: 'batchSize', help: 'logical batch size (default 2048)', env: 'LLAMA_ARG_BATCH' },
  { names: ['-ub', '--ubatch-size'], kind: 'int', key: 'ubatchSize', help: 'physical batch size (default 512)', env: 'LLAMA_ARG_UBATCH' },
  { names: ['-fa', '--flash-attn'], kind: 'string', key: 'flashAttn', help: 'flash attention: on, off or auto (default auto)' },
  { names: ['--no-mmap'], kind: 'bool', key: 'noMmap', help: 'read the model into memory instead of mapping it' },
] as const satisfies readonly FlagSpec[];

export interface RuntimeOptions {
  model: string;
  ctxSize: number | undefined;
  nGpuLayers: number;
  threads: number | undefined;
  threadsBatch: number | undefined;
  batchSize: number;
  ubatchSize: number;
  flashAttn: number;
  useMmap: boolean;
}

/**
 * `-ngl N|all|auto` and `--layer-window auto`. Without a GPU backend every layer stays on the CPU
 * whatever is asked; with one, "auto" and "all" ask llama.cpp for every layer (-1), and llama.cpp
 * fits what the free memory allows.
 */
export function resolveGpuLayers(gpuLayers: unknown, layerWindow: unknown, gpuAvailable: boolean): number {
  if (layerWindow !== undefined && layerWindow !== 'auto') throw new UsageError(`--layer-window: expected "auto", got "${String(layerWindow)}"`);
  if (!gpuAvailable) return 0;
  if (layerWindow === 'auto' || gpuLayers === undefined || gpuLayers === 'auto' || gpuLayers === 'all') return -1;
  const n = Number(gpuLayers);
  if (!Number.isInteger(n)) throw new UsageError(`-ngl: expected a number, "all" or "auto", got "${String(gpuLayers)}"`);
  return n < 0 ? -1 : n;
}

export function resolveRuntime(flags: ParsedFlags<typeof MODEL_FLAGS>, gpuAvailable: boolean): RuntimeOptions {
  const model = flags.model;
  if (typeof model !== 'string' || model === '') throw new UsageError('-m <model.gguf> is required');
  const positive = (name: string, v: unknown, fallback: number): number => {
    if (v === undefined) return fallback;
    if (typeof v !== 'number' || v < 1) throw new UsageError(`${name}: must be a positive integer`);
    return v;
  };
  const fa = flags.flashAttn ?? 'auto';
  const flashAttn = fa === 'auto' ? -1 : fa === 'on' || fa === 'true' || fa === '1' ? 1 : fa === 'off' || fa === 'false' || fa === '0' ? 0 : NaN;
  if (Number.isNaN(flashAttn)) throw new UsageError(`--flash-attn: expected on, off or auto, got "${String(fa)}"`);
  const ctx = flags.ctxSize;
  if (ctx !== undefined && ctx < 0) throw new UsageError('-c: must be >= 0');
  return {
    model,
    ctxSize: ctx,
    nGpuLayers: resolveGpuLayers(flags.gpuLayers, flags.layerWindow, gpuAvailable),
    threads: flags.threads === undefined ? undefined : positive('-t', flags.threads, 1),
    threadsBatch: flags.threadsBatch === undefined ? undefined : positive('-tb', flags.threadsBatch, 1),
    batchSize: positive('-b', flags.batchSize, 2048),
    ubatchSize: positive('-ub', flags.ubatchSize, 512),
    flashAttn,
    useMmap: !flags.noMmap,
  };
}

/** Default context: the model's training context, capped at 8192 tokens to bound KV memory. */
export const DEFAULT_CTX_CAP = 8192;

export function contextSize(requested: number | undefined, nCtxTrain: number): number {
  if (requested === 0) return nCtxTrain;
  if (requested !== undefined) return requested;
  return Math.min(nCtxTrain > 0 ? nCtxTrain : DEFAULT_CTX_CAP, DEFAULT_CTX_CAP);
}
