// --cache-reuse N / n_cache_reuse: past the common prefix, chunks of at least N cached tokens that
// reappear in the new prompt are shifted into place instead of recomputed, as llama-server does.
// (Both run with --cache-ram 0 here: the host-memory prompt cache would restore whole prompts.)
import t from 'tap';
import { native } from '../../src/native/binding.js';
import { serverOptions } from '../../src/inference/server-config.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';
import { startLlamaServer } from '../helpers/llama-server.js';

const models = await ensureTestModels();
const flags = serverOptions(native.ServerParams.parse(['llama-server', '-m', models.chat, '--cache-reuse', '8', '--cache-ram', '0']).values(), {}, false);
const ours = await startTestServer(models.chat, { parallel: 1, ctxSize: 1024, generation: flags.generation!, engine: { promptCacheMib: flags.engine!.promptCacheMib! } });
t.teardown(ours.close);
const reference = await startLlamaServer(['-m', models.chat, '-c', '1024', '-np', '1', '--cache-reuse', '8', '--cache-ram', '0']);
t.teardown(reference.close);

const tokens = async (text: string): Promise<number[]> => (await postJson(`${ours.base}/tokenize`, { content: text })).body.tokens;
const head = await tokens('The first part of a long document that both prompts share at the start.');
const middle = await tokens(' An inserted paragraph that the second prompt leaves out entirely, twelve or so tokens.');
const tail = await tokens(' And the final part of the document, which both prompts share, follows after it for a while longer.');
const first = [...head, ...middle, ...tail];
const second = [...head, ...tail];

/** Runs `first` then `second` on one slot; returns what `second` reports. */
async function secondAfterFirst(base: string, extra: Record<string, unknown>) {
  const run = (prompt: number[]) => postJson(`${base}/completion`, { prompt, n_predict: 8, temperature: 0, id_slot: 0, ...extra });
  t.equal((await run(first)).status, 200);
  const res = await run(second);
  t.equal(res.status, 200);
  return { content: res.body.content as string, cacheN: res.body.timings.cache_n as number, promptN: res.body.timings.prompt_n as number };
}

t.test('--cache-reuse 8: the shared tail is shifted into place, as on llama-server', async (t) => {
  t.equal(flags.generation!.nCacheReuse, 8, 'the flag sets the default');
  const mine = await secondAfterFirst(ours.base, {});
  const theirs = await secondAfterFirst(reference.base, {});
  t.equal(mine.cacheN, second.length - 1, 'every token but the last (re-evaluated for its logits) comes from the cache');
  t.equal(mine.promptN, 1);
  t.same(mine, theirs, 'same text and counts as llama-server');
});

t.test('n_cache_reuse 0 in the request: only the common prefix is reused', async (t) => {
  const mine = await secondAfterFirst(ours.base, { n_cache_reuse: 0 });
  const theirs = await secondAfterFirst(reference.base, { n_cache_reuse: 0 });
  t.equal(mine.cacheN, head.length);
  t.same(mine, theirs);
});

t.test('a chunk shorter than n_cache_reuse is recomputed', async (t) => {
  const mine = await secondAfterFirst(ours.base, { n_cache_reuse: tail.length + 1 });
  t.equal(mine.cacheN, head.length);
  t.equal(mine.promptN, tail.length);
});

t.test('n_cache_reuse must be a non-negative integer', async (t) => {
  for (const bad of [-1, 1.5, 'x']) {
    const res = await postJson(`${ours.base}/completion`, { prompt: 'x', n_predict: 1, n_cache_reuse: bad });
    t.equal(res.status, 400, `n_cache_reuse ${JSON.stringify(bad)}`);
    t.match(res.body.error.message, /n_cache_reuse/);
  }
});
