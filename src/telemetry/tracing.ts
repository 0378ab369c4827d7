// Traces over OpenTelemetry, on only when an OTLP endpoint is configured
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT). This module is all that
// the servers import: it holds no OpenTelemetry import of its own, and loads the SDK
// (otel-tracing.ts, by a dynamic import) only from startTracing with an endpoint set. Off, every
// hook below is one null check.
//
// The hooks act on the request whose handler is running: the HTTP adapter runs each handler in
// its request's context (src/http/request-trace.ts), so the service code that calls them needs no
// request or span in hand. State is per thread: an auth-server worker starts its own tracing.
import type { CompletionTaskSpec } from '../native/binding.js';
import { setRequestTracer } from '../http/request-trace.js';
import type { CompletionTrace, EmbeddingTrace, Tracing } from './traces.js';

export type { CompletionTrace, EmbeddingTrace };

let active: Tracing | null = null;
let starting: Promise<boolean> | null = null;

/** True when the environment names an OTLP endpoint for traces. */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'] || env['OTEL_EXPORTER_OTLP_ENDPOINT']);
}

/**
 * Turns tracing on for this thread's HTTP servers when an OTLP endpoint is configured (the SDK
 * reads the rest of the OTEL_* variables itself); resolves to whether it is on. Without an
 * endpoint it loads nothing. `serviceName` is the default of OTEL_SERVICE_NAME. Idempotent.
 */
export function startTracing(serviceName: string): Promise<boolean> {
  if (!tracingConfigured()) return Promise.resolve(false);
  starting ??= import('./otel-tracing.js').then(async ({ createTracing }) => {
    active = await createTracing(serviceName);
    setRequestTracer(active.requestTracer);
    return true;
  });
  return starting;
}

/** True once startTracing has turned tracing on in this thread. */
export function tracingEnabled(): boolean {
  return active !== null;
}

/** Exports every ended span now (tests; before a planned exit). */
export async function flushTracing(): Promise<void> {
  await active?.flush();
}

/** Exports what is left and stops tracing in this thread (server shutdown). Never rejects. */
export async function stopTracing(): Promise<void> {
  const tracing = active;
  active = null;
  starting = null;
  setRequestTracer(null);
  await tracing?.shutdown().catch(() => {});
}

/**
 * Sets `llama.tenant` on the span of the request being handled: call it from the request's guard
 * or handler once its tenant is known. Does nothing when tracing is off or outside a request.
 */
export function setRequestTenant(tenant: string): void {
  active?.current()?.setTenant(tenant);
}

/** Choice `index` of the chat being answered ended with tool calls (its finish reason is `tool_calls`). */
export function recordToolCalls(index: number): void {
  active?.current()?.markToolCalls(index);
}

/** The id the response of the request being handled carries (`gen_ai.response.id`). */
export function recordResponseId(id: string): void {
  active?.current()?.setResponseId(id);
}

/**
 * The request being handled submits completion tasks to `model`: names its span after the
 * GenAI operation and the model, records the request's settings, and returns what follows the
 * tasks; null when tracing is off.
 */
export function traceCompletions(model: string, specs: readonly CompletionTaskSpec[]): CompletionTrace | null {
  return active?.current()?.completions(model, specs) ?? null;
}

/** As traceCompletions, for embedding (and reranking) inputs. */
export function traceEmbeddings(model: string): EmbeddingTrace | null {
  return active?.current()?.embeddings(model) ?? null;
}

/** Puts the current request's trace context in outgoing headers (`traceparent`, `tracestate`). */
export function injectTraceContext(headers: Record<string, string>): void {
  active?.inject(headers);
}
