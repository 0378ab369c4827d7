// The tenant on inference-server's request spans (docs/tenants.md, "Traces"): a key's tenant is the
// span's llama.tenant; where no key is required (the anonymous tenant) the span has none.
import t from 'tap';
import { flushTracing, startTracing, stopTracing } from '../../src/telemetry/tracing.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';
import { OtlpReceiver } from './otlp-receiver.js';

const receiver = await OtlpReceiver.start();
process.env['OTEL_EXPORTER_OTLP_ENDPOINT'] = receiver.url;
process.env['OTEL_EXPORTER_OTLP_PROTOCOL'] = 'http/json';
delete process.env['OTEL_SERVICE_NAME'];
t.equal(await startTracing('inference-server'), true);

const models = await ensureTestModels();
const keyed = await startTestServer(models.chat, { ctxSize: 512, parallel: 1, apiKeys: ['sk-a', 'sk-b'], tenants: { file: { keys: { 'key-2': { name: 'bravo' } } } } });
t.teardown(async () => {
  await keyed.close();
  await stopTracing();
  await receiver.close();
});

t.test('a key\'s request span carries its tenant', async (t) => {
  const reply = await postJson(`${keyed.base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 2 }, { authorization: 'Bearer sk-b' });
  t.equal(reply.status, 200);
  const span = await receiver.flushedUntil((s) => s.attributes['gen_ai.response.id'] === reply.body.id, flushTracing);
  t.equal(span.attributes['llama.tenant'], 'bravo');
  const models = await fetch(`${keyed.base}/v1/models`, { headers: { authorization: 'Bearer sk-a' } });
  t.equal(models.status, 200);
  const listed = await receiver.flushedUntil((s) => s.attributes['http.route'] === '/v1/models', flushTracing);
  t.equal(listed.attributes['llama.tenant'], 'key-1', 'read-only routes too');
});
