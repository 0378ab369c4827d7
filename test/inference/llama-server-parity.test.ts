// The same /completion requests to this server and to llama-server built from the same llama.cpp:
// same text, same token probabilities in both shapes, same generation_settings and /props defaults.
import t, { type Test } from 'tap';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';
import { startLlamaServer } from '../helpers/llama-server.js';

const models = await ensureTestModels();
const ours = await startTestServer(models.chat, { parallel: 2, ctxSize: 2048 });
t.teardown(ours.close);
const reference = await startLlamaServer(['-m', models.chat, '-c', '2048', '-np', '2', '-kvu']);
t.teardown(reference.close);

/** What llama-server reports that this server does not implement (reasoning, tool-call grammars, speculative decoding). */
const NOT_IMPLEMENTED = new Set([
  'chat_format', 'generation_prompt', 'grammar_lazy',
  'grammar_triggers', 'preserved_tokens', 'reasoning_format', 'reasoning_in_content', 'speculative.types',
]);

/** Equal, with numbers compared to float32 precision (llama-server reports float32 values widened to double). */
function sameValue(a: unknown, b: unknown): boolean {
  if (typeof a === 'number' && typeof b === 'number') return Math.abs(a - b) <= 1e-6 * Math.max(1, Math.abs(b));
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => sameValue(x, b[i]));
  if (a && b && typeof a === 'object' && typeof b === 'object') {
    const ka = Object.keys(a).sort();
    const kb = Object.keys(b).sort();
    return sameValue(ka, kb) && ka.every((k) => sameValue((a as any)[k], (b as any)[k]));
  }
  return a === b;
}

function compareSettings(t: Test, mine: Record<string, unknown>, theirs: Record<string, unknown>): void {
  for (const [key, value] of Object.entries(theirs)) {
    if (NOT_IMPLEMENTED.has(key)) continue;
    t.ok(key in mine, `${key} is reported`);
    t.ok(sameValue(mine[key], value), `${key}: ${JSON.stringify(mine[key])} vs llama-server ${JSON.stringify(value)}`);
  }
}

/** Token probabilities: same tokens and bytes; probabilities within 1e-4 (logits differ in the last bits between batch shapes). */
function compareProbabilities(t: Test, mine: any[], theirs: any[], post: boolean): void {
  t.equal(mine.length, theirs.length, 'one entry per generated token');
  const value = post ? 'prob' : 'logprob';
  const top = post ? 'top_probs' : 'top_logprobs';
  mine.forEach((m, i) => {
    const r = theirs[i];
    t.same([m.id, m.token, m.bytes], [r.id, r.token, r.bytes], `token ${i}`);
    t.ok(Math.abs(m[value] - r[value]) < 1e-4, `token ${i} ${value} ${m[value]} vs ${r[value]}`);
    t.same(m[top].map((x: any) => [x.id, x.token, x.bytes]), r[top].map((x: any) => [x.id, x.token, x.bytes]), `token ${i} candidates`);
    m[top].forEach((x: any, j: number) => t.ok(Math.abs(x[value] - r[top][j][value]) < 1e-4, `token ${i} candidate ${j}`));
  });
}

const REQUESTS: Array<[string, Record<string, unknown>]> = [
  ['greedy, raw probabilities', { prompt: 'Hello world', n_predict: 6, temperature: 0, n_probs: 4 }],
  ['greedy, post-sampling', { prompt: 'Hello world', n_predict: 6, temperature: 0, n_probs: 4, post_sampling_probs: true }],
  ['top_k 3, seeded', { prompt: 'Hello world', n_predict: 6, temperature: 1, top_k: 3, seed: 7, n_probs: 5, post_sampling_probs: true }],
  ['top_p / min_p, stop, logit_bias', { prompt: 'Once upon', n_predict: 8, temperature: 0.7, top_p: 0.5, min_p: 0.1, seed: 3, n_probs: 10, post_sampling_probs: true, stop: ['zz'], logit_bias: [[5, 1.5]] }],
  ['adaptive_p sampler, seeded', { prompt: 'Once upon', n_predict: 8, temperature: 1, samplers: ['top_k', 'adaptive_p'], top_k: 20, adaptive_target: 0.3, adaptive_decay: 0.5, seed: 11, n_probs: 3, post_sampling_probs: true }],
  ['n_indent over text fixed by a grammar', { prompt: 'code', n_predict: 64, temperature: 0, n_probs: 1, n_indent: 4, grammar: 'root ::= "if x:\\n    y = 1\\n  z\\nw"' }],
];

for (const [name, body] of REQUESTS) {
  t.test(`${name}: same text, probabilities and generation_settings as llama-server`, async (t) => {
    const [mine, theirs] = await Promise.all([postJson(`${ours.base}/completion`, body), postJson(`${reference.base}/completion`, body)]);
    t.equal(mine.status, 200);
    t.equal(theirs.status, 200);
    t.equal(mine.body.content, theirs.body.content);
    t.equal(mine.body.stop_type, theirs.body.stop_type);
    compareProbabilities(t, mine.body.completion_probabilities, theirs.body.completion_probabilities, body.post_sampling_probs === true);
    compareSettings(t, mine.body.generation_settings, theirs.body.generation_settings);
  });
}

t.test('response_fields picks the same fields as llama-server', async (t) => {
  const body = { prompt: 'Hello', n_predict: 4, temperature: 0, response_fields: ['content', 'generation_settings/n_predict', 'tokens_predicted', 'nope', 'timings/nope'] };
  const [mine, theirs] = await Promise.all([postJson(`${ours.base}/completion`, body), postJson(`${reference.base}/completion`, body)]);
  t.same(mine.body, theirs.body);
});

t.test('/props default parameters match llama-server', async (t) => {
  const [mine, theirs] = await Promise.all([ours.base, reference.base].map(async (b) => (await fetch(`${b}/props`)).json()));
  compareSettings(t, mine.default_generation_settings.params, theirs.default_generation_settings.params);
});

t.test('--context-shift: generation past a full context is the same as llama-server\'s, for each n_keep / n_discard', async (t) => {
  const mine = await startTestServer(models.chat, { parallel: 1, ctxSize: 64, engine: { contextShift: true } });
  t.teardown(mine.close);
  const theirs = await startLlamaServer(['-m', models.chat, '-c', '64', '-np', '1', '--context-shift']);
  t.teardown(theirs.close);
  const cases = [
    { prompt: 'Hello there my friend', n_predict: 700, temperature: 0, ignore_eos: true },
    { prompt: 'Hello there my friend', n_predict: 700, temperature: 0, ignore_eos: true, n_keep: -1 },
    { prompt: 'Hello there my friend', n_predict: 700, temperature: 0, ignore_eos: true, n_keep: 2, n_discard: 10 },
  ];
  for (const body of cases) {
    const a = await postJson(`${mine.base}/completion`, body);
    const b = await postJson(`${theirs.base}/completion`, body);
    t.equal(a.body.tokens_predicted, 700, 'generated past the 256-token slot context');
    t.same([a.body.content, a.body.stop_type, a.body.truncated], [b.body.content, b.body.stop_type, b.body.truncated], JSON.stringify({ n_keep: body.n_keep, n_discard: body.n_discard }));
  }
  const metrics = await (await fetch(`${mine.base}/metrics`)).text();
  t.ok(Number(/^llamacpp:context_shifts_total (\d+)$/m.exec(metrics)?.[1]) > 0, 'shifts are counted');
});

