// The only loader of the native addon, and the declaration of its whole surface (NativeAddon),
// whose types live beside it by handle: model-types.ts, engine-types.ts, chat-types.ts,
// server-params-types.ts (re-exported here). Everything is implemented in native/ (one class
// per llama.cpp handle).
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chooseAddon, currentHost, prebuiltPackageNames, sourceBuildPath } from './prebuilt.js';
import type { ChatMessageDiff, ChatParsedMessage, ChatParserOptions, NativeChatParser } from './chat-types.js';
import type { EngineEvent, EngineParams, NativeEngine } from './engine-types.js';
import type { ModelLoadHandle, ModelLoadOptions, NativeLoraAdapter, NativeModel, NativeVision } from './model-types.js';
import type { LogLevel, NativeServerParams, ServerOption, SystemInfo } from './server-params-types.js';

export * from './chat-types.js';
export * from './engine-types.js';
export * from './model-types.js';
export * from './server-params-types.js';
export * from './token.js';

/**
 * The `code` of every Error the addon throws or rejects with (native/errors.h declares the same
 * set). Failures of a running task are `error` events instead, and carry no code.
 */
export type NativeErrorCode =
  /** Wrong JS types or shapes: a bug in the TypeScript caller. */
  | 'INVALID_ARGUMENT'
  | 'TOKEN_OUT_OF_RANGE'
  | 'EMPTY_PROMPT'
  /** With `nPromptTokens` and `nCtx`. */
  | 'EXCEEDS_CONTEXT'
  /** An embedding input larger than one batch; with `nPromptTokens` and `nBatch`. */
  | 'EXCEEDS_BATCH'
  /** Invalid sampling parameters or grammar. */
  | 'BAD_SAMPLING'
  /** A JSON schema that cannot become a grammar. */
  | 'BAD_SCHEMA'
  | 'BAD_MEDIA'
  /** No projector, audio input, generation on an embedding engine (or the reverse), ... */
  | 'NOT_SUPPORTED'
  | 'TEMPLATE_FAILED'
  | 'DISPOSED'
  /** dispose() of an object an engine still uses. */
  | 'IN_USE'
  /** A model, adapter, projector, context or task could not be loaded or created. */
  | 'LOAD_FAILED'
  /** llama.cpp's parser refused a llama-server command line (it printed why). */
  | 'BAD_ARGUMENTS'
  | 'BAD_TOOLS'
  | 'BAD_JSON'
  | 'BAD_PARSER'
  | 'PARSE_FAILED'
  | 'INVALID_DIFF'
  /** A slot file name or file that cannot be used: missing, a symbolic link, not a regular file, corrupt, too large for the slot. */
  | 'BAD_SLOT_FILE'
  /** A slot file could not be written. */
  | 'SAVE_FAILED';

export interface NativeError extends Error {
  code: NativeErrorCode;
  /** EXCEEDS_CONTEXT and EXCEEDS_BATCH: the prompt's length in tokens. */
  nPromptTokens?: number;
  /** EXCEEDS_CONTEXT: the tokens one slot holds. */
  nCtx?: number;
  /** EXCEEDS_BATCH: the engine's batch size. */
  nBatch?: number;
}

const NATIVE_ERROR_CODES: ReadonlySet<string> = new Set<NativeErrorCode>([
  'INVALID_ARGUMENT', 'TOKEN_OUT_OF_RANGE', 'EMPTY_PROMPT', 'EXCEEDS_CONTEXT', 'EXCEEDS_BATCH', 'BAD_SAMPLING', 'BAD_SCHEMA',
  'BAD_MEDIA', 'NOT_SUPPORTED', 'TEMPLATE_FAILED', 'DISPOSED', 'IN_USE', 'LOAD_FAILED', 'BAD_ARGUMENTS', 'BAD_TOOLS', 'BAD_JSON', 'BAD_PARSER', 'PARSE_FAILED', 'INVALID_DIFF',
  'BAD_SLOT_FILE', 'SAVE_FAILED',
]);

/** True for an Error thrown or rejected by the addon. */
export function isNativeError(err: unknown): err is NativeError {
  return err instanceof Error && NATIVE_ERROR_CODES.has((err as { code?: unknown }).code as string);
}

export interface NativeAddon {
  Model: { load(path: string, options: ModelLoadOptions, onProgress?: (progress: number) => void): ModelLoadHandle };
  LoraAdapter: { load(model: NativeModel, path: string): Promise<NativeLoraAdapter> };
  Vision: {
    /** What a projector file reads, from its header alone; both false for a file that is not one. */
    capabilities(path: string): { vision: boolean; audio: boolean };
    load(model: NativeModel, path: string, options?: { nThreads?: number; useGpu?: boolean; /** llama-server's -mmdev, --image-min/max-tokens, --mtmd-batch-max-tokens, -fa apply as there. */ serverParams?: NativeServerParams }): Promise<NativeVision> };
  ChatParser: {
    /** Throws code BAD_PARSER for an unknown format or a parser that does not load. */
    new (options: ChatParserOptions): NativeChatParser;
    /** llama.cpp's stream deltas from one parse to the next; throws code INVALID_DIFF when something is withdrawn. */
    diff(previous: ChatParsedMessage, current: ChatParsedMessage): ChatMessageDiff[];
  };
  Engine: {
    create(model: NativeModel, params: EngineParams, onEvents: (events: EngineEvent[]) => void): Promise<NativeEngine>;
    /** Reads `params` as create() does, without creating anything: throws INVALID_ARGUMENT for a value of the wrong type or out of range. */
    checkParams(params: EngineParams): void;
  };
  ServerParams: {
    /**
     * Parses argv (argv[0] is the program name) exactly as llama-server does: --help and
     * --version print and end the process; a refused command line prints llama-server's message
     * to stderr and throws (code BAD_ARGUMENTS).
     */
    parse(argv: readonly string[]): NativeServerParams;
    /** Every option llama-server accepts. */
    options(): ServerOption[];
    /** llama.cpp's build, "b<number>-<commit>" (llama-server's /props build_info). */
    buildInfo(): string;
  };
  systemInfo(): SystemInfo;
  /** The lowest level of llama.cpp's log lines printed to stderr (default warn, or LLAMA_ADDON_LOG). */
  setLogLevel(level: LogLevel): void;
  /** Registers rpc-server endpoints ("host:port,...") as devices, as llama.cpp's --rpc; ggml aborts the process for an unreachable one, so check reachability first (rpc-servers.ts). */
  addRpcServers(servers: string): void;
  /** Converts a JSON schema (as JSON text) to a GBNF grammar; throws BAD_SCHEMA on unsupported schemas. */
  jsonSchemaToGrammar(schemaJson: string): string;
  /** From now on every log line goes through llama.cpp's common log, where --log-file, --log-jsonl, --log-prefix, --log-timestamps and --log-colors apply. */
  useCommonLog(): void;
  /** A line of this program, always printed, on the route of llama.cpp's lines (the text ends with its newline). */
  logWrite(level: Exclude<LogLevel, 'none'>, text: string): void;
}

const require = createRequire(import.meta.url);

/**
 * Loads the addon; a shared library it needs and this machine lacks (a CUDA build's runtime
 * libraries, say) fails here with the loader's message, which is passed on with what to do.
 */
export function loadAddon(path: string): NativeAddon {
  try {
    return require(path) as NativeAddon;
  } catch (err) {
    const message = (err as Error).message;
    const missing = /(lib[\w.+-]+\.so[\w.]*): cannot open shared object file/.exec(message)?.[1];
    if (!missing) throw err;
    const gpu = /^lib(cuda|cublas|nvidia|nvrtc)/.test(missing)
      ? ' The addon was built for NVIDIA GPUs (GGML_CUDA=ON): install the CUDA runtime it was built with (libcudart, libcublas), or rebuild it for the CPU with `npm run build:addon`.'
      : '';
    throw new Error(`cannot load the native addon ${path}: it needs ${missing}, which this machine does not have.${gpu}`, { cause: err });
  }
}

/**
 * The source build or a prebuilt package (prebuilt.ts decides which may serve), the first that
 * loads; one that does not is reported and the next one tried. Refused prebuilts are reported
 * when there is no source build to use instead.
 */
function loadPackageAddon(): NativeAddon {
  // src/native (ts-node) and dist/native (compiled) are both two levels below the package root.
  const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
  const { candidates, refused } = chooseAddon(root, currentHost(root), { verifyContents: false });
  if (candidates[0]?.origin !== 'build') {
    for (const { name, reason } of refused) console.error(`llama-auth-suite: prebuilt addon ${name} not used: ${reason}`);
  }
  const last = candidates.pop();
  if (!last) {
    throw new Error(`native addon not found: no source build at ${sourceBuildPath(root)} and no usable prebuilt package ` +
      `(${prebuiltPackageNames(process.platform, process.arch).join(' or ')}): run \`npm install\` (or \`npm run build:addon\`) to build it`);
  }
  for (const { path, origin } of candidates) {
    try {
      return loadAddon(path);
    } catch (err) {
      console.error(`llama-auth-suite: the ${origin === 'build' ? 'source build' : `prebuilt addon ${origin}`} does not load (${(err as Error).message}); trying the next`);
    }
  }
  return loadAddon(last.path);
}

/** The loaded addon (loaded once, on first import). */
export const native: NativeAddon = loadPackageAddon();
