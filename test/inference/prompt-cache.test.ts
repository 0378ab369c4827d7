// --cache-ram (llama-server's host-memory prompt cache, on by default there and here): a prompt a
// slot was about to lose is kept in RAM and restored when it comes back, instead of recomputed.
import t from 'tap';
import { native } from '../../src/native/binding.js';
import { serverOptions } from '../../src/inference/server-config.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';
import { startLlamaServer } from '../helpers/llama-server.js';

const models = await ensureTestModels();
const A = 'Once upon a time there was a little village by the sea where everybody knew the baker. '.repeat(3);
const B = 'A completely different request about the weather in the mountains during the long winter. '.repeat(3);

/** A, then B, then A again on one slot: what the second A reports. */
async function aBA(base: string) {
  const run = (prompt: string) => postJson(`${base}/completion`, { prompt, n_predict: 8, temperature: 0, id_slot: 0 });
  const first = await run(A);
  t.equal(first.status, 200);
  t.equal((await run(B)).status, 200);
  const again = await run(A);
  t.equal(again.status, 200);
  return { content: again.body.content as string, cacheN: again.body.timings.cache_n as number, nPrompt: again.body.tokens_evaluated as number, firstContent: first.body.content as string };
}

t.test('a prompt that comes back after another is restored from host memory, as on llama-server', async (t) => {
  const ours = await startTestServer(models.chat, { parallel: 1, ctxSize: 1024 });
  t.teardown(ours.close);
  const reference = await startLlamaServer(['-m', models.chat, '-c', '1024', '-np', '1']);
  t.teardown(reference.close);
  const mine = await aBA(ours.base);
  t.equal(mine.cacheN, mine.nPrompt - 1, 'all of A but its last token comes back');
  t.equal(mine.content, mine.firstContent, 'the restored state gives the same greedy answer');
  t.same(mine, await aBA(reference.base), 'same counts and text as llama-server');
});

t.test('--cache-ram 0 turns it off, as on llama-server', async (t) => {
  const flags = serverOptions(native.ServerParams.parse(['llama-server', '-m', models.chat, '--cache-ram', '0']).values(), {}, false);
  t.equal(flags.engine!.promptCacheMib, 0);
  const ours = await startTestServer(models.chat, { parallel: 1, ctxSize: 1024, engine: { promptCacheMib: flags.engine!.promptCacheMib! } });
  t.teardown(ours.close);
  const reference = await startLlamaServer(['-m', models.chat, '-c', '1024', '-np', '1', '--cache-ram', '0']);
  t.teardown(reference.close);
  const mine = await aBA(ours.base);
  const theirs = await aBA(reference.base);
  t.ok(mine.cacheN <= 1, `only what A and B share (BOS) is reused: ${mine.cacheN}`);
  t.equal(mine.cacheN, theirs.cacheN);
  t.equal(mine.content, theirs.content);
});

t.test('an idle slot dropped for room in the KV pool is kept in the prompt cache (--cache-idle-slots)', async (t) => {
  for (const cacheIdleSlots of [true, false]) {
    const ours = await startTestServer(models.chat, { parallel: 2, ctxSize: 256, engine: { cacheIdleSlots } });
    const run = (prompt: string, slot: number, n: number) => postJson(`${ours.base}/completion`, { prompt, n_predict: n, temperature: 0, id_slot: slot, ignore_eos: true });
    const first = await run(A, 0, 4);
    // Slot 1 needs more of the pool than slot 0 leaves free: slot 0's cache is dropped; then slot 1,
    // idle and holding most of the pool, must make room for slot 0's prompt to come back.
    t.equal((await run(B, 1, 256 - first.body.tokens_evaluated)).status, 200);
    const slots = await (await fetch(`${ours.base}/slots`)).json() as Array<{ id: number; n_ctx: number }>;
    t.equal(slots.length, 2);
    const again = await run(A, 0, 4);
    t.equal(again.status, 200);
    t.equal(again.body.timings.cache_n, cacheIdleSlots ? again.body.tokens_evaluated - 1 : 0, `cacheIdleSlots ${cacheIdleSlots}`);
    t.equal(again.body.content, first.body.content);
    await ours.close();
  }
});
