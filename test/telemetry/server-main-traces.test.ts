// The inference-server command traced: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES reach the
// resource, and the spans still in the batch when the server is told to stop are exported before
// it exits (the batch delay here is longer than the test).
import { spawn } from 'node:child_process';
import t from 'tap';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson } from '../helpers/inference-server.js';
import { OtlpReceiver } from './otlp-receiver.js';

const receiver = await OtlpReceiver.start();
t.teardown(() => receiver.close());
const models = await ensureTestModels();

const child = spawn(process.execPath, ['--import', './scripts/ts-loader.mjs', 'src/inference/server-main.ts', '-m', models.chat, '-c', '512', '-np', '1', '-t', '1', '--host', '127.0.0.1', '--port', '0'], {
  env: {
    ...process.env,
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${receiver.url}/v1/traces`,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '600000',
    OTEL_SERVICE_NAME: 'chat-east',
    OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment.name=test',
  },
});
let stderr = '';
child.stderr.on('data', (chunk) => { stderr += chunk; });
const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
const base = await new Promise<string>((resolve, reject) => {
  const timer = setTimeout(() => reject(new Error(`inference-server did not start: ${stderr}`)), 60_000);
  child.stderr.on('data', () => {
    if (!/model ready/.test(stderr)) return;
    clearTimeout(timer);
    resolve(/listening on (http:\/\/[\d.]+:\d+)/.exec(stderr)![1]!);
  });
  child.on('exit', (code) => { clearTimeout(timer); reject(new Error(`inference-server exited with ${code}: ${stderr}`)); });
});

t.test('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT turns tracing on; the spans of the batch are exported at shutdown', async (t) => {
  const reply = await postJson(`${base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3 });
  t.equal(reply.status, 200);
  child.kill('SIGTERM');
  t.equal(await exited, 0);
  const span = receiver.spans.find((s) => s.attributes['gen_ai.response.id'] === reply.body.id);
  t.ok(span, 'the span was exported before the process ended');
  t.equal(span!.name, `chat ${reply.body.model}`);
  t.equal(span!.resource['service.name'], 'chat-east', 'OTEL_SERVICE_NAME over the default');
  t.equal(span!.resource['deployment.environment.name'], 'test', 'OTEL_RESOURCE_ATTRIBUTES');
  t.equal(receiver.children(span!).length, 3);
});
