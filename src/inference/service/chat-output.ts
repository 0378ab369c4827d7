// The assistant message a chat task is writing: its generated text parsed by the template's
// format (llama.cpp's per-format parsers) into content, reasoning_content and tool_calls, and
// while streaming the differences since the last parse, as llama-server computes them. Nothing
// sent is ever withdrawn: a partial parse only grows into the final one. A reply that its format
// cannot parse at the end is a server error, as llama-server answers it.
import { randomBytes } from 'node:crypto';
import { native, type ChatMessageDiff, type ChatParsedMessage, type NativeChatParser, type ReasoningFormat } from '../../native/binding.js';
import { ErrorType, inferenceError } from '../errors.js';
import { recordToolCalls } from '../../telemetry/tracing.js';
import type { RenderedChat } from './chat-prompt.js';

export interface ChatToolCallOut {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** OpenAI's assistant message: content always (empty with tool calls), the rest when present. */
export interface ChatMessageOut {
  role: 'assistant';
  content: string;
  reasoning_content?: string;
  tool_calls?: ChatToolCallOut[];
}

const EMPTY: ChatParsedMessage = { content: '', reasoningContent: '', toolCalls: [] };

/** A tool call without an id of the model's own gets one, as llama-server does. */
function toolCallId(): string {
  return randomBytes(24).toString('base64url').replace(/[-_]/g, '').slice(0, 32);
}

export class ChatOutput {
  private readonly parser: NativeChatParser;
  private readonly format: string;
  private text = '';
  private previous: ChatParsedMessage = EMPTY;
  /** Ids given to calls the model wrote without one, by index (kept for the whole stream). */
  private readonly ids: string[] = [];

  /** `choice`: the index of the choice it writes (the request's trace records which ended with tool calls). */
  constructor(chat: RenderedChat, private readonly choice = 0) {
    this.format = chat.params.format;
    this.parser = new native.ChatParser({
      format: chat.params.format,
      parser: chat.params.parser,
      generationPrompt: chat.params.generationPrompt,
      reasoningFormat: chat.reasoningFormat as ReasoningFormat,
      ...(chat.continuation !== 'none' ? { isContinuation: true } : {}),
    });
  }

  /** The finished message; a reply its format cannot parse is a 500, as llama-server answers it. */
  message(content: string): ChatMessageOut {
    const parsed = this.finalParse(content);
    return {
      role: 'assistant',
      content: parsed.content,
      ...(parsed.reasoningContent ? { reasoning_content: parsed.reasoningContent } : {}),
      ...(parsed.toolCalls.length > 0 ? { tool_calls: parsed.toolCalls.map((c, i) => this.toolCall(c, i)) } : {}),
    };
  }

  /** The deltas that `text` (more generated text) adds, as OpenAI chunk deltas. */
  push(text: string): Array<Record<string, unknown>> {
    this.text += text;
    const current = this.parse(this.text, true);
    if (!current) return [];
    const diffs = native.ChatParser.diff(this.previous, current);
    this.previous = current;
    return diffs.map((d) => this.delta(d));
  }

  /** What the final parse adds to the streamed ones; a reply its format cannot parse is a 500 (a last error event). */
  finish(): Array<Record<string, unknown>> {
    const current = this.finalParse(this.text);
    const diffs = native.ChatParser.diff(this.previous, current);
    this.previous = current;
    return diffs.map((d) => this.delta(d));
  }

  private finalParse(text: string): ChatParsedMessage {
    const parsed = this.parse(text, false);
    if (!parsed) throw inferenceError(ErrorType.SERVER, `The model produced output that does not match the expected ${this.format} format`);
    if (parsed.toolCalls.length > 0) recordToolCalls(this.choice);
    return parsed;
  }

  get hasToolCalls(): boolean {
    return this.previous.toolCalls.length > 0;
  }

  private parse(text: string, partial: boolean): ChatParsedMessage | null {
    try {
      return this.parser.parse(text, partial);
    } catch {
      // A partial text may not parse yet (nothing is streamed for it); a final one is refused.
      return null;
    }
  }

  private toolCall(call: ChatParsedMessage['toolCalls'][number], index: number): ChatToolCallOut {
    const id = call.id || (this.ids[index] ??= toolCallId());
    return { id, type: 'function', function: { name: call.name, arguments: call.arguments } };
  }

  private delta(d: ChatMessageDiff): Record<string, unknown> {
    const delta: Record<string, unknown> = {};
    if (d.reasoningContentDelta) delta.reasoning_content = d.reasoningContentDelta;
    if (d.contentDelta) delta.content = d.contentDelta;
    if (d.toolCallIndex !== null && d.toolCallDelta) {
      const call: Record<string, unknown> = { index: d.toolCallIndex };
      const id = d.toolCallDelta.id || (d.toolCallDelta.name ? (this.ids[d.toolCallIndex] ??= toolCallId()) : '');
      if (id) Object.assign(call, { id, type: 'function' });
      const fn: Record<string, string> = {};
      if (d.toolCallDelta.name) fn.name = d.toolCallDelta.name;
      if (d.toolCallDelta.arguments) fn.arguments = d.toolCallDelta.arguments;
      if (Object.keys(fn).length > 0) call.function = fn;
      delta.tool_calls = [call];
    }
    return delta;
  }
}
