// Command-line options of inference-server and inference-cli, spelled as llama-server's and
// llama-cli's flags so that their users feel at home. Parsing is strict: an unknown flag or a
// bad value is an error naming the flag, never silently ignored.

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

export type FlagKind = 'string' | 'int' | 'float' | 'bool' | 'list';

export interface FlagSpec {
  /** Names including dashes, e.g. ['-m', '--model']. The first long name is the key. */
  names: string[];
  kind: FlagKind;
  key: string;
  help: string;
  /** Environment variable read when the flag is absent. */
  env?: string;
  /** Recognised but not available yet: using it is an error with this message. */
  unsupported?: string;
}

export type ParsedFlags = Record<string, string | number | boolean | string[] | undefined>;

export function parseFlags(argv: readonly string[], specs: readonly FlagSpec[], env: NodeJS.ProcessEnv = process.env): ParsedFlags {
  const byName = new Map<string, FlagSpec>();
  for (const spec of specs) for (const name of spec.names) byName.set(name, spec);
  const out: ParsedFlags = {};
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i]!;
    let inline: string | undefined;
    const eq = arg.indexOf('=');
    if (arg.startsWith('--') && eq > 0) {
      inline = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    }
    const spec = byName.get(arg);
    if (!spec) throw new UsageError(`unknown option: ${arg} (see --help)`);
    if (spec.unsupported) throw new UsageError(`${arg}: ${spec.unsupported}`);
    if (spec.kind === 'bool') {
      out[spec.key] = inline === undefined ? true : parseBool(arg, inline);
      continue;
    }
    const value = inline ?? argv[++i];
    if (value === undefined) throw new UsageError(`${arg} needs a value`);
    out[spec.key] = convert(arg, spec, value, out[spec.key]);
  }
  for (const spec of specs) {
    if (out[spec.key] !== undefined || !spec.env) continue;
    const value = env[spec.env];
    if (value !== undefined && value !== '') {
      out[spec.key] = spec.kind === 'bool' ? parseBool(spec.env, value) : convert(spec.env, spec, value, undefined);
    }
  }
  return out;
}

function parseBool(name: string, value: string): boolean {
  if (/^(1|true|on|yes)$/i.test(value)) return true;
  if (/^(0|false|off|no)$/i.test(value)) return false;
  throw new UsageError(`${name}: expected a boolean, got "${value}"`);
}

function convert(name: string, spec: FlagSpec, value: string, previous: unknown): string | number | string[] {
  switch (spec.kind) {
    case 'int': {
      if (!/^-?\d+$/.test(value.trim())) throw new UsageError(`${name}: expected an integer, got "${value}"`);
      return Number.parseInt(value, 10);
    }
    case 'float': {
      const n = Number(value);
      if (value.trim() === '' || !Number.isFinite(n)) throw new UsageError(`${name}: expected a number, got "${value}"`);
      return n;
    }
    case 'list': {
      const items = value.split(',').map((s) => s.trim()).filter((s) => s !== '');
      return [...(Array.isArray(previous) ? (previous as string[]) : []), ...items];
    }
    default:
      return value;
  }
}

export function usage(command: string, summary: string, specs: readonly FlagSpec[]): string {
  const lines = [`usage: ${command} [options]`, '', summary, '', 'options:'];
  for (const spec of specs) {
    const names = spec.names.join(', ') + (spec.kind === 'bool' ? '' : ` <${spec.kind === 'list' ? 'a,b,...' : spec.kind}>`);
    lines.push(`  ${names.padEnd(34)} ${spec.help}${spec.env ? ` (env ${spec.env})` : ''}`);
  }
  return lines.join('\n');
}

/** Flags shared by the server and the CLI (model and runtime). */
export const MODEL_FLAGS: FlagSpec[] = [
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
];

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

export function resolveRuntime(flags: ParsedFlags, gpuAvailable: boolean): RuntimeOptions {
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
  const ctx = flags.ctxSize as number | undefined;
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
