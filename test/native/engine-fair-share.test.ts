// Fair share in the engine's admission (EngineParams.fairShare, native/admission.h): tasks carry
// their tenant, and a free slot goes to the tenant that used the least, not to the oldest task.
// The rules themselves are checked in C++ (test/native/engine-rules.cpp); this checks that the
// engine applies them. One slot; a blocker of tenant A holds it while the other tasks queue, so
// the order of their first tokens is the order they were admitted in.
import t, { type Test } from 'tap';
import { native, type CompletionTaskSpec, type NativeModel } from '../../src/native/binding.js';
import { InferenceEngine } from '../../src/inference/engine/engine.js';
import { ensureTestModels } from '../fixtures/models.js';
import { TEST_THREADS } from '../helpers/test-threads.js';

const models = await ensureTestModels();
const model: NativeModel = await native.Model.load(models.chat, {}).promise;
t.teardown(() => model.dispose());

const task = (text: string, nPredict: number, extra: Partial<CompletionTaskSpec> = {}): CompletionTaskSpec => ({
  prompt: model.tokenize(text, true, false), nPredict, cachePrompt: false, ...extra, sampling: { temperature: 0 },
});

interface Queued { name: string; spec: CompletionTaskSpec }

/** The names of `queued` in the order their first tokens came, each submitted on its own while A's blocker holds the only slot. */
async function admissionOrder(t: Test, fairShare: boolean | undefined, queued: Queued[]): Promise<string[]> {
  const e = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 2048, nParallel: 1, overloadLifoMs: 0, ...(fairShare === undefined ? {} : { fairShare }) });
  try {
    t.equal(e.native.info().fairShare, fairShare ?? true, 'info reports the setting');
    let release!: () => void;
    const started = new Promise<void>((r) => (release = r));
    const blocker = await e.submitAll([task('Blocker', 200, { tenant: 'A' })], { onToken: () => release });
    await started;
    const order: string[] = [];
    const outcomes = [];
    for (const q of queued) {
      const [outcome] = await e.submitAll([q.spec], { onToken: () => () => { if (!order.includes(q.name)) order.push(q.name); } });
      outcomes.push(outcome!);
    }
    // Else an order could come from tasks that never waited (each admitted as it arrived).
    t.equal(e.native.metrics().queued, queued.length, 'every other task waits in the queue while the blocker holds the slot');
    t.same(order, [], 'none of them has generated yet');
    const [held] = await Promise.all([blocker[0]!, ...outcomes]);
    t.equal(held!.nPredicted, 200, 'the blocker ran to its end, the others waiting');
    t.equal(order.length, queued.length, 'every queued task generated');
    return order;
  } finally {
    await e.dispose();
  }
}

const backlogThenB: Queued[] = [
  { name: 'a1', spec: task('a one', 2, { tenant: 'A' }) },
  { name: 'a2', spec: task('a two', 2, { tenant: 'A' }) },
  { name: 'a3', spec: task('a three', 2, { tenant: 'A' }) },
  { name: 'b1', spec: task('b one', 2, { tenant: 'B' }) },
];

t.test('fair share (the default): the free slot goes to the tenant without a backlog before the backlog', async (t) => {
  t.same(await admissionOrder(t, undefined, backlogThenB), ['b1', 'a1', 'a2', 'a3']);
});

t.test('fairShare false: one queue in arrival order, whatever the tenants', async (t) => {
  t.same(await admissionOrder(t, false, backlogThenB), ['a1', 'a2', 'a3', 'b1']);
});

t.test('fairShare false: every task in one tenant, so priority still orders the queue', async (t) => {
  t.same(await admissionOrder(t, false, [
    { name: 'a3', spec: task('three', 2, { tenant: 'A', priority: 3 }) },
    { name: 'b1', spec: task('one', 2, { tenant: 'B', priority: 1 }) },
    { name: 'a1', spec: task('one again', 2, { tenant: 'A', priority: 1 }) },
  ]), ['b1', 'a1', 'a3']);
});

t.test('within a tenant: lower priority first, then arrival order; the batch class after the interactive one', async (t) => {
  t.same(await admissionOrder(t, undefined, [
    { name: 'p3', spec: task('three', 2, { tenant: 'A', priority: 3 }) },
    { name: 'batch', spec: task('batch', 2, { tenant: 'B', priorityClass: 'batch' }) },
    { name: 'p1', spec: task('one', 2, { tenant: 'A', priority: 1 }) },
    { name: 'p1b', spec: task('one again', 2, { tenant: 'A', priority: 1 }) },
  ]), ['p1', 'p1b', 'p3', 'batch']);
});

t.test('a task\'s tenant fields are checked', async (t) => {
  const e = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 1024, nParallel: 1 });
  t.teardown(() => e.dispose());
  // The tenant settings' bounds (the TypeScript validator's): a weight above 0 and at most 100, a known class.
  const weight = { code: 'INVALID_ARGUMENT', message: 'task.tenantWeight must be a number above 0 and at most 100' };
  await t.rejects(e.run(task('x', 1, { tenantWeight: 0 })), weight);
  await t.rejects(e.run(task('x', 1, { tenantWeight: -1 })), weight);
  await t.rejects(e.run(task('x', 1, { tenantWeight: 100.5 })), weight);
  await t.rejects(e.run(task('x', 1, { tenantWeight: Number.NaN })), weight);
  await t.rejects(e.run(task('x', 1, { tenantWeight: '2' as unknown as number })), weight);
  const klass = { code: 'INVALID_ARGUMENT', message: 'task.priorityClass must be "interactive" or "batch"' };
  await t.rejects(e.run(task('x', 1, { priorityClass: 'urgent' as 'batch' })), klass);
  await t.rejects(e.run(task('x', 1, { priorityClass: 1 as unknown as 'batch' })), klass);
  await t.rejects(e.run(task('x', 1, { tenant: 7 as unknown as string })), { code: 'INVALID_ARGUMENT', message: 'task.tenant must be a string' });
  // The bounds themselves are accepted.
  t.equal((await e.run(task('x', 1, { tenant: 'A', tenantWeight: 100, priorityClass: 'batch' }))).nPredicted, 1, 'weight 100, the batch class');
  t.equal((await e.run(task('x', 1, { tenantWeight: 0.001, priorityClass: 'interactive' }))).nPredicted, 1, 'a small weight, the interactive class');
});
