// Router mode traced: the router's span (this process) and the span of the model's child process
// (which inherits the OTEL_* environment and exports on its own) are one trace, the child's span
// a child of the router's through the traceparent the proxy forwards in place of the client's.
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { native } from '../../src/native/binding.js';
import { startRouterServer } from '../../src/inference/multi-model/server.js';
import { flushTracing, startTracing, stopTracing } from '../../src/telemetry/tracing.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson } from '../helpers/inference-server.js';
import { REPO_ROOT } from '../helpers/reference.js';
import { OtlpReceiver } from './otlp-receiver.js';

const receiver = await OtlpReceiver.start();
process.env['OTEL_EXPORTER_OTLP_ENDPOINT'] = receiver.url;
process.env['OTEL_EXPORTER_OTLP_PROTOCOL'] = 'http/json';
// The child exports its batch 50 ms after its span ends rather than 5 s.
process.env['OTEL_BSP_SCHEDULE_DELAY'] = '50';
delete process.env['OTEL_SERVICE_NAME'];
await startTracing('inference-server');

const models = await ensureTestModels();
const dir = mkdtempSync(join(tmpdir(), 'router-traces-'));
mkdirSync(join(dir, 'models'));
copyFileSync(models.chat, join(dir, 'models', 'chat.gguf'));
const params = native.ServerParams.parse(['llama-server', '--models-dir', join(dir, 'models'), '-c', '512', '-np', '1', '-t', '1']);
const router = await startRouterServer({
  host: '127.0.0.1', port: 0, apiKeys: [], maxBodyBytes: 1 << 20, autoload: true, modelsMax: 0, spares: 0, buildInfo: 'b1-test',
  readSpecs: () => params.routerModels(),
  command: [process.execPath, '--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), join(REPO_ROOT, 'src', 'inference', 'server-main.ts')],
  childArgs: [], log: () => {},
});
t.teardown(async () => {
  await router.close();
  await stopTracing();
  await receiver.close();
  rmSync(dir, { recursive: true, force: true });
});

t.test("the model process's span is a child of the router's, in the client's trace", async (t) => {
  const traceId = '5bf92f3577b34da6a3ce929d0e0e4736';
  const reply = await postJson(`http://127.0.0.1:${router.port}/v1/chat/completions`, { model: 'chat', messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3 }, {
    traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
  });
  t.equal(reply.status, 200);
  const routerSpan = await receiver.flushedUntil((s) => s.traceId === traceId && s.name === 'POST /v1/chat/completions', flushTracing);
  t.equal(routerSpan.parentSpanId, '00f067aa0ba902b7', "the router continues the client's trace");
  t.equal(routerSpan.attributes['http.response.status_code'], 200);
  const childSpan = await receiver.waitFor((s) => s.traceId === traceId && s.name === `chat ${reply.body.model}`);
  t.equal(childSpan.parentSpanId, routerSpan.spanId, "the child's span descends from the router's");
  t.equal(childSpan.resource['service.name'], 'inference-server', 'the child inherits the environment');
  t.equal(childSpan.attributes['gen_ai.usage.output_tokens'], reply.body.usage.completion_tokens);
  t.equal(childSpan.attributes['gen_ai.response.id'], reply.body.id);
});
