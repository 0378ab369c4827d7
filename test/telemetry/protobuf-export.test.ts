// The default protocol is the specification's http/protobuf: without OTEL_EXPORTER_OTLP_PROTOCOL
// the spans reach the collector's /v1/traces as application/x-protobuf.
import t from 'tap';
import { startHttpServer } from '../../src/http/server.js';
import { flushTracing, startTracing, stopTracing } from '../../src/telemetry/tracing.js';
import { OtlpReceiver } from './otlp-receiver.js';

const receiver = await OtlpReceiver.start();
process.env['OTEL_EXPORTER_OTLP_ENDPOINT'] = receiver.url;
delete process.env['OTEL_EXPORTER_OTLP_PROTOCOL'];
delete process.env['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'];
await startTracing('inference-server');
const server = await startHttpServer({
  host: '127.0.0.1', port: 0, maxBodyBytes: 1024, formatError: (e) => ({ status: e.status, body: {} }),
  routes: [{ method: 'GET', path: '/ping', handler: () => ({ body: 'pong' }) }],
});
t.teardown(async () => {
  server.close();
  await stopTracing();
  await receiver.close();
});

t.test('spans are exported as protobuf by default', async (t) => {
  t.equal((await fetch(`http://127.0.0.1:${server.port}/ping`)).status, 200);
  await flushTracing();
  t.equal(receiver.requests.length, 1);
  t.equal(receiver.requests[0]!.contentType, 'application/x-protobuf');
  t.ok(receiver.requests[0]!.bytes > 0);
});
