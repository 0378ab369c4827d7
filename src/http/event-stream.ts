// A server-sent-events response with backpressure: the one way every streaming route writes its
// events. Each `send` writes one whole event in one corked write, so bytes of two events never
// interleave. When the socket's buffer is full, `send` resolves only after uWS reports the socket
// writable again: a slow reader therefore slows its producer instead of growing server memory.
// With a ping interval, a stream that stays silent that long after an event gets the SSE comment
// `:\n\n`, and again after each further interval, as llama-server's --sse-ping-interval
// (clients such as undici time out a silent connection). As there, no ping comes before the
// first event: the status line and headers go out with it.

/** One event: its name (the `event:` field; none for a plain `data:` event) and its data line. */
export interface ServerSentEvent {
  event?: string;
  /** One line: JSON, or a marker such as `[DONE]`. */
  data: string;
}

/** An event's bytes: `event: <name>\n` when named, `data: <data>\n`, and the blank line that ends it. */
export function formatEvent(event: string | ServerSentEvent): string {
  if (typeof event === 'string') return `data: ${event}\n\n`;
  return `${event.event === undefined ? '' : `event: ${event.event}\n`}data: ${event.data}\n\n`;
}

export interface EventStream {
  /** Writes one event (a string is a plain `data:` event). Resolves when the client can take more. Never rejects. */
  send(event: string | ServerSentEvent): Promise<void>;
  /**
   * Writes bytes framed elsewhere: a relayed body piece by piece, or (`wholeEvents`) bytes that
   * end where an event ends (a replayed stream), which then go on the wire complete as events do.
   */
  sendRaw(chunk: string | Uint8Array, wholeEvents?: boolean): Promise<void>;
  /** True once the status line went out with a first write: from then on an error can only be an event. */
  readonly started: boolean;
  /** True once the client went away or the stream ended; further sends are dropped. */
  readonly closed: boolean;
  /** Ends the response. Idempotent. */
  end(): void;
}

/** What an EventStream needs from the transport (implemented by the uWS adapter). */
export interface EventSink {
  /**
   * Writes a chunk; returns false when it was buffered because of backpressure. `wholeEvents`
   * says the chunk is one or more whole events, which the transport puts on the wire complete now.
   */
  write(chunk: string | Uint8Array, wholeEvents: boolean): boolean;
  /** Calls `ready` once the buffered bytes have drained. */
  whenWritable(ready: () => void): void;
  end(): void;
  isOpen(): boolean;
  /** True once the status line went out. */
  hasStarted(): boolean;
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
      void write(SSE_PING, true);
    }, interval);
    pingTimer.unref();
  };

  const write = async (chunk: string | Uint8Array, wholeEvents: boolean): Promise<void> => {
    await drained;
    if (ended || !sink.isOpen()) {
      stopPings();
      return;
    }
    const flushed = sink.write(chunk, wholeEvents);
    armPing();
    if (!flushed) {
      drained = new Promise<void>((resolve) => sink.whenWritable(resolve));
      await drained;
    }
  };

  return {
    send: (event) => write(formatEvent(event), true),
    sendRaw: (chunk, wholeEvents = false) => write(chunk, wholeEvents),
    get started() {
      return sink.hasStarted();
    },
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
