// The engine's types (native/engine-binding.h): its settings, the tasks submitted to it, the
// events it sends back, and what it reports.
import type { ChatGrammarTrigger } from './chat-types.js';
import type { NativeLoraAdapter, NativeVision, PoolingTypeId } from './model-types.js';
import type { Token } from './token.js';
import type { NativeServerParams } from './server-params-types.js';

export interface EngineParams {
  /** Total context (KV cache) size in tokens; 0 = the model's training context. */
  nCtx?: number;
  /** Number of slots (parallel sequences). */
  nParallel?: number;
  /** Logical batch size: most tokens decoded per step. */
  nBatch?: number;
  /** Physical batch size. */
  nUbatch?: number;
  nThreads?: number;
  nThreadsBatch?: number;
  /** All slots share one KV pool (llama-server's default with automatic slots). */
  kvUnified?: boolean;
  /** -1 auto, 0 off, 1 on. */
  flashAttn?: number;
  /** Embedding mode: tasks are embedded (kind "embedding"), never generated. */
  embeddings?: boolean;
  /** The pooling type; -1 = the model's own. */
  pooling?: PoolingTypeId | -1;
  /** A generating slot whose context is full drops old tokens (task nKeep/nDiscard) instead of stopping. */
  contextShift?: boolean;
  /** --kv-unified-per-slot: the most tokens one slot may hold (0 or absent: its share of the pool). */
  nCtxSlotMax?: number;
  /** -bs: create the context for backend sampling (tasks opt in with sampling.backendSampling). */
  backendSampling?: boolean;
  /** --cache-ram: MiB of host memory for saved prompt states (-1 no limit, 0 or absent: off). */
  promptCacheMib?: number;
  /** --cache-idle-slots (with promptCacheMib): when a task starts, idle slots' caches go to the prompt cache and, with kvUnified, leave the KV pool; those dropped under KV pressure go there first too. */
  cacheIdleSlots?: boolean;
  /** -sp / --special: generated special tokens keep their text (as llama-server's --special). */
  special?: boolean;
  /**
   * --kv-events: the engine keeps a copy of the token ids its host-memory cache and disk tier hold
   * (the files it adopts at start-up included) for the KV-cache events (enableCacheEvents). Off,
   * nothing is kept until events are enabled.
   */
  cacheEvents?: boolean;
  /** --cache-disk: the prompt cache's disk tier, in this directory (absent: off; never for an embedding engine). */
  cacheDisk?: string;
  /** Its budget in MiB over the whole directory (absent or 0: no limit; the server computes a default, service/disk-cache.ts). */
  cacheDiskMib?: number;
  /** What identifies the model's and adapters' files (service/disk-cache.ts); the engine adds the context layout. */
  cacheDiskIdentity?: string;
  /** Tests only: a slow disk for the disk tier; each write waits this many ms half way through its state (0..3600000, default 0). */
  cacheDiskTestWriteDelayMs?: number;
  /** Tests only: a slow disk for the disk tier; each read waits this many ms before it starts (0..3600000, default 0). */
  cacheDiskTestReadDelayMs?: number;
  /**
   * Chunked prefill: the tokens one step decodes while any slot is generating (one per generating
   * slot first, prompt chunks fill the rest, at least half of it); an integer >= 0, 0 = no budget
   * (prompts fill nBatch, as llama-server). With nothing generating prompts fill nBatch. Default
   * 512 where the build has no GPU device, 0 (the time target alone) where it has one.
   */
  prefillBudget?: number;
  /**
   * Chunked prefill's time target in ms: while any slot is generating, a step carries no more prompt
   * tokens than the recent steps' costs say fit beside the generating tokens in this long (at least
   * a quarter of nUbatch); with prefillBudget, the smaller share wins. A number 0..3600000 (a
   * fraction of a millisecond is allowed), 0 = no time target. Default 1000.
   */
  prefillBudgetMs?: number;
  /**
   * Burst wait in ms: an idle engine that receives tasks waits for more while they keep coming,
   * until none came for this long (at most five times it in all), so that requests sent together
   * share their first batch; a lone request's first step starts this much later. A number 0..1000,
   * 0 = start at once. Default 4 where the build has no GPU device, 0 where it has one.
   */
  burstWaitMs?: number;
  /**
   * Prefix sharing across slots: a prompt starts from the longest prefix any slot's KV cells hold
   * (no computation, no copy in a unified pool) and waits for a prefix another slot is computing.
   * Default: on when kvUnified. Never for embeddings or for recurrent, hybrid or sliding-window models.
   */
  prefixSharing?: boolean;
  /**
   * Adaptive LIFO in ms: free slots go to waiting tasks oldest first, but once the oldest has
   * waited this long, newest first (prompts then go in by admission order). A number 0..3600000,
   * 0 = always oldest first. Default 1000.
   */
  overloadLifoMs?: number;
  /**
   * Fair share (native/admission.h, docs/tenants.md): free slots go to tenants (tasks' `tenant`) by
   * weighted fair queuing on tokens, the adaptive LIFO applying within each tenant's queue, and
   * tasks' `priority` ordering a tenant's queue. false: every task counts as one tenant's (one
   * queue by class, priority, then arrival order). With one tenant both give the same order. Default true.
   */
  fairShare?: boolean;
  /**
   * llama-server's -sps: a task without idSlot goes to the idle slot whose cache holds the largest
   * fraction of its prompt when that fraction exceeds this, else to the least recently used idle
   * slot. A number 0..1, 0 = always the least recently used. Default: serverParams' value, else 0.1.
   */
  slotPromptSimilarity?: number;
  /**
   * The step modes, for comparisons (EngineInfo says what each does and when it applies):
   * absent, the engine decides; false turns one off; true asks for it where it applies.
   */
  splitSteps?: boolean;
  earlyOutputs?: boolean;
  prepareSaves?: boolean;
  /** LoRA adapters of this model that tasks may apply (task.loraScales indexes them). */
  loras?: NativeLoraAdapter[];
  /** A multimodal projector for this model: tasks may then carry images, audio, or both. */
  vision?: NativeVision;
  /** llama-server's command line: its context flags (-ctk, -ctv, --swa-full, RoPE/YaRN, -nkvo, --no-op-offload) apply as there. */
  serverParams?: NativeServerParams;
}

/**
 * What a server's command line decides of its engine, passed to Engine.create unchanged (the
 * fields' meanings are EngineParams'); the model, its adapters and projector, and the sizes
 * (nCtx, nParallel, nBatch, threads) come from elsewhere. Defaults and ranges are the engine's
 * (native/engine-params.cpp): an absent field takes its default, and Engine.checkParams refuses
 * a value out of range as Engine.create would.
 */
export type EngineSettings = Pick<EngineParams, 'contextShift' | 'promptCacheMib' | 'cacheIdleSlots' | 'special' | 'nCtxSlotMax' | 'backendSampling' |
  'prefillBudget' | 'prefillBudgetMs' | 'overloadLifoMs' | 'fairShare' | 'burstWaitMs' | 'kvUnified' | 'prefixSharing' | 'slotPromptSimilarity' |
  'splitSteps' | 'earlyOutputs' | 'prepareSaves' | 'cacheDisk' | 'cacheDiskMib' | 'cacheDiskTestWriteDelayMs' | 'cacheDiskTestReadDelayMs'>;

/**
 * The chat layer's part of the sampling parameters (from Model.applyChat's ChatParams and the
 * request), converted to token ids natively as llama-server's request schema does.
 */
export interface ChatSamplingParams {
  /** The grammar is a chat format's tool-call grammar (ChatParams.grammar): it is prefilled with generationPrompt. */
  grammarToolCalls?: boolean;
  /** ChatParams.grammarLazy: the grammar applies from a trigger on (triggers required). */
  grammarLazy?: boolean;
  /** ChatParams.grammarTriggers; a word that is one token becomes a token trigger (it must be preserved). */
  grammarTriggers?: ChatGrammarTrigger[];
  /** ChatParams.preservedTokens: those that are one token are sampled and emitted as their text. */
  preservedTokens?: string[];
  /** ChatParams.generationPrompt. */
  generationPrompt?: string;
  /** --reasoning-budget: tokens of thinking before the end tag is forced; -1 unlimited, 0 none. */
  reasoningBudgetTokens?: number;
  /** ChatParams.thinkingStartTag (with thinkingEndTags, as llama-server sets them when the template thinks). */
  reasoningBudgetStartTag?: string;
  /** ChatParams.thinkingEndTags; the first is forced when the budget runs out. */
  reasoningBudgetEndTags?: string[];
  /** Text forced before the end tag when the budget runs out. */
  reasoningBudgetMessage?: string;
  /** Create the budget sampler even without a budget (reasoning can be ended at run time). */
  reasoningControl?: boolean;
}

/** The keys of ChatSamplingParams (request defaults do not carry them). */
export type ChatSamplingKey = keyof ChatSamplingParams;

/** Sampling parameters, in llama.cpp's units; absent fields take llama.cpp's defaults. */
export interface SamplingParams extends ChatSamplingParams {
  /** -1 = random. */
  seed?: number;
  temperature?: number;
  dynatempRange?: number;
  dynatempExponent?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  typicalP?: number;
  xtcProbability?: number;
  xtcThreshold?: number;
  topNSigma?: number;
  repeatPenalty?: number;
  /** -1 = the whole context. */
  repeatLastN?: number;
  frequencyPenalty?: number;
  presencePenalty?: number;
  dryMultiplier?: number;
  dryBase?: number;
  dryAllowedLength?: number;
  dryPenaltyLastN?: number;
  drySequenceBreakers?: string[];
  mirostat?: number;
  mirostatTau?: number;
  mirostatEta?: number;
  /** The adaptive_p sampler (used only when listed in `samplers`): target probability (negative: off) and EMA decay. */
  adaptiveTarget?: number;
  adaptiveDecay?: number;
  minKeep?: number;
  nProbs?: number;
  ignoreEos?: boolean;
  /** -bs: run this chain in the decode graph when the engine allows it (no grammar, reasoning budget or raw probabilities). */
  backendSampling?: boolean;
  /** Sampler names in order (llama-server's names: dry, top_k, typ_p, top_p, min_p, xtc, temperature, ...). */
  samplers?: string[];
  /** GBNF grammar. */
  grammar?: string;
  /** The grammar was generated from a JSON schema. */
  grammarFromSchema?: boolean;
  /** [token, bias] pairs; -Infinity bans a token. */
  logitBias?: Array<[Token, number]>;
}

export interface CompletionTaskSpec {
  /** "embedding" on an engine in embedding mode; default "completion". */
  kind?: 'completion' | 'embedding';
  /** The prompt's tokens. Ignored when `media` is given (then `promptText` is tokenized natively). */
  prompt: Int32Array;
  /** Text with one media marker per image (with `media`). */
  promptText?: string;
  /** Encoded image files (PNG, JPEG, ...), in marker order; needs an engine with `vision`. */
  media?: Uint8Array[];
  /** -1 = until end of generation or the slot's context is full. */
  nPredict?: number;
  /** -1 = choose automatically. */
  idSlot?: number;
  cachePrompt?: boolean;
  /** PROGRESS events: when the prompt starts, then after every batch of it (llama-server's return_progress). */
  returnProgress?: boolean;
  /** Top-N token probabilities for each generated token. */
  nProbs?: number;
  /** Take them from the sampler chain's final candidates instead of the raw softmax over the vocabulary. */
  postSamplingProbs?: boolean;
  /** 0 = no limit. As llama-server: checked once a new line has been generated. */
  tMaxPredictMs?: number;
  /** Context shift: prompt tokens kept at the start (-1: all of the prompt; default 0). */
  nKeep?: number;
  /** Context shift: tokens dropped after them (0: half of the rest). */
  nDiscard?: number;
  /** Cache reuse (llama-server's n_cache_reuse): chunks of at least this many cached tokens that reappear later in the prompt are shifted there instead of recomputed (0: off). */
  nCacheReuse?: number;
  /** > 0: generation ends at the first line after the first that is indented less (llama-server's n_indent). */
  nIndent?: number;
  stop?: string[];
  sampling?: SamplingParams;
  /** One scale per engine adapter (missing entries are 0); fixed for the task's whole life. */
  loraScales?: number[];
  /** Whom the task belongs to (fair share, native/admission.h); "" or absent: the anonymous tenant. */
  tenant?: string;
  /** The tenant's weight, > 0 and <= 100 (default 1): its share of the engine relative to other tenants. */
  tenantWeight?: number;
  /** "interactive" (default) is admitted before "batch", across tenants. */
  priorityClass?: PriorityClass;
  /** Within the tenant: lower first (vLLM's `priority`); default 0. */
  priority?: number;
}

export type PriorityClass = 'interactive' | 'batch';

export type StopType = 'none' | 'eos' | 'limit' | 'word';

export interface TokenProbability {
  id: Token;
  /** Raw bytes of the token's text. */
  piece: Uint8Array;
  p: number;
}

export type EngineEvent =
  /** `nPrompt` (the prompt's token count, images included) comes with a task's first token. */
  | { task: number; kind: 'token'; token: Token; text: string; prob?: number; probs?: TokenProbability[]; nPrompt?: number }
  | {
      task: number; kind: 'done'; text: string; stop: StopType; stoppingWord: string; truncated: boolean;
      nPrompt: number; nCached: number; nPredicted: number; tPromptMs: number; tPredictMs: number; slot: number;
      /** Speculative decoding: tokens drafted for this task, and those the model accepted. */
      nDraft: number; nDraftAccepted: number;
    }
  | { task: number; kind: 'error'; message: string }
  /** return_progress: the prompt's tokens, those reused from the cache, those in the cache so far (cached included). */
  | { task: number; kind: 'progress'; total: number; cache: number; processed: number; timeMs: number }
  /**
   * One pooled vector (nVectors 1), or one per prompt token with pooling none; row-major. With the
   * time from the slot taking the input to its vector (tPromptMs) and the slot.
   */
  | { task: number; kind: 'embedding'; embedding: Float32Array; nVectors: number; nPrompt: number; tPromptMs: number; slot: number };

export interface SlotSnapshot {
  id: number;
  nCtx: number;
  state: 'idle' | 'prompt' | 'generating';
  taskId: number | null;
  nPrompt: number;
  nDecoded: number;
  nCache: number;
}

/**
 * One slot's cache change (native/cache-events.h): it keeps its first `keep` reported tokens (whole
 * blocks) and now also holds `tokens` after them (whole blocks), computed with adapter scales `lora`.
 */
export interface CacheChange {
  /** Where: 0 a slot's cells (slot: its id), 1 a host-memory cache entry, 2 a disk tier file (slot: the entry's id). */
  tier: 0 | 1 | 2;
  slot: number;
  keep: number;
  tokens: Int32Array;
  lora: number[];
}

export interface EngineMetrics {
  /** Prompt tokens decoded (not those reused from a slot's cache). */
  promptTokens: number;
  /** Prompt tokens reused from a slot's cache. */
  cachedTokens: number;
  /** Of those, tokens taken from another slot's cells (prefix sharing). */
  sharedTokens: number;
  /** Prompts that waited for another slot to compute their shared prefix. */
  sharedJoins: number;
  /** Busy slots summed over decode calls (over decodeCalls: the average). */
  busySlotDecodes: number;
  /** The longest sequence a slot has held (prompt + generation). */
  nTokensMax: number;
  promptMs: number;
  predictedTokens: number;
  predictedMs: number;
  decodeCalls: number;
  /** Steps whose generating rows and prompt rows were decoded by two calls (EngineInfo.splitSteps). */
  splitSteps: number;
  /** llama_decode calls ended at a ubatch boundary so that their outputs went out before the batch's rest (EngineInfo.earlyOutputs). */
  earlyOutputCalls: number;
  /** Times a full slot dropped old tokens (--context-shift). */
  contextShifts: number;
  /** Router mode: tokens the tenants used on the router's other model processes, received for fair share (chargeTenants). */
  tokensElsewhere: number;
  /** Slot caches copied to the host-memory prompt cache (--cache-ram). */
  promptCacheSaves: number;
  /** Of those, copies into a buffer requested ahead for the task (written on a thread of its own) or kept from a restored or evicted entry. */
  promptCacheReuses: number;
  /** Host memory the prompt cache holds now: saved prompts and buffers kept for reuse (never above --cache-ram). */
  promptCacheBytes: number;
  tasksDone: number;
  /** The disk tier (--cache-disk; zero when off): prompts restored from a file, prompts that found none worth restoring, bytes and files written, bytes read, files deleted for the budget or superseded, files deleted unread (another layout, truncated, checksum), writes dropped (too many waiting), files adopted at start-up. */
  diskHits: number;
  diskMisses: number;
  diskBytesWritten: number;
  diskFilesWritten: number;
  diskBytesRead: number;
  diskEvictions: number;
  diskRejected: number;
  diskDropped: number;
  diskAdopted: number;
  /** Now: writes queued or in progress, and bytes of this model's files. */
  diskPending: number;
  diskBytes: number;
  queued: number;
  /** Generating requests being prepared (NativeEngine.beginPreparing) that have not submitted their tasks yet. */
  preparing: number;
  busySlots: number;
  /** Speculative decoding (absent when off): drafted tokens, accepted ones, verification steps, accepted per draft position. */
  draftTokens?: number;
  draftAccepted?: number;
  draftSteps?: number;
  acceptedPerPos?: number[];
}

export interface EngineInfo {
  nCtx: number;
  nCtxSlot: number;
  nParallel: number;
  nBatch: number;
  nUbatch: number;
  /** The chunked-prefill budget (EngineParams.prefillBudget). */
  prefillBudget: number;
  /** Chunked prefill's time target (EngineParams.prefillBudgetMs). */
  prefillBudgetMs: number;
  /**
   * A step holding generating tokens and 64 rows or more decodes its generating rows and its
   * prompt rows by two llama_decode calls (on when the build has no GPU backend, without a draft
   * model, not for embeddings): on the CPU, one attention tile mixing the two reads every cell of
   * every generating sequence for all its rows (docs/benchmarks.md).
   */
  splitSteps: boolean;
  /**
   * A batch of several ubatches is decoded by one call per stretch of whole ubatches that ends with
   * an output, sampled before the next call: prompts arriving together that end in the first
   * ubatches get their first token sooner (on a CPU build with a unified pool and a plain KV cache,
   * without a draft model, not for embeddings).
   */
  earlyOutputs: boolean;
  /**
   * Buffers for the prompt cache's expected saves are written ahead on a thread of their own: where
   * the build has a GPU backend or the machine has more hardware threads than decoding uses.
   */
  prepareSaves: boolean;
  /** Adaptive LIFO's threshold (EngineParams.overloadLifoMs). */
  overloadLifoMs: number;
  /** Fair share across tenants in admission (EngineParams.fairShare). */
  fairShare: boolean;
  /** The burst wait (EngineParams.burstWaitMs). */
  burstWaitMs: number;
  /** Slot choice's similarity threshold (EngineParams.slotPromptSimilarity). */
  slotPromptSimilarity: number;
  /** Prefix sharing across slots in effect (EngineParams.prefixSharing, and what the model's memory allows). */
  prefixSharing: boolean;
  nThreads: number;
  nThreadsBatch: number;
  embeddings: boolean;
  /** The context's pooling type. */
  pooling: PoolingTypeId;
  /** Floats per embedding vector (classifier outputs for rank pooling). */
  nEmbdOut: number;
  /** Speculative decoding is on (--spec-type), with these drafters (comma-separated). */
  speculative: boolean;
  specTypes?: string;
}

export interface Submission {
  /** One id per task, in order, allocated at once. */
  ids: number[];
  /**
   * Resolves once every task is on the engine's queue (they enter it together, so they can share
   * their first batch); rejects with a NativeError when any task is refused, and then none is
   * queued and none emits an event. A submission with images or a grammar is prepared off the
   * JS thread (images decoded, grammars parsed) before that; one without is prepared in
   * microseconds and queued before submit() returns, this promise already settled. Continuations
   * of this promise run before the first event of its tasks arrives.
   */
  queued: Promise<void>;
}

/**
 * llama-server's slot actions. `dir` is the --slot-save-path directory and `filename` one name in
 * it: the addon opens it relative to the directory, never follows a symbolic link, and reads or
 * writes only a regular file.
 */
export type SlotActionSpec =
  | { action: 'save' | 'restore'; slot: number; dir: string; filename: string }
  | { action: 'erase'; slot: number };

export interface SlotActionResult {
  /** Cached tokens saved, restored or erased. */
  nTokens: number;
  /** save: bytes written; restore: bytes read. */
  nBytes: number;
  ms: number;
}

export interface NativeEngine {
  /**
   * Submits tasks. Throws INVALID_ARGUMENT (wrong types) or DISPOSED synchronously. `prepared`:
   * they are the tasks of a request counted by beginPreparing(), which stops counting once they
   * are queued or refused, or when submit throws.
   */
  submit(tasks: CompletionTaskSpec[], prepared?: boolean): Submission;
  /**
   * The server has received a generating request and is preparing it (its chat template
   * rendered, its prompt tokenized). An idle engine that has tasks waits for requests being
   * prepared to submit theirs, up to 25 times burstWaitMs, so that requests sent together share
   * their first batch. Ended by submit(tasks, true), or by endPreparing().
   */
  beginPreparing(): void;
  /** A request counted by beginPreparing() is withdrawn before it submitted tasks (it failed, or its client left). */
  endPreparing(): void;
  /**
   * The number of tokens of a task's prompt, its images (`media` with `promptText`) tokenized by
   * the projector and each counted as its tokens, as llama-server counts them; on a worker,
   * nothing queued. Rejects with BAD_MEDIA, NOT_SUPPORTED (no projector) or TOKEN_OUT_OF_RANGE.
   */
  countTokens(task: CompletionTaskSpec): Promise<number>;
  /** Stops a task at the next step; no further events arrive for it. A task still being prepared is never queued. */
  cancel(taskId: number): void;
  /**
   * Router mode: what tenants used on the router's other model processes, as [tenant, tokens];
   * fair share charges the tenants with tasks here, so that the share holds across the models.
   */
  chargeTenants(charges: Array<[string, number]>): void;
  slots(): SlotSnapshot[];
  metrics(): EngineMetrics;
  /** KV-cache events (native/cache-events.h): starts (a block size, tokens) or stops (0) the slots' change reports. */
  enableCacheEvents(blockSize: number): void;
  /** The slots' cache changes since the previous call, oldest first. */
  cacheChanges(): CacheChange[];
  info(): EngineInfo;
  /**
   * Saves, restores or erases a slot's cache between two steps, once the slot is idle (a busy slot
   * defers it). Throws INVALID_ARGUMENT (a slot out of range, wrong shapes) or DISPOSED
   * synchronously; rejects with BAD_SLOT_FILE (the file is missing, a link, not a regular file or
   * unusable, or images without a projector; a failed restore leaves the slot empty), SAVE_FAILED,
   * or DISPOSED when the engine is disposed first. Images in the cache are saved and restored.
   */
  slotAction(spec: SlotActionSpec): Promise<SlotActionResult>;
  /** Stops the engine thread and frees the context. Idempotent. */
  dispose(): Promise<void>;
}
