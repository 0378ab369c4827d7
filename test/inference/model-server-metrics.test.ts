// GIE's model-server protocol on /metrics, scraped under load and parsed by a Prometheus text
// parser: waiting and running requests while the slots are full and a queue forms, the LoRA gauge
// while an adapter (chosen by the model field) waits and then runs, and the KV-cache utilisation
// against the slots' own numbers once a long context has filled the pool.
import t from 'tap';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';
import { gauge, parseMetrics, type Family } from '../helpers/prometheus.js';

const models = await ensureTestModels();
const N_CTX = 4096;
const server = await startTestServer(models.chat, { parallel: 2, ctxSize: N_CTX, loras: [{ path: models.lora, scale: 0 }] });
t.teardown(() => server.close());
const ADAPTER = 'tiny-chat-lora';

async function scrape(): Promise<Map<string, Family>> {
  return parseMetrics(await (await fetch(`${server.base}/metrics`)).text());
}

function loraLabels(families: Map<string, Family>): Record<string, string> {
  return families.get('llamacpp:lora_requests_info')!.metrics[0]!.labels!;
}

/** A streamed completion held open: resolves `started` at its first token; `stop()` disconnects it. */
function stream(path: string, body: Record<string, unknown>): { started: Promise<void>; stop(): void; done: Promise<void> } {
  const abort = new AbortController();
  let started!: () => void;
  const startedPromise = new Promise<void>((resolve) => (started = resolve));
  const done = (async () => {
    try {
      const res = await fetch(`${server.base}${path}`, { method: 'POST', body: JSON.stringify({ ...body, stream: true }), signal: abort.signal, headers: { 'content-type': 'application/json' } });
      for await (const chunk of res.body!) if (Buffer.from(chunk).includes('data:')) started();
    } catch {
      // Disconnected by stop().
    }
  })();
  return { started: startedPromise, stop: () => abort.abort(), done };
}

/** Scrapes until `ready` holds of a scrape (the state is reached by the engine's own thread); fails after 60 s. */
async function scrapeUntil(ready: (f: Map<string, Family>) => boolean): Promise<Map<string, Family>> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const families = await scrape();
    if (ready(families)) return families;
    if (Date.now() > deadline) throw new Error('the server never reached the state awaited');
  }
}

const long = (i: number): Record<string, unknown> => ({ prompt: `stream ${i} keeps a slot busy`, n_predict: 1800, ignore_eos: true });

t.test('idle: nothing waits or runs, the pool is empty, the adapter is loaded and unused', async (t) => {
  const f = await scrape();
  t.equal(gauge(f, 'llamacpp:requests_deferred'), 0);
  t.equal(gauge(f, 'llamacpp:requests_processing'), 0);
  t.equal(gauge(f, 'llamacpp:kv_cache_usage_ratio'), 0);
  t.same(loraLabels(f), { max_lora: '1', running_lora_adapters: '', waiting_lora_adapters: '' });
  t.same(f.get('llamacpp:cache_config_info')!.metrics[0]!.labels, { block_size: '16', num_gpu_blocks: String(N_CTX / 16) });
  t.ok(Math.abs(gauge(f, 'llamacpp:lora_requests_info') - Date.now() / 1000) < 60, 'the LoRA gauge\'s value is a timestamp');
});

t.test('slots full and a queue forming: running, waiting and the adapter waiting, then running', async (t) => {
  const busy = [stream('/completion', long(1)), stream('/completion', long(2))];
  await Promise.all(busy.map((s) => s.started));
  const adapter = stream('/v1/completions', { model: ADAPTER, prompt: 'the adapter waits for a slot', max_tokens: 1800, ignore_eos: true });
  const third = stream('/completion', long(3));
  t.teardown(() => { for (const s of [...busy, adapter, third]) s.stop(); });

  const queued = await scrapeUntil((f) => gauge(f, 'llamacpp:requests_deferred') === 2);
  t.equal(gauge(queued, 'llamacpp:requests_processing'), 2, 'both slots run');
  t.same(loraLabels(queued), { max_lora: '1', running_lora_adapters: '', waiting_lora_adapters: ADAPTER });
  const usage = gauge(queued, 'llamacpp:kv_cache_usage_ratio');
  t.ok(usage > 0 && usage <= 1, `the running slots hold cells (${usage})`);

  for (const s of busy) s.stop();
  await adapter.started;
  const running = await scrapeUntil((f) => loraLabels(f).running_lora_adapters !== '');
  t.same(loraLabels(running), { max_lora: '1', running_lora_adapters: ADAPTER, waiting_lora_adapters: '' });
  t.equal(gauge(running, 'llamacpp:requests_deferred'), 0, 'the queue is gone');
  adapter.stop();
  third.stop();
  await Promise.all([adapter.done, third.done]);
  const idle = await scrapeUntil((f) => gauge(f, 'llamacpp:requests_processing') === 0);
  t.same(loraLabels(idle), { max_lora: '1', running_lora_adapters: '', waiting_lora_adapters: '' });
});

t.test('a long context fills the pool: the utilisation is the slots\' tokens over n_ctx, at most 1', async (t) => {
  // Two prompts of 1900 token ids each, one per slot (a slot holds at most n_ctx / 2 = 2048).
  const tokens = (tag: number): number[] => Array.from({ length: 1900 }, (_, i) => 200 + ((i * 7 + tag) % 5000));
  const answers = await Promise.all([1, 2].map((tag) => postJson(`${server.base}/completion`, { prompt: tokens(tag), n_predict: 1 })));
  t.same(answers.map((a) => a.status), [200, 200]);
  const f = await scrape();
  const slots = (await (await fetch(`${server.base}/slots`)).json()) as Array<{ n_cached_tokens: number }>;
  const held = slots.reduce((n, s) => n + s.n_cached_tokens, 0);
  // (The other slot's cells may have gone to the host-memory cache: the pool holds one or both.)
  t.ok(held >= 1900, `the slots hold a long context (${held} of ${N_CTX} cells)`);
  t.equal(gauge(f, 'llamacpp:kv_cache_usage_ratio'), Math.min(1, held / N_CTX));
});
