// A server-sent-events response with backpressure. Each `send` writes one whole event
// (`data: ...\n\n`) in one corked write, so bytes of two events never interleave. When the
// socket's buffer is full, `send` resolves only after uWS reports the socket writable again:
// a slow reader therefore slows its producer instead of growing server memory.
// With a ping interval, a stream that stays silent that long after an event gets the SSE comment
// `:\n\n`, and again after each further interval, as llama-server's --sse-ping-interval
// (clients such as undici time out a silent connection). As there, no ping comes before the
// first event: the status line and headers go out with it.

export interface EventStream {
  /** Writes `data: <data>\n\n`. Resolves when the client can take more. Never rejects. */
  send(data: string): Promise<void>;
  /** Writes a raw, already framed chunk (e.g. `data: [DONE]\n\n`), or raw bytes. */
  sendRaw(chunk: string | Uint8Array): Promise<void>;
  /** True once the client went away or the stream ended; further sends are dropped. */
  readonly closed: boolean;
  /** Ends the response. Idempotent. */
  end(): void;
}

/** The three operations an EventStream needs from the transport (implemented by the uWS adapter). */
export interface EventSink {
  /** Writes a chunk; returns false when it was buffered because of backpressure. */
  write(chunk: string | Uint8Array): boolean;
  /** Calls `ready` once the buffered bytes have drained. */
  whenWritable(ready: () => void): void;
  end(): void;
  isOpen(): boolean;
}

/** llama-server's ping: an SSE comment line, ignored by clients. */
export const SSE_PING = ':\n\n';

export interface EventStreamOptions {
  /** Milliseconds of silence after an event before a ping; 0 or less never pings. */
  pingIntervalMs?: number;
}

export function createEventStream(sink: EventSink, options: EventStreamOptions = {}): EventStream {
  let ended = false;
  let drained: Promise<void> = Promise.resolve();
  const interval = options.pingIntervalMs ?? 0;
  let pingTimer: NodeJS.Timeout | null = null;

  const stopPings = (): void => {
    if (pingTimer) clearTimeout(pingTimer);
    pingTimer = null;
  };
  // Re-armed by every write, so a ping comes only after `interval` of silence.
  const armPing = (): void => {
    stopPings();
    if (interval <= 0 || ended) return;
    pingTimer = setTimeout(() => {
      pingTimer = null;
      void sendRaw(SSE_PING);
    }, interval);
    pingTimer.unref();
  };

  const sendRaw = async (chunk: string | Uint8Array): Promise<void> => {
    await drained;
    if (ended || !sink.isOpen()) {
      stopPings();
      return;
    }
    const flushed = sink.write(chunk);
    armPing();
    if (!flushed) {
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
      stopPings();
      if (sink.isOpen()) sink.end();
    },
  };
}
