// Anthropic's Messages API shapes, as llama-server writes them (server-task.cpp's
// to_json_anthropic / to_json_anthropic_stream): the message, its streamed events, its usage,
// its stop reasons and its errors.
import type { HttpError } from '../../http/errors.js';
import type { ServerSentEvent } from '../../http/event-stream.js';
import type { StopType } from '../../native/binding.js';
import type { CompletionOutcome } from '../engine/engine.js';
import type { ChatMessageOut } from '../service/chat-output.js';

export type AnthropicStopReason = 'end_turn' | 'max_tokens' | 'tool_use';

/** A reply that ended on its own (end of generation or a stop sequence) ended its turn, or stopped for its tool calls. */
export function anthropicStopReason(stop: StopType, toolCalls: boolean): AnthropicStopReason {
  if (stop === 'word' || stop === 'eos') return toolCalls ? 'tool_use' : 'end_turn';
  return 'max_tokens';
}

export interface AnthropicUsage {
  cache_read_input_tokens: number;
  input_tokens: number;
  output_tokens: number;
}

/** input_tokens counts the prompt tokens evaluated, cache_read_input_tokens those reused from the cache. */
export function anthropicUsage(o: Pick<CompletionOutcome, 'nPrompt' | 'nCached' | 'nPredicted'>): AnthropicUsage {
  return { cache_read_input_tokens: o.nCached, input_tokens: o.nPrompt - o.nCached, output_tokens: o.nPredicted };
}

/** The content blocks of a finished message: thinking, then text, then one tool_use per call. */
export function contentBlocks(message: ChatMessageOut): Array<Record<string, unknown>> {
  const blocks: Array<Record<string, unknown>> = [];
  if (message.reasoning_content) blocks.push({ type: 'thinking', thinking: message.reasoning_content, signature: '' });
  if (message.content) blocks.push({ type: 'text', text: message.content });
  for (const call of message.tool_calls ?? []) {
    blocks.push({ type: 'tool_use', id: call.id, name: call.function.name, input: toolInput(call.function.arguments) });
  }
  return blocks;
}

/** Arguments that are not a JSON object's text become an empty input, as in llama-server. */
function toolInput(args: string): unknown {
  try {
    return JSON.parse(args);
  } catch {
    return {};
  }
}

export interface MessageHeader {
  id: string;
  model: string;
}

/** The response to a non-streamed request. */
export function anthropicMessage(header: MessageHeader, message: ChatMessageOut, outcome: CompletionOutcome): Record<string, unknown> {
  return {
    id: header.id,
    type: 'message',
    role: 'assistant',
    content: contentBlocks(message),
    model: header.model,
    stop_reason: anthropicStopReason(outcome.stop, message.tool_calls !== undefined),
    stop_sequence: outcome.stoppingWord === '' ? null : outcome.stoppingWord,
    usage: anthropicUsage(outcome),
  };
}

/** One server-sent event; its name is its data's type. */
export function sseEvent(data: { type: string } & Record<string, unknown>): ServerSentEvent {
  return { event: data.type, data: JSON.stringify(data) };
}

/**
 * The events of one streamed message, from the OpenAI-shaped deltas of ChatOutput: message_start
 * with the first token; a content block per kind as it first appears (thinking, text, each tool
 * call), numbered in the order they start; their deltas; and at the end every block stopped in
 * order (a thinking block after an empty signature_delta), message_delta with the stop reason
 * and usage, and message_stop.
 */
export class AnthropicEventWriter {
  private started = false;
  private thinkingIndex: number | null = null;
  private textIndex: number | null = null;
  /** Block index of each tool call, by the call's index. */
  private readonly toolIndex = new Map<number, number>();
  private blocks = 0;

  constructor(private readonly header: MessageHeader) {}

  /** message_start, once: the prompt's length is known with the first token (cache reuse only at the end). */
  start(nPrompt: number): ServerSentEvent[] {
    if (this.started) return [];
    this.started = true;
    const message = {
      id: this.header.id, type: 'message', role: 'assistant', content: [], model: this.header.model,
      stop_reason: null, stop_sequence: null,
      usage: { cache_read_input_tokens: 0, input_tokens: nPrompt, output_tokens: 0 },
    };
    return [sseEvent({ type: 'message_start', message })];
  }

  /** The events of ChatOutput deltas. */
  deltas(deltas: ReadonlyArray<Record<string, unknown>>): ServerSentEvent[] {
    const events: ServerSentEvent[] = [];
    for (const delta of deltas) {
      if (typeof delta.reasoning_content === 'string') {
        if (this.thinkingIndex === null) {
          this.thinkingIndex = this.blocks++;
          events.push(sseEvent({ type: 'content_block_start', index: this.thinkingIndex, content_block: { type: 'thinking', thinking: '' } }));
        }
        events.push(sseEvent({ type: 'content_block_delta', index: this.thinkingIndex, delta: { type: 'thinking_delta', thinking: delta.reasoning_content } }));
      }
      if (typeof delta.content === 'string') {
        if (this.textIndex === null) {
          this.textIndex = this.blocks++;
          events.push(sseEvent({ type: 'content_block_start', index: this.textIndex, content_block: { type: 'text', text: '' } }));
        }
        events.push(sseEvent({ type: 'content_block_delta', index: this.textIndex, delta: { type: 'text_delta', text: delta.content } }));
      }
      for (const call of (delta.tool_calls as ToolCallDelta[] | undefined) ?? []) events.push(...this.toolEvents(call));
    }
    return events;
  }

  /** The closing events, once generation has ended. */
  finish(outcome: CompletionOutcome, toolCalls: boolean): ServerSentEvent[] {
    const events = this.start(outcome.nPrompt);
    const order = [this.thinkingIndex, this.textIndex, ...this.toolIndex.values()].filter((i): i is number => i !== null).sort((a, b) => a - b);
    for (const index of order) {
      if (index === this.thinkingIndex) events.push(sseEvent({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: '' } }));
      events.push(sseEvent({ type: 'content_block_stop', index }));
    }
    events.push(sseEvent({
      type: 'message_delta',
      delta: { stop_reason: anthropicStopReason(outcome.stop, toolCalls), stop_sequence: outcome.stoppingWord === '' ? null : outcome.stoppingWord },
      usage: { output_tokens: outcome.nPredicted },
    }));
    events.push(sseEvent({ type: 'message_stop' }));
    return events;
  }

  private toolEvents(call: ToolCallDelta): ServerSentEvent[] {
    const events: ServerSentEvent[] = [];
    let index = this.toolIndex.get(call.index);
    if (index === undefined && call.function?.name) {
      index = this.blocks++;
      this.toolIndex.set(call.index, index);
      events.push(sseEvent({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: call.id ?? '', name: call.function.name } }));
    }
    if (index !== undefined && call.function?.arguments) {
      events.push(sseEvent({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: call.function.arguments } }));
    }
    return events;
  }
}

interface ToolCallDelta {
  index: number;
  id?: string;
  function?: { name?: string; arguments?: string };
}

/** Anthropic's error types, by HTTP status. */
function errorType(status: number): string {
  switch (status) {
    case 400: return 'invalid_request_error';
    case 401: return 'authentication_error';
    case 403: return 'permission_error';
    case 404: return 'not_found_error';
    case 413: return 'request_too_large';
    case 429: return 'rate_limit_error';
    case 503: return 'overloaded_error';
    default: return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

/** Anthropic's error body: {"type": "error", "error": {"type", "message"}}. */
export function anthropicError(error: HttpError): { type: 'error'; error: { type: string; message: string } } {
  return { type: 'error', error: { type: errorType(error.status), message: error.message } };
}
