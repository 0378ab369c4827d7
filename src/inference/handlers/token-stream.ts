// Token streaming over SSE with backpressure, one event per token as llama-server sends them
// (its clients count tokens and probabilities per chunk). Tokens wait here, in order, while the
// client's socket is full; a slow reader therefore costs the tokens generated meanwhile, never
// more, and the engine never waits for it.
import type { EventStream } from '../../http/event-stream.js';
import type { GeneratedToken } from '../engine/engine.js';

export class TokenStream {
  private pending: GeneratedToken[] = [];
  /** True while pump() runs; set and cleared synchronously around its loop. */
  private running = false;
  private done: Promise<void> = Promise.resolve();

  constructor(
    private readonly stream: EventStream,
    /** Renders the `data:` payloads of a token's events (a batch of one): one, several, or null for none. */
    private readonly render: (tokens: GeneratedToken[]) => string | readonly string[] | null,
  ) {}

  push(token: GeneratedToken): void {
    this.pending.push(token);
    if (!this.running) this.done = this.pump();
  }

  private async pump(): Promise<void> {
    this.running = true;
    try {
      while (this.pending.length > 0 && !this.stream.closed) {
        const data = this.render(this.pending.splice(0, 1));
        for (const event of data === null ? [] : typeof data === 'string' ? [data] : data) await this.stream.send(event);
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
