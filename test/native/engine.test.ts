import t, { type Test } from 'tap';
import { availableParallelism } from 'node:os';
import { native, type CompletionTaskSpec, type NativeModel } from '../../src/native/binding.js';
import { InferenceEngine } from '../../src/inference/engine/engine.js';
import { CHAT_TOKENS, ensureTestModels } from '../fixtures/models.js';
import { TEST_THREADS } from '../helpers/test-threads.js';

const models = await ensureTestModels();
const model: NativeModel = await native.Model.load(models.chat, {}).promise;
const engine = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 2 });
t.teardown(async () => {
  await engine.dispose();
  model.dispose();
});

const prompt = (text: string) => model.tokenize(text, true, true);
const greedy = (text: string, nPredict: number, extra: Partial<CompletionTaskSpec> = {}): CompletionTaskSpec => ({
  prompt: prompt(text), nPredict, ...extra, sampling: { temperature: 0, ...extra.sampling },
});

t.test('greedy generation is deterministic and stops at n_predict with stop "limit"', async (t) => {
  const a = await engine.run(greedy('Hello', 16));
  const b = await engine.run(greedy('Hello', 16, { cachePrompt: false }));
  t.equal(a.tokens.length, 16);
  t.equal(a.nPredicted, 16);
  t.equal(a.stop, 'limit');
  t.same(b.tokens, a.tokens);
  t.equal(b.content, a.content);
  t.equal(model.detokenize(a.tokens), a.content, 'content is the text of the tokens');
});

t.test('tokens stream to the caller as they are produced', async (t) => {
  const seen: string[] = [];
  const out = await engine.run(greedy('Stream me', 8), { onToken: (tok) => { seen.push(tok.text); } });
  t.equal(seen.length, 8);
  t.equal(seen.join(''), out.content);
});

t.test('a seed makes sampling reproducible; another seed changes it', async (t) => {
  const spec = (seed: number): CompletionTaskSpec => ({ prompt: prompt('Once upon a time'), nPredict: 24, cachePrompt: false, sampling: { temperature: 1, seed, topK: 0, topP: 1, minP: 0 } });
  const a = await engine.run(spec(1234));
  const b = await engine.run(spec(1234));
  const c = await engine.run(spec(99));
  t.same(a.tokens, b.tokens);
  t.notSame(a.tokens, c.tokens);
});

t.test('stop strings end generation with stop "word" and are not emitted, even across tokens', async (t) => {
  const base = await engine.run(greedy('Hello', 16));
  // A stop string made of the end of one token and the start of the next.
  const pieces = base.tokens.map((id) => Buffer.from(model.tokenPiece(id, false)).toString('utf8'));
  const cut = 5;
  const word = pieces[cut]!.slice(-2) + pieces[cut + 1]!.slice(0, 2);
  const expected = base.content.slice(0, base.content.indexOf(word));
  const streamed: string[] = [];
  const out = await engine.run(greedy('Hello', 16, { stop: ['never-appears', word] }), { onToken: (tok) => { streamed.push(tok.text); } });
  t.equal(out.stop, 'word');
  t.equal(out.stoppingWord, word);
  t.equal(out.content, expected);
  t.notOk(streamed.join('').includes(word), 'no part of the stream carries the stop word');
  t.equal(streamed.join(''), expected);
});

t.test('a partial stop match at the end is released when generation ends otherwise', async (t) => {
  const base = await engine.run(greedy('Hello', 6));
  const lastPiece = Buffer.from(model.tokenPiece(base.tokens.at(-1)!, false)).toString('utf8');
  const stop = lastPiece + 'ZZZ-never';
  const out = await engine.run(greedy('Hello', 6, { stop: [stop] }));
  t.equal(out.stop, 'limit');
  t.equal(out.content, base.content, 'held-back text is flushed at the end');
});

t.test('end of generation gives stop "eos"', async (t) => {
  const out = await engine.run(greedy('Hello', 16, { sampling: { temperature: 0, logitBias: [[CHAT_TOKENS.imEnd, 100]] } }));
  t.equal(out.stop, 'eos');
  t.equal(out.nPredicted, 1);
  t.equal(out.content, '', 'the end-of-generation token has no text');
});

t.test('ignore_eos keeps generating past end of generation', async (t) => {
  const out = await engine.run(greedy('Hello', 5, { sampling: { temperature: 0, ignoreEos: true, logitBias: [[CHAT_TOKENS.imEnd, 100]] } }));
  t.equal(out.stop, 'limit');
  t.equal(out.nPredicted, 5);
  t.notOk(out.tokens.includes(CHAT_TOKENS.imEnd));
});

t.test('penalties change greedy output', async (t) => {
  const plain = await engine.run(greedy('Hello', 32, { cachePrompt: false }));
  const penalised = await engine.run(greedy('Hello', 32, { cachePrompt: false, sampling: { temperature: 0, repeatPenalty: 1.5, frequencyPenalty: 1, presencePenalty: 1, repeatLastN: 64 } }));
  t.notSame(penalised.tokens, plain.tokens);
});

t.test('reports tokens evaluated, tokens cached and timings', async (t) => {
  const text = 'The quick brown fox jumps over the lazy dog again and again';
  const first = await engine.run(greedy(text, 4, { idSlot: 1, cachePrompt: false }));
  t.equal(first.nPrompt, prompt(text).length);
  t.equal(first.nCached, 0);
  t.ok(first.tPromptMs > 0);
  t.ok(first.tPredictMs > 0);
  const second = await engine.run(greedy(text, 4, { idSlot: 1 }));
  t.equal(second.nCached, 0, 'a task that did not use the prompt cache left nothing in it');
  const third = await engine.run(greedy(text + ' and more', 4, { idSlot: 1 }));
  t.equal(third.nCached, prompt(text).length, 'the common prefix came from the slot cache');
  t.equal(third.slot, 1);
});

t.test('a task with cache_prompt false frees its KV cells when it ends; one with the cache keeps them', async (t) => {
  const text = 'Cells of a task that opted out of the prompt cache are not kept';
  const kept = await engine.run(greedy(text, 4, { idSlot: 0 }));
  t.equal(engine.native.slots()[0]!.nCache, kept.nPrompt + kept.nPredicted - 1, 'cache_prompt true: prompt and generated tokens (the last one never decoded) stay');
  const freed = await engine.run(greedy(text, 4, { idSlot: 0, cachePrompt: false }));
  t.equal(freed.nCached, 0);
  t.equal(engine.native.slots()[0]!.nCache, 0, 'cache_prompt false: the slot is empty');
});

// Three slots; A's prompt fills slot 0, B's slot 1 (their only common token, BOS, is under a tenth
// of either prompt), then A's prompt continued arrives while slot 2 has never been used.
async function slotChoices(t: Test, slotPromptSimilarity?: number): Promise<{ continued: number; freedSlot: number; slots: number[] }> {
  // llama-server's choice: without prefix sharing (with it and idle slots kept in the pool, the choice is the next test's).
  const e = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 3, prefixSharing: false, ...(slotPromptSimilarity === undefined ? {} : { slotPromptSimilarity }) });
  t.teardown(() => e.dispose());
  const a = 'Alpha is the first prompt of this test and it is long enough for a share';
  const b = 'Bravo comes second and has nothing in common with the first one at all';
  t.ok(1 / prompt(a).length < 0.1 && 1 / prompt(b).length < 0.1, 'premise: one common token is under a tenth of each prompt');
  const first = await e.run(greedy(a, 2));
  const second = await e.run(greedy(b, 2));
  const continued = await e.run(greedy(a + ' and then some more', 2));
  // A task that does not use the cache still goes where its prompt is, and empties that slot.
  const opted = await e.run(greedy(b, 2, { cachePrompt: false }));
  return { continued: continued.slot, freedSlot: opted.slot, slots: [first.slot, second.slot, ...e.native.slots().map((s) => s.nCache)] };
}

t.test('slot choice (-sps): the idle slot holding the largest share of the prompt above slotPromptSimilarity (0.1 by default), else the least recently used', async (t) => {
  const { continued, freedSlot, slots } = await slotChoices(t);
  t.same(slots.slice(0, 2), [0, 1], 'A and B: least recently used (never used) slots');
  t.equal(continued, 0, 'A continued: the slot holding A, not the never-used slot 2');
  t.equal(freedSlot, 1, 'B again without the cache: the slot holding B');
  t.equal(slots[3], 0, 'that slot is empty afterwards');
});

t.test('slot choice with slotPromptSimilarity 0: always the least recently used idle slot', async (t) => {
  const { continued, freedSlot } = await slotChoices(t, 0);
  t.equal(continued, 2, 'A continued: the never-used slot 2');
  t.equal(freedSlot, 0, 'B: slot 0, used longest ago');
});

t.test('slot choice with prefix sharing: the conversation continued, else an empty slot, else the least recently used', async (t) => {
  const e = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 3 });
  t.teardown(() => e.dispose());
  t.equal(e.native.info().prefixSharing, true, 'on with the (default) unified pool');
  const a = 'Alpha is the first prompt of this test and it is long enough for a share';
  const b = 'Bravo comes second and has nothing in common with the first one at all. '.repeat(5);
  const first = await e.run(greedy(a, 2));
  const second = await e.run(greedy(b, 2));
  t.same([first.slot, second.slot], [0, 1], 'A and B: empty slots');
  const continued = await e.run(greedy(a + ' and then some more', 2));
  t.equal(continued.slot, 0, 'A continued: the slot holding A, which loses only its answer');
  const half = prompt(b).length >> 1;
  const branch = [...prompt(b).slice(0, half), ...model.tokenize(' then goes somewhere else entirely, word after word', false, true)];
  const branched = await e.run({ prompt: new Int32Array(branch), nPredict: 2, sampling: { temperature: 0 } });
  t.equal(branched.slot, 2, "a prompt sharing half of B's cache: the empty slot, not B's (which would lose its other half)");
  t.ok(branched.nCached >= half - 2, `it took the shared half from B's cells (${branched.nCached} tokens)`);
  t.equal(e.native.slots()[1]!.nCache, second.nPrompt + 1, "B's slot kept all of its cache");
  const other = await e.run(greedy('Charlie is unrelated to every cached prompt here', 2));
  t.equal(other.slot, 1, 'an unrelated prompt with no empty slot: the least recently used idle slot (B)');
  const opted = await e.run(greedy(a, 2, { cachePrompt: false }));
  t.equal(opted.nCached, 0, 'cache_prompt false: nothing reused, not even from another slot');
});

// --cache-idle-slots with --cache-ram, as llama-server: when a task starts, every idle slot's cache
// goes to the prompt cache, and with a unified KV pool its cells are freed; the prompt comes back
// from the cache when it is sent again.
async function idleSlotAfterAnotherStarts(t: Test, params: { cacheIdleSlots: boolean; kvUnified: boolean; prefixSharing?: boolean }, other = 'Another prompt entirely', own = LONG_PROMPT.slice(0, 300)) {
  const e = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 2, promptCacheMib: 64, ...params });
  try {
    const first = await e.run(greedy(own, 4, { idSlot: 0 }));
    await e.run(greedy(other, 4, { idSlot: 1 }));
    const idleCells = e.native.slots()[0]!.nCache;
    const again = await e.run(greedy(own, 4, { idSlot: 0 }));
    t.same(again.tokens, first.tokens, 'the same greedy answer');
    return { idleCells, cached: again.nCached, nPrompt: first.nPrompt, kept: first.nPrompt + first.nPredicted - 1 };
  } finally {
    await e.dispose();
  }
}

t.test('a task that starts sends idle slots to the prompt cache; with a unified pool their cells are freed unless a running prompt shares most of them', async (t) => {
  const unified = await idleSlotAfterAnotherStarts(t, { cacheIdleSlots: true, kvUnified: true, prefixSharing: false });
  t.equal(unified.idleCells, 0, 'the idle slot was emptied when the other task started');
  t.equal(unified.cached, unified.nPrompt - 1, 'its prompt came back from the prompt cache');
  const unrelated = await idleSlotAfterAnotherStarts(t, { cacheIdleSlots: true, kvUnified: true });
  t.equal(unrelated.idleCells, 0, 'with prefix sharing (the default) an idle cache that the running prompt does not share is emptied too');
  t.equal(unrelated.cached, unrelated.nPrompt - 1, 'and its prompt comes back from the prompt cache');
  const related = await idleSlotAfterAnotherStarts(t, { cacheIdleSlots: true, kvUnified: true }, LONG_PROMPT.slice(0, 600));
  t.equal(related.idleCells, related.kept, 'an idle cache that the running prompt mostly shares keeps its cells');
  t.equal(related.cached, related.nPrompt - 1, 'and serves the prompt from there');
  const mostlyOwn = await idleSlotAfterAnotherStarts(t, { cacheIdleSlots: true, kvUnified: true }, `${LONG_PROMPT.slice(0, 300)} and then another story`, LONG_PROMPT.slice(0, 1200));
  t.equal(mostlyOwn.idleCells, 0, 'one whose shared prefix is under half of it is emptied');
  t.equal(mostlyOwn.cached, mostlyOwn.nPrompt - 1, 'and comes back from the prompt cache');
  const separate = await idleSlotAfterAnotherStarts(t, { cacheIdleSlots: true, kvUnified: false });
  t.equal(separate.idleCells, separate.kept, 'without a unified pool the slot keeps its cells (freeing them gains no room)');
  t.equal(separate.cached, separate.nPrompt - 1);
  const off = await idleSlotAfterAnotherStarts(t, { cacheIdleSlots: false, kvUnified: true });
  t.equal(off.idleCells, off.kept, 'cacheIdleSlots false: idle slots keep their cells');
  t.equal(off.cached, off.nPrompt - 1, 'and serve the prompt from there');
});

t.test('tasks admitted together: an idle cache that one of them continues is not freed under another', async (t) => {
  const e = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 3, promptCacheMib: 64, cacheIdleSlots: true, kvUnified: true });
  t.teardown(() => e.dispose());
  const own = LONG_PROMPT.slice(0, 300);
  const first = await e.run(greedy(own, 4, { idSlot: 0 }));
  const [unrelated, again] = await Promise.all(await e.submitAll([greedy('Another prompt entirely', 4), greedy(own, 4)]));
  t.not(unrelated!.slot, 0, 'the unrelated prompt took an empty slot');
  t.equal(again!.slot, 0, 'the prompt went back to its conversation\'s slot, whose cache was still in the pool');
  t.equal(again!.nCached, first.nPrompt - 1);
  t.same(again!.tokens, first.tokens);
});

t.test('an idle cache kept in the pool is copied to host memory only when its cells go', async (t) => {
  const e = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 2, promptCacheMib: 64, cacheIdleSlots: true, kvUnified: true });
  t.teardown(() => e.dispose());
  const saves = () => e.native.metrics().promptCacheSaves;
  const own = LONG_PROMPT.slice(0, 300);
  const first = await e.run(greedy(own, 4, { idSlot: 0 }));
  t.equal(saves(), 0, 'nothing to copy when the first task started');
  await e.run(greedy(`${LONG_PROMPT.slice(0, 250)} and then the story went somewhere else`, 4, { idSlot: 1 }));
  t.equal(e.native.slots()[0]!.nCache, first.nPrompt + first.nPredicted - 1, "slot 0's cache, mostly shared with the running prompt, stayed in the pool");
  t.equal(saves(), 0, 'and was not copied to host memory');
  await e.run(greedy('Another prompt entirely', 4, { idSlot: 0, cachePrompt: false }));
  t.equal(saves(), 2, "a task that took slot 0 copied its cache first, and slot 1's idle cache, which it does not share, was copied and freed");
  t.equal(e.native.slots()[1]!.nCache, 0);
  const again = await e.run(greedy(own, 4));
  t.equal(again.nCached, first.nPrompt - 1, "slot 0's prompt came back whole from host memory");
  t.same(again.tokens, first.tokens, 'the same greedy answer');
});

t.test('with a prompt cache, a task that does not use it still sends the cache it overwrites there (as llama-server)', async (t) => {
  const e = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 1, promptCacheMib: 64, cacheIdleSlots: false });
  t.teardown(() => e.dispose());
  const own = LONG_PROMPT.slice(0, 300);
  const first = await e.run(greedy(own, 4));
  await e.run(greedy('Another prompt entirely', 4, { cachePrompt: false }));
  t.equal(e.native.metrics().promptCacheSaves, 1, 'the cache_prompt false task copied the slot\'s cache before taking it');
  const again = await e.run(greedy(own, 4));
  t.equal(again.nCached, first.nPrompt - 1, 'the first prompt came back whole from host memory');
  t.same(again.tokens, first.tokens);
});

t.test('the prompt cache copies into buffers written ahead (for the tasks started) or kept from restored entries, and holds no more host memory than --cache-ram', async (t) => {
  // One decoding thread on this 2-core machine leaves a core for writing buffers ahead.
  const e = await InferenceEngine.create(model, { nCtx: 1024, nParallel: 1, promptCacheMib: 64, cacheIdleSlots: false, nThreads: 1 });
  t.teardown(() => e.dispose());
  t.equal(e.native.info().prepareSaves, true, 'with a hardware thread to spare, buffers are written ahead');
  const m = () => e.native.metrics();
  const a = LONG_PROMPT.slice(0, 300);
  const b = `${LONG_PROMPT.slice(300, 600)} and so on`;
  const firstA = await e.run(greedy(a, 4));
  const firstB = await e.run(greedy(b, 4));
  t.equal(m().promptCacheSaves, 1, "B's task copied A's cache to host memory");
  t.equal(m().promptCacheReuses, 0, 'into fresh memory: before the first save the size of a cache is not known, so nothing was prepared for A');
  t.ok(m().promptCacheBytes > 0 && m().promptCacheBytes <= 64 * 1024 * 1024, 'the host memory held is reported');
  const againA = await e.run(greedy(a, 4));
  t.equal(againA.nCached, firstA.nPrompt - 1, 'A came back from host memory');
  t.equal(m().promptCacheSaves, 2, "and B's cache went there first");
  t.equal(m().promptCacheReuses, 1, "into the buffer prepared for it when B's task started");
  const held = m().promptCacheBytes;
  const againB = await e.run(greedy(b, 4));
  t.equal(againB.nCached, firstB.nPrompt - 1, 'B came back from host memory');
  t.equal(m().promptCacheSaves, 3);
  t.equal(m().promptCacheReuses, 2, "A's cache went into the buffer its restored entry left");
  t.equal(m().promptCacheBytes, held, 'so the cache holds no more memory than before');
  const thirdA = await e.run(greedy(a, 4));
  t.equal(thirdA.nCached, firstA.nPrompt - 1, 'A, copied into a reused buffer, came back whole');
  t.same(thirdA.tokens, firstA.tokens, 'the same greedy answer');
  t.same(againB.tokens, firstB.tokens);
  t.equal(m().promptCacheReuses, 3);

  // A conversation that comes back to its slot saves nothing, and nothing is written ahead for it.
  const conversation = await InferenceEngine.create(model, { nCtx: 1024, nParallel: 1, promptCacheMib: 64, cacheIdleSlots: false, nThreads: 1 });
  t.teardown(() => conversation.dispose());
  await conversation.run(greedy(a, 4));
  await conversation.run(greedy(b, 4));
  const afterB = conversation.native.metrics();
  t.equal(afterB.promptCacheSaves, 1, "B's task saved A");
  const longer = await conversation.run(greedy(`${b} ${LONG_PROMPT.slice(600, 1400)}`, 4));
  t.ok(longer.nCached > 0, 'B went on in its slot');
  t.equal(conversation.native.metrics().promptCacheSaves, 1, 'saving nothing');
  t.equal(conversation.native.metrics().promptCacheBytes, afterB.promptCacheBytes, 'and no buffer was written ahead for its longer cache');

  // Decoding on every hardware thread of a CPU build: none is written ahead (that thread would
  // take a core from the decode running meanwhile); kept buffers are still reused.
  const busy = await InferenceEngine.create(model, { nCtx: 1024, nParallel: 1, promptCacheMib: 64, cacheIdleSlots: false, nThreads: availableParallelism() });
  t.teardown(() => busy.dispose());
  t.equal(busy.native.info().prepareSaves, busy.native.info().splitSteps ? false : true, 'off on a CPU build whose decoding uses every hardware thread');
  for (const p of [a, b, a, b]) await busy.run(greedy(p, 4));
  t.equal(busy.native.metrics().promptCacheSaves, 3);
  t.equal(busy.native.metrics().promptCacheReuses, busy.native.info().prepareSaves ? 2 : 1, "only A's second save reused a buffer (the one its restored entry left)");

  // prepareSaves: false (for comparisons): no thread writes buffers, even with one to spare.
  const unprepared = await InferenceEngine.create(model, { nCtx: 1024, nParallel: 1, promptCacheMib: 64, cacheIdleSlots: false, nThreads: 1, prepareSaves: false });
  t.teardown(() => unprepared.dispose());
  t.equal(unprepared.native.info().prepareSaves, false, 'prepareSaves: false turns it off');
  for (const p of [a, b, a, b]) await unprepared.run(greedy(p, 4));
  t.equal(unprepared.native.metrics().promptCacheReuses, 1, "as when decoding takes every thread: only A's second save reused a buffer");

  // A limit smaller than two entries: the buffers kept for reuse count against it too.
  const small = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 1, promptCacheMib: 1, cacheIdleSlots: false });
  t.teardown(() => small.dispose());
  const prompts = [a, b, `${LONG_PROMPT.slice(600, 900)} again`, a, b];
  for (const p of prompts) await small.run(greedy(p.slice(0, 120), 4));
  t.ok(small.native.metrics().promptCacheSaves >= 3, 'entries were saved under the 1 MiB limit');
  t.ok(small.native.metrics().promptCacheBytes <= 1024 * 1024, `held ${small.native.metrics().promptCacheBytes} bytes, within 1 MiB`);
});

t.test('slotPromptSimilarity is validated; 0.1 by default', async (t) => {
  for (const bad of [-0.1, 1.5, Number.NaN, 'half']) {
    await t.rejects(InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 1, slotPromptSimilarity: bad as number }),
      { code: 'INVALID_ARGUMENT', message: 'params.slotPromptSimilarity must be a number from 0 (always the least recently used slot) to 1' }, `slotPromptSimilarity ${String(bad)}`);
  }
  const defaults = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 1 });
  t.teardown(() => defaults.dispose());
  t.ok(Math.abs(defaults.native.info().slotPromptSimilarity - 0.1) < 1e-9);
});

// With returnProgress, the progress reports came before the tokens and each one used to mark the
// task as ended on the JS side: cancel() then ignored it, and with nothing else pending the event
// loop could exit under the running task (the process aborted).
for (const returnProgress of [false, true]) t.test(`cancelling a running task frees its slot and emits nothing more${returnProgress ? ' (with progress reports)' : ''}`, async (t) => {
  const controller = new AbortController();
  let tokens = 0;
  let reports = 0;
  const running = engine.run(greedy('Cancel me', -1, { idSlot: 0, returnProgress }), {
    signal: controller.signal,
    onToken: (event) => {
      if (event.progress) reports++;
      else if (++tokens === 3) controller.abort(new Error('client gone'));
    },
  });
  await t.rejects(running, { message: 'client gone' });
  const predictedBefore = engine.native.metrics().predictedTokens;
  // Pinned to slot 0, this task starts only once the cancelled one has left it.
  const after = await engine.run(greedy('Next', 3, { idSlot: 0 }));
  t.equal(after.nPredicted, 3, 'the slot serves the next task');
  t.equal(after.slot, 0);
  t.equal(engine.native.metrics().predictedTokens - predictedBefore, 3, 'the cancelled task generated nothing more (it never finished)');
  t.equal(engine.native.slots()[0]!.state, 'idle', 'the slot is free again');
  t.equal(reports > 0, returnProgress, 'progress reports came when asked for');
});

t.test('an invalid grammar is refused at submit', async (t) => {
  await t.rejects(engine.run({ prompt: prompt('x'), sampling: { grammar: 'root ::= (' } }), { code: 'BAD_SAMPLING', message: /invalid sampling parameters/ });
});

t.test('a grammar constrains the output', async (t) => {
  const out = await engine.run(greedy('Answer:', 40, { sampling: { temperature: 0, grammar: 'root ::= ("yes" | "no") "."' } }));
  t.match(out.content, /^(yes|no)\.$/);
  t.equal(out.stop, 'eos', 'the grammar ends the generation');
});

t.test('a prompt larger than the context is refused', async (t) => {
  const big = new Int32Array(1100).fill(100);
  await t.rejects(engine.run({ prompt: big }), { code: 'EXCEEDS_CONTEXT', message: /does not fit the context/ });
});

t.test('n_probs returns the top probabilities of each generated token, ranked', async (t) => {
  const out = await engine.run(greedy('Hello', 4, { nProbs: 5, sampling: { temperature: 0, nProbs: 5 } }));
  t.equal(out.probabilities.length, 4);
  for (const p of out.probabilities) {
    t.equal(p.probs.length, 5);
    t.equal(p.probs[0]!.id, p.token, 'greedy picks the most probable token');
    t.equal(p.prob, p.probs[0]!.p);
    for (let i = 1; i < p.probs.length; i++) t.ok(p.probs[i - 1]!.p >= p.probs[i]!.p, 'ranked by probability');
    const sum = p.probs.reduce((s, x) => s + x.p, 0);
    t.ok(sum > 0 && sum <= 1.000001, 'probabilities of the top tokens sum to at most 1');
  }
  const wider = await engine.run(greedy('Hello', 4, { nProbs: 10, sampling: { temperature: 0, nProbs: 10 } }));
  t.same(wider.probabilities.map((p) => p.probs.slice(0, 5)), out.probabilities.map((p) => p.probs), 'the top 5 are the first 5 of the top 10, with the same probabilities');
});

t.test('two slots generate concurrently with the same results as alone', async (t) => {
  const alone = [await engine.run(greedy('First prompt', 12, { cachePrompt: false })), await engine.run(greedy('Second prompt here', 12, { cachePrompt: false }))];
  const together = await Promise.all([engine.run(greedy('First prompt', 12, { cachePrompt: false })), engine.run(greedy('Second prompt here', 12, { cachePrompt: false }))]);
  t.same(together[0]!.tokens, alone[0]!.tokens);
  t.same(together[1]!.tokens, alone[1]!.tokens);
});

// Chunked prefill (EngineParams.prefillBudget): a prompt that arrives while slots generate goes in
// chunks within the budget, one chunk per step beside the generating slots' tokens.
const LONG_PROMPT = Array.from({ length: 40 }, (_, i) => `line ${i} of a long document`).join('\n');

/**
 * The tasks of streamsThenLongPrompt: two streams of `streamPredict` tokens, then a long prompt.
 * The streams keep their cells when they end (cachePrompt true): a cachePrompt-false stream would
 * free them while the long prompt is still being fed, its next chunks would fill those cells, out
 * of position order, and where two tokens are nearly tied that can flip one (docs/options.md, chunked
 * prefill); this test is about how the prompt is split, not where its cells lie.
 */
function streamsThenLongPromptTasks(streamPredict: number) {
  const withTopTwo = { nProbs: 2, sampling: { temperature: 0, nProbs: 2 } };
  return [
    greedy('First prompt', streamPredict, withTopTwo),
    greedy('Second prompt here', streamPredict, withTopTwo),
    greedy(LONG_PROMPT, 8, { ...withTopTwo, cachePrompt: false }),
  ];
}

/**
 * A greedy pick whose two best candidates are closer than this in log-probability is a near tie:
 * the same arithmetic split otherwise (other batch shapes, other cells) rounds differently, by
 * about 1e-3 here, and may pick the other (docs/options.md, chunked prefill). The test model's
 * distributions are flat, so its runs have such ties every few dozen tokens.
 */
const NEAR_TIE = 0.01;

/**
 * The tokens of each task of streamsThenLongPrompt run alone, one after the other, up to the first
 * near tie: those any split of the work must reproduce exactly.
 */
async function eachAloneUpToNearTie(t: Test, e: InferenceEngine, streamPredict: number): Promise<number[][]> {
  const decided: number[][] = [];
  for (const task of streamsThenLongPromptTasks(streamPredict)) {
    const out = await e.run(task);
    const tie = out.probabilities.findIndex((p) => Math.log(p.probs[0]!.p / p.probs[1]!.p) < NEAR_TIE);
    decided.push(out.tokens.slice(0, tie < 0 ? out.tokens.length : tie));
  }
  t.ok(decided.every((tokens) => tokens.length >= 4), `each task has at least 4 tokens before a near tie (${decided.map((d) => d.length).join(', ')})`);
  return decided;
}

/** Each task's tokens cut to the length of its counterpart in `decided`. */
const cutTo = (tokens: number[][], decided: number[][]) => tokens.map((x, i) => x.slice(0, decided[i]!.length));

/**
 * Two streams generate; once both have produced a token, a long prompt is submitted. Returns each
 * task's tokens, how many stream tokens the engine produced while the long prompt was being fed
 * (after its admission, which its first progress report marks, and before its first token), and
 * how many after its first token. The engine's events reach the callbacks in the order it made
 * them, so the counts do not depend on when this thread got to run.
 */
async function streamsThenLongPrompt(e: InferenceEngine, streamPredict: number): Promise<{ tokens: number[][]; streamTokensDuringLongPrompt: number; streamTokensAfterLongFirst: number; longPrompt: number }> {
  let started = 0;
  let admitted = false;
  let longFirst = false;
  let during = 0;
  let after = 0;
  let release!: () => void;
  const bothStarted = new Promise<void>((r) => (release = r));
  const onStreamToken = (n: { first: boolean }) => () => {
    if (longFirst) after++;
    else if (admitted) during++;
    if (n.first) {
      n.first = false;
      if (++started === 2) release();
    }
  };
  const [first, second, longTask] = streamsThenLongPromptTasks(streamPredict);
  const streams = [
    e.run(first!, { onToken: onStreamToken({ first: true }) }),
    e.run(second!, { onToken: onStreamToken({ first: true }) }),
  ];
  await bothStarted;
  const long = e.run({ ...longTask!, returnProgress: true }, {
    onToken: (event) => {
      if (event.progress) admitted = true;
      else longFirst = true;
    },
  });
  const results = await Promise.all([...streams, long]);
  return { tokens: results.map((r) => [...r.tokens]), streamTokensDuringLongPrompt: during, streamTokensAfterLongFirst: after, longPrompt: results[2]!.nPrompt };
}

t.test('chunked prefill: greedy output with a small budget and a prompt arriving mid-stream equals each task alone', async (t) => {
  const chunked = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 2048, nParallel: 3, prefillBudget: 8 });
  t.teardown(() => chunked.dispose());
  t.equal(chunked.native.info().prefillBudget, 8);
  const alone = await eachAloneUpToNearTie(t, chunked, 40);
  const together = await streamsThenLongPrompt(chunked, 40);
  t.ok(together.longPrompt > 200, `the long prompt has ${together.longPrompt} tokens`);
  t.same(cutTo(together.tokens, alone), alone, 'streams and the chunked prompt give the tokens they give alone, up to the first near tie');
  // Budget 8 with two slots generating: at most 6 prompt tokens per step, so the prompt needs
  // more steps than the streams have tokens left, and they finish before its first token.
  t.equal(together.streamTokensAfterLongFirst, 0, 'the streams kept generating while the long prompt was fed');
});

// Prompts admitted together (a burst larger than nBatch) are not held back by the budget for the
// burst's own generating slots: with nBatch 64 the first step takes A's 40 prompt tokens and 24 of
// B's; A then generates, and the next step carries the rest of B and all of C beside A's token,
// as an engine without a budget does (llama-server's batches). A budget of 8 applied to them would
// feed B and C 6 tokens a step, C's first token some ten steps later. A prompt that arrives once
// streams have their first token is still held back (the tests above).
t.test('chunked prefill: prompts admitted with the generating slots are not held back for them; the batches and tokens are those of no budget', async (t) => {
  const params = { nCtx: 2048, nParallel: 3, nBatch: 64, nUbatch: 64, prefillBudgetMs: 0 };
  const budgeted = await InferenceEngine.create(model, { nThreads: TEST_THREADS, ...params, prefillBudget: 8 });
  t.teardown(() => budgeted.dispose());
  const unbudgeted = await InferenceEngine.create(model, { nThreads: TEST_THREADS, ...params, prefillBudget: 0 });
  t.teardown(() => unbudgeted.dispose());
  const tokens = model.tokenize(LONG_PROMPT, true, true);
  t.ok(tokens.length >= 120, 'three 40-token prompts');
  const tasks = [0, 1, 2].map((i) => ({ prompt: tokens.slice(40 * i, 40 * (i + 1)), nPredict: 12, cachePrompt: false, sampling: { temperature: 0, ignoreEos: true } }));
  const run = async (e: InferenceEngine) => {
    const order: number[] = [];
    const outs = await Promise.all(await e.submitAll(tasks, { onToken: (index) => () => order.push(index) }));
    return { tokens: outs.map((o) => [...o.tokens]), aTokensBeforeC: order.indexOf(2) < 0 ? -1 : order.slice(0, order.indexOf(2)).filter((i) => i === 0).length };
  };
  const burst = await run(budgeted);
  const free = await run(unbudgeted);
  t.ok(burst.aTokensBeforeC >= 1 && burst.aTokensBeforeC <= 2, `C's first token came with A's second (A had ${burst.aTokensBeforeC} before it)`);
  t.equal(burst.aTokensBeforeC, free.aTokensBeforeC, 'as without a budget');
  t.same(burst.tokens, free.tokens, 'the same batches, so the same tokens');
});

// The time target (EngineParams.prefillBudgetMs): a step carries the prompt tokens that the recent
// steps' costs say fit in that time beside the generating tokens, at least a quarter of nUbatch.
// A target of one microsecond leaves room for no prompt token on any machine, so every step
// carries exactly that quarter: 16 tokens with nUbatch 64. The streams outlast the prompt, so every
// chunk has the same shape (two stream tokens, 16 prompt tokens) whenever the prompt arrives.
t.test('chunked prefill by time: with a target nothing fits in, a prompt arriving mid-stream goes in quarter-ubatch chunks; greedy output equals each task alone', async (t) => {
  const timed = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 2048, nParallel: 3, nUbatch: 64, prefillBudget: 0, prefillBudgetMs: 0.001 });
  t.teardown(() => timed.dispose());
  t.equal(timed.native.info().prefillBudgetMs, 0.001);
  t.equal(timed.native.info().prefillBudget, 0, 'no token budget: the time target alone splits the prompt');
  const alone = await eachAloneUpToNearTie(t, timed, 60);
  const together = await streamsThenLongPrompt(timed, 60);
  t.ok(together.longPrompt > 300, `the long prompt has ${together.longPrompt} tokens`);
  t.same(cutTo(together.tokens, alone), alone, 'streams and the chunked prompt give the tokens they give alone, up to the first near tie');
  // ceil(longPrompt / 16) steps from its admission to its first token, each with one token of each
  // stream (those of the last step come before or after its first token, by slot order).
  const steps = Math.ceil(together.longPrompt / 16);
  const during = together.streamTokensDuringLongPrompt;
  t.ok(during >= 2 * (steps - 1) && during <= 2 * steps, `${during} stream tokens while the prompt was fed in ${steps} chunks of 16`);
  t.ok(together.streamTokensAfterLongFirst > 0, 'the streams outlasted the prompt');
});

// Split steps (EngineInfo.splitSteps, on in a build without a GPU backend): a step holding
// generating tokens and 64 rows or more decodes the generating rows, samples them, then decodes
// the prompt rows. Budget 80 with two streams: chunks of 78 prompt tokens, so every chunk but a
// short last one (under 62 tokens) is such a step.
t.test('a step with generating slots and 64+ rows is decoded in two calls when splitSteps is on; greedy output equals each task alone', async (t) => {
  const split = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 2048, nParallel: 3, prefillBudget: 80, prefillBudgetMs: 0 });
  t.teardown(() => split.dispose());
  const on = split.native.info().splitSteps;
  const alone = await eachAloneUpToNearTie(t, split, 40);
  const before = split.native.metrics().splitSteps;
  const together = await streamsThenLongPrompt(split, 40);
  t.same(cutTo(together.tokens, alone), alone, 'streams and the prompt give the tokens they give alone, up to the first near tie');
  const p = together.longPrompt;
  const chunks = Math.floor(p / 78) + (p % 78 >= 62 ? 1 : 0);
  t.ok(together.streamTokensAfterLongFirst > 0, 'the streams outlasted the prompt');
  t.equal(split.native.metrics().splitSteps - before, on ? chunks : 0, `${p} prompt tokens: ${on ? `${chunks} steps of 64+ rows split` : 'no step split (GPU build)'}`);
  t.equal(on, native.systemInfo().backend === 'CPU', 'on where the build has no GPU backend');
});

// splitSteps: false (for comparisons): the engine decodes every step in one call; the same
// streams and prompt give the same tokens.
t.test('with splitSteps: false, no step is split; greedy output equals each task alone', async (t) => {
  const whole = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 2048, nParallel: 3, prefillBudget: 80, prefillBudgetMs: 0, splitSteps: false });
  t.teardown(() => whole.dispose());
  t.equal(whole.native.info().splitSteps, false);
  const alone = await eachAloneUpToNearTie(t, whole, 40);
  const together = await streamsThenLongPrompt(whole, 40);
  t.same(cutTo(together.tokens, alone), alone, 'streams and the prompt give the tokens they give alone, up to the first near tie');
  t.equal(whole.native.metrics().splitSteps, 0, 'no step was split');
});

// A split step whose prompt rows find no room in a full pool: the prompt slot's rows are taken
// back and fed in smaller pieces until the pool is full, then the slot holding the most tokens
// (the prompt's) fails with llama-server's error; the streams, already served in that step, keep
// every token. 512 cells in one pool, submitted together: two streams of 1 + 100 tokens and a
// prompt of 510 fed 128 tokens a step (nBatch 130), so its fourth chunk (126 rows beside the two
// streams' tokens) finds 120 free cells.
t.test('a full pool during split steps: the long prompt fails with "Context size has been exceeded.", the streams get every token', async (t) => {
  const small = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 512, nParallel: 3, kvUnified: true, nBatch: 130, prefillBudget: 130, prefillBudgetMs: 0 });
  t.teardown(() => small.dispose());
  const longPrompt = model.tokenize(LONG_PROMPT.repeat(2), true, true).slice(0, 510);
  t.equal(longPrompt.length, 510);
  const before = small.native.metrics().splitSteps;
  const stream = greedy('A', 100, { sampling: { temperature: 0, ignoreEos: true } });
  const [a, b, long] = await small.submitAll([stream, stream, { prompt: longPrompt, nPredict: 4, cachePrompt: false, sampling: { temperature: 0 } }]);
  await t.rejects(long!, { message: 'Context size has been exceeded.' });
  const served = await Promise.all([a!, b!]);
  t.same(served.map((r) => r.tokens.length), [100, 100], 'each stream got all its tokens');
  if (small.native.info().splitSteps) t.ok(small.native.metrics().splitSteps - before >= 3, 'the prompt went in split steps from its second chunk');
  const after = await small.run(greedy('A', 4));
  t.equal(after.tokens.length, 4, 'the engine keeps serving');
});

// Early outputs (EngineInfo.earlyOutputs, on in a CPU build with a unified pool): prompts admitted
// together make one batch of several ubatches; it is decoded by one llama_decode call per stretch
// of whole ubatches that ends with a prompt's last token, and those prompts' first tokens are
// sampled and sent before the next call. With nUbatch 64: two short prompts end in the first
// ubatch and a long one fills the rest, so the batch goes in two calls, the second about 30 times
// the first.
async function shortsBesideLong(e: InferenceEngine) {
  const withTopTwo = { nProbs: 2, sampling: { temperature: 0, nProbs: 2 } };
  const longPrompt = model.tokenize(LONG_PROMPT.repeat(8), true, true).slice(0, 2000);
  const tasks = [greedy('Short one', 4, withTopTwo), greedy('Another short one', 4, withTopTwo), { prompt: longPrompt, nPredict: 4, ...withTopTwo }];
  // Whether the long prompt's first token reached this thread in a later turn of the event loop
  // than the first short prompt's (a setImmediate between them has run): delivered apart.
  let turnPassed = false;
  let deliveredApart = false;
  const firstOf = (index: number) => {
    let seen = false;
    return () => {
      if (seen) return;
      seen = true;
      if (index === 0) setImmediate(() => (turnPassed = true));
      if (index === 2) deliveredApart = turnPassed;
    };
  };
  const before = e.native.metrics().earlyOutputCalls;
  const outs = await Promise.all(await e.submitAll(tasks, { onToken: firstOf }));
  return { outs, deliveredApart, calls: e.native.metrics().earlyOutputCalls - before, longPrompt: longPrompt.length };
}

t.test('prompts admitted together: those ending in the first ubatch of a long batch get their first token before the rest is decoded, with the same tokens and probabilities', async (t) => {
  const params = { nThreads: TEST_THREADS, nCtx: 4096, nParallel: 3, nUbatch: 64, nBatch: 4096 };
  const early = await InferenceEngine.create(model, params);
  t.teardown(() => early.dispose());
  const on = early.native.info().earlyOutputs;
  t.equal(on, native.systemInfo().backend === 'CPU', 'on where the build has no GPU backend');
  const got = await shortsBesideLong(early);
  t.equal(got.longPrompt, 2000);
  t.equal(got.calls, on ? 1 : 0, on ? 'one call ended early, after the first ubatch' : 'no call ended early (GPU build)');
  const [first, , long] = got.outs;
  if (on) {
    t.ok(first!.tPromptMs < long!.tPromptMs / 2, `the short prompt's first token after ${first!.tPromptMs.toFixed(1)} ms, the long one's after ${long!.tPromptMs.toFixed(1)} ms`);
    t.ok(got.deliveredApart, 'the short prompt\'s first token reached the caller before the long prompt\'s was sampled');
  }

  const whole = await InferenceEngine.create(model, { nThreads: TEST_THREADS, ...params, earlyOutputs: false });
  t.teardown(() => whole.dispose());
  t.equal(whole.native.info().earlyOutputs, false, 'earlyOutputs: false turns it off');
  const ref = await shortsBesideLong(whole);
  t.equal(ref.calls, 0, 'one call for the whole batch');
  t.notOk(ref.deliveredApart, 'every first token delivered together');
  t.same(got.outs.map((o) => o.tokens), ref.outs.map((o) => o.tokens), 'the same tokens');
  t.same(got.outs.map((o) => o.probabilities), ref.outs.map((o) => o.probabilities), 'the same probabilities: the same ubatches, the same arithmetic');
});

// A later call of an early-output batch that finds no room in the pool: its rows are taken back
// (the first call's slots keep their first token) and built again in the next step, where KV
// pressure is relieved as usual. 256 cells in one pool; prompts of 20 and 40 tokens end in the
// first 64-row ubatch; a third of 250 tokens needs 246 more cells than the 192 left, so it fails
// with llama-server's error and the two others get every token.
t.test('a later call of an early-output batch without room: its rows are taken back, the long prompt fails with "Context size has been exceeded.", the others get every token', async (t) => {
  const small = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 256, nParallel: 3, kvUnified: true, nUbatch: 64, nBatch: 512, prefillBudget: 0, prefillBudgetMs: 0 });
  t.teardown(() => small.dispose());
  const long = model.tokenize(LONG_PROMPT, true, true).slice(0, 250);
  const a = model.tokenize(LONG_PROMPT.slice(400), true, true).slice(0, 20);
  const b = model.tokenize(LONG_PROMPT.slice(200), true, true).slice(0, 40);
  t.same([a.length, b.length, long.length], [20, 40, 250]);
  const task = (p: number[]) => ({ prompt: p, nPredict: 4, sampling: { temperature: 0, ignoreEos: true } });
  const before = small.native.metrics().earlyOutputCalls;
  const [first, second, third] = await small.submitAll([task(a), task(b), task(long)]);
  await t.rejects(third!, { message: 'Context size has been exceeded.' });
  const served = await Promise.all([first!, second!]);
  t.same(served.map((r) => r.tokens.length), [4, 4], 'each short prompt got all its tokens');
  if (small.native.info().earlyOutputs) t.equal(small.native.metrics().earlyOutputCalls - before, 1, 'the first call ended early');
  const after = await small.run(task(long.slice(0, 100)));
  t.equal(after.tokens.length, 4, 'the engine keeps serving');
});

t.test('without a budget (0) a prompt arriving mid-stream goes in one n_batch step, stalling the streams', async (t) => {
  const whole = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 2048, nParallel: 3, prefillBudget: 0, prefillBudgetMs: 0 });
  t.teardown(() => whole.dispose());
  const together = await streamsThenLongPrompt(whole, 40);
  t.ok(together.streamTokensAfterLongFirst > 40, `${together.streamTokensAfterLongFirst} stream tokens came after the long prompt's first token`);
});

t.test('alone, a prompt fills n_batch whatever the budget or time target (no slowdown of prompt processing)', async (t) => {
  const chunked = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 2048, nParallel: 3, prefillBudget: 8, prefillBudgetMs: 0.001 });
  t.teardown(() => chunked.dispose());
  const before = chunked.native.metrics().decodeCalls;
  const out = await chunked.run(greedy(LONG_PROMPT, 1, { cachePrompt: false }));
  t.ok(out.nPrompt > 200);
  t.equal(chunked.native.metrics().decodeCalls - before, 1, 'one decode for the whole prompt');
});

// Adaptive LIFO (EngineParams.overloadLifoMs): tasks waiting for a slot get one oldest first, but
// newest first once the oldest has waited the threshold; prompts then go in by admission order.
// Two blockers of the same shape hold both slots and end in the same step, so the three waiting
// tasks are admitted in one pass. nBatch 32 feeds each waiting ~100-token prompt over several
// steps, one prompt after the other, so the order of their first tokens is the order they were
// fed in; the third waits for one of the first two to end.
async function firstTokenOrder(t: Test, overloadLifoMs: number): Promise<string[]> {
  const e = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 2048, nParallel: 2, nBatch: 32, nUbatch: 32, overloadLifoMs });
  try {
    t.equal(e.native.info().overloadLifoMs, overloadLifoMs);
    let release!: () => void;
    const blocking = new Promise<void>((r) => (release = r));
    let blockerTokens = 0;
    const blockers = await e.submitAll([greedy('Blocker', 64, { cachePrompt: false }), greedy('Blocker', 64, { cachePrompt: false })], {
      onToken: () => () => {
        blockerTokens++;
        release();
      },
    });
    await blocking;
    const order: string[] = [];
    const names = ['A', 'B', 'C'];
    const waiting = await e.submitAll(names.map((name) => greedy(`${name}: ${LONG_PROMPT.slice(0, 400)}`, 2, { cachePrompt: false })), {
      onToken: (index) => () => { if (!order.includes(names[index]!)) order.push(names[index]!); },
    });
    t.ok(blockerTokens < 2 * 64, 'the three were queued while the blockers held both slots');
    await Promise.all([...blockers, ...waiting]);
    return order;
  } finally {
    await e.dispose();
  }
}

t.test('adaptive LIFO: once the oldest waiting task has waited the threshold, free slots go to the newest first and their prompts go in newest first', async (t) => {
  t.same(await firstTokenOrder(t, 0.001), ['C', 'B', 'A'], 'a microsecond threshold: every wait is overload');
});

t.test('adaptive LIFO off (0), or a threshold not reached: waiting tasks get slots and prompt steps oldest first', async (t) => {
  t.same(await firstTokenOrder(t, 0), ['A', 'B', 'C'], '0: always oldest first');
  t.same(await firstTokenOrder(t, 3_600_000), ['A', 'B', 'C'], 'an hour: not reached');
});

t.test('the adaptive LIFO threshold is validated; 1000 ms by default', async (t) => {
  for (const bad of [-1, 3_600_001, Number.NaN, Number.POSITIVE_INFINITY, 'soon']) {
    await t.rejects(InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 1, overloadLifoMs: bad as number }),
      { code: 'INVALID_ARGUMENT', message: 'params.overloadLifoMs must be a number of milliseconds from 0 (always oldest first) to 3600000' }, `overloadLifoMs ${String(bad)}`);
  }
  const defaults = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 1 });
  t.teardown(() => defaults.dispose());
  t.equal(defaults.native.info().overloadLifoMs, 1000);
});

// Burst wait (EngineParams.burstWaitMs): an idle engine that receives a task waits for more while
// they keep coming, so that requests sent a few milliseconds apart share their first batch. Two
// one-token tasks submitted 50 ms apart to an idle engine: with a 500 ms wait (room for a slow
// timer) they are decoded by one call; without one the first is decoded alone as it arrives.
async function decodeCallsForTwoArrivals(burstWaitMs: number): Promise<{ calls: number; info: number }> {
  const e = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 2, burstWaitMs });
  try {
    const before = e.native.metrics().decodeCalls;
    const first = e.run(greedy('First arrival', 1, { cachePrompt: false }));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const second = e.run(greedy('Second arrival', 1, { cachePrompt: false }));
    await Promise.all([first, second]);
    return { calls: e.native.metrics().decodeCalls - before, info: e.native.info().burstWaitMs };
  } finally {
    await e.dispose();
  }
}

t.test('burst wait: an idle engine takes tasks arriving within the wait into its first batch; without a wait the first goes alone', async (t) => {
  t.same(await decodeCallsForTwoArrivals(500), { calls: 1, info: 500 }, 'one call for both');
  t.same(await decodeCallsForTwoArrivals(0), { calls: 2, info: 0 }, 'the first decoded alone, the second after it');
});

// A task cancelled while an idle engine waits for the rest of its burst leaves the queue there
// (Engine::gather_burst takes cancels as they come): it is never admitted nor decoded, and the
// task that arrives after it is decoded alone.
t.test('burst wait: a task cancelled during the wait is never decoded', async (t) => {
  const e = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 2, burstWaitMs: 1000 });
  t.teardown(() => e.dispose());
  const before = e.native.metrics();
  const stop = new AbortController();
  const [cancelled] = await e.submitAll([greedy('Cancelled while the engine waits for the burst', 4, { cachePrompt: false })], { signal: stop.signal });
  stop.abort(new Error('cancelled by the test'));
  await t.rejects(cancelled!, /cancelled by the test/);
  const next = greedy('After the cancel', 1, { cachePrompt: false });
  const outcome = await e.run(next);
  const m = e.native.metrics();
  t.equal(outcome.nPrompt, next.prompt.length);
  t.equal(m.promptTokens - before.promptTokens, next.prompt.length, 'only the next task\'s prompt was decoded');
  t.equal(m.decodeCalls - before.decodeCalls, 1, 'in one call');
  t.equal(m.queued, 0, 'nothing left waiting');
  t.equal(m.busySlots, 0, 'no slot held');
});

// Requests the server is preparing (InferenceEngine.beginPreparing: received, their chat template
// or prompt still being prepared) are waited for too, up to 25 times burstWaitMs. With a 40 ms
// wait a burst ends 40 ms after its last task and 200 ms after its first at most; a task
// submitted 400 ms after the first goes into a second call unless it was counted as being
// prepared (waited for up to 1,000 ms). One that ends without submitting (its request failed)
// holds nothing: with a 400 ms wait the engine would wait for it 10 s, and it starts as soon as
// the burst's quiet time has passed.
async function twoArrivals(prepared: boolean): Promise<{ calls: number; preparingAfter: number }> {
  const e = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 2, burstWaitMs: 40 });
  try {
    const before = e.native.metrics().decodeCalls;
    if (prepared) {
      e.beginPreparing();
      e.beginPreparing();
    }
    const [first] = await e.submitAll([greedy('First arrival', 1, { cachePrompt: false })], { prepared });
    await new Promise((resolve) => setTimeout(resolve, 400)); // the second request being prepared
    const [second] = await e.submitAll([greedy('Second arrival', 1, { cachePrompt: false })], { prepared });
    await Promise.all([first, second]);
    return { calls: e.native.metrics().decodeCalls - before, preparingAfter: e.native.metrics().preparing };
  } finally {
    await e.dispose();
  }
}

t.test('burst wait: an idle engine waits for requests being prepared to submit their tasks; one that ends without holds nothing', async (t) => {
  t.same(await twoArrivals(true), { calls: 1, preparingAfter: 0 }, 'counted as being prepared: both in one call');
  t.same(await twoArrivals(false), { calls: 2, preparingAfter: 0 }, 'not counted: the first decoded alone once the burst was over');

  const e = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 2, burstWaitMs: 400 });
  t.teardown(() => e.dispose());
  e.beginPreparing();
  const startedAt = performance.now();
  const [alone] = await e.submitAll([greedy('Submitted beside a request that fails', 1, { cachePrompt: false })]);
  setTimeout(() => e.endPreparing(), 100);
  const outcome = await alone!;
  const elapsed = performance.now() - startedAt;
  t.equal(outcome.tokens.length, 1);
  t.ok(elapsed < 5000, `decoded ${elapsed.toFixed(0)} ms after it was submitted, not after the 10 s a request being prepared is waited for`);
  t.equal(e.native.metrics().preparing, 0);
});

t.test('the burst wait is validated; 4 ms by default where the build has no GPU backend, 0 where it has one', async (t) => {
  for (const bad of [-1, 1001, Number.NaN, Number.POSITIVE_INFINITY, 'soon']) {
    await t.rejects(InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 1, burstWaitMs: bad as number }),
      { code: 'INVALID_ARGUMENT', message: 'params.burstWaitMs must be a number of milliseconds from 0 (no wait) to 1000' }, `burstWaitMs ${String(bad)}`);
  }
  const defaults = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 1 });
  t.teardown(() => defaults.dispose());
  t.equal(defaults.native.info().burstWaitMs, native.systemInfo().backend === 'CPU' ? 4 : 0);
});

t.test('the prefill budget is validated', async (t) => {
  for (const bad of [-1, 1.5, Number.NaN, 'many', 2 ** 31]) {
    await t.rejects(InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 1, prefillBudget: bad as number }),
      { code: 'INVALID_ARGUMENT', message: 'params.prefillBudget must be an integer >= 0 (0: no budget)' }, `prefillBudget ${String(bad)}`);
  }
  for (const bad of [-1, 3_600_001, Number.NaN, Number.POSITIVE_INFINITY, 'soon']) {
    await t.rejects(InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 1, prefillBudgetMs: bad as number }),
      { code: 'INVALID_ARGUMENT', message: 'params.prefillBudgetMs must be a number of milliseconds from 0 (no time target) to 3600000' }, `prefillBudgetMs ${String(bad)}`);
  }
  const defaults = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 1 });
  t.teardown(() => defaults.dispose());
  // Both follow whether the build has a GPU device (splitSteps: on without one, for a plain engine).
  const gpu = !defaults.native.info().splitSteps;
  t.equal(defaults.native.info().prefillBudget, gpu ? 0 : 512, gpu ? 'no token budget by default with a GPU device' : 'a 512-token budget by default without a GPU device');
  t.equal(defaults.native.info().prefillBudgetMs, 1000, 'time target by default');
});
