// -bs / backend_sampling: the sampler chain runs in the decode graph, as llama-server's -bs.
import t from 'tap';
import { native } from '../../src/native/binding.js';
import { serverOptions } from '../../src/inference/server-config.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';
import { startLlamaServer } from '../helpers/llama-server.js';

const models = await ensureTestModels();
const flags = serverOptions(native.ServerParams.parse(['llama-server', '-m', models.chat, '-bs']).values(), {}, false);
const ours = await startTestServer(models.chat, { parallel: 2, ctxSize: 1024, engine: { backendSampling: flags.engine!.backendSampling! }, generation: flags.generation! });
t.teardown(ours.close);

const request = (backend: boolean) => ({
  prompt: 'The countries of Europe, in random order, are:', n_probs: 10, n_predict: 12, post_sampling_probs: true, seed: 4242, backend_sampling: backend,
});
/** Probabilities with the zeros left out: backend and CPU samplers differ only there. */
const probs = (body: any) => body.completion_probabilities.map((p: any) => ({ id: p.id, top: p.top_probs.filter((x: any) => x.prob > 0).map((x: any) => [x.id, x.prob]) }));

t.test('the same tokens and post-sampling probabilities with and without backend sampling', async (t) => {
  t.equal(flags.engine!.backendSampling, true, '-bs is parsed');
  const on = await postJson(`${ours.base}/completion`, request(true));
  const off = await postJson(`${ours.base}/completion`, request(false));
  t.equal(on.status, 200);
  t.equal(on.body.generation_settings.backend_sampling, true, 'the flag is the request default, reported');
  t.equal(on.body.content, off.body.content);
  const [a, b] = [probs(on.body), probs(off.body)];
  t.same(a.map((x: any) => [x.id, x.top.map((y: number[]) => y[0])]), b.map((x: any) => [x.id, x.top.map((y: number[]) => y[0])]), 'same tokens and candidates');
  a.forEach((x: any, i: number) => x.top.forEach((y: number[], j: number) => t.ok(Math.abs(y[1]! - b[i].top[j][1]) < 1e-4, `token ${i} candidate ${j}`)));
});

t.test('equal to llama-server -bs', async (t) => {
  const reference = await startLlamaServer(['-m', models.chat, '-c', '1024', '-np', '2', '-bs']);
  t.teardown(reference.close);
  const mine = await postJson(`${ours.base}/completion`, request(true));
  const theirs = await postJson(`${reference.base}/completion`, request(true));
  t.equal(mine.body.content, theirs.body.content);
  t.same(probs(mine.body).map((x: any) => x.id), probs(theirs.body).map((x: any) => x.id));
});

t.test('grammar, raw probabilities and concurrent slots fall back to the CPU chain, never a crash', async (t) => {
  const grammar = await postJson(`${ours.base}/completion`, { prompt: 'x', n_predict: 8, grammar: 'root ::= "yes" | "no"', backend_sampling: true });
  t.equal(grammar.status, 200);
  t.match(grammar.body.content, /^(yes|no)$/);
  const raw = await postJson(`${ours.base}/completion`, { ...request(true), post_sampling_probs: false });
  t.equal(raw.status, 200);
  t.equal(raw.body.completion_probabilities.length, 12);
  const both = await Promise.all([postJson(`${ours.base}/completion`, request(true)), postJson(`${ours.base}/completion`, request(true))]);
  t.same(both.map((r) => r.status), [200, 200]);
  t.equal(both[0].body.content, both[1].body.content, 'the same seed gives the same text in two slots');
});
