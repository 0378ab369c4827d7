// A model and its children's types (native/model.h, lora.h, vision.h).
import type { Token } from './token.js';
import type { ChatInputs, ChatMessageText, ChatParams, ChatTemplateInfo, ChatTemplateOptions } from './chat-types.js';
import type { NativeServerParams } from './server-params-types.js';

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
