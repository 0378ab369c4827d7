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
    /** Renders the `data:` payload of a token's event (a batch of one), or null to send nothing for it. */
    private readonly render: (tokens: GeneratedToken[]) => string | null,
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
        if (data !== null) await this.stream.send(data);
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
