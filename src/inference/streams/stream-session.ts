// One generation's SSE bytes, kept so that a client that went away can read them again
// (llama-server's stream_session): the producer appends, readers read from any byte offset and
// wait for more until the session is finalized. Only the last `capBytes` are kept; the bytes
// dropped from the front are still counted, so offsets stay those of the whole stream.

/** Unix seconds, as llama-server reports started_at and completed_at. */
export const nowSeconds = (): number => Math.floor(Date.now() / 1000);

export class StreamSession {
  readonly startedAt = nowSeconds();
  /** 0 while the producer runs; unix seconds once finalized. */
  completedAt = 0;
  private readonly chunks: Buffer[] = [];
  private buffered = 0;
  private dropped = 0;
  private done = false;
  private readonly cancel = new AbortController();
  private waiters: Array<() => void> = [];

  constructor(readonly conversationId: string, private readonly capBytes: number) {}

  /** Aborted by a stop (DELETE /v1/stream) or by a newer session of the same conversation. */
  get signal(): AbortSignal {
    return this.cancel.signal;
  }

  get isDone(): boolean {
    return this.done;
  }

  /** Bytes that ever entered the session. */
  get totalBytes(): number {
    return this.dropped + this.buffered;
  }

  /** Bytes dropped from the front to stay within the cap. */
  get droppedBytes(): number {
    return this.dropped;
  }

  /** Appends a chunk; false once finalized (the chunk is dropped). */
  append(chunk: string | Uint8Array): boolean {
    if (this.done) return false;
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk);
    if (bytes.length === 0) return true;
    this.chunks.push(bytes);
    this.buffered += bytes.length;
    while (this.buffered > this.capBytes) {
      const first = this.chunks[0]!;
      const excess = this.buffered - this.capBytes;
      if (first.length <= excess) {
        this.chunks.shift();
        this.buffered -= first.length;
        this.dropped += first.length;
      } else {
        this.chunks[0] = first.subarray(excess);
        this.buffered -= excess;
        this.dropped += excess;
      }
    }
    this.wake();
    return true;
  }

  /** No more bytes will come; wakes the readers. Idempotent. */
  finalize(): void {
    if (this.done) return;
    this.done = true;
    this.completedAt = nowSeconds();
    this.wake();
  }

  /** Stops the producer (its signal aborts) and finalizes. */
  stop(): void {
    this.cancel.abort();
    this.finalize();
  }

  /** The bytes kept from `offset` on (empty when none yet); null when `offset` was dropped. */
  readFrom(offset: number): Buffer | null {
    if (offset < this.dropped) return null;
    let start = this.dropped;
    const parts: Buffer[] = [];
    for (const chunk of this.chunks) {
      const end = start + chunk.length;
      if (end > offset) parts.push(offset > start ? chunk.subarray(offset - start) : chunk);
      start = end;
    }
    return Buffer.concat(parts);
  }

  /** Resolves on the next append or finalize, or when `signal` aborts. */
  changed(signal: AbortSignal): Promise<void> {
    if (this.done || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const onAbort = (): void => resolve();
      signal.addEventListener('abort', onAbort, { once: true });
      this.waiters.push(() => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      });
    });
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const wake of waiters) wake();
  }
}
