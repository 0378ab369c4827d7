// What the tracing hooks (tracing.ts) call while tracing is on, as contracts: the SDK side
// (otel-tracing.ts, request-span.ts, task-spans.ts) implements them, and tracing.ts needs nothing
// else of it, so that the SDK is loaded only when tracing is on (and no module imports back).
import type { RequestTracer } from '../http/request-trace.js';
import type { CompletionTaskSpec } from '../native/binding.js';
import type { CompletionOutcome, EmbeddingOutcome } from '../inference/engine/engine.js';

/** One request's completion tasks, followed to their outcomes. */
export interface CompletionTrace {
  /** The tasks' outcome promises, once submitted: usage, finish reasons and the timing spans come from them. */
  follow(outcomes: ReadonlyArray<Promise<CompletionOutcome>>): void;
}

/** One request's embedding inputs, followed to their outcomes. */
export interface EmbeddingTrace {
  /** The inputs' outcome promises, once submitted: input tokens, dimensions and the timing spans come from them. */
  follow(outcomes: ReadonlyArray<Promise<EmbeddingOutcome>>): void;
}

/** The span of the request being handled, as the hooks use it (request-span.ts RequestSpan). */
export interface RequestSpanHooks {
  setTenant(tenant: string): void;
  setResponseId(id: string): void;
  markToolCalls(index: number): void;
  /** Null when the request's span is not recorded (sampled out). */
  completions(model: string, specs: readonly CompletionTaskSpec[]): CompletionTrace | null;
  embeddings(model: string): EmbeddingTrace | null;
}

/** What tracing.ts holds while tracing is on (otel-tracing.ts createTracing). */
export interface Tracing {
  readonly requestTracer: RequestTracer;
  /** The span of the request whose handler is running (its async context), or null. */
  current(): RequestSpanHooks | null;
  /** Writes the current request's trace context into outgoing headers. */
  inject(headers: Record<string, string>): void;
  flush(): Promise<void>;
  shutdown(): Promise<void>;
}
