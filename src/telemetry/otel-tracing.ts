// The OpenTelemetry SDK, set up from the environment: loaded by tracing.ts only when an OTLP
// endpoint is configured. One BasicTracerProvider per thread with a BatchSpanProcessor and an
// OTLP/HTTP exporter: http/protobuf (the specification's default) unless
// OTEL_EXPORTER_OTLP_TRACES_PROTOCOL or OTEL_EXPORTER_OTLP_PROTOCOL says http/json. The SDK reads
// the rest of the OTEL_* variables itself: endpoints, headers, timeout, compression
// (the exporter), OTEL_TRACES_SAMPLER and its argument, span limits (the provider),
// OTEL_BSP_* (the processor), OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES (the env detector).
import { AsyncLocalStorage } from 'node:async_hooks';
import { defaultTextMapSetter, diag, DiagConsoleLogger, DiagLogLevel } from '@opentelemetry/api';
import { diagLogLevelFromString, W3CTraceContextPropagator } from '@opentelemetry/core';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor, type SpanExporter } from '@opentelemetry/sdk-trace-base';
import { ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import { RequestSpan, type SpanTools } from './request-span.js';
import type { Tracing } from './traces.js';

/** The instrumentation scope of every span. */
const SCOPE = 'llama-auth-suite';

async function createExporter(): Promise<SpanExporter> {
  const protocol = process.env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'] || process.env['OTEL_EXPORTER_OTLP_PROTOCOL'] || 'http/protobuf';
  if (protocol === 'http/json') return new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter();
  if (protocol !== 'http/protobuf') diag.warn(`OTLP protocol "${protocol}" is not supported here; exporting traces over http/protobuf`);
  return new (await import('@opentelemetry/exporter-trace-otlp-proto')).OTLPTraceExporter();
}

export async function createTracing(serviceName: string): Promise<Tracing> {
  // The SDK reports export failures through diag, silent unless given a logger.
  diag.setLogger(new DiagConsoleLogger(), diagLogLevelFromString(process.env['OTEL_LOG_LEVEL']) ?? DiagLogLevel.WARN);
  const resource = defaultResource()
    .merge(resourceFromAttributes({ [ATTR_SERVICE_NAME]: serviceName }))
    .merge(detectResources({ detectors: [envDetector] }));
  const provider = new BasicTracerProvider({ resource, spanProcessors: [new BatchSpanProcessor(await createExporter())] });
  const storage = new AsyncLocalStorage<RequestSpan>();
  const propagator = new W3CTraceContextPropagator();
  const tools: SpanTools = { tracer: provider.getTracer(SCOPE), storage, propagator };
  return {
    requestTracer: { begin: (request) => new RequestSpan(tools, request) },
    current: () => storage.getStore() ?? null,
    inject: (headers) => {
      const span = storage.getStore();
      if (span) propagator.inject(span.context, headers, defaultTextMapSetter);
    },
    flush: () => provider.forceFlush(),
    shutdown: () => provider.shutdown(),
  };
}
