// inference-server's command line: llama-server's own (parsed by llama.cpp's parser, see
// ServerParams and llama-server-flags.ts) plus a few flags of ours, which are taken out first.
// Pure functions from the parsed values to the server's options, so they can be tested alone.
import { hostname } from 'node:os';
import { BLOCK_HASH_ALGOS, DEFAULT_BLOCK_KEY_RULE, type BlockHashAlgo } from './kv-events/block-keys.js';
import { isEndpoint } from './kv-events/endpoint.js';
import type { KvEventsOptions } from './kv-events/kv-events-service.js';
import { DEFAULT_PUBLISHER_OPTIONS } from './kv-events/publisher-options.js';
import { ROLE_NAMES, type RoleName } from '../auth/roles.js';
import { UsageError, parseFlags, type FlagSpec, type ParsedFlags } from '../cli/flags.js';
import { native, PoolingType, type EngineSettings, type LogLevel, type PoolingName, type ReasoningFormat, type ServerParamValues } from '../native/binding.js';
import { LLAMA_SERVER_FLAGS } from './llama-server-flags.js';
import type { RuntimeOptions } from './options.js';
import type { InferenceServerOptions, TenantOptions } from './server.js';
import { readTenantsFile, type TenantsFile } from './tenants/tenant-table.js';
import type { TenantLimits } from './tenants/tenant.js';
import type { RouterServerOptions } from './multi-model/server.js';
import type { TransportOptions } from './transport.js';
import type { GenerationDefaults } from './service/generation.js';

/**
 * The roles --auth-role takes, in the auth service's order: from src/auth/roles.ts, a module of
 * its own (a value import from src/auth/mount.ts would load the whole auth service, postgres.js,
 * migrations and key ring, on every start, which access/auth-bridge.ts defers until --auth or
 * --auth-app).
 */
const AUTH_ROLES: RoleName[] = [...ROLE_NAMES];

/** Flags of this server that llama-server does not have. */
export const OWN_FLAGS = [
  { names: ['--max-body-bytes'], kind: 'int', key: 'maxBodyBytes', help: 'largest accepted request body (default 33554432)' },
  { names: ['--media-allow-remote'], kind: 'bool', key: 'mediaAllowRemote', help: 'fetch http(s) image URLs in chat messages (default: only data URLs)' },
  { names: ['--prefill-budget'], kind: 'int', key: 'prefillBudget', help: 'chunked prefill: most tokens a step decodes while any slot is generating (its tokens first, prompt chunks fill the rest); shorter stalls of running streams against slower long prompts; 0 = no budget, prompts fill -b as in llama-server (default 512, 0 where the build has a GPU device)' },
  { names: ['--prefill-budget-ms'], kind: 'int', key: 'prefillBudgetMs', help: 'chunked prefill: while any slot is generating, a step carries only the prompt tokens that the last steps\' costs say fit beside the generating tokens in this many ms (at least a quarter of -ub); with --prefill-budget, the smaller share wins; 0 = no time target (default 1000)' },
  { names: ['--prefix-sharing'], kind: 'bool', key: 'prefixSharing', help: 'prompts share prefixes across slots: a prompt starts from the longest prefix any slot\'s KV cells hold and waits for one another slot is computing, instead of computing it again (default: on with a unified KV pool, i.e. --kv-unified or -np not given; without one each share copies a slot\'s whole buffer)' },
  { names: ['--no-prefix-sharing'], kind: 'bool', key: 'noPrefixSharing', help: 'turn prefix sharing across slots off (each slot reuses only its own cache, as llama-server)' },
  { names: ['--overload-lifo-ms'], kind: 'int', key: 'overloadLifoMs', help: 'adaptive LIFO: requests wait for a free slot oldest first, but once the oldest has waited this many ms (overload), newest first: most clients get a prompt answer while the oldest wait longer; 0 = always oldest first (default 1000)' },
  { names: ['--no-fair-share'], kind: 'bool', key: 'noFairShare', help: 'free slots go to waiting requests as if all were one tenant\'s (class, then priority, then arrival order with the adaptive LIFO), instead of by fair share across tenants (see docs/tenants.md)' },
  { names: ['--tenants'], kind: 'string', key: 'tenantsFile', help: 'JSON file of per-key and per-tenant settings: names, weights, priority classes (interactive, batch) and limits (see docs/tenants.md)' },
  { names: ['--tenant-rpm'], kind: 'int', key: 'tenantRpm', help: 'requests per minute of every tenant that --tenants does not limit itself (default: no limit)' },
  { names: ['--tenant-tpm'], kind: 'int', key: 'tenantTpm', help: 'prompt and completion tokens per minute of every tenant that --tenants does not limit itself, checked when a request is admitted (default: no limit)' },
  { names: ['--tenant-concurrency'], kind: 'int', key: 'tenantConcurrency', help: 'requests in progress at once of every tenant that --tenants does not limit itself (default: no limit)' },
  { names: ['--burst-wait-ms'], kind: 'int', key: 'burstWaitMs', help: 'an idle server that receives requests waits for more while they keep coming, until none came for this many ms (at most five times it), so that requests sent together share their first batch; a lone request starts this much later; 0 = start at once (default 4, 0 where the build has a GPU device)' },
  { names: ['--no-split-steps'], kind: 'bool', key: 'noSplitSteps', help: 'decode a step\'s generating rows and prompt rows in one call (for comparisons; by default a CPU build decodes them apart, see docs/options.md)' },
  { names: ['--no-early-outputs'], kind: 'bool', key: 'noEarlyOutputs', help: 'sample a step\'s outputs once, after its last ubatch (for comparisons; by default a CPU build sends the first ubatches\' outputs sooner, see docs/options.md)' },
  { names: ['--no-prepare-saves'], kind: 'bool', key: 'noPrepareSaves', help: 'no thread writes the prompt cache\'s buffers ahead (for comparisons; see docs/options.md)' },
  { names: ['--kv-events'], kind: 'string', key: 'kvEvents', help: 'publish KV-cache events as vLLM does (BlockStored, BlockRemoved, AllBlocksCleared over ZMQ) for llm-d\'s precise prefix routing: bound when ENDPOINT names no host (tcp://*:5557), connected to when it does (off by default; docs/scaling.md)' },
  { names: ['--kv-events-replay'], kind: 'string', key: 'kvEventsReplay', help: 'with --kv-events: a ROUTER endpoint (bound) answering replay requests from a sequence number' },
  { names: ['--kv-events-block-size'], kind: 'int', key: 'kvEventsBlockSize', help: 'with --kv-events: tokens per block (default 16, as vLLM and llm-d)' },
  { names: ['--kv-events-hash-seed'], kind: 'string', key: 'kvEventsHashSeed', help: 'with --kv-events: the block keys\' seed, vLLM\'s PYTHONHASHSEED and llm-d\'s hashSeed (default "")' },
  { names: ['--kv-events-hash-algo'], kind: 'string', key: 'kvEventsHashAlgo', choices: BLOCK_HASH_ALGOS, help: 'with --kv-events: sha256_cbor (vLLM\'s, default) or sha256_cbor_64bit (keys chained on 64 bits: llm-d\'s own request keys)' },
  { names: ['--kv-events-pod'], kind: 'string', key: 'kvEventsPod', help: 'with --kv-events: the pod name in the topic kv@<pod>@<model> (default $POD_NAME, else the host name)' },
  { names: ['--cache-disk'], kind: 'string', key: 'cacheDisk', help: 'the prompt cache\'s disk tier: prompt states are kept in this directory and found again by prefix after a restart, a model reload or an eviction from --cache-ram (off by default; see docs/options.md)' },
  { names: ['--cache-disk-mib'], kind: 'int', key: 'cacheDiskMib', help: 'with --cache-disk: most MiB its files take, least recently used first out (default: a tenth of the file system, at most half its free space at start-up)' },
  { names: ['--layer-window'], kind: 'string', key: 'layerWindow', choices: ['auto'], help: '"auto": as many layers on the GPU as its free memory holds (-ngl auto)' },
  { names: ['--models-spare'], kind: 'int', key: 'modelsSpare', help: 'router mode: model processes kept started without a model (Node and the addon loaded, about 75 MB each), so that loading a model skips process start-up (default 1; 0 = none)' },
  { names: ['--auth'], kind: 'bool', key: 'auth', help: 'mount the authentication service on this port (configured by the AUTH_* variables, see docs/auth-service.md)' },
  { names: ['--auth-app'], kind: 'string', key: 'authApp', help: 'also accept access tokens of this auth-service app (slug) where an API key is accepted' },
  { names: ['--auth-role'], kind: 'string', key: 'authRole', choices: AUTH_ROLES, help: 'with --auth-app: least role required in the token (viewer, staff, admin, owner)' },
  { names: ['--auth-issuer'], kind: 'string', key: 'authIssuer', help: 'with --auth-app and no --auth: the issuer (iss) of the auth-server whose tokens are accepted' },
  { names: ['--auth-jwks-url'], kind: 'string', key: 'authJwksUrl', help: 'with --auth-issuer: where its JWKS is, if not <issuer>/.well-known/jwks.json' },
] as const satisfies readonly FlagSpec[];

export type OwnFlags = ParsedFlags<typeof OWN_FLAGS>;

/** Splits argv (without node and script) into our own flags, parsed, and llama-server's command line. */
export function splitCommandLine(argv: readonly string[]): { own: OwnFlags; llama: string[] } {
  const ownNames = new Map<string, FlagSpec>(OWN_FLAGS.flatMap((spec) => spec.names.map((name) => [name, spec] as const)));
  const own: string[] = [];
  const llama: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const spec = ownNames.get(arg.split('=')[0]!);
    if (!spec) {
      llama.push(arg);
      continue;
    }
    own.push(arg);
    if (spec.kind !== 'bool' && !arg.includes('=') && i + 1 < argv.length) own.push(argv[++i]!);
  }
  return { own: parseFlags(own, OWN_FLAGS, {}), llama };
}

/** The refusal of every given option this server cannot honour, one line each. */
export function refusedOptions(given: readonly string[]): string[] {
  return given.flatMap((name) => {
    const support = LLAMA_SERVER_FLAGS[name];
    return support?.kind === 'refused' ? [`${name}: ${support.why}`] : [];
  });
}

/** Refuses the start (a usage error: main prints it and exits 1) when any given option cannot be honoured. */
export function refuseUnhonoured(given: readonly string[]): void {
  const refused = refusedOptions(given);
  if (refused.length > 0) throw new UsageError(`cannot honour these options:\n  ${refused.join('\n  ')}`);
}

/** The options that llama.cpp's parser sets on its common log; with any of them, every line goes through it. */
const COMMON_LOG_OPTIONS = ['--log-file', '--log-jsonl', '--log-colors', '--log-prefix', '--log-timestamps'];

/** True when the command line configures llama.cpp's common log (see native useCommonLog). */
export function usesCommonLog(given: readonly string[]): boolean {
  return given.some((name) => COMMON_LOG_OPTIONS.includes(name));
}

/**
 * llama.cpp's log level from -v / -lv N / --log-disable, or null to keep this server's default
 * (warnings and errors). Verbosity: 0 output only, 1 errors, 2 warnings, 3 information, 4+ debug.
 */
export function logLevel(v: ServerParamValues, given: readonly string[]): LogLevel | null {
  if (given.includes('--log-disable')) return 'none';
  if (!given.includes('-v') && !given.includes('-lv')) return null;
  if (v.verbosity >= 4) return 'debug';
  return (['none', 'error', 'warn', 'info'] as const)[Math.max(0, v.verbosity)]!;
}

/** common_params' LLAMA_DEFAULT_SEED: a random seed per request. */
const RANDOM_SEED = 0xffffffff;

export function generationDefaults(v: ServerParamValues): GenerationDefaults {
  const s = v.sampling;
  return {
    sampling: {
      seed: s.seed === RANDOM_SEED ? -1 : s.seed,
      temperature: s.temperature,
      dynatempRange: s.dynatempRange,
      dynatempExponent: s.dynatempExponent,
      topK: s.topK,
      topP: s.topP,
      minP: s.minP,
      topNSigma: s.topNSigma,
      typicalP: s.typicalP,
      xtcProbability: s.xtcProbability,
      xtcThreshold: s.xtcThreshold,
      repeatLastN: s.repeatLastN,
      repeatPenalty: s.repeatPenalty,
      presencePenalty: s.presencePenalty,
      frequencyPenalty: s.frequencyPenalty,
      dryMultiplier: s.dryMultiplier,
      dryBase: s.dryBase,
      dryAllowedLength: s.dryAllowedLength,
      dryPenaltyLastN: s.dryPenaltyLastN,
      drySequenceBreakers: s.drySequenceBreakers,
      mirostat: s.mirostat,
      mirostatTau: s.mirostatTau,
      mirostatEta: s.mirostatEta,
      adaptiveTarget: s.adaptiveTarget,
      adaptiveDecay: s.adaptiveDecay,
      minKeep: s.minKeep,
      ignoreEos: s.ignoreEos,
      backendSampling: s.backendSampling,
      samplers: s.samplers,
      grammar: s.grammar,
      logitBias: s.logitBias,
    },
    nProbs: s.nProbs,
    nKeep: v.nKeep,
    cachePrompt: v.cachePrompt,
    nCacheReuse: v.cacheReuse,
    stop: v.antiprompt,
  };
}

function poolingName(id: number): PoolingName | undefined {
  return (Object.keys(PoolingType) as PoolingName[]).find((name) => PoolingType[name] === id);
}

function runtimeOptions(v: ServerParamValues, own: OwnFlags, gpuAvailable: boolean): RuntimeOptions {
  if (v.model === '') throw new UsageError('-m <model.gguf> is required');
  return {
    model: v.model,
    // Unset (0) keeps this server's default: the training context, at most 8192; with
    // --kv-unified-per-slot N, as llama-server, a pool of N per slot.
    ctxSize: v.nCtx !== 0 ? v.nCtx : v.kvUnifiedPerSlot > 0 ? (v.nParallel > 0 ? v.nParallel : 4) * v.kvUnifiedPerSlot : undefined,
    // llama.cpp: -1 auto, -2 and below all; without a GPU backend every layer stays on the CPU.
    nGpuLayers: !gpuAvailable ? 0 : own.layerWindow === 'auto' || v.nGpuLayers < 0 ? -1 : v.nGpuLayers,
    threads: v.threads > 0 ? v.threads : undefined,
    threadsBatch: v.threadsBatch > 0 ? v.threadsBatch : undefined,
    batchSize: v.nBatch,
    ubatchSize: v.nUbatch,
    flashAttn: v.flashAttn,
    useMmap: v.loadMode !== 0,
  };
}

/** --ssl-key-file and --ssl-cert-file: both or neither (llama-server silently serves plain HTTP with one). */
function tlsOptions(v: ServerParamValues): { tls?: { keyFile: string; certFile: string } } {
  if (v.sslKeyFile === '' && v.sslCertFile === '') return {};
  if (v.sslKeyFile === '' || v.sslCertFile === '') {
    throw new UsageError(`${v.sslKeyFile === '' ? '--ssl-cert-file' : '--ssl-key-file'} needs ${v.sslKeyFile === '' ? '--ssl-key-file' : '--ssl-cert-file'} too: HTTPS takes both a key and its certificate`);
  }
  return { tls: { keyFile: v.sslKeyFile, certFile: v.sslCertFile } };
}

/** The HTTP transport's options: TLS, port sharing, timeouts, pings, static files, the CORS proxy, the agent tools (single-model and router mode alike). */
function transportOptions(v: ServerParamValues): TransportOptions & Pick<InferenceServerOptions, 'corsProxy' | 'tools'> {
  return {
    ...tlsOptions(v),
    reusePort: v.reusePort,
    // -to sets llama-server's read and write timeouts to the same value.
    timeoutSeconds: Math.max(0, v.timeoutRead),
    ssePingIntervalSeconds: v.ssePingInterval,
    ...(v.publicPath !== '' ? { publicPath: v.publicPath } : {}),
    corsProxy: v.uiMcpProxy,
    // --tools (a CSV row) or -ag ("all"); --tools-runtime applies only with tools, as in llama-server.
    tools: { names: v.serverTools, runtime: v.serverToolsRuntime },
  };
}

/** llama-server's start-up warning when --cache-idle-slots (on by default) meets --cache-ram 0; serverOptions then turns it off. */
export function cacheIdleSlotsWarning(v: ServerParamValues): string | null {
  return v.cacheIdleSlots && v.cacheRamMib === 0 ? '--cache-idle-slots requires --cache-ram, disabling' : null;
}

/** --prefix-sharing / --no-prefix-sharing (both given: a usage error); neither: the engine's default. */
export function prefixSharingOption(own: OwnFlags): { prefixSharing?: boolean } {
  if (own.prefixSharing && own.noPrefixSharing) throw new UsageError('--prefix-sharing and --no-prefix-sharing contradict each other');
  if (own.noPrefixSharing) return { prefixSharing: false };
  return own.prefixSharing ? { prefixSharing: true } : {};
}

/** --tenants FILE (read and checked) and the --tenant-* limits; a bad file or value is a usage error. */
export function tenantOptions(own: OwnFlags): TenantOptions {
  const defaultLimits: TenantLimits = {};
  for (const [flag, value, field] of [
    ['--tenant-rpm', own.tenantRpm, 'requestsPerMinute'],
    ['--tenant-tpm', own.tenantTpm, 'tokensPerMinute'],
    ['--tenant-concurrency', own.tenantConcurrency, 'concurrentRequests'],
  ] as const) {
    if (value === undefined) continue;
    if (!Number.isInteger(value) || value < 1) throw new UsageError(`${flag}: must be an integer of 1 or more, got ${value}`);
    defaultLimits[field] = value;
  }
  let file: TenantsFile | undefined;
  if (own.tenantsFile !== undefined) {
    try {
      file = readTenantsFile(own.tenantsFile);
    } catch (err) {
      throw new UsageError((err as Error).message.startsWith('--tenants') ? (err as Error).message : `--tenants: ${(err as Error).message}`);
    }
  }
  return { ...(file ? { file } : {}), defaultLimits };
}

/** --kv-events and its settings: the publisher's endpoints, the block-key rule and the pod's name. */
export function kvEventsOption(own: OwnFlags, env: Record<string, string | undefined> = process.env): { kvEvents?: KvEventsOptions } {
  const given = ['kvEventsReplay', 'kvEventsBlockSize', 'kvEventsHashSeed', 'kvEventsHashAlgo', 'kvEventsPod'] as const;
  if (own.kvEvents === undefined) {
    const stray = given.find((key) => own[key] !== undefined);
    if (stray) throw new UsageError(`--${stray.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} needs --kv-events ENDPOINT`);
    return {};
  }
  for (const [flag, endpoint] of [['--kv-events', own.kvEvents], ['--kv-events-replay', own.kvEventsReplay]] as const) {
    if (endpoint !== undefined && !isEndpoint(endpoint)) throw new UsageError(`${flag}: not a ZMQ endpoint (tcp://HOST:PORT, tcp://*:PORT, ipc://PATH): ${endpoint}`);
  }
  const blockSize = own.kvEventsBlockSize ?? DEFAULT_BLOCK_KEY_RULE.blockSize;
  if (blockSize < 1 || blockSize > 4096) throw new UsageError(`--kv-events-block-size: must be 1 to 4096, got ${blockSize}`);
  return {
    kvEvents: {
      publisher: { ...DEFAULT_PUBLISHER_OPTIONS, endpoint: own.kvEvents, replayEndpoint: own.kvEventsReplay ?? null },
      rule: { blockSize, hashSeed: own.kvEventsHashSeed ?? DEFAULT_BLOCK_KEY_RULE.hashSeed, algo: (own.kvEventsHashAlgo as BlockHashAlgo | undefined) ?? DEFAULT_BLOCK_KEY_RULE.algo },
      pod: own.kvEventsPod ?? env['POD_NAME'] ?? hostname(),
    },
  };
}

/** --cache-disk [--cache-disk-mib]: the directory and budget (the engine completes the model's identity at load). */
export function diskCacheOption(own: OwnFlags): { cacheDisk?: string; cacheDiskMib?: number } {
  if (own.cacheDiskMib !== undefined && own.cacheDisk === undefined) throw new UsageError('--cache-disk-mib needs --cache-disk DIR');
  if (own.cacheDiskMib !== undefined && own.cacheDiskMib < 1) throw new UsageError(`--cache-disk-mib: must be at least 1, got ${own.cacheDiskMib}`);
  if (own.cacheDisk === undefined) return {};
  if (own.cacheDisk === '') throw new UsageError('--cache-disk: needs a directory');
  return { cacheDisk: own.cacheDisk, ...(own.cacheDiskMib !== undefined ? { cacheDiskMib: own.cacheDiskMib } : {}) };
}

/** Our flags that set an engine setting, by the setting (a usage error names the flag). */
const ENGINE_FLAGS: ReadonlyArray<[keyof EngineSettings, string]> = [
  ['prefillBudget', '--prefill-budget'],
  ['prefillBudgetMs', '--prefill-budget-ms'],
  ['overloadLifoMs', '--overload-lifo-ms'],
  ['burstWaitMs', '--burst-wait-ms'],
];

/**
 * What llama-server's command line and our own flags decide of the engine: one settings object,
 * passed to Engine.create unchanged. Absent flags are left out (the engine's defaults apply); a
 * value out of range is refused here by the engine's own rules (Engine.checkParams), so that it
 * fails at start-up as a usage error naming its flag.
 */
export function engineSettings(v: ServerParamValues, own: OwnFlags): EngineSettings {
  const settings: EngineSettings = {
    contextShift: v.ctxShift,
    promptCacheMib: v.cacheRamMib,
    // As llama-server: idle slots go to the prompt cache only when there is one.
    cacheIdleSlots: v.cacheIdleSlots && cacheIdleSlotsWarning(v) === null,
    special: v.special,
    backendSampling: v.sampling.backendSampling,
    ...(v.kvUnifiedPerSlot > 0 ? { nCtxSlotMax: v.kvUnifiedPerSlot } : {}),
    // As llama-server: with -np left to its default the slots share one KV pool; with -np given,
    // each slot has n_ctx / np unless --kv-unified.
    kvUnified: v.nParallel < 0 ? true : v.kvUnified,
    ...prefixSharingOption(own),
    // The step modes, off for comparisons; otherwise the engine decides.
    ...(own.noSplitSteps ? { splitSteps: false } : {}),
    ...(own.noEarlyOutputs ? { earlyOutputs: false } : {}),
    ...(own.noPrepareSaves ? { prepareSaves: false } : {}),
    ...(own.noFairShare ? { fairShare: false } : {}),
    ...diskCacheOption(own),
  };
  for (const [key, flag] of ENGINE_FLAGS) {
    const value = own[key as keyof OwnFlags] as number | undefined;
    if (value === undefined) continue;
    try {
      native.Engine.checkParams({ [key]: value });
    } catch (err) {
      throw new UsageError(`${flag}: ${(err as Error).message.replace(/^params\.\w+ /, '')}, got ${value}`);
    }
    Object.assign(settings, { [key]: value });
  }
  return settings;
}

/** The server's options from llama-server's parsed command line and our own flags. */
export function serverOptions(v: ServerParamValues, own: OwnFlags, gpuAvailable: boolean): Omit<InferenceServerOptions, 'serverParams'> {
  const pooling = poolingName(v.poolingType);
  const rerank = v.embedding && pooling === 'rank';
  return {
    runtime: runtimeOptions(v, own, gpuAvailable),
    host: v.hosts[0] ?? '127.0.0.1',
    extraHosts: v.hosts.slice(1),
    port: v.port,
    // llama-server's -np default (-1) is 4 slots.
    parallel: v.nParallel > 0 ? v.nParallel : 4,
    engine: engineSettings(v, own),
    ...(v.aliases[0] !== undefined ? { alias: v.aliases[0], aliases: v.aliases } : {}),
    // As llama-server: a model named by -hf is called by its repo[:tag] unless -a names it.
    ...(v.aliases[0] === undefined && v.hfRepo !== '' ? { alias: v.hfRepo } : {}),
    apiKeys: v.apiKeys,
    tenants: tenantOptions(own),
    ...kvEventsOption(own),
    metrics: v.endpointMetrics,
    slots: v.endpointSlots,
    sleepIdleSeconds: v.sleepIdleSeconds,
    apiPrefix: v.apiPrefix,
    webui: v.webui,
    // (--tools, --agent and MCP servers already made the default origins "localhost" in the parser.)
    cors: { origins: v.corsOrigins, methods: v.corsMethods, headers: v.corsHeaders, credentials: v.corsCredentials },
    ...transportOptions(v),
    props: v.endpointProps,
    nPredict: v.nPredict,
    maxBodyBytes: own.maxBodyBytes ?? 32 * 1024 * 1024,
    embedding: v.embedding && !rerank,
    rerank,
    ...(pooling !== undefined && !rerank ? { pooling } : {}),
    loras: v.loras.map((l) => ({ path: l.path, scale: v.loraInitWithoutApply ? 0 : l.scale })),
    ...(v.mmproj !== '' && !v.noMmproj ? { mmproj: v.mmproj } : {}),
    allowRemoteMedia: Boolean(own.mediaAllowRemote),
    ...(v.mediaPath !== '' ? { mediaPath: v.mediaPath } : {}),
    ...(v.slotSavePath !== '' ? { slotSavePath: v.slotSavePath } : {}),
    ...(v.promptsLogDir !== '' ? { promptsLogDir: v.promptsLogDir } : {}),
    generation: generationDefaults(v),
    spmInfill: v.spmInfill,
    chat: {
      reasoningFormat: v.reasoningFormat as ReasoningFormat,
      enableThinking: v.enableReasoning < 0 ? undefined : v.enableReasoning === 1,
      prefillAssistant: v.prefillAssistant,
      reasoningBudget: v.sampling.reasoningBudget,
      reasoningBudgetMessage: v.sampling.reasoningBudgetMessage,
      useJinja: v.useJinja,
      skipChatParsing: v.skipChatParsing,
    },
    // llama-server's debug fields come with verbosity above 9 (-v).
    verbose: v.verbosity > 9,
    embdNormalize: v.embdNormalize,
    tags: v.tags,
    mmprojUseGpu: v.mmprojUseGpu,
    ...(v.chatTemplate !== '' ? { chatTemplate: v.chatTemplate } : {}),
    templateKwargs: Object.fromEntries(Object.entries(v.chatTemplateKwargs).map(([k, json]) => [k, JSON.parse(json) as unknown])),
  };
}

/** Our own flags that every model process of a router gets too. */
function childArgs(own: OwnFlags): string[] {
  return [
    ...(own.maxBodyBytes !== undefined ? ['--max-body-bytes', String(own.maxBodyBytes)] : []),
    ...(own.mediaAllowRemote ? ['--media-allow-remote'] : []),
    ...(own.layerWindow !== undefined ? ['--layer-window', own.layerWindow] : []),
    // Fair share runs in each model process (the router forwards the tenant); limits stay in the router.
    ...(own.noFairShare ? ['--no-fair-share'] : []),
    // One directory for every model: each model's states go to a directory of their own in it
    // (by fingerprint), and the budget covers them all.
    ...(own.cacheDisk !== undefined ? ['--cache-disk', own.cacheDisk] : []),
    ...(own.cacheDiskMib !== undefined ? ['--cache-disk-mib', String(own.cacheDiskMib)] : []),
  ];
}

/** Router mode's options (started without -m): the HTTP side as in single-model mode, and the model limits. */
export function routerOptions(v: ServerParamValues, own: OwnFlags): Omit<RouterServerOptions, 'command' | 'readSpecs' | 'buildInfo' | 'log'> {
  return {
    host: v.hosts[0] ?? '127.0.0.1',
    extraHosts: v.hosts.slice(1),
    port: v.port,
    apiKeys: v.apiKeys,
    tenants: tenantOptions(own),
    apiPrefix: v.apiPrefix,
    cors: { origins: v.corsOrigins, methods: v.corsMethods, headers: v.corsHeaders, credentials: v.corsCredentials },
    maxBodyBytes: own.maxBodyBytes ?? 32 * 1024 * 1024,
    webui: v.webui,
    autoload: v.modelsAutoload,
    modelsMax: v.modelsMax,
    spares: own.modelsSpare ?? 1,
    childArgs: childArgs(own),
    hfToken: v.hfToken,
    ...transportOptions(v),
  };
}
