// Greedy output must equal llama.cpp's own (llama-simple from the vendored source).
import t from 'tap';
import { native } from '../../src/native/binding.js';
import { InferenceEngine } from '../../src/inference/engine/engine.js';
import { ensureTestModels } from '../fixtures/models.js';
import { llamaSimpleGreedy } from '../helpers/reference.js';
import { TEST_THREADS } from '../helpers/test-threads.js';

const models = await ensureTestModels();
const model = await native.Model.load(models.chat, {}).promise;
const engine = await InferenceEngine.create(model, { nThreads: TEST_THREADS, nCtx: 2048, nParallel: 1 });
t.teardown(async () => {
  await engine.dispose();
  model.dispose();
});

for (const [prompt, n] of [['Hello', 16], ['The capital of France is', 32], ['def fibonacci(n):', 24]] as const) {
  t.test(`greedy "${prompt}" x${n} equals llama-simple token for token`, async (t) => {
    const reference = await llamaSimpleGreedy(models.chat, prompt, n);
    const ours = await engine.run({ prompt: model.tokenize(prompt, true, true), nPredict: n, sampling: { temperature: 0 } });
    t.equal(ours.nPredicted, n);
    t.equal(ours.content, reference);
  });
}
