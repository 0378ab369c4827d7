// The events of a streamed response, in llama-server's order: response.created and
// response.in_progress; per reasoning delta response.output_item.added (the first time) and
// response.reasoning_text.delta; per content delta response.output_item.added and
// response.content_part.added (the first time) and response.output_text.delta; per tool call
// response.output_item.added, then response.function_call_arguments.delta; at the end
// response.output_item.done for each item (with output_text.done and content_part.done for the
// message) and response.completed.
import type { ServerSentEvent } from '../../http/event-stream.js';
import type { CompletionOutcome } from '../engine/engine.js';
import type { ChatMessageOut } from '../service/chat-output.js';
import { functionCallItem, inProgress, outputItems, outputTextPart, responseUsage, type ResponseEvent, type ResponseIds } from './responses.js';
import { timings } from './timings.js';

export class ResponseEvents {
  private created = false;
  private reasoningStarted = false;
  private textStarted = false;
  /** The id of the tool call whose arguments are streaming. */
  private callId = '';

  constructor(
    private readonly ids: ResponseIds,
    private readonly model: string,
  ) {}

  /** response.created and response.in_progress, the first time: llama-server sends them with the first token's events. */
  opening(): ResponseEvent[] {
    if (this.created) return [];
    this.created = true;
    return [inProgress('response.created', this.ids.response), inProgress('response.in_progress', this.ids.response)];
  }

  /** The events of chat deltas (ChatOutput's OpenAI chunk deltas). */
  deltas(deltas: ReadonlyArray<Record<string, unknown>>): ResponseEvent[] {
    return [...this.opening(), ...deltas.flatMap((d) => this.delta(d))];
  }

  private delta(d: Record<string, unknown>): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    if (typeof d.reasoning_content === 'string') {
      if (!this.reasoningStarted) {
        events.push({ type: 'response.output_item.added', item: { id: this.ids.reasoning, summary: [], type: 'reasoning', content: [], encrypted_content: '', status: 'in_progress' } });
        this.reasoningStarted = true;
      }
      events.push({ type: 'response.reasoning_text.delta', delta: d.reasoning_content, item_id: this.ids.reasoning });
    }
    if (typeof d.content === 'string') {
      if (!this.textStarted) {
        events.push({ type: 'response.output_item.added', item: { content: [], id: this.ids.message, role: 'assistant', status: 'in_progress', type: 'message' } });
        events.push({ type: 'response.content_part.added', item_id: this.ids.message, part: { type: 'output_text', text: '' } });
        this.textStarted = true;
      }
      events.push({ type: 'response.output_text.delta', item_id: this.ids.message, delta: d.content });
    }
    const call = Array.isArray(d.tool_calls) ? (d.tool_calls[0] as { id?: string; function?: { name?: string; arguments?: string } }) : undefined;
    if (call?.function?.name) {
      this.callId = call.id ?? '';
      events.push({ type: 'response.output_item.added', item: functionCallItem(this.callId, call.function.name, '', 'in_progress') });
    }
    if (call?.function?.arguments) {
      events.push({ type: 'response.function_call_arguments.delta', delta: call.function.arguments, item_id: `fc_${this.callId}` });
    }
    return events;
  }

  /** The closing events of the finished message; `withTimings` puts the engine's timings on response.completed. */
  closing(message: ChatMessageOut, outcome: CompletionOutcome, withTimings: boolean): ResponseEvent[] {
    const events: ResponseEvent[] = [];
    const output = outputItems(message, this.ids, true);
    for (const item of output) {
      if (item.type === 'message') {
        const text = message.content;
        events.push({ type: 'response.output_text.done', item_id: this.ids.message, text });
        events.push({ type: 'response.content_part.done', item_id: this.ids.message, part: outputTextPart(text) });
      }
      events.push({ type: 'response.output_item.done', item });
    }
    const completed: ResponseEvent = {
      type: 'response.completed',
      response: {
        id: this.ids.response,
        object: 'response',
        created_at: Math.floor(Date.now() / 1000),
        status: 'completed',
        model: this.model,
        output,
        usage: responseUsage(outcome),
      },
    };
    if (withTimings) completed.timings = timings(outcome);
    events.push(completed);
    return events;
  }
}

/** An event as a named server-sent event: its type names it, its JSON is the data. */
export function eventPayload(event: ResponseEvent): ServerSentEvent {
  return { event: event.type, data: JSON.stringify(event) };
}
