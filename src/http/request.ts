// What a handler sees of a request, and what it returns. No uWS type crosses this boundary.
import type { EventStream } from './event-stream.js';

export interface HttpRequest {
  readonly method: string;
  /** Path without the query string, as sent (not decoded). */
  readonly path: string;
  readonly query: URLSearchParams;
  /** Path parameters of the matched route, URI-decoded. */
  readonly params: Readonly<Record<string, string>>;
  /** Header values by lower-case name. */
  readonly headers: Readonly<Record<string, string>>;
  /** The whole body, already read and within the size cap. Empty for GET. */
  readonly body: Buffer;
  /** Aborted when the client disconnects; long work must stop and free its resources. */
  readonly signal: AbortSignal;
  /** The client's address: read it while answering (it is '' once the response ended or the client left). */
  readonly remoteAddress: string;
  /**
   * Switches the response to a `text/event-stream`, or returns the stream already opened. After
   * its first event the handler's return value is ignored; the stream is ended when the handler
   * settles. The status line and headers go out
   * with the first event: a handler that throws before it is answered with a plain error
   * response, one that throws later gets its error sent as a last event.
   */
  openEventStream(init?: { status?: number; headers?: Record<string, string>; ping?: boolean }): EventStream;
  /** True once the event stream's status line went out: an error can then only be a last event. */
  readonly streamStarted: boolean;
  /**
   * A header for the answer, whatever it turns out to be (a result, an event stream, an error),
   * e.g. rate-limit headers set by a guard. Ignored once the status line went out.
   */
  setResponseHeader(name: string, value: string): void;
}

export interface HttpResult {
  status?: number;
  headers?: Record<string, string>;
  /** Serialised as JSON unless `text` is given. */
  body?: unknown;
  /** A raw text body, sent with `contentType` (default text/plain). */
  text?: string;
  /** Raw bytes, sent with `contentType` (default application/octet-stream). */
  bytes?: Buffer;
  contentType?: string;
}
