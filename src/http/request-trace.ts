// The HTTP layer's one tracing hook. With no tracer registered (the default) the adapter does
// nothing more per request than read a null. A tracer (src/telemetry, when an OTLP endpoint is
// configured) is told of every request the adapter answers, by its route's template, and follows
// its response: the status line, the error code answered, the end or the client's departure. No
// tracing library type crosses this boundary.

/** What a tracer learns of a request when it arrives, routed but not yet read. */
export interface TracedRequest {
  method: string;
  /** The matched route's template (`/admin/apps/:app_id`), null when no route matched. */
  route: string | null;
  /** Header values by lower-case name (`traceparent` among them). */
  headers: Readonly<Record<string, string>>;
}

/** One request's trace. Every method may be called in any order, more than once; `end` settles it. */
export interface RequestTrace {
  /** Runs the handler in the request's context: code it calls can find the request's trace. */
  run<T>(fn: () => T): T;
  /** The status line is going out; `body`: the JSON body of a whole response, if any. */
  respond(status: number, body?: unknown): void;
  /** The request failed with this error code (an HttpError answered, or sent as a stream's last event). */
  fail(code: string): void;
  /** The response ended, the client went away first, or the server cut it off (a -to timeout). */
  end(how: RequestEnd): void;
}

export type RequestEnd = 'ended' | 'client-gone' | 'timed-out';

export interface RequestTracer {
  begin(request: TracedRequest): RequestTrace;
}

let tracer: RequestTracer | null = null;

/** Registers the tracer of this thread's servers (null: none). Requests already begun keep theirs. */
export function setRequestTracer(next: RequestTracer | null): void {
  tracer = next;
}

/** The registered tracer, or null: the adapter's per-request check. */
export function requestTracer(): RequestTracer | null {
  return tracer;
}
