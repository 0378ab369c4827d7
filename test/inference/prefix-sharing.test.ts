// Prefix sharing across slots: a prompt takes the longest prefix any slot's KV cells hold, and
// waits for one another slot is computing, instead of computing it again. Greedy output must be
// what the server gives without sharing (--no-prefix-sharing), with 2+ slots, streamed and not,
// with context shift, with per-request LoRA scales and with images; cells a running task uses
// are never freed, and the pool's size (-c) is what it holds.
import t from 'tap';
import { InferenceEngine } from '../../src/inference/engine/engine.js';
import { ensureTestModels } from '../fixtures/models.js';
import { dataUrl, encodePng } from '../helpers/png.js';
import { parseSse, postJson, startTestServer, type TestServer } from '../helpers/inference-server.js';
import { TEST_THREADS } from '../helpers/test-threads.js';

const models = await ensureTestModels();

/** A prefix of a few hundred tokens that every prompt below starts with. */
const PREFIX = `You are a careful assistant. ${Array.from({ length: 40 }, (_, i) => `Rule ${i}: answer briefly and check the facts twice.`).join(' ')}`;
const prompts = (n: number) => Array.from({ length: n }, (_, i) => `${PREFIX}\nQuestion ${i}: what comes after ${i * 7}?`);

/**
 * A greedy pick whose two best candidates are closer than this in log-probability is a near tie:
 * other batch shapes round the same arithmetic differently (by about 1e-3 with the test model),
 * which may pick the other candidate whatever the sharing. Tokens are compared up to the first one.
 */
const NEAR_TIE = 0.01;

interface Answer {
  tokens: number[];
  /** Tokens before the first near tie. */
  decided: number;
  promptN: number;
  cacheN: number;
}

function answerOf(tokens: number[], probs: Array<{ top_logprobs: Array<{ logprob: number }> }>, timings: { prompt_n: number; cache_n: number }): Answer {
  const tie = probs.findIndex((p) => p.top_logprobs[0]!.logprob - p.top_logprobs[1]!.logprob < NEAR_TIE);
  return { tokens, decided: tie < 0 ? tokens.length : tie, promptN: timings.prompt_n, cacheN: timings.cache_n };
}

async function complete(base: string, body: Record<string, unknown>): Promise<Answer> {
  const res = await postJson(`${base}/completion`, { n_predict: 12, temperature: 0, n_probs: 2, return_tokens: true, ...body });
  if (res.status !== 200) throw new Error(`POST /completion: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
  return answerOf(res.body.tokens, res.body.completion_probabilities, res.body.timings);
}

async function completeStreamed(base: string, body: Record<string, unknown>): Promise<Answer> {
  const res = await fetch(`${base}/completion`, { method: 'POST', body: JSON.stringify({ n_predict: 12, temperature: 0, n_probs: 2, return_tokens: true, ...body, stream: true }) });
  if (res.status !== 200) throw new Error(`POST /completion (stream): ${res.status}`);
  const events = parseSse(await res.text()) as any[];
  const final = events.at(-1);
  return answerOf(events.flatMap((e) => e.tokens ?? []), events.flatMap((e) => e.completion_probabilities ?? []), final.timings);
}

/** Each answer's tokens equal the reference's up to the reference's first near tie. */
function sameUpToNearTies(t: Tap.Test, got: Answer[], want: Answer[], what: string): void {
  t.equal(got.length, want.length);
  const cut = (a: Answer, n: number) => a.tokens.slice(0, n);
  t.same(got.map((g, i) => cut(g, want[i]!.decided)), want.map((w) => cut(w, w.decided)), `${what}: the tokens of the server without sharing, up to its first near tie`);
  t.ok(want.every((w) => w.decided >= 3), `${what}: each answer has at least 3 tokens before a near tie (${want.map((w) => w.decided).join(', ')})`);
}

async function metric(base: string, name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`llamacpp:${name} `));
  return Number(line?.split(' ')[1]);
}

async function pair(options: Parameters<typeof startTestServer>[1], t: Tap.Test): Promise<{ shared: TestServer; plain: TestServer }> {
  const shared = await startTestServer(models.chat, options);
  t.teardown(shared.close);
  const plain = await startTestServer(models.chat, { ...options, engine: { ...options.engine, prefixSharing: false } });
  t.teardown(plain.close);
  return { shared, plain };
}

t.test('prompts sent together that share a prefix: one computes it, the others take it; the same tokens as without sharing', async (t) => {
  const { shared, plain } = await pair({ parallel: 4, ctxSize: 4096 }, t);
  t.equal((await shared.server.ready).engine.native.info().prefixSharing, true, 'on by default with a unified pool');
  t.equal((await plain.server.ready).engine.native.info().prefixSharing, false, '--no-prefix-sharing turns it off');
  const bodies = prompts(4).map((prompt) => ({ prompt }));
  const prefixTokens = ((await postJson(`${shared.base}/tokenize`, { content: `${PREFIX}\nQuestion` })).body.tokens as number[]).length;
  t.ok(prefixTokens > 300, `the shared prefix has ${prefixTokens} tokens`);

  for (const [mode, run] of [['not streamed', complete], ['streamed', completeStreamed]] as const) {
    const want = await Promise.all(bodies.map((b) => run(plain.base, { ...b, cache_prompt: false })));
    t.ok(want.every((w) => w.cacheN === 0 && w.promptN > prefixTokens), `${mode}: without sharing every prompt is computed whole`);
    const before = await metric(shared.base, 'prompt_tokens_shared_total');
    // A fresh prefix for each mode: no slot holds it yet, so the four arrive to an empty pool.
    const got = await Promise.all(bodies.map((b) => run(shared.base, { ...b, prompt: `${mode} ${b.prompt}` })));
    const computed = got.reduce((sum, g) => sum + g.promptN, 0);
    t.ok(computed < prefixTokens + 4 * 20, `${mode}: ${computed} prompt tokens computed in all, the prefix (${prefixTokens}) once`);
    t.equal(got.filter((g) => g.cacheN >= prefixTokens - 1).length, 3, `${mode}: three prompts took the prefix from another slot (cache_n ${got.map((g) => g.cacheN).join(', ')})`);
    t.ok((await metric(shared.base, 'prompt_tokens_shared_total')) - before >= 3 * (prefixTokens - 1), `${mode}: /metrics counts the shared tokens`);
    const plainAgain = await Promise.all(bodies.map((b) => run(plain.base, { ...b, prompt: `${mode} ${b.prompt}`, cache_prompt: false })));
    sameUpToNearTies(t, got, plainAgain, mode);
  }
  t.equal(await metric(plain.base, 'prompt_tokens_shared_total'), 0, 'nothing is shared without sharing');
});

t.test('tasks submitted together join the one computing their common prefix: it is computed once, in one step', async (t) => {
  const { shared } = await pair({ parallel: 4, ctxSize: 4096 }, t);
  const service = await shared.server.ready;
  const model = service.model;
  const specs = prompts(4).map((text) => ({ prompt: model.tokenize(`Joined ${text}`, true, true), nPredict: 4, sampling: { temperature: 0 } }));
  const before = service.engine.native.metrics();
  const outcomes = await Promise.all(await service.engine.submitAll(specs));
  const after = service.engine.native.metrics();
  t.equal(after.sharedJoins - before.sharedJoins, 3, 'three tasks waited for the first');
  t.same(outcomes.map((o) => o.nCached > 0), [false, true, true, true], `the first computed the prefix, the others took it (${outcomes.map((o) => o.nCached).join(', ')})`);
  const computed = after.promptTokens - before.promptTokens;
  t.equal(computed, specs.reduce((n, s) => n + s.prompt.length, 0) - outcomes.reduce((n, o) => n + o.nCached, 0), '/metrics counts only computed tokens');
  t.ok(after.sharedTokens - before.sharedTokens === outcomes.reduce((n, o) => n + o.nCached, 0), 'every cached token came from the first task');
});

t.test('a prompt takes a prefix from an idle slot that keeps its own cache', async (t) => {
  // No host-memory prompt cache: idle slots keep their cells in the pool (with one, as
  // llama-server's --cache-idle-slots, they go to host memory whenever a task starts).
  const { shared } = await pair({ parallel: 2, ctxSize: 4096, engine: { promptCacheMib: 0 } }, t);
  // The first prompt's own part is long (a tenth of it and more): the second, sharing only the
  // prefix, goes to the empty slot rather than destroy it.
  const [a0, b] = prompts(2);
  const a = `${a0} ${'Then think about it once more and answer in full sentences. '.repeat(8)}`;
  const first = await complete(shared.base, { prompt: a });
  t.equal(first.cacheN, 0);
  const second = await complete(shared.base, { prompt: b });
  t.ok(second.cacheN > 300 && second.promptN < 20, `the second prompt computed ${second.promptN} tokens and took ${second.cacheN}`);
  const again = await complete(shared.base, { prompt: a });
  t.equal(again.cacheN + again.promptN, first.promptN, 'the first prompt comes back');
  t.ok(again.promptN <= 1, `its slot still holds all of it (${again.promptN} computed): the second went to the other slot`);
  // Its last token is computed again alone (the first time in a batch of the whole prompt).
  sameUpToNearTies(t, [again], [first], 'the prompt that came back');
});

t.test('context shift: a slot whose shared cells move gets cells of its own first; the other slot is not disturbed', async (t) => {
  // Each slot holds at most 580 tokens (--kv-unified-per-slot), a dozen past the prompts: the
  // answers shift every 20 tokens, keeping 10 and dropping the 20 after them, so the cells that
  // move are shared ones.
  const { shared, plain } = await pair({ parallel: 3, ctxSize: 2048, engine: { contextShift: true, nCtxSlotMax: 580 } }, t);
  const body = (prompt: string) => ({ prompt, n_predict: 48, n_keep: 10, n_discard: 20, ignore_eos: true });
  const texts = prompts(3);
  const want = await Promise.all(texts.map((p) => complete(plain.base, body(p))));
  const got = await Promise.all(texts.map((p) => complete(shared.base, body(p))));
  t.equal(got.filter((g) => g.cacheN > 500).length, 2, `two answers took the first one's prefix (cache_n ${got.map((g) => g.cacheN).join(', ')})`);
  const shifts = Number((await (await fetch(`${shared.base}/metrics`)).text()).match(/llamacpp:n_tokens_max (\d+)/)?.[1]);
  t.ok(shifts >= 579, 'the slots filled up and shifted');
  sameUpToNearTies(t, got, want, 'with context shifts');
  t.ok(want.some((w, i) => w.decided > 580 - (w.promptN + w.cacheN) + 20), `an answer is compared past its second shift (${want.map((w) => w.decided).join(', ')} tokens decided)`);
});

t.test('--cache-reuse: cells a slot moved are not shared; a prompt takes only the exact prefix before them', async (t) => {
  const { shared, plain } = await pair({ parallel: 2, ctxSize: 4096, engine: { promptCacheMib: 0 } }, t);
  const middle = ' Then think about it once more and answer in full sentences.'.repeat(6);
  const tail = '\nQuestion: what comes after 41? Answer with a number and nothing else, please.';
  const full = `${PREFIX}${middle}${tail}`;
  const cut = `${PREFIX}${tail}`;
  const prefixTokens = (await postJson(`${shared.base}/tokenize`, { content: PREFIX, add_special: true })).body.tokens.length as number;
  // Slot 0 computes the full prompt, then the cut one with cache reuse: the tail's cells move back
  // over the removed middle (shifted K/V, not what a fresh computation gives).
  await complete(shared.base, { prompt: full, id_slot: 0 });
  const reused = await complete(shared.base, { prompt: cut, id_slot: 0, n_cache_reuse: 4 });
  t.ok(reused.cacheN > prefixTokens + 10, `slot 0 reused the moved tail (cache_n ${reused.cacheN}, prefix ${prefixTokens})`);
  // The cut prompt and more on slot 1: it may take slot 0's prefix, not its moved tail.
  const longer = `${cut} And then the one after that.`;
  const got = await complete(shared.base, { prompt: longer, id_slot: 1 });
  t.ok(got.cacheN <= prefixTokens + 1, `slot 1 took ${got.cacheN} tokens, no more than the exact prefix (${prefixTokens}, the boundary token's merge aside)`);
  t.ok(got.cacheN >= prefixTokens - 2, 'and it took that prefix');
  const want = await complete(plain.base, { prompt: longer, id_slot: 1 });
  sameUpToNearTies(t, [got], [want], 'after a cache reuse');
});

t.test('per-request LoRA scales: prefixes are shared only between prompts computed under the same scales', async (t) => {
  const { shared, plain } = await pair({ parallel: 4, ctxSize: 4096, loras: [{ path: models.lora, scale: 0 }] }, t);
  const [a, b, c] = prompts(3);
  const bodies = [{ prompt: a, lora: [{ id: 0, scale: 1 }] }, { prompt: b, lora: [{ id: 0, scale: 0 }] }, { prompt: c, lora: [{ id: 0, scale: 1 }] }];
  const want = [];
  for (const body of bodies) want.push(await complete(plain.base, body));
  const got = [];
  for (const body of bodies) got.push(await complete(shared.base, body));
  t.equal(got[0]!.cacheN, 0);
  t.equal(got[1]!.cacheN, 0, 'a prompt under other scales computes the prefix again');
  t.ok(got[2]!.cacheN > 300, `a prompt under the first one's scales takes its prefix (${got[2]!.cacheN})`);
  sameUpToNearTies(t, got, want, 'with LoRA scales per request');
});

t.test('images: the same image at the same place is shared, another image is not', async (t) => {
  const { shared, plain } = await pair({ parallel: 3, ctxSize: 4096, mmproj: models.mmproj }, t);
  const red = encodePng(64, 64, () => [220, 30, 30]);
  const blue = encodePng(64, 64, () => [30, 30, 220]);
  const media = (png: Buffer, question: string) => ({ prompt: { prompt_string: `${PREFIX}\nLook: <__media__> ${question}`, multimodal_data: [dataUrl(png).split(',')[1]] } });
  const bodies = [media(red, 'What colour?'), media(red, 'Which shape?'), media(blue, 'What colour?')];
  const want = [];
  for (const body of bodies) want.push(await complete(plain.base, body));
  const got = [];
  for (const body of bodies) got.push(await complete(shared.base, body));
  const prefixTokens = ((await postJson(`${shared.base}/tokenize`, { content: `${PREFIX}\nLook:` })).body.tokens as number[]).length;
  t.ok(got[1]!.cacheN >= prefixTokens + 64, `the same image is shared with the text before it (${got[1]!.cacheN} tokens)`);
  t.ok(got[2]!.cacheN >= prefixTokens - 1 && got[2]!.cacheN < prefixTokens + 64, `another image: only the text before it (${got[2]!.cacheN} tokens)`);
  sameUpToNearTies(t, got, want, 'with images');
});

t.test('a shared prefix outlives the task that computed it, and sharing fits in the pool what copies would not', async (t) => {
  // 4 prompts of ~570 tokens: about 4 x 600 = 2400 cells as copies, about 570 + 4 x 70 with the
  // prefix shared; the pool holds 1024.
  const { shared } = await pair({ parallel: 4, ctxSize: 1024, engine: { promptCacheMib: 0 } }, t);
  const solo = await startTestServer(models.chat, { parallel: 1, ctxSize: 1024, engine: { prefixSharing: false, promptCacheMib: 0 } });
  t.teardown(solo.close);
  const [first, ...rest] = prompts(4);
  const bodies = rest.map((prompt) => ({ prompt, n_predict: 60, ignore_eos: true }));
  const want = [];
  for (const body of bodies) want.push(await complete(solo.base, { ...body, cache_prompt: false }));
  // The first computes the prefix and generates until it is cancelled (cache_prompt false: its
  // cells are freed then); the others start once it generates, take its prefix, and it is
  // cancelled as soon as each of them has its first token.
  const stop = new AbortController();
  const computing = await fetch(`${shared.base}/completion`, { method: 'POST', body: JSON.stringify({ prompt: first, n_predict: 900, ignore_eos: true, cache_prompt: false, stream: true }), signal: stop.signal });
  const reader = computing.body!.getReader();
  await reader.read(); // its first token: the prefix is in the pool
  const firstTokens: Array<Promise<void>> = [];
  const answers = bodies.map((body) => {
    let sawToken!: () => void;
    firstTokens.push(new Promise<void>((resolve) => (sawToken = resolve)));
    return (async () => {
      const res = await fetch(`${shared.base}/completion`, { method: 'POST', body: JSON.stringify({ n_probs: 2, return_tokens: true, temperature: 0, ...body, stream: true }) });
      const decoder = new TextDecoder();
      let text = '';
      for await (const chunk of res.body!) {
        text += decoder.decode(chunk, { stream: true });
        if (text.includes('"tokens":[')) sawToken();
      }
      return parseSse(text) as any[];
    })();
  });
  const cancelled = Promise.all(firstTokens).then(() => stop.abort());
  const done = await Promise.all(answers);
  await cancelled;
  const got = done.map((events) => answerOf(events.flatMap((e) => e.tokens ?? []), events.flatMap((e) => e.completion_probabilities ?? []), events.at(-1).timings));
  t.ok(got.every((g) => g.tokens.length === 60), 'every task got all its tokens: none failed for room');
  t.ok(got.every((g) => g.cacheN > 500), `they took the prefix (${got.map((g) => g.cacheN).join(', ')})`);
  sameUpToNearTies(t, got, want, 'after the computing task freed its cells');
  const slots = (await (await fetch(`${shared.base}/slots`)).json()) as Array<{ n_ctx: number }>;
  t.ok(slots.every((s) => s.n_ctx === 1024), 'the pool is the size -c gave it');
});

t.test('KV pressure evicts the least recently used idle slot first; the others keep their cache', async (t) => {
  // No host-memory prompt cache: an evicted slot's prompt is gone. Two unrelated prompts of ~290
  // tokens fill two idle slots; a third generating 300 more needs room for ~590: the older idle
  // slot goes, the newer one stays (1024 cells: 290 + 590 fit, 2 x 290 + 590 do not).
  const { shared } = await pair({ parallel: 3, ctxSize: 1024, engine: { promptCacheMib: 0 } }, t);
  const short = PREFIX.slice(0, PREFIX.indexOf('Rule 20:'));
  const older = `Old ${short}`;
  const newer = `New ${short}`;
  await complete(shared.base, { prompt: older, n_predict: 1 });
  await complete(shared.base, { prompt: newer, n_predict: 1 });
  const big = await complete(shared.base, { prompt: `Big ${short}`, n_predict: 300, ignore_eos: true });
  t.equal(big.tokens.length, 300);
  const newerAgain = await complete(shared.base, { prompt: newer, n_predict: 1 });
  t.ok(newerAgain.cacheN > 250, `the more recently used idle slot kept its cache (cache_n ${newerAgain.cacheN})`);
  const olderAgain = await complete(shared.base, { prompt: older, n_predict: 1 });
  t.ok(olderAgain.cacheN < 10, `the least recently used one was evicted (cache_n ${olderAgain.cacheN})`);
});

t.test('--prefix-sharing and --no-prefix-sharing on the command line', async (t) => {
  const { prefixSharingOption } = await import('../../src/inference/server-config.js');
  t.same(prefixSharingOption({}), {}, 'neither: the engine decides (on with a unified pool)');
  t.same(prefixSharingOption({ prefixSharing: true }), { prefixSharing: true });
  t.same(prefixSharingOption({ noPrefixSharing: true }), { prefixSharing: false });
  t.throws(() => prefixSharingOption({ prefixSharing: true, noPrefixSharing: true }), /contradict/);
  const split = await import('../../src/inference/server-config.js');
  t.same(split.splitCommandLine(['-m', 'x.gguf', '--no-prefix-sharing']).own, { noPrefixSharing: true });
});

t.test('without a unified pool sharing is off unless asked for, and then copies between streams', async (t) => {
  const off = await startTestServer(models.chat, { parallel: 2, ctxSize: 2048, engine: { kvUnified: false } });
  t.teardown(off.close);
  t.equal((await off.server.ready).engine.native.info().prefixSharing, false, 'off by default (-np without --kv-unified)');
  const on = await startTestServer(models.chat, { parallel: 2, ctxSize: 2048, engine: { kvUnified: false, prefixSharing: true } });
  t.teardown(on.close);
  const [a, b] = prompts(2);
  const first = await complete(on.base, { prompt: a });
  const want = await complete(off.base, { prompt: b, cache_prompt: false });
  const second = await complete(on.base, { prompt: b });
  t.ok(second.cacheN > 300, `the second prompt took the first's prefix from the other stream (${second.cacheN})`);
  t.equal(first.cacheN, 0);
  sameUpToNearTies(t, [second], [want], 'between streams');
});

t.test('a task waiting for a prefix whose computing task is cancelled takes what it holds and computes the rest', async (t) => {
  // 64-token batches: the first prompt (~2,200 tokens) takes about 35 steps, so the second,
  // submitted once the first is queued, joins it while it is being fed; the first is cancelled
  // then, and with cache_prompt false its cells are freed as it ends: the waiting one must take
  // them before. (Two submissions are prepared on libuv's pool and reach the queue in either
  // order: submitted together, the second was sometimes admitted first, 2 runs in 40 under load.)
  const server = await startTestServer(models.chat, { parallel: 1, ctxSize: 1024 });
  t.teardown(server.close);
  const { model } = await server.server.ready;
  const e = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 8192, nParallel: 2, nBatch: 64, nUbatch: 64 });
  t.teardown(() => e.dispose());
  const long = `${PREFIX} ${PREFIX} ${PREFIX} ${PREFIX}`;
  const [a, b] = [`${long}\nQuestion A?`, `${long}\nQuestion B?`].map((text) => model.tokenize(text, true, true));
  const greedyB = { prompt: b!, nPredict: 12, nProbs: 2, sampling: { temperature: 0, nProbs: 2 } };
  const stop = new AbortController();
  const before = e.native.metrics();
  const [first] = await e.submitAll([{ prompt: a!, nPredict: 4, cachePrompt: false, sampling: { temperature: 0 } }], { signal: stop.signal });
  const computing = first!.catch((err: Error) => err);
  // The waiting task's first progress report comes when it is admitted (and joins): then the
  // computing one is cancelled.
  const waiting = await e.run({ ...greedyB, returnProgress: true }, { onToken: (tok) => { if (tok.progress) stop.abort(new Error('cancelled by the test')); } });
  t.match(String(await computing), /cancelled by the test/, 'the computing task was cancelled');
  t.equal(e.native.metrics().sharedJoins - before.sharedJoins, 1, 'the second task waited for the first');
  t.ok(waiting.nCached > 0 && waiting.nCached < a!.length - 64, `it took the part computed before the cancel (${waiting.nCached} tokens)`);
  const alone = await e.run({ ...greedyB, cachePrompt: false });
  const tie = alone.probabilities.findIndex((p) => Math.log(p.probs[0]!.p / p.probs[1]!.p) < NEAR_TIE);
  const decided = tie < 0 ? alone.tokens.length : tie;
  t.ok(decided >= 3, `at least 3 tokens before a near tie (${decided})`);
  t.same([...waiting.tokens].slice(0, decided), [...alone.tokens].slice(0, decided), 'its tokens are those of the prompt computed alone');
});

t.test('a prompt sharing a few more tokens with a waiting prompt than with the computing one waits for the computing one', async (t) => {
  // Three prompts submitted together: A computes the shared prefix P; B (P, then " Question", then
  // its own words) and C (P, " Question", other words) wait for it. C shares one token more with
  // B than with A, but B computes its own part only after A, a step later: C takes P from A in the
  // same step as B, rather than P and one token from B a step after it (12 agent requests: two
  // first tokens a step, 350 ms, after the ten others).
  const server = await startTestServer(models.chat, { parallel: 1, ctxSize: 1024 });
  t.teardown(server.close);
  const { model } = await server.server.ready;
  const e = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 4096, nParallel: 3 });
  t.teardown(() => e.dispose());
  const p = [...model.tokenize(PREFIX, true, true)];
  const words = (text: string): number[] => [...model.tokenize(text, false, false)];
  const question = words(' Question')[0]!;
  const a = [...p, ...words('\nAnswer A now.')];
  const b = [...p, question, ...words(' one: what comes after two?')];
  const c = [...p, question, ...words(' two: what comes after three?')];
  t.not(a[p.length], question, 'A leaves P another way');
  const task = (prompt: number[]) => ({ prompt: Int32Array.from(prompt), nPredict: 1, sampling: { temperature: 0 } });
  const before = e.native.metrics();
  const outcomes = await Promise.all(await e.submitAll([task(a), task(b), task(c)]));
  const after = e.native.metrics();
  t.same(outcomes.map((o) => o.nCached), [0, p.length, p.length], 'B and C took P from A');
  t.equal(after.sharedJoins - before.sharedJoins, 2, 'both waited for A');
  t.equal(after.decodeCalls - before.decodeCalls, 2, 'A\'s prompt, then B\'s and C\'s parts in one step');
});
