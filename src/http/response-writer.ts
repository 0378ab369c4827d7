// One response on a uWS socket: every write to it goes through here. It owns the response's
// state (ended or not, client gone or not, event stream or not), so that nothing is written
// after the end or after the client left, and errors are mapped and logged in one place.
import { STATUS_CODES } from 'node:http';
import { HttpError, HttpLayerCode, toHttpError, type ErrorFormatter } from './errors.js';
import { completingPieces } from './complete-chunks.js';
import { createEventStream, type EventStream } from './event-stream.js';
import type { HttpResult } from './request.js';
import type { RequestTrace } from './request-trace.js';

/** The part of a uWS HttpResponse that writing a response needs. */
export interface ResponseSink {
  onAborted(handler: () => void): unknown;
  onWritable(handler: (offset: number) => boolean): unknown;
  cork(cb: () => void): unknown;
  /** The peer's address as text; only while the response is open. */
  getRemoteAddressAsText(): ArrayBuffer;
  writeStatus(status: string): unknown;
  writeHeader(key: string, value: string): unknown;
  write(chunk: string | Uint8Array): boolean;
  end(body?: string | Uint8Array, closeConnection?: boolean): unknown;
  endWithoutBody(reportedContentLength?: number, closeConnection?: boolean): unknown;
  /** Closes the connection at once (no response end). */
  close(): unknown;
}

export interface ResponseSettings {
  formatError: ErrorFormatter;
  /** Receives internal errors (500s) with their causes; never shown to clients. */
  logError?: (error: HttpError, req: { method: string; path: string }) => void;
  /** Event streams send a ping after this many milliseconds of silence (--sse-ping-interval); 0 never. */
  ssePingIntervalMs?: number;
  /**
   * llama-server's write timeout (-to): a response whose client takes no bytes for this many
   * milliseconds while the socket's buffer is full has its connection closed; 0 never.
   */
  writeTimeoutMs?: number;
}

export interface EventStreamInit {
  status?: number;
  headers?: Record<string, string>;
  /** False: no SSE pings (the stream carries another format, e.g. a proxied body). */
  ping?: boolean;
}

/** A result's body bytes and their Content-Type (null: no body, no Content-Type). */
function encodeBody(result: HttpResult): { payload: string | Buffer; contentType: string | null } {
  if (result.bytes !== undefined) return { payload: result.bytes, contentType: result.contentType ?? 'application/octet-stream' };
  if (result.text !== undefined) return { payload: result.text, contentType: result.text === '' ? null : result.contentType ?? 'text/plain; charset=utf-8' };
  if (result.body === undefined) return { payload: '', contentType: null };
  return { payload: JSON.stringify(result.body), contentType: 'application/json; charset=utf-8' };
}

function statusLine(status: number): string {
  return `${status} ${STATUS_CODES[status] ?? 'Unknown'}`;
}

export class ResponseWriter {
  /** The response has ended or the client is gone: no more writes. */
  private finished = false;
  private clientGone = false;
  /** Made only when a handler asks for the signal (most never do). */
  private abort: AbortController | null = null;
  private stream: EventStream | null = null;
  /** An event stream's status line and headers, until its first write sends them. */
  private streamHead: (() => void) | null = null;
  /** Headers set by setHeader, for whatever answer goes out (made by the first). */
  private extraHeaders: Map<string, string> | null = null;
  /** The peer's address, read from the socket the first time it is asked for. */
  private address: string | null = null;

  /**
   * Must be constructed synchronously inside the uWS request callback: onAborted has to be
   * registered before any asynchronous step, or uWS terminates the process.
   */
  constructor(
    private readonly res: ResponseSink,
    private readonly request: { method: string; path: string },
    private readonly settings: ResponseSettings,
    /** Headers of every response on this request (e.g. CORS). */
    private readonly headers: ReadonlyArray<readonly [string, string]> = [],
    /** The request's trace when tracing is on: told the status, the error code and the end. */
    private readonly trace: RequestTrace | null = null,
  ) {
    res.onAborted(() => {
      this.finished = true;
      this.clientGone = true;
      this.abort?.abort();
      this.trace?.end('client-gone');
    });
  }

  /** Sets a header of the answer to come (a later value of the same name replaces it). */
  setHeader(name: string, value: string): void {
    (this.extraHeaders ??= new Map()).set(name, value);
  }

  /**
   * The client's address. Read from the socket when first asked (most requests never ask), so it
   * must be asked while the request is answered: '' once the response ended or the client left
   * without it having been read.
   */
  get remoteAddress(): string {
    if (this.address === null) {
      if (this.finished) return '';
      this.address = Buffer.from(this.res.getRemoteAddressAsText()).toString();
    }
    return this.address;
  }

  /** True until the response ended or the client went away. */
  get isOpen(): boolean {
    return !this.finished;
  }

  /** True once an event stream sent its status line. */
  get streamStarted(): boolean {
    return this.stream?.started ?? false;
  }

  /** Aborted when the client disconnects. */
  get signal(): AbortSignal {
    if (!this.abort) {
      this.abort = new AbortController();
      if (this.clientGone) this.abort.abort();
    }
    return this.abort.signal;
  }

  /** Writes a whole response. HEAD gets the headers and Content-Length of the GET answer, no body. */
  writeResult(result: HttpResult, closeConnection = false): void {
    if (this.finished) return;
    this.finished = true;
    const status = result.status ?? 200;
    const { payload, contentType } = encodeBody(result);
    const isHead = this.request.method === 'HEAD';
    this.trace?.respond(status, result.body);
    this.res.cork(() => {
      this.writeHead(status, result.headers);
      if (contentType !== null) this.res.writeHeader('Content-Type', contentType);
      if (isHead) this.res.endWithoutBody(Buffer.byteLength(payload), closeConnection);
      else this.res.end(payload, closeConnection);
    });
    this.trace?.end('ended');
  }

  /** Answers anything thrown, through the product's formatter; 500s are logged with their cause. */
  writeError(thrown: unknown): void {
    const error = this.logged(thrown);
    const { status, body } = this.settings.formatError(error);
    const headers: Record<string, string> = error.code === HttpLayerCode.METHOD_NOT_ALLOWED && error.details.allow
      ? { Allow: String(error.details.allow) } : {};
    // A 413 closes the connection: the body reader has read the refused body to its end (or to its
    // bound) first, so the close finds no unread bytes to answer with a reset (body-reader.ts).
    this.writeResult({ status, body, headers }, error.status === 413);
  }

  /**
   * Switches the response to `text/event-stream`. The status line and headers go out with the
   * first event, so a handler that fails before it still gets a plain error response.
   */
  openEventStream(init: EventStreamInit = {}): EventStream {
    if (this.stream) return this.stream;
    if (this.finished) throw new HttpError(499, 'CLIENT_CLOSED', 'Client closed the connection');
    // Called only inside res.cork.
    this.streamHead = () => {
      this.trace?.respond(init.status ?? 200);
      this.writeHead(init.status ?? 200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache', ...init.headers });
    };
    this.stream = createEventStream({
      // The pieces of one write go out in one corked send; false when uWS buffered any of them.
      write: (chunk, wholeEvents) => {
        let ok = true;
        this.res.cork(() => {
          this.sendStreamHead();
          for (const piece of completingPieces(chunk, wholeEvents)) ok = this.res.write(piece) && ok;
        });
        return ok;
      },
      whenWritable: (ready) => this.whenWritable(ready),
      end: () => {
        this.finished = true;
        this.res.cork(() => {
          this.sendStreamHead();
          this.res.end();
        });
        this.trace?.end('ended');
      },
      isOpen: () => !this.finished,
      hasStarted: () => this.streamHead === null,
    }, { pingIntervalMs: init.ping === false ? 0 : this.settings.ssePingIntervalMs ?? 0 });
    return this.stream;
  }

  /** Calls `ready` once the socket drained or the client left; past the write timeout, closes the connection. */
  private whenWritable(ready: () => void): void {
    if (this.finished) return ready();
    const timeoutMs = this.settings.writeTimeoutMs ?? 0;
    const timer = timeoutMs > 0 ? setTimeout(() => this.closeConnection(), timeoutMs) : null;
    const onAbort = (): void => {
      if (timer) clearTimeout(timer);
      ready();
    };
    this.signal.addEventListener('abort', onAbort, { once: true });
    this.res.onWritable(() => {
      if (timer) clearTimeout(timer);
      this.signal.removeEventListener('abort', onAbort);
      ready();
      return true;
    });
  }

  /** Drops the connection, as a timed-out write does in llama-server; the handler sees its signal abort. */
  closeConnection(): void {
    if (this.finished) return;
    this.finished = true;
    this.clientGone = true;
    this.abort?.abort();
    this.res.close();
    this.trace?.end('timed-out');
  }

  /**
   * Ends the response with a handler's outcome: the end of its event stream, or its result (also
   * when it opened a stream that has sent nothing: e.g. an error answered in its own format).
   */
  finish(result: HttpResult | void): void {
    if (this.stream && (this.stream.started || result === undefined)) this.stream.end();
    else this.writeResult(result ?? { status: 204 });
  }

  /** Ends the response with a handler's failure: a plain error, or a last event once streaming began. */
  async fail(thrown: unknown): Promise<void> {
    const stream = this.stream;
    if (!stream || !stream.started) {
      this.writeError(thrown);
      return;
    }
    await stream.send(JSON.stringify(this.settings.formatError(this.logged(thrown)).body));
    stream.end();
  }

  private logged(thrown: unknown): HttpError {
    const error = toHttpError(thrown);
    if (error.status === 500) this.settings.logError?.(error, this.request);
    this.trace?.fail(error.code);
    return error;
  }

  private writeHead(status: number, headers: Record<string, string> = {}): void {
    this.res.writeStatus(statusLine(status));
    for (const [k, v] of this.headers) this.res.writeHeader(k, v);
    if (this.extraHeaders) for (const [k, v] of this.extraHeaders) this.res.writeHeader(k, v);
    for (const [k, v] of Object.entries(headers)) this.res.writeHeader(k, v);
  }

  private sendStreamHead(): void {
    const head = this.streamHead;
    this.streamHead = null;
    head?.();
  }
}
