// Token streaming over SSE with backpressure, one event per token as llama-server sends them
// (its clients count tokens and probabilities per chunk). Tokens wait here, in order, while the
// client's socket is full; a slow reader therefore costs the tokens generated meanwhile, never
// more, and the engine never waits for it.
import type { EventStream, ServerSentEvent } from '../../http/event-stream.js';
import type { GeneratedToken } from '../engine/engine.js';

/** An event of a stream: a plain `data:` payload, or a named event (Anthropic's, Responses'). */
export type StreamEvent = string | ServerSentEvent;

/** One event or several, as a list. */
export function eventList(events: StreamEvent | readonly StreamEvent[] | null): readonly StreamEvent[] {
  if (events === null) return [];
  return typeof events === 'string' || !Array.isArray(events) ? [events as StreamEvent] : events;
}

export class TokenStream {
  private pending: GeneratedToken[] = [];
  /** True while pump() runs; set and cleared synchronously around its loop. */
  private running = false;
  private done: Promise<void> = Promise.resolve();

  constructor(
    private readonly stream: EventStream,
    /** Renders a token's events (a batch of one): one, several, or null for none. */
    private readonly render: (tokens: GeneratedToken[]) => StreamEvent | readonly StreamEvent[] | null,
  ) {}

  push(token: GeneratedToken): void {
    this.pending.push(token);
    if (!this.running) this.done = this.pump();
  }

  private async pump(): Promise<void> {
    this.running = true;
    try {
      while (this.pending.length > 0 && !this.stream.closed) {
        for (const event of eventList(this.render(this.pending.splice(0, 1)))) await this.stream.send(event);
      }
    } finally {
      this.pending = [];
      this.running = false;
    }
  }

  /** Resolves when every pushed token has been written (or the client is gone). */
  async flush(): Promise<void> {
    while (this.running) await this.done;
  }
}
