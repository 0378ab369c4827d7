// Without an OTLP endpoint tracing is off and free: no OpenTelemetry module is ever loaded (a
// module hook registered first refuses them all, and the requests below still succeed), no
// tracer is registered with the HTTP layer, and nothing reaches a collector.
import { createRequire, register } from 'node:module';
import t from 'tap';

const REFUSE_OPENTELEMETRY = `
export async function resolve(specifier, context, next) {
  if (specifier.startsWith('@opentelemetry/')) throw new Error('tracing is off: refused to load ' + specifier);
  return next(specifier, context);
}`;
register(`data:text/javascript,${encodeURIComponent(REFUSE_OPENTELEMETRY)}`);

delete process.env['OTEL_EXPORTER_OTLP_ENDPOINT'];
delete process.env['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT'];

const { OtlpReceiver } = await import('./otlp-receiver.js');
const { requestTracer } = await import('../../src/http/request-trace.js');
const tracing = await import('../../src/telemetry/tracing.js');
const { ensureTestModels } = await import('../fixtures/models.js');
const { parseSse, postJson, startTestServer } = await import('../helpers/inference-server.js');

const receiver = await OtlpReceiver.start();
// An endpoint for another signal does not turn traces on.
process.env['OTEL_EXPORTER_OTLP_METRICS_ENDPOINT'] = receiver.url;
const models = await ensureTestModels();
const chat = await startTestServer(models.chat, { ctxSize: 1024 });
t.teardown(async () => {
  await chat.close();
  await receiver.close();
  delete process.env['OTEL_EXPORTER_OTLP_METRICS_ENDPOINT'];
});

t.test('the module hook refuses OpenTelemetry, so a request that loaded it would fail', async (t) => {
  await t.rejects(import('@opentelemetry/api'), /tracing is off: refused to load @opentelemetry\/api/);
});

t.test('startTracing without an endpoint loads nothing and registers no tracer', async (t) => {
  t.equal(await tracing.startTracing('inference-server'), false);
  t.equal(tracing.tracingEnabled(), false);
  t.equal(requestTracer(), null);
});

t.test('requests are served untraced: every hook is a no-op and nothing reaches the collector', async (t) => {
  const reply = await postJson(`${chat.base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4 }, { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' });
  t.equal(reply.status, 200);
  const streamed = await postJson(`${chat.base}/completion`, { prompt: 'Hi', n_predict: 4, stream: true });
  t.equal(parseSse(streamed.body).length > 1, true);
  const headers = { traceparent: 'kept as received' };
  tracing.injectTraceContext(headers);
  t.same(headers, { traceparent: 'kept as received' }, 'a proxied request forwards the headers it got');
  tracing.setRequestTenant('tenant');
  await tracing.flushTracing();
  await tracing.stopTracing();
  t.equal(receiver.requests.length, 0);
  const cached = Object.keys(createRequire(import.meta.url).cache).filter((path) => path.includes('@opentelemetry'));
  t.same(cached, [], 'no OpenTelemetry module in the CommonJS cache');
});
