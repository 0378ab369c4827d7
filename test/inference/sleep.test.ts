// --sleep-idle-seconds: the model is unloaded after that long without a request using it, and
// loaded again by the next request that needs it; read-only endpoints never wake it.
import { once } from 'node:events';
import t from 'tap';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';

const models = await ensureTestModels();
const { server, base, close } = await startTestServer(models.chat, { sleepIdleSeconds: 0.2, parallel: 2, ctxSize: 1024, metrics: true });
t.teardown(close);
const asleep = () => once(server.host, 'asleep');
const props = async () => (await (await fetch(`${base}/props`)).json()) as { is_sleeping: boolean };

t.test('an idle server sleeps; read-only endpoints answer from before and do not wake it', async (t) => {
  const greedy = await postJson(`${base}/completion`, { prompt: 'Hello', n_predict: 6, temperature: 0 });
  const awakeModels = await (await fetch(`${base}/v1/models`)).json();
  const awakeProps = await props();
  t.equal(awakeProps.is_sleeping, false);
  await asleep();
  t.equal(server.host.isSleeping, true);
  t.equal((await fetch(`${base}/health`)).status, 200);
  t.same(await (await fetch(`${base}/v1/models`)).json(), awakeModels);
  const sleepingProps = await props();
  t.same(sleepingProps, { ...awakeProps, is_sleeping: true });
  const metrics = await (await fetch(`${base}/metrics`)).text();
  t.match(metrics, /llamacpp:tokens_predicted_total 6/);
  t.equal((await fetch(`${base}/slots`)).status, 200);
  t.equal(server.host.isSleeping, true, 'none of them woke the model');

  const woken = await postJson(`${base}/completion`, { prompt: 'Hello', n_predict: 6, temperature: 0 });
  t.equal(woken.status, 200);
  t.equal(woken.body.content, greedy.body.content, 'the reloaded model answers as before');
  t.equal((await props()).is_sleeping, false);
});

t.test('token counting and tokenizing wake it too; concurrent requests share one load', async (t) => {
  await asleep();
  let wakes = 0;
  const count = (): void => { wakes++; };
  server.host.on('awake', count);
  t.teardown(() => server.host.off('awake', count));
  const [a, b] = await Promise.all([
    postJson(`${base}/chat/completions/input_tokens`, { messages: [{ role: 'user', content: 'Hello world' }] }),
    postJson(`${base}/tokenize`, { content: 'Hello' }),
  ]);
  t.equal(a.status, 200);
  t.ok(a.body.input_tokens > 0);
  t.equal(b.status, 200);
  t.equal(wakes, 1, 'one load for both requests');
  t.equal((await props()).is_sleeping, false);
});
