// The only loader of the native addon, and the TypeScript declaration of its whole surface.
// Everything here is implemented in native/ (one class per llama.cpp handle).
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chooseAddon, currentHost, prebuiltPackageNames, sourceBuildPath } from './prebuilt.js';

/** A token id of the model's vocabulary. */
export type Token = number;

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

/** llama_pooling_type: how an embedding engine turns a sequence's token vectors into its output. */
export const PoolingType = { none: 0, mean: 1, cls: 2, last: 3, rank: 4 } as const;
export type PoolingName = keyof typeof PoolingType;
export type PoolingTypeId = (typeof PoolingType)[PoolingName];

export interface ModelLoadOptions {
  /** Layers to offload to the GPU; -1 = all (the llama.cpp default), 0 = none. */
  nGpuLayers?: number;
  useMmap?: boolean;
  /** llama-server's command line: its model flags apply as there, instead of the two above. */
  serverParams?: NativeServerParams;
}

export interface ModelMetadata {
  architecture: string;
  name: string;
  description: string;
  nParams: number;
  sizeBytes: number;
  nCtxTrain: number;
  nEmbd: number;
  nLayer: number;
  nHead: number;
  nHeadKv: number;
  vocabSize: number;
  vocabType: 'none' | 'spm' | 'bpe' | 'wpm' | 'ugm' | 'rwkv' | 'other';
  hasEncoder: boolean;
  hasDecoder: boolean;
  nClsOut: number;
  /** `<arch>.pooling_type` from the GGUF, when present. */
  poolingType: PoolingTypeId | null;
  tokens: {
    bos: Token | null; eos: Token | null; eot: Token | null; sep: Token | null; nl: Token | null; pad: Token | null;
    fimPre: Token | null; fimSuf: Token | null; fimMid: Token | null; fimPad: Token | null; fimRep: Token | null; fimSep: Token | null;
  };
  /** Every end-of-generation token of the vocabulary. */
  eogTokens: Token[];
  addBos: boolean;
  addEos: boolean;
  addSep: boolean;
  chatTemplate: string | null;
  /** Every GGUF key/value, values rendered as text by llama.cpp (arrays abbreviated). */
  kv: Record<string, string>;
}

export interface ChatMessageText {
  role: string;
  content: string;
}

export interface ChatTemplateOptions {
  addGenerationPrompt?: boolean;
  /** A Jinja template to use instead of the model's own. */
  template?: string;
  /** chat_template_kwargs: values are JSON text (e.g. "true"). */
  kwargs?: Record<string, string>;
}

/** A tool call of an assistant message (history) or of a parsed output. */
export interface ChatToolCall {
  /** The call's id ("" or absent when the format has none). */
  id?: string;
  name: string;
  /** The arguments as JSON text (as OpenAI's `function.arguments`). */
  arguments: string;
}

export interface ChatContentPart {
  /** media_marker: the text is the vision marker standing for one image. */
  type: 'text' | 'media_marker';
  text: string;
}

/** One message of a conversation, as llama.cpp's common_chat_msg. */
export interface ChatInputMessage {
  role: string;
  content?: string | ChatContentPart[] | null;
  reasoningContent?: string;
  /** An assistant message's tool calls. */
  toolCalls?: ChatToolCall[];
  /** A role "tool" message: the call it answers, and the tool's name. */
  toolCallId?: string;
  toolName?: string;
}

export interface ChatTool {
  name: string;
  description?: string;
  /** The parameters' JSON schema as JSON text (an object); absent = no parameters ("{}"). */
  parameters?: string;
}

/**
 * llama.cpp's tool choices. llama-server maps OpenAI's named function (`{type: "function", ...}`)
 * to "auto" (json_value falls back to the default for a non-string) and Anthropic's
 * `{type: "any"|"tool"}` to "required"; another string is refused.
 */
export type ChatToolChoice = 'auto' | 'none' | 'required';

/** --reasoning-format / the request's reasoning_format. */
export type ReasoningFormat = 'none' | 'auto' | 'deepseek' | 'deepseek-legacy';

/** continue_final_message: how the last (assistant) message is continued. */
export type ChatContinuation = 'none' | 'auto' | 'reasoning' | 'content';

/** common_chat_templates_inputs, as llama-server fills it in oaicompat_chat_params_parse. */
export interface ChatInputs {
  messages: ChatInputMessage[];
  tools?: ChatTool[];
  /** Default "auto". */
  toolChoice?: ChatToolChoice;
  /** Default false (llama-server defaults it to the template's supports_parallel_tool_calls). */
  parallelToolCalls?: boolean;
  /** Default true. */
  addGenerationPrompt?: boolean;
  /** Default "none". */
  continueFinalMessage?: ChatContinuation;
  /** Default "none". */
  reasoningFormat?: ReasoningFormat;
  /** Default true. */
  enableThinking?: boolean;
  /** Render the template plainly and parse everything as content (llama-server's force_pure_content). */
  forcePureContent?: boolean;
  /** response_format's schema, as JSON text. */
  jsonSchema?: string;
  /** A GBNF grammar from the request (refused by llama.cpp together with tools). */
  grammar?: string;
  /** chat_template_kwargs: values are JSON text (e.g. "true"). */
  kwargs?: Record<string, string>;
  /**
   * The time for strftime_now, in ms since the epoch; default now. Passed on as llama.cpp's
   * inputs.now, which this llama.cpp's Jinja engine does not read yet (it reads the clock).
   */
  now?: number;
  /** A Jinja template (or "chatml") instead of the model's own. */
  template?: string;
  /** false (--no-jinja): llama.cpp's built-in templates by name instead of Jinja. */
  useJinja?: boolean;
}

export interface ChatGrammarTrigger {
  type: 'token' | 'word' | 'pattern' | 'patternFull';
  value: string;
  /** The token of a "token" trigger, else null. */
  token: Token | null;
}

/** common_chat_params: what a conversation renders to. Pass the sampling part on as SamplingParams. */
export interface ChatParams {
  prompt: string;
  /** The parser format's name (common_chat_format_name): "Content-only", "peg-native", ... */
  format: string;
  /** GBNF; "" when output is free. */
  grammar: string;
  /** The grammar applies only from a trigger on. */
  grammarLazy: boolean;
  grammarTriggers: ChatGrammarTrigger[];
  /** Marker texts to keep as special tokens (sampling) and in the output text. */
  preservedTokens: string[];
  /** Stop strings to add to the request's. */
  additionalStops: string[];
  /** The assistant prefix the prompt ends with (for the parser and the grammar's prefill). */
  generationPrompt: string;
  supportsThinking: boolean;
  /** e.g. "<think>"; "" when the template does not think. */
  thinkingStartTag: string;
  thinkingEndTags: string[];
  /** The serialized PEG parser of the output (for ChatParser). */
  parser: string;
}

export interface ChatTemplateInfo {
  /** The Jinja source in use (llama.cpp's ChatML when the model has none). */
  source: string;
  /** The model carries a template (or one was given). */
  hasModelTemplate: boolean;
  /** common_chat_templates_get_caps: supports_tools, supports_tool_calls, supports_parallel_tool_calls, ... */
  caps: Record<string, boolean>;
  /** The template reacts to enable_thinking (llama-server's /props and --reasoning auto). */
  supportsEnableThinking: boolean;
}

/**
 * common_chat_parser_params: made from a ChatParams and the request. The flags after
 * generationPrompt are passed on as llama-server passes them; this llama.cpp's PEG parsers do not
 * read them (reasoning and tool-call parsing are decided by applyChat's inputs).
 */
export interface ChatParserOptions {
  /** ChatParams.format. */
  format: string;
  /** ChatParams.parser. */
  parser: string;
  /** ChatParams.generationPrompt: parsing starts with it, so a think block it opens is seen. */
  generationPrompt: string;
  /** Default "none". */
  reasoningFormat?: ReasoningFormat;
  /** llama-server: stream && reasoningFormat === "deepseek-legacy". */
  reasoningInContent?: boolean;
  /** Default true. */
  parseToolCalls?: boolean;
  /** continue_final_message was set. */
  isContinuation?: boolean;
  echo?: boolean;
}

/** A parsed model output. Tool call ids are "" unless the format carries them. */
export interface ChatParsedMessage {
  content: string;
  reasoningContent: string;
  toolCalls: Required<ChatToolCall>[];
}

/** One stream delta (common_chat_msg_diff). */
export interface ChatMessageDiff {
  reasoningContentDelta: string;
  contentDelta: string;
  /** The tool call this delta extends or starts, else null. */
  toolCallIndex: number | null;
  /** id and name are set when the call starts (or its name grows); arguments is the new piece. */
  toolCallDelta: Required<ChatToolCall> | null;
}

/**
 * The parser of one request's output. Stateless: parse the whole text generated so far, as
 * llama-server does per token (on its HTTP threads); runs on the JS thread. Stream deltas are
 * ChatParser.diff(previous, current) of consecutive non-empty parses; a tool call without an id
 * gets one from the caller (llama-server: a random id per call index, kept for the stream).
 */
export interface NativeChatParser {
  /** Throws code PARSE_FAILED when a complete (isPartial false) text does not match the format. */
  parse(text: string, isPartial: boolean): ChatParsedMessage;
}

export interface NativeModel {
  metadata(): ModelMetadata;
  tokenize(text: string, addSpecial: boolean, parseSpecial: boolean): Int32Array;
  /** The same on a worker thread (for long texts and busy servers). */
  tokenizeAsync(text: string, addSpecial: boolean, parseSpecial: boolean): Promise<Int32Array>;
  detokenize(tokens: Int32Array | readonly number[], removeSpecial?: boolean, unparseSpecial?: boolean): string;
  /** The raw bytes of a token's text (may be an incomplete UTF-8 sequence). */
  tokenPiece(token: Token, special?: boolean): Uint8Array;
  applyChatTemplate(messages: readonly ChatMessageText[], options?: ChatTemplateOptions): string;
  /**
   * llama.cpp's chat layer: the prompt with tools and tool history, and the grammar, triggers,
   * preserved tokens, stops and parser of the model's format. Throws an Error with `code`
   * BAD_TOOLS (a tool's name or parameters), BAD_JSON (jsonSchema or a kwargs value),
   * TEMPLATE_FAILED (the template does not parse or render, or llama.cpp refuses the inputs).
   */
  applyChat(inputs: ChatInputs): ChatParams;
  /**
   * applyChat rendered on a worker thread (llama-server renders on its HTTP threads): the JS thread
   * only reads the inputs and builds the result. Malformed inputs throw at once as applyChat's do;
   * a template that fails to render rejects with TEMPLATE_FAILED.
   */
  applyChatAsync(inputs: ChatInputs): Promise<ChatParams>;
  /** The model's template (or `template`): what llama-server reports in /props. Errors as applyChat. */
  chatTemplateInfo(template?: string): ChatTemplateInfo;
  /** Frees the weights. Throws while an engine still uses the model. Idempotent. */
  dispose(): void;
  readonly disposed: boolean;
}

export interface ModelLoadHandle {
  promise: Promise<NativeModel>;
  /** Aborts an in-progress load; the promise then rejects with "model loading was cancelled". */
  cancel(): void;
}

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
  'prefillBudget' | 'prefillBudgetMs' | 'overloadLifoMs' | 'burstWaitMs' | 'kvUnified' | 'prefixSharing' | 'slotPromptSimilarity' |
  'splitSteps' | 'earlyOutputs' | 'prepareSaves'>;

export interface NativeVision {
  /** The text that stands for one image or audio clip in a prompt (e.g. "<__media__>"). */
  readonly marker: string;
  /** The projector reads images. */
  readonly supportsVision: boolean;
  /** The projector reads audio (WAV, MP3, FLAC). */
  readonly supportsAudio: boolean;
  dispose(): void;
}

export interface NativeLoraAdapter {
  readonly path: string;
  /** The adapter's GGUF key/values. */
  metadata(): Record<string, string>;
  /** Frees the adapter (throws while an engine uses it). Idempotent. */
  dispose(): void;
}

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
}

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
  /** One pooled vector (nVectors 1), or one per prompt token with pooling none; row-major. */
  | { task: number; kind: 'embedding'; embedding: Float32Array; nVectors: number; nPrompt: number };

export interface SlotSnapshot {
  id: number;
  nCtx: number;
  state: 'idle' | 'prompt' | 'generating';
  taskId: number | null;
  nPrompt: number;
  nDecoded: number;
  nCache: number;
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
  /** Slot caches copied to the host-memory prompt cache (--cache-ram). */
  promptCacheSaves: number;
  /** Of those, copies into a buffer requested ahead for the task (written on a thread of its own) or kept from a restored or evicted entry. */
  promptCacheReuses: number;
  /** Host memory the prompt cache holds now: saved prompts and buffers kept for reuse (never above --cache-ram). */
  promptCacheBytes: number;
  tasksDone: number;
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
  slots(): SlotSnapshot[];
  metrics(): EngineMetrics;
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

export interface SystemInfo {
  backend: 'CPU' | 'CUDA' | 'Metal';
  llamaSystemInfo: string;
  supportsGpuOffload: boolean;
  supportsMmap: boolean;
  maxDevices: number;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'none';

/** One option of llama-server's command line, as llama.cpp's parser defines it. */
export interface ServerOption {
  names: string[];
  /** The --no-... spellings of a boolean option. */
  negatedNames: string[];
  env: string | null;
  valueHint: string | null;
  help: string;
  sampling: boolean;
}

export interface ServerSamplingValues {
  seed: number; nProbs: number; minKeep: number; topK: number; topP: number; minP: number;
  xtcProbability: number; xtcThreshold: number; typicalP: number; temperature: number;
  dynatempRange: number; dynatempExponent: number; repeatLastN: number; repeatPenalty: number;
  frequencyPenalty: number; presencePenalty: number; dryMultiplier: number; dryBase: number;
  dryAllowedLength: number; dryPenaltyLastN: number; drySequenceBreakers: string[];
  adaptiveTarget: number; adaptiveDecay: number; reasoningBudgetMessage: string; mirostat: number; mirostatTau: number; mirostatEta: number;
  topNSigma: number; ignoreEos: boolean; backendSampling: boolean; timingsPerToken: boolean; samplers: string[]; grammar: string;
  logitBias: Array<[number, number]>; reasoningBudget: number;
}

/** The values of llama-server's common_params that this server reads (names as in TypeScript). */
export interface ServerParamValues {
  model: string; mmproj: string; noMmproj: boolean; mmprojUseGpu: boolean; aliases: string[]; tags: string[];
  /** -hf/-hfr repo[:quant], -hff file, -hft token (or HF_TOKEN), -mu URL, -mmu URL, --offline, -hfd repo[:quant], -md file. */
  hfRepo: string; hfFile: string; hfToken: string; modelUrl: string; mmprojUrl: string; offline: boolean; draftHfRepo: string; draftModel: string;
  hosts: string[]; port: number; reusePort: boolean; apiKeys: string[]; apiPrefix: string;
  nParallel: number; nCtx: number; nBatch: number; nUbatch: number; nPredict: number; nKeep: number;
  threads: number; threadsBatch: number; threadsHttp: number; nGpuLayers: number; flashAttn: number; loadMode: number;
  ctxShift: boolean; kvUnified: boolean; kvUnifiedPerSlot: number; swaFull: boolean; cacheReuse: number; cachePrompt: boolean; cacheRamMib: number; cacheIdleSlots: boolean; special: boolean;
  cacheTypeK: string; cacheTypeV: string; slotSavePath: string; slotPromptSimilarity: number;
  endpointSlots: boolean; endpointProps: boolean; endpointMetrics: boolean;
  corsOrigins: string; corsMethods: string; corsHeaders: string; corsCredentials: boolean;
  timeoutRead: number; timeoutWrite: number; publicPath: string; webui: boolean;
  sslKeyFile: string; sslCertFile: string; ssePingInterval: number; promptsLogDir: string;
  uiMcpProxy: boolean; serverTools: string[]; serverToolsRuntime: string; mcpServersConfig: string; mcpServersJson: string; corsOriginsExplicit: boolean;
  chatTemplate: string; useJinja: boolean; skipChatParsing: boolean; enableChatTemplate: boolean; chatTemplateKwargs: Record<string, string>;
  reasoningFormat: string; enableReasoning: number; prefillAssistant: boolean; sleepIdleSeconds: number;
  mediaPath: string; verbosity: number; logJson: boolean; embedding: boolean; poolingType: number; embdNormalize: number; antiprompt: string[]; spmInfill: boolean;
  loras: Array<{ path: string; scale: number }>; loraInitWithoutApply: boolean;
  modelsDir: string; modelsPreset: string; modelsMax: number; modelsAutoload: boolean;
  sampling: ServerSamplingValues;
}

/** llama-server's command line parsed by llama.cpp's own parser (common/arg.cpp). */
export interface NativeServerParams {
  values(): ServerParamValues;
  /** First names of the options set on the command line or through their environment variables. */
  given(): string[];
  /**
   * Router mode's models (llama-server's load_models): the HF cache's, --models-dir's and
   * --models-preset's, with the command line laid over each; sorted by name. Throws
   * (BAD_ARGUMENTS) when the directory or the preset file cannot be read.
   */
  routerModels(): RouterModelSpec[];
}

/** One model of router mode, as llama.cpp's preset code describes it. */
export interface RouterModelSpec {
  name: string;
  source: 'preset' | 'models_dir' | 'cache';
  /** A cache model a preset with dedup-cache-models serves: left out of GET /models, still usable. */
  hidden: boolean;
  aliases: string[];
  tags: string[];
  /** Seconds a stopping child gets before it is killed (preset stop-timeout, default 10). */
  stopTimeout: number;
  /** Preset load-on-startup. */
  loadOnStartup: boolean;
  /** --sleep-idle-seconds for this model (taken out of args: the router unloads idle models); -1 never. */
  sleepIdleSeconds: number;
  /** The preset in INI form, as GET /models shows it. */
  presetIni: string;
  /** The projector file, "" for none. */
  mmproj: string;
  /** The child's command line (without program, host, port and alias). */
  args: string[];
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
