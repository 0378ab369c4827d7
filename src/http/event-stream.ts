// A server-sent-events response with backpressure. Each `send` writes one whole event
// (`data: ...\n\n`) in one corked write, so bytes of two events never interleave. When the
// socket's buffer is full, `send` resolves only after uWS reports the socket writable again:
// a slow reader therefore slows its producer instead of growing server memory.

export interface EventStream {
  /** Writes `data: <data>\n\n`. Resolves when the client can take more. Never rejects. */
  send(data: string): Promise<void>;
  /** Writes a raw, already framed chunk (e.g. `data: [DONE]\n\n`). */
  sendRaw(chunk: string): Promise<void>;
  /** True once the client went away or the stream ended; further sends are dropped. */
  readonly closed: boolean;
  /** Ends the response. Idempotent. */
  end(): void;
}

/** The three operations an EventStream needs from the transport (implemented by the uWS adapter). */
export interface EventSink {
  /** Writes a chunk; returns false when it was buffered because of backpressure. */
  write(chunk: string): boolean;
  /** Calls `ready` once the buffered bytes have drained. */
  whenWritable(ready: () => void): void;
  end(): void;
  isOpen(): boolean;
}

export function createEventStream(sink: EventSink): EventStream {
  let ended = false;
  let drained: Promise<void> = Promise.resolve();

  const sendRaw = async (chunk: string): Promise<void> => {
    await drained;
    if (ended || !sink.isOpen()) return;
    if (!sink.write(chunk)) {
      drained = new Promise<void>((resolve) => sink.whenWritable(resolve));
      await drained;
    }
  };

  return {
    send: (data) => sendRaw(`data: ${data}\n\n`),
    sendRaw,
    get closed() {
      return ended || !sink.isOpen();
    },
    end() {
      if (ended) return;
      ended = true;
      if (sink.isOpen()) sink.end();
    },
  };
}
