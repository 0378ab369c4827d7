// Engine.submit: tasks with images or a grammar are prepared off the JS thread (the others at
// once, queued before submit() returns), queued together or refused together with
// a coded error, cancellable while still being prepared; the submission settles before the
// first event of its tasks. Uses the raw native engine, so that every event it emits is seen.
import t from 'tap';
import { isNativeError, native, type CompletionTaskSpec, type EngineEvent, type NativeEngine } from '../../src/native/binding.js';
import { ensureTestModels } from '../fixtures/models.js';
import { encodePng } from '../helpers/png.js';

const models = await ensureTestModels();
const model = await native.Model.load(models.chat, {}).promise;
const vision = await native.Vision.load(model, models.mmproj, {});

const events: EngineEvent[] = [];
const endWaiters = new Map<number, () => void>();
const engine: NativeEngine = await native.Engine.create(model, { nCtx: 1024, nParallel: 2, vision }, (batch) => {
  for (const event of batch) {
    events.push(event);
    if (event.kind !== 'token') endWaiters.get(event.task)?.();
  }
});
t.teardown(async () => {
  await engine.dispose();
  vision.dispose();
  model.dispose();
});

const prompt = (text: string): Int32Array => model.tokenize(text, true, true);
const nCtxSlot = engine.info().nCtxSlot;
const red = encodePng(64, 64, () => [255, 0, 0]);

/** Submits the tasks and resolves with their last events (done or error), in order. */
async function runToEnd(specs: CompletionTaskSpec[]): Promise<EngineEvent[]> {
  const { ids, queued } = engine.submit(specs);
  const ends = ids.map((id) => new Promise<EngineEvent>((resolve) => endWaiters.set(id, () => resolve(events.find((e) => e.task === id && e.kind !== 'token')!))));
  await queued;
  return Promise.all(ends);
}

/** The Error that `specs`' submission is refused with. */
async function refusal(specs: CompletionTaskSpec[]): Promise<unknown> {
  try {
    await engine.submit(specs).queued;
  } catch (err) {
    return err;
  }
  throw new Error('the submission was not refused');
}

t.test('an invalid grammar is refused with BAD_SAMPLING', async (t) => {
  const err = await refusal([{ prompt: prompt('x'), sampling: { grammar: 'root ::= (' } }]);
  t.ok(isNativeError(err));
  t.match(err, { code: 'BAD_SAMPLING', message: 'invalid sampling parameters: failed to parse grammar' });
});

t.test('a prompt longer than a slot holds is refused with EXCEEDS_CONTEXT and both sizes', async (t) => {
  const err = await refusal([{ prompt: new Int32Array(nCtxSlot + 10).fill(100) }]);
  t.match(err, {
    code: 'EXCEEDS_CONTEXT',
    message: `the prompt (${nCtxSlot + 10} tokens) does not fit the context of ${nCtxSlot} tokens`,
    nPromptTokens: nCtxSlot + 10,
    nCtx: nCtxSlot,
  });
});

t.test('images that cannot be used are refused with BAD_MEDIA', async (t) => {
  const image = (bytes: Uint8Array, promptText = 'Look: <__media__> and say'): CompletionTaskSpec => ({ prompt: new Int32Array(0), promptText, media: [bytes] });
  t.match(await refusal([image(Buffer.from('certainly not an image'))]), { code: 'BAD_MEDIA', message: 'media file 0 is not in a supported format (PNG, JPEG, GIF, BMP, PSD, HDR or PNM images; WAV, MP3 or FLAC audio)' });
  t.match(await refusal([image(red.subarray(0, 60))]), { code: 'BAD_MEDIA', message: 'image 0 could not be decoded (corrupt or truncated)' });
  t.match(await refusal([image(red, 'no marker here')]), { code: 'BAD_MEDIA', message: 'the number of images and audio clips (1) does not match the number of media markers "<__media__>" in the prompt (0)' });
  t.match(await refusal([image(red, 'ends with the image <__media__>')]), { code: 'BAD_MEDIA', message: 'the prompt must continue with text after its last image or audio clip' });
});

t.test('refusals of the prompt itself carry their own codes', async (t) => {
  t.match(await refusal([{ prompt: new Int32Array(0) }]), { code: 'EMPTY_PROMPT', message: 'the prompt is empty' });
  t.match(await refusal([{ prompt: new Int32Array([1, 1 << 30]) }]), { code: 'TOKEN_OUT_OF_RANGE', message: `prompt token out of range: ${1 << 30}` });
  t.match(await refusal([{ prompt: prompt('x'), sampling: { logitBias: [[1 << 30, 1]] } }]), { code: 'TOKEN_OUT_OF_RANGE', message: 'logitBias token out of range' });
  t.match(await refusal([{ kind: 'embedding', prompt: prompt('x') }]), {
    code: 'NOT_SUPPORTED', message: 'this engine generates text; embeddings need an engine created with embeddings: true',
  });
});

t.test('arguments of the wrong type throw INVALID_ARGUMENT at once', async (t) => {
  const wrong = (specs: unknown) => () => engine.submit(specs as CompletionTaskSpec[]);
  t.throws(wrong({ prompt: prompt('x') }), { name: 'TypeError', code: 'INVALID_ARGUMENT', message: 'submit(tasks): tasks must be an array' });
  t.throws(wrong([{ prompt: [1, 2, 3] }]), { name: 'TypeError', code: 'INVALID_ARGUMENT', message: 'task.prompt must be an Int32Array of tokens' });
  t.throws(wrong([{ prompt: prompt('x'), stop: 'a' }]), { code: 'INVALID_ARGUMENT', message: 'task.stop must be an array of strings' });
  t.throws(() => engine.cancel('1' as unknown as number), { code: 'INVALID_ARGUMENT', message: 'cancel(taskId)' });
});

t.test('a refused submission queues none of its tasks', async (t) => {
  const before = engine.metrics().tasksDone;
  const err = await refusal([{ prompt: prompt('fine'), nPredict: 2 }, { prompt: prompt('x'), sampling: { grammar: 'root ::= (' } }]);
  t.match(err, { code: 'BAD_SAMPLING' });
  const [marker] = await runToEnd([{ prompt: prompt('marker'), nPredict: 2 }]);
  t.equal(marker!.kind, 'done');
  t.equal(engine.metrics().tasksDone - before, 1, 'only the marker task ran');
});

t.test('the submission resolves before the first event of its tasks', async (t) => {
  const order: string[] = [];
  const { ids, queued } = engine.submit([{ prompt: prompt('Order'), nPredict: 2 }]);
  const ended = new Promise<void>((resolve) => endWaiters.set(ids[0]!, resolve));
  const seenBefore = events.length;
  await queued;
  order.push(`queued after ${events.length - seenBefore} events`);
  await ended;
  order.push(`ended after ${events.filter((e) => e.task === ids[0]).length} events`);
  t.same(order, ['queued after 0 events', 'ended after 3 events']);
});

// Sent to libuv's pool, a task waited for the JS thread to come back to the worker's completion
// before it was queued: in a burst of requests, behind the others being read.
// Whether `queued` is settled when submit() returns is read after one microtask turn, during which
// no libuv callback can run. (A setImmediate marker raced the task's own end: with one token to
// predict, the engine's done event could reach the poll phase before the check phase fired.)
t.test('a task without images or a grammar is queued before submit() returns; one with a grammar is prepared off the JS thread', async (t) => {
  const queuedAtReturn = async (spec: CompletionTaskSpec): Promise<boolean> => {
    const { ids, queued } = engine.submit([spec]);
    const ended = new Promise<void>((resolve) => endWaiters.set(ids[0]!, resolve));
    let settled = false;
    void queued.then(() => { settled = true; });
    await null;
    const atReturn = settled;
    await queued;
    await ended;
    return atReturn;
  };
  t.equal(await queuedAtReturn({ prompt: prompt('At once'), nPredict: 1 }), true, 'queued when submit() returned');
  t.equal(await queuedAtReturn({ prompt: prompt('With a grammar'), nPredict: 1, sampling: { grammar: 'root ::= "a"' } }), false, 'queued later, by the pool');
});

t.test('a task cancelled while it is prepared is never queued and emits nothing', async (t) => {
  const big = encodePng(2048, 2048, () => [10, 200, 10]);
  const before = engine.metrics().tasksDone;
  const { ids, queued } = engine.submit([{ prompt: new Int32Array(0), promptText: 'Look: <__media__> and say', media: [big], nPredict: 4 }]);
  engine.cancel(ids[0]!);
  await queued;
  t.equal(engine.metrics().queued, 0, 'nothing waits in the queue');
  await runToEnd([{ prompt: prompt('marker'), nPredict: 2 }]);
  t.equal(engine.metrics().tasksDone - before, 1, 'only the marker task ran');
  t.same(events.filter((e) => e.task === ids[0]), [], 'no event of the cancelled task');
});

t.test('decoding a large image does not hold the JS thread', async (t) => {
  const big = encodePng(3000, 3000, (x) => [x % 256, 100, 50]);
  const order: string[] = [];
  const { ids, queued } = engine.submit([{ prompt: new Int32Array(0), promptText: 'Look: <__media__> and say', media: [big], nPredict: 2 }]);
  const ended = new Promise<void>((resolve) => endWaiters.set(ids[0]!, resolve));
  setImmediate(() => order.push('the event loop turned'));
  await queued;
  order.push('the image was decoded and the task queued');
  t.same(order, ['the event loop turned', 'the image was decoded and the task queued']);
  await ended;
  t.match(events.find((e) => e.task === ids[0] && e.kind !== 'token'), { kind: 'done', nPredicted: 2 }, 'the task then ran');
});

// beginPreparing() counts a request the server is preparing (an idle engine gathering a burst
// waits for it); each count ends once: by submit(tasks, true) however the submission ends (queued
// at once, queued after the pool prepared it, refused there or at once, thrown), or by endPreparing().
t.test('a request being prepared stops counting once its submission is queued, refused or thrown, or when it ends without', async (t) => {
  const preparing = (): number => engine.metrics().preparing;
  t.equal(preparing(), 0);
  engine.beginPreparing();
  engine.beginPreparing();
  t.equal(preparing(), 2, 'two requests being prepared');
  await runToEnd([{ prompt: prompt('Queued at once'), nPredict: 1 }]);
  t.equal(preparing(), 2, 'a submission not counted ends none');

  const ended = (id: number): Promise<void> => new Promise((resolve) => endWaiters.set(id, resolve));
  const plain = engine.submit([{ prompt: prompt('Prepared, queued at once'), nPredict: 1 }], true);
  t.equal(preparing(), 1, 'queued before submit() returned: settled');
  const plainEnded = ended(plain.ids[0]!);
  await plain.queued;

  const withGrammar = engine.submit([{ prompt: prompt('Prepared, with a grammar'), nPredict: 1, sampling: { grammar: 'root ::= "a"' } }], true);
  t.equal(preparing(), 1, 'prepared on the pool: counts until it is queued');
  const grammarEnded = ended(withGrammar.ids[0]!);
  await withGrammar.queued;
  t.equal(preparing(), 0, 'queued: settled');
  await Promise.all([plainEnded, grammarEnded]);

  engine.beginPreparing();
  const badGrammar = engine.submit([{ prompt: prompt('Bad grammar'), nPredict: 1, sampling: { grammar: 'root ::= (' } }], true);
  await t.rejects(badGrammar.queued, { code: 'BAD_SAMPLING' });
  t.equal(preparing(), 0, 'refused on the pool: settled');

  engine.beginPreparing();
  const outOfRange = engine.submit([{ prompt: Int32Array.of(1 << 30), nPredict: 1 }], true);
  await t.rejects(outOfRange.queued, { code: 'TOKEN_OUT_OF_RANGE' });
  t.equal(preparing(), 0, 'refused at once: settled');

  engine.beginPreparing();
  t.throws(() => engine.submit('not an array' as unknown as CompletionTaskSpec[], true), { code: 'INVALID_ARGUMENT' });
  t.equal(preparing(), 0, 'submit() threw: settled');

  engine.beginPreparing();
  engine.endPreparing();
  t.equal(preparing(), 0, 'ended without a submission');
  engine.endPreparing();
  t.equal(preparing(), 0, 'never below zero');
});
