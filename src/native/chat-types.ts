// The chat layer's types (native/chat-template.h, chat-parser.h): a chat to a prompt with its
// grammar and parser, and a reply parsed back into content, reasoning and tool calls.
import type { Token } from './token.js';

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
