// Token streaming over SSE with backpressure: tokens that arrive while the previous chunk is
// still waiting for the client are merged into the next chunk, so a slow reader costs at most
// the pending text, never an unbounded queue of chunks.
import type { EventStream } from '../../http/event-stream.js';
import type { GeneratedToken } from '../engine/engine.js';

export class TokenStream {
  private pending: GeneratedToken[] = [];
  /** True while pump() runs; set and cleared synchronously around its loop. */
  private running = false;
  private done: Promise<void> = Promise.resolve();

  constructor(
    private readonly stream: EventStream,
    /** Renders a chunk's `data:` payload, or null to send nothing for these tokens. */
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
        const tokens = this.pending;
        this.pending = [];
        const data = this.render(tokens);
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
