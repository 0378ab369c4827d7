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

t.test('/metrics over sleeps, as llama-server: counters keep counting, the throughput gauges cover the window since the last scrape', async (t) => {
  const metric = (text: string, name: string): number => Number(new RegExp(`^llamacpp:${name} (\\S+)$`, 'm').exec(text)![1]);
  const scrape = async (): Promise<string> => (await fetch(`${base}/metrics`)).text();
  await scrape(); // ends the window of the earlier tests
  t.equal((await postJson(`${base}/completion`, { prompt: 'Hello', n_predict: 8, temperature: 0 })).status, 200);
  const first = await scrape();
  t.ok(metric(first, 'predicted_tokens_seconds') > 0, 'the first scrape reports the generation since the previous one');
  const awake = await scrape();
  t.equal(metric(awake, 'predicted_tokens_seconds'), 0, 'the next scrape has an empty window');
  t.equal(metric(awake, 'requests_total'), metric(first, 'requests_total'), 'scrapes are not counted as requests');
  await props();
  if (!server.host.isSleeping) await asleep(); // on a loaded machine it may already have slept
  t.equal(await scrape(), awake, 'a scrape during sleep equals the last one before it');
  t.equal(server.host.isSleeping, true);
  t.equal((await postJson(`${base}/completion`, { prompt: 'Hello', n_predict: 8, temperature: 0 })).status, 200);
  const woken = await scrape();
  t.equal(metric(woken, 'tokens_predicted_total'), metric(awake, 'tokens_predicted_total') + 8, 'totals go on across the sleep');
  t.equal(metric(woken, 'requests_total'), metric(awake, 'requests_total') + 1);
  t.ok(metric(woken, 'predicted_tokens_seconds') > 0);
});
