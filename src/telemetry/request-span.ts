// One request's SERVER span: begun by the HTTP adapter when the request is routed, ended with its
// response (or when the client leaves). Every request gets the HTTP server conventions' name
// `{method} {route}` and attributes; a request that reaches the engine becomes a GenAI span,
// renamed `{gen_ai.operation.name} {gen_ai.request.model}`, with the request's settings, its
// usage and finish reasons (`tool_calls` where the chat's answer says so), and child spans per
// task for its queue wait, prompt processing and generation (task-spans.ts; an embedding input
// has the first two).
import type { AsyncLocalStorage } from 'node:async_hooks';
import { defaultTextMapGetter, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type TextMapPropagator, type Tracer } from '@opentelemetry/api';
import { ATTR_ERROR_TYPE, ATTR_HTTP_REQUEST_METHOD, ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_HTTP_ROUTE } from '@opentelemetry/semantic-conventions';
import {
  ATTR_GEN_AI_OPERATION_NAME, ATTR_GEN_AI_PROVIDER_NAME, ATTR_GEN_AI_REQUEST_FREQUENCY_PENALTY,
  ATTR_GEN_AI_REQUEST_MAX_TOKENS, ATTR_GEN_AI_REQUEST_MODEL, ATTR_GEN_AI_REQUEST_PRESENCE_PENALTY, ATTR_GEN_AI_REQUEST_SEED,
  ATTR_GEN_AI_REQUEST_STOP_SEQUENCES, ATTR_GEN_AI_REQUEST_TEMPERATURE, ATTR_GEN_AI_REQUEST_TOP_K, ATTR_GEN_AI_REQUEST_TOP_P,
  ATTR_GEN_AI_RESPONSE_FINISH_REASONS, ATTR_GEN_AI_RESPONSE_ID, ATTR_GEN_AI_RESPONSE_MODEL, ATTR_GEN_AI_SYSTEM,
} from '@opentelemetry/semantic-conventions/incubating';
import type { RequestEnd, RequestTrace, TracedRequest } from '../http/request-trace.js';
import type { CompletionTaskSpec } from '../native/binding.js';
import { genAiOperation, type GenAiOperation } from './genai-operations.js';
import { CompletionSpans, EmbeddingSpans } from './task-spans.js';
import type { CompletionTrace, EmbeddingTrace, RequestSpanHooks } from './traces.js';

export interface SpanTools {
  tracer: Tracer;
  /** Holds the span of the request whose handler is running. */
  storage: AsyncLocalStorage<RequestSpan>;
  propagator: TextMapPropagator;
}

/** gen_ai.provider.name (and the deprecated gen_ai.system): the engine, not a vendor's API. */
export const PROVIDER = 'llama.cpp';
/** The tenant the request is served for (setRequestTenant). */
export const ATTR_TENANT = 'llama.tenant';
/** error.type of a request whose client left before its response ended. */
export const CLIENT_CLOSED = 'CLIENT_CLOSED';
/** error.type of a request whose connection the server cut off (-to/--timeout). */
export const TIMEOUT = 'timeout';

/**
 * The error code of a JSON error body answered as a result: the auth catalog's `error.code`,
 * OpenAI's (and Anthropic's) `error.type`, RFC 6749's `error`.
 */
function errorCodeOf(body: unknown): string | null {
  if (typeof body !== 'object' || body === null) return null;
  const error = (body as { error?: unknown }).error;
  if (typeof error === 'string') return error;
  if (typeof error !== 'object' || error === null) return null;
  const { code, type } = error as { code?: unknown; type?: unknown };
  if (typeof code === 'string') return code;
  return typeof type === 'string' ? type : null;
}

/** The settings a task runs with (the request's, else the server's defaults), as GenAI request attributes. */
function requestSettings(spec: CompletionTaskSpec): Attributes {
  const s = spec.sampling;
  const attributes: Attributes = {};
  if (spec.nPredict !== undefined && spec.nPredict >= 0) attributes[ATTR_GEN_AI_REQUEST_MAX_TOKENS] = spec.nPredict;
  if (s?.temperature !== undefined) attributes[ATTR_GEN_AI_REQUEST_TEMPERATURE] = s.temperature;
  if (s?.topP !== undefined) attributes[ATTR_GEN_AI_REQUEST_TOP_P] = s.topP;
  if (s?.topK !== undefined) attributes[ATTR_GEN_AI_REQUEST_TOP_K] = s.topK;
  if (s?.frequencyPenalty !== undefined) attributes[ATTR_GEN_AI_REQUEST_FREQUENCY_PENALTY] = s.frequencyPenalty;
  if (s?.presencePenalty !== undefined) attributes[ATTR_GEN_AI_REQUEST_PRESENCE_PENALTY] = s.presencePenalty;
  // -1 (the default) is a random seed: no seed was asked for.
  if (s?.seed !== undefined && s.seed >= 0) attributes[ATTR_GEN_AI_REQUEST_SEED] = s.seed;
  if (spec.stop && spec.stop.length > 0) attributes[ATTR_GEN_AI_REQUEST_STOP_SEQUENCES] = spec.stop;
  return attributes;
}

export class RequestSpan implements RequestTrace, RequestSpanHooks {
  readonly span: Span;
  /** The request's trace context: its span's children and forwarded requests descend from it. */
  readonly context: Context;
  /** The GenAI operation of the route, null for the other routes. */
  private readonly operation: GenAiOperation | null;
  private status = 0;
  private errorCode: string | null = null;
  private finishReasons: string[] = [];
  private readonly toolCallChoices = new Set<number>();
  private ended = false;
  /**
   * The request's clock: the wall clock when it began, advanced by the monotonic clock. Its span
   * and every child take their times from it (the SDK's own anchors each span on Date.now(),
   * to the millisecond, which would misplace children by up to a millisecond or more).
   */
  private readonly beganAt = Date.now();
  private readonly beganPerf = performance.now();

  constructor(private readonly tools: SpanTools, request: TracedRequest) {
    // A client's traceparent (W3C Trace Context) makes this span a child of the client's.
    const parent = tools.propagator.extract(ROOT_CONTEXT, request.headers, defaultTextMapGetter);
    const attributes: Attributes = { [ATTR_HTTP_REQUEST_METHOD]: request.method };
    if (request.route !== null) attributes[ATTR_HTTP_ROUTE] = request.route;
    this.operation = request.route === null ? null : genAiOperation(request.route);
    if (this.operation) attributes[ATTR_GEN_AI_OPERATION_NAME] = this.operation;
    const name = request.route === null ? request.method : `${request.method} ${request.route}`;
    this.span = tools.tracer.startSpan(name, { kind: SpanKind.SERVER, attributes, startTime: this.beganAt }, parent);
    this.context = trace.setSpan(parent, this.span);
  }

  /** Now on the request's clock, in milliseconds since the epoch. */
  now(): number {
    return this.beganAt + (performance.now() - this.beganPerf);
  }

  run<T>(fn: () => T): T {
    return this.tools.storage.run(this, fn);
  }

  respond(status: number, body?: unknown): void {
    this.status = status;
    this.span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
    if (status >= 400) this.errorCode ??= errorCodeOf(body);
  }

  fail(code: string): void {
    this.errorCode = code;
  }

  end(how: RequestEnd): void {
    if (this.ended) return;
    this.ended = true;
    const cutShort = how === 'client-gone' ? CLIENT_CLOSED : how === 'timed-out' ? TIMEOUT : null;
    const errorType = this.errorCode ?? cutShort ?? (this.status >= 400 ? String(this.status) : null);
    if (errorType !== null) this.span.setAttribute(ATTR_ERROR_TYPE, errorType);
    // As the HTTP server conventions: a 4xx leaves the status unset (the server did its job); a
    // 5xx, a response cut short, or an error sent as the last event of a stream is an error.
    if (this.status >= 500 || cutShort !== null || (this.errorCode !== null && this.status < 400)) {
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: errorType ?? undefined });
    }
    this.span.end(this.now());
  }

  setTenant(tenant: string): void {
    this.span.setAttribute(ATTR_TENANT, tenant);
  }

  setResponseId(id: string): void {
    this.span.setAttribute(ATTR_GEN_AI_RESPONSE_ID, id);
  }

  /**
   * Choice `index` of a chat ended with tool calls: its finish reason is `tool_calls`, as the
   * response says, whichever of this and the tasks' outcomes (setFinishReasons) comes first.
   */
  markToolCalls(index: number): void {
    this.toolCallChoices.add(index);
    this.writeFinishReasons();
  }

  /** The engine's finish reasons, one per task (`stop` or `length`). */
  private setFinishReasons(reasons: string[]): void {
    this.finishReasons = reasons;
    this.writeFinishReasons();
  }

  private writeFinishReasons(): void {
    if (this.finishReasons.length === 0) return;
    this.span.setAttribute(ATTR_GEN_AI_RESPONSE_FINISH_REASONS,
      this.finishReasons.map((reason, i) => (reason === 'stop' && this.toolCallChoices.has(i) ? 'tool_calls' : reason)));
  }

  completions(model: string, specs: readonly CompletionTaskSpec[]): CompletionTrace | null {
    if (!this.span.isRecording()) return null;
    this.becomeGenAi(this.operation ?? 'text_completion', model);
    if (specs[0]) this.span.setAttributes(requestSettings(specs[0]));
    return new CompletionSpans(this.tools.tracer, this.span, this.context, () => this.now(), (reasons) => this.setFinishReasons(reasons));
  }

  embeddings(model: string): EmbeddingTrace | null {
    if (!this.span.isRecording()) return null;
    this.becomeGenAi(this.operation ?? 'embeddings', model);
    return new EmbeddingSpans(this.tools.tracer, this.span, this.context, () => this.now());
  }

  /** The GenAI conventions' name and common attributes: the request is served by `model` on llama.cpp. */
  private becomeGenAi(operation: GenAiOperation, model: string): void {
    this.span.updateName(`${operation} ${model}`);
    this.span.setAttributes({
      [ATTR_GEN_AI_OPERATION_NAME]: operation,
      [ATTR_GEN_AI_PROVIDER_NAME]: PROVIDER,
      [ATTR_GEN_AI_SYSTEM]: PROVIDER,
      // A llama-server serves its one model whatever a request's `model` field says.
      [ATTR_GEN_AI_REQUEST_MODEL]: model,
      [ATTR_GEN_AI_RESPONSE_MODEL]: model,
    });
  }
}
