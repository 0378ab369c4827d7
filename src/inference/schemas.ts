// Request bodies of the inference API, as TypeBox schemas (compiled once in routes) with their
// static types side by side. Unknown fields are accepted and ignored, as llama-server and the
// OpenAI API do; known fields are type-checked and a wrong one is a 400 naming it.
import { Type, type Static } from '@sinclair/typebox';
import type { BodyOptions } from '../http/validation.js';

/**
 * How every inference route reads its body: any content type (llama-server does, so that
 * `curl -d '{...}'` works); strings must have a UTF-8 form; nesting is capped far above any
 * real request (a json_schema dozens of levels deep) and far below what would overflow the
 * recursion of JSON.stringify or a native parser.
 */
export const BODY_OPTIONS: BodyOptions = { strictContentType: false, wellFormedStrings: true, maxDepth: 128 };

// Counts, ids and limits are C int32 in the engine: a larger integer (2**40, 1e300) would wrap or
// saturate there, so it is refused here with the field's name.
const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;
const Int = Type.Integer({ minimum: INT32_MIN, maximum: INT32_MAX });
/** A sampling seed: any uint32 (as llama-server), or a negative value for a random seed. */
const Seed = Type.Integer({ minimum: INT32_MIN, maximum: 4294967295 });
const Num = Type.Number();
/** A probability, 0..1. */
const Probability = Type.Number({ minimum: 0, maximum: 1 });
/** A count of tokens, 0 or more. */
const Count = Type.Integer({ minimum: 0, maximum: INT32_MAX });
/** A count of tokens where -1 means "all" (or "any slot"). */
const Window = Type.Integer({ minimum: -1, maximum: INT32_MAX });
const TokenArray = Type.Array(Int);
const StopField = Type.Union([Type.String(), Type.Array(Type.String())]);

export const SAMPLER_NAMES = ['dry', 'top_k', 'top_p', 'top_n_sigma', 'typ_p', 'typical_p', 'min_p', 'temperature', 'xtc', 'infill', 'penalties', 'adaptive_p'] as const;

const LogitBias = Type.Union([
  // {"15043": 1.0, "Hello": -1, "42": false}
  Type.Record(Type.String(), Type.Union([Num, Type.Boolean()])),
  // [[15043, 1.0], ["Hello", false]]
  Type.Array(Type.Tuple([Type.Union([Int, Type.String()]), Type.Union([Num, Type.Boolean()])])),
]);

/** Sampling and generation parameters shared by every completion endpoint. */
export const GenerationFields = {
  temperature: Type.Optional(Num),
  dynatemp_range: Type.Optional(Num),
  dynatemp_exponent: Type.Optional(Num),
  top_k: Type.Optional(Int),
  top_p: Type.Optional(Probability),
  min_p: Type.Optional(Probability),
  top_n_sigma: Type.Optional(Num),
  typical_p: Type.Optional(Probability),
  xtc_probability: Type.Optional(Probability),
  xtc_threshold: Type.Optional(Num),
  repeat_penalty: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
  repeat_last_n: Type.Optional(Window),
  frequency_penalty: Type.Optional(Num),
  presence_penalty: Type.Optional(Num),
  dry_multiplier: Type.Optional(Num),
  dry_base: Type.Optional(Num),
  dry_allowed_length: Type.Optional(Count),
  dry_penalty_last_n: Type.Optional(Window),
  dry_sequence_breakers: Type.Optional(Type.Array(Type.String())),
  mirostat: Type.Optional(Type.Union([Type.Literal(0), Type.Literal(1), Type.Literal(2)])),
  mirostat_tau: Type.Optional(Num),
  mirostat_eta: Type.Optional(Num),
  adaptive_target: Type.Optional(Num),
  adaptive_decay: Type.Optional(Type.Number({ minimum: 0, maximum: 0.99 })),
  min_keep: Type.Optional(Int),
  seed: Type.Optional(Seed),
  ignore_eos: Type.Optional(Type.Boolean()),
  /** -bs: run the sampler chain in the decode graph (default from the flag). */
  backend_sampling: Type.Optional(Type.Boolean()),
  logit_bias: Type.Optional(LogitBias),
  n_probs: Type.Optional(Type.Integer({ minimum: 0, maximum: 100 })),
  post_sampling_probs: Type.Optional(Type.Boolean()),
  grammar: Type.Optional(Type.String()),
  json_schema: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  samplers: Type.Optional(Type.Union([Type.Array(Type.Union(SAMPLER_NAMES.map((n) => Type.Literal(n)))), Type.String()])),
  n_predict: Type.Optional(Int),
  max_tokens: Type.Optional(Type.Union([Int, Type.Null()])),
  stop: Type.Optional(Type.Union([StopField, Type.Null()])),
  stream: Type.Optional(Type.Boolean()),
  cache_prompt: Type.Optional(Type.Boolean()),
  id_slot: Type.Optional(Window),
  t_max_predict_ms: Type.Optional(Int),
  n_indent: Type.Optional(Count),
  /** vLLM's field: the request's rank within its tenant's queue, lower first (default 0; docs/tenants.md). */
  priority: Type.Optional(Int),
  timings_per_token: Type.Optional(Type.Boolean()),
  /** Streamed requests: prompt_progress events while the prompt is processed (llama-server). */
  return_progress: Type.Optional(Type.Boolean()),
  return_tokens: Type.Optional(Type.Boolean()),
  n_keep: Type.Optional(Window),
  n_discard: Type.Optional(Count),
  /** Shortest chunk of the cache reused by shifting it to its place in the new prompt (0: off; --cache-reuse). */
  n_cache_reuse: Type.Optional(Count),
  n_cmpl: Type.Optional(Int),
  n: Type.Optional(Int),
  model: Type.Optional(Type.Union([Type.String(), Type.Null()])),
  stream_options: Type.Optional(Type.Object({ include_usage: Type.Optional(Type.Boolean()) })),
  response_fields: Type.Optional(Type.Array(Type.String())),
  /** Per-request LoRA scales, llama-server's [{id, scale}]; adapters not listed run at 0. */
  lora: Type.Optional(Type.Array(Type.Object({ id: Type.Integer({ minimum: 0 }), scale: Type.Number() }))),
};

const PromptPiece = Type.Union([Type.String(), Int]);
/** llama-server's multimodal prompt: text with media markers, and base64 images. */
const MultimodalPrompt = Type.Object({ prompt_string: Type.String(), multimodal_data: Type.Optional(Type.Array(Type.String())) });
/** A prompt: text, tokens, a mix of both, or an array of such prompts (a prompt object among them). */
export const PromptField = Type.Union([
  Type.String(),
  Type.Array(Type.Union([PromptPiece, Type.Array(PromptPiece), MultimodalPrompt])),
]);

export const CompletionBody = Type.Object({
  prompt: Type.Union([PromptField, MultimodalPrompt]),
  /** Base64 images for the media markers of a text prompt (also accepted inside `prompt`). */
  multimodal_data: Type.Optional(Type.Array(Type.String())),
  ...GenerationFields,
});
export type CompletionBody = Static<typeof CompletionBody>;

/** /infill: prefix and suffix are text or, as llama-server allows, a mix of text and token ids. */
const InfillText = Type.Union([Type.String(), Type.Array(PromptPiece)]);
export const InfillChunk = Type.Object({ filename: Type.Optional(Type.String()), text: Type.String() });
export const InfillBody = Type.Object({
  input_prefix: InfillText,
  input_suffix: InfillText,
  input_extra: Type.Optional(Type.Array(InfillChunk)),
  prompt: Type.Optional(Type.String()),
  ...GenerationFields,
});
export type InfillBody = Static<typeof InfillBody>;

export const OpenAICompletionBody = Type.Object({
  prompt: PromptField,
  ...GenerationFields,
  logprobs: Type.Optional(Type.Union([Int, Type.Null()])),
  echo: Type.Optional(Type.Boolean()),
  suffix: Type.Optional(Type.Union([Type.String(), Type.Null()])),
});
export type OpenAICompletionBody = Static<typeof OpenAICompletionBody>;

const TextPart = Type.Object({ type: Type.Literal('text'), text: Type.String() });
const ImagePart = Type.Object({ type: Type.Literal('image_url'), image_url: Type.Object({ url: Type.String() }) });
/** OpenAI's audio part: base64 bytes in data (llama-server also reads url); format is not needed to decode. */
const AudioPart = Type.Object({ type: Type.Literal('input_audio'), input_audio: Type.Object({ data: Type.Optional(Type.String()), url: Type.Optional(Type.String()), format: Type.Optional(Type.String()) }) });
export const MessageContent = Type.Union([Type.String(), Type.Array(Type.Union([TextPart, ImagePart, AudioPart])), Type.Null()]);

/** A tool call in an assistant message of the history (OpenAI's shape); arguments are JSON text. */
const ToolCall = Type.Object({
  id: Type.Optional(Type.String()),
  type: Type.Optional(Type.Literal('function')),
  function: Type.Object({ name: Type.String({ minLength: 1 }), arguments: Type.Optional(Type.Union([Type.String(), Type.Record(Type.String(), Type.Unknown())])) }),
});

export const ChatMessage = Type.Object({
  role: Type.String(),
  content: Type.Optional(MessageContent),
  name: Type.Optional(Type.String()),
  tool_calls: Type.Optional(Type.Union([Type.Array(ToolCall), Type.Null()])),
  tool_call_id: Type.Optional(Type.String()),
  reasoning_content: Type.Optional(Type.Union([Type.String(), Type.Null()])),
});
export type ChatMessage = Static<typeof ChatMessage>;

/** A tool the model may call (OpenAI's function tool); parameters is a JSON schema. */
export const ChatToolField = Type.Object({
  type: Type.Literal('function'),
  function: Type.Object({
    name: Type.String({ minLength: 1 }),
    description: Type.Optional(Type.String()),
    parameters: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    strict: Type.Optional(Type.Boolean()),
  }),
});

export const ToolChoiceField = Type.Union([
  Type.Literal('auto'),
  Type.Literal('none'),
  Type.Literal('required'),
  Type.Object({ type: Type.Literal('function'), function: Type.Object({ name: Type.String() }) }),
]);

/** The fields of a chat request that decide its prompt (chat completions, /apply-template, token counting). */
export const ChatPromptFields = {
  messages: Type.Array(ChatMessage),
  tools: Type.Optional(Type.Union([Type.Array(ChatToolField), Type.Null()])),
  tool_choice: Type.Optional(Type.Union([ToolChoiceField, Type.Null()])),
  parallel_tool_calls: Type.Optional(Type.Boolean()),
  chat_template_kwargs: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  add_generation_prompt: Type.Optional(Type.Boolean()),
  continue_final_message: Type.Optional(Type.Union([Type.Boolean(), Type.String()])),
  reasoning_format: Type.Optional(Type.Union([Type.Literal('none'), Type.Literal('auto'), Type.Literal('deepseek'), Type.Literal('deepseek-legacy')])),
  reasoning_effort: Type.Optional(Type.String()),
  reasoning_budget_tokens: Type.Optional(Type.Integer({ minimum: -1, maximum: 2147483647 })),
  reasoning_budget_message: Type.Optional(Type.String()),
  thinking_budget_tokens: Type.Optional(Type.Integer({ minimum: -1, maximum: 2147483647 })),
};

const ResponseFormat = Type.Union([
  Type.Object({ type: Type.Literal('text') }),
  Type.Object({ type: Type.Literal('json_object'), schema: Type.Optional(Type.Record(Type.String(), Type.Unknown())) }),
  Type.Object({
    type: Type.Literal('json_schema'),
    json_schema: Type.Object({
      name: Type.Optional(Type.String()),
      schema: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
      strict: Type.Optional(Type.Boolean()),
    }),
  }),
]);

export const ChatCompletionBody = Type.Object({
  ...ChatPromptFields,
  messages: Type.Array(ChatMessage, { minItems: 1 }),
  ...GenerationFields,
  /** llama-server's debug field: the native answer (with its prompt) as `__verbose`. */
  verbose: Type.Optional(Type.Boolean()),
  logprobs: Type.Optional(Type.Union([Type.Boolean(), Type.Null()])),
  top_logprobs: Type.Optional(Type.Union([Int, Type.Null()])),
  max_completion_tokens: Type.Optional(Type.Union([Int, Type.Null()])),
  response_format: Type.Optional(ResponseFormat),
});
export type ChatCompletionBody = Static<typeof ChatCompletionBody>;

export const TokenizeBody = Type.Object({
  content: Type.String(),
  add_special: Type.Optional(Type.Boolean()),
  parse_special: Type.Optional(Type.Boolean()),
  with_pieces: Type.Optional(Type.Boolean()),
});
export type TokenizeBody = Static<typeof TokenizeBody>;

export const DetokenizeBody = Type.Object({ tokens: TokenArray });
export type DetokenizeBody = Static<typeof DetokenizeBody>;

export const ApplyTemplateBody = Type.Object({ ...ChatPromptFields });
export type ApplyTemplateBody = Static<typeof ApplyTemplateBody>;

/** Inputs to embed: the prompt forms of /completion (text, tokens, mixed, or several). */
const EmbeddingInput = PromptField;

export const OpenAIEmbeddingBody = Type.Object({
  input: EmbeddingInput,
  model: Type.Optional(Type.String()),
  encoding_format: Type.Optional(Type.Union([Type.Literal('float'), Type.Literal('base64')])),
  dimensions: Type.Optional(Type.Integer()),
  user: Type.Optional(Type.String()),
});
export type OpenAIEmbeddingBody = Static<typeof OpenAIEmbeddingBody>;

/** llama-server's /embedding(s) takes `input` too. */
export const NativeEmbeddingBody = Type.Object({
  content: Type.Optional(EmbeddingInput),
  input: Type.Optional(EmbeddingInput),
  embd_normalize: Type.Optional(Type.Integer({ minimum: -1 })),
});
export type NativeEmbeddingBody = Static<typeof NativeEmbeddingBody>;

export const RerankBody = Type.Object({
  query: Type.String(),
  documents: Type.Optional(Type.Array(Type.String())),
  /** TEI's name for documents. */
  texts: Type.Optional(Type.Array(Type.String())),
  top_n: Type.Optional(Type.Integer({ minimum: 0 })),
  return_text: Type.Optional(Type.Boolean()),
  model: Type.Optional(Type.String()),
});
export type RerankBody = Static<typeof RerankBody>;

const LoraAdapterItem = Type.Object({
  id: Type.Optional(Type.Integer({ minimum: 0 })),
  path: Type.Optional(Type.String()),
  scale: Type.Number(),
});
/** `{"lora_adapters": [{path or id, scale}]}`, or llama-server's bare array. */
export const LoraAdaptersBody = Type.Union([Type.Object({ lora_adapters: Type.Array(LoraAdapterItem) }), Type.Array(LoraAdapterItem)]);
export type LoraAdaptersBody = Static<typeof LoraAdaptersBody>;

/** An image's source in Anthropic's content blocks: base64 bytes or a URL. */
const AnthropicImageSource = Type.Object({
  type: Type.String(),
  media_type: Type.Optional(Type.String()),
  data: Type.Optional(Type.String()),
  url: Type.Optional(Type.String()),
});

/** What a tool_result block may hold: text, or text and image blocks. */
const AnthropicResultBlock = Type.Object({
  type: Type.String(),
  text: Type.Optional(Type.String()),
  source: Type.Optional(AnthropicImageSource),
});

/**
 * A content block of Anthropic's messages (text, image, thinking, tool_use, tool_result). As in
 * llama-server, blocks of other types are ignored; a block's own fields are checked once it is
 * converted to the chat fields.
 */
const AnthropicBlock = Type.Object({
  type: Type.String(),
  text: Type.Optional(Type.Unknown()),
  thinking: Type.Optional(Type.String()),
  source: Type.Optional(AnthropicImageSource),
  id: Type.Optional(Type.String()),
  name: Type.Optional(Type.String()),
  input: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  tool_use_id: Type.Optional(Type.String()),
  content: Type.Optional(Type.Union([Type.String(), Type.Array(AnthropicResultBlock), Type.Null()])),
  is_error: Type.Optional(Type.Boolean()),
});
export type AnthropicBlock = Static<typeof AnthropicBlock>;

const AnthropicMessage = Type.Object({
  role: Type.String(),
  content: Type.Optional(Type.Union([Type.String(), Type.Array(AnthropicBlock)])),
});

const AnthropicTool = Type.Object({
  name: Type.String(),
  description: Type.Optional(Type.String()),
  input_schema: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});

/** POST /v1/messages and /v1/messages/count_tokens (Anthropic's Messages API, as llama-server takes it). */
export const AnthropicMessagesBody = Type.Object({
  model: Type.Optional(Type.String()),
  messages: Type.Array(AnthropicMessage),
  system: Type.Optional(Type.Union([Type.String(), Type.Array(Type.Object({ type: Type.String(), text: Type.Optional(Type.String()) })), Type.Null()])),
  tools: Type.Optional(Type.Array(AnthropicTool)),
  tool_choice: Type.Optional(Type.Object({ type: Type.String(), name: Type.Optional(Type.String()) })),
  max_tokens: Type.Optional(Int),
  stop_sequences: Type.Optional(Type.Array(Type.String())),
  temperature: Type.Optional(Type.Number()),
  top_p: Type.Optional(Type.Number()),
  top_k: Type.Optional(Int),
  stream: Type.Optional(Type.Boolean()),
  chat_template_kwargs: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  thinking: Type.Optional(Type.Object({ type: Type.String(), budget_tokens: Type.Optional(Int) })),
  metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
});
export type AnthropicMessagesBody = Static<typeof AnthropicMessagesBody>;
