import t from 'tap';
import { CHAT_TOKENS, ensureTestModels } from '../fixtures/models.js';
import { completionTokens, sameGreedyAnswer } from '../helpers/greedy.js';
import { parseSse, postJson, startTestServer } from '../helpers/inference-server.js';
import { llamaSimpleGreedy } from '../helpers/reference.js';
import { resolveRuntime } from '../../src/inference/options.js';

const models = await ensureTestModels();
const { base, close, server } = await startTestServer(models.chat, { parallel: 8, ctxSize: 4096 });
t.teardown(close);
const completion = (body: object) => postJson(`${base}/completion`, body);

t.test('8 concurrent greedy requests each get the output they get alone', async (t) => {
  const prompts = Array.from({ length: 8 }, (_, i) => `Request number ${i}: tell me about ${['cats', 'dogs', 'llamas', 'code', 'rust', 'go', 'c++', 'tea'][i]}`);
  // Decoded together, each row's numbers round otherwise than alone (other cells, another batch):
  // the same answer up to where a near tie went (test/helpers/greedy.ts).
  const body = (prompt: string) => ({ prompt, n_predict: 24, temperature: 0, cache_prompt: false, n_probs: 2 });
  const alone = [];
  for (const prompt of prompts) alone.push(completionTokens((await completion(body(prompt))).body));
  const together = await Promise.all(prompts.map((prompt) => completion(body(prompt))));
  together.forEach((res, i) => sameGreedyAnswer(t, completionTokens(res.body), alone[i]!, `request ${i}`, 3));
});

t.test('requests beyond the free slots wait in the queue and all complete', async (t) => {
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) => completion({ prompt: `queued ${i}`, n_predict: 6, temperature: 0 })));
  t.ok(results.every((r) => r.status === 200 && r.body.tokens_predicted === 6));
});

t.test('a prompt given as tokens equals the same prompt as text', async (t) => {
  const tokens = (await postJson(`${base}/tokenize`, { content: 'The capital of France is' })).body.tokens;
  const a = await completion({ prompt: 'The capital of France is', n_predict: 8, temperature: 0 });
  const b = await completion({ prompt: tokens, n_predict: 8, temperature: 0 });
  t.equal(b.body.content, a.body.content);
  const mixed = await completion({ prompt: [tokens[0], 'capital of France is'], n_predict: 8, temperature: 0 });
  t.equal(mixed.status, 200);
});

t.test('an array of prompts is answered with an array, in order', async (t) => {
  const single = await Promise.all(['one', 'two', 'three'].map((p) => completion({ prompt: p, n_predict: 5, temperature: 0 })));
  const res = await completion({ prompt: ['one', 'two', 'three'], n_predict: 5, temperature: 0 });
  t.equal(res.status, 200);
  t.ok(Array.isArray(res.body));
  t.same(res.body.map((r: any) => r.content), single.map((r) => r.body.content));
  t.same(res.body.map((r: any) => r.index), [0, 1, 2]);
});

t.test('streaming sends SSE chunks that add up to the non-streamed content, then a final chunk', async (t) => {
  const plain = await completion({ prompt: 'Hello', n_predict: 10, temperature: 0 });
  const res = await fetch(`${base}/completion`, { method: 'POST', body: JSON.stringify({ prompt: 'Hello', n_predict: 10, temperature: 0, stream: true }) });
  t.equal(res.headers.get('content-type'), 'text/event-stream');
  const events = parseSse(await res.text()) as any[];
  const partial = events.filter((e) => e.stop === false);
  const final = events.at(-1);
  t.ok(partial.length >= 1);
  t.equal(partial.map((e) => e.content).join(''), plain.body.content);
  t.equal(final.stop, true);
  t.equal(final.content, '');
  for (const key of ['stop_type', 'stopping_word', 'tokens_evaluated', 'tokens_cached', 'truncated', 'timings', 'model']) t.ok(key in final, key);
  t.equal(final.stop_type, 'limit');
  t.equal(final.tokens_predicted, 10);
});

t.test('a stop string split across tokens is never emitted, streamed or not', async (t) => {
  const base24 = await completion({ prompt: 'Hello', n_predict: 24, temperature: 0, return_tokens: true });
  const pieces = await Promise.all(base24.body.tokens.map(async (id: number) => (await postJson(`${base}/detokenize`, { tokens: [id] })).body.content as string));
  const word = pieces[9]!.slice(-2) + pieces[10]!.slice(0, 3);
  const expected = base24.body.content.slice(0, base24.body.content.indexOf(word));
  const plain = await completion({ prompt: 'Hello', n_predict: 24, temperature: 0, stop: [word] });
  t.equal(plain.body.content, expected);
  t.equal(plain.body.stop_type, 'word');
  t.equal(plain.body.stopping_word, word);
  const res = await fetch(`${base}/completion`, { method: 'POST', body: JSON.stringify({ prompt: 'Hello', n_predict: 24, temperature: 0, stop: [word], stream: true }) });
  const events = parseSse(await res.text()) as any[];
  const text = events.map((e) => e.content).join('');
  t.equal(text, expected);
  t.notOk(events.some((e) => e.content.includes(word.slice(0, 3)) && text.indexOf(word.slice(0, 3)) >= expected.length));
});

t.test('return_tokens returns the generated token ids', async (t) => {
  const res = await completion({ prompt: 'Hello', n_predict: 5, temperature: 0, return_tokens: true });
  t.equal(res.body.tokens.length, 5);
  t.equal((await postJson(`${base}/detokenize`, { tokens: res.body.tokens })).body.content, res.body.content);
});

t.test('n_cmpl (alias n): that many completions of each prompt, seeds seed + i, indexed prompt by prompt', async (t) => {
  const alone = async (prompt: string, seed: number) => (await completion({ prompt, n_predict: 6, temperature: 1, seed })).body.content;
  const res = await completion({ prompt: 'Tell me', n_predict: 6, temperature: 1, seed: 5, n_cmpl: 3 });
  t.equal(res.status, 200);
  t.same(res.body.map((r: any) => r.index), [0, 1, 2]);
  t.same(res.body.map((r: any) => r.content), [await alone('Tell me', 5), await alone('Tell me', 6), await alone('Tell me', 7)]);
  const two = await completion({ prompt: ['Tell me', 'Show me'], n_predict: 6, temperature: 1, seed: 5, n: 2 });
  t.same(two.body.map((r: any) => r.index), [0, 1, 2, 3]);
  t.same(two.body.map((r: any) => r.content), [await alone('Tell me', 5), await alone('Tell me', 6), await alone('Show me', 5), await alone('Show me', 6)]);
  const streamed = await fetch(`${base}/completion`, { method: 'POST', body: JSON.stringify({ prompt: 'Tell me', n_predict: 6, temperature: 1, seed: 5, n_cmpl: 2, stream: true }) });
  const events = parseSse(await streamed.text()) as any[];
  for (const index of [0, 1]) {
    const mine = events.filter((e) => e.index === index);
    t.equal(mine.filter((e) => e.stop).length, 1, `one final chunk for completion ${index}`);
    t.equal(mine.map((e) => e.content).join(''), await alone('Tell me', 5 + index));
  }
  const tooMany = await completion({ prompt: 'x', n_cmpl: 9 });
  t.equal(tooMany.status, 400);
  t.match(tooMany.body.error.message, /"n_cmpl".*slots/);
  const zero = await completion({ prompt: 'x', n_cmpl: 0 });
  t.equal(zero.status, 400);
});

t.test('n_indent ends generation at the first less-indented line after the first, keeping its new line and blanks', async (t) => {
  // The grammar fixes the text the model may write, whatever its weights.
  const grammar = 'root ::= "if x:\\n    y = 1\\n  z\\nw"';
  const free = await completion({ prompt: 'code', n_predict: 64, temperature: 0, grammar });
  t.equal(free.body.content, 'if x:\n    y = 1\n  z\nw', 'without n_indent the whole text');
  const four = await completion({ prompt: 'code', n_predict: 64, temperature: 0, grammar, n_indent: 4 });
  t.equal(four.body.content, 'if x:\n    y = 1\n  ');
  t.equal(four.body.stop_type, 'limit');
  const two = await completion({ prompt: 'code', n_predict: 64, temperature: 0, grammar, n_indent: 2 });
  t.equal(two.body.content, 'if x:\n    y = 1\n  z\n');
  const res = await fetch(`${base}/completion`, { method: 'POST', body: JSON.stringify({ prompt: 'code', n_predict: 64, temperature: 0, grammar, n_indent: 4, stream: true }) });
  const events = parseSse(await res.text()) as any[];
  t.equal(events.map((e) => e.content).join(''), four.body.content, 'nothing past the cut is streamed');
  const bad = await completion({ prompt: 'code', n_indent: -1 });
  t.equal(bad.status, 400);
  t.equal(bad.body.error.field, 'n_indent');
});

t.test('n_probs: per-token top probabilities, ranked, consistent with the chosen token', async (t) => {
  const res = await completion({ prompt: 'Hello', n_predict: 4, temperature: 0, n_probs: 3 });
  const probs = res.body.completion_probabilities;
  t.equal(probs.length, 4);
  for (const p of probs) {
    t.equal(p.top_logprobs.length, 3);
    t.equal(p.top_logprobs[0].id, p.id, 'greedy picked the most probable token');
    t.equal(p.top_logprobs[0].logprob, p.logprob);
    for (let i = 1; i < 3; i++) t.ok(p.top_logprobs[i - 1].logprob >= p.top_logprobs[i].logprob);
    const sum = p.top_logprobs.reduce((s: number, x: any) => s + Math.exp(x.logprob), 0);
    t.ok(sum <= 1.000001 && sum > 0);
    t.same(p.bytes, [...Buffer.from(p.token)]);
  }
});

t.test('post_sampling_probs: the probabilities the sampler chain left, as prob/top_probs', async (t) => {
  const res = await completion({ prompt: 'Hello', n_predict: 6, temperature: 1, top_k: 3, seed: 5, n_probs: 5, post_sampling_probs: true });
  const probs = res.body.completion_probabilities;
  t.equal(probs.length, 6);
  for (const p of probs) {
    t.notOk('logprob' in p, 'no logprob in the post-sampling shape');
    t.ok(p.top_probs.length >= 1 && p.top_probs.length <= 3, 'top_k 3 leaves at most 3 candidates');
    const sum = p.top_probs.reduce((s: number, x: any) => s + x.prob, 0);
    t.ok(Math.abs(sum - 1) < 1e-4, `the candidates' probabilities sum to 1 (${sum})`);
    const chosen = p.top_probs.find((x: any) => x.id === p.id);
    t.ok(chosen, 'the sampled token is one of the candidates');
    t.equal(p.prob, chosen.prob);
    for (let i = 1; i < p.top_probs.length; i++) t.ok(p.top_probs[i - 1].prob >= p.top_probs[i].prob, 'ranked');
  }
  const greedy = await completion({ prompt: 'Hello', n_predict: 2, temperature: 0, n_probs: 5, post_sampling_probs: true });
  for (const p of greedy.body.completion_probabilities) {
    t.equal(p.prob, 1, 'greedy keeps one candidate');
    t.same(p.top_probs.map((x: any) => x.id), [p.id]);
  }
});

t.test('seed is llama-server\'s uint32: -1 is random, other negative seeds wrap and are fixed', async (t) => {
  const gen = async (seed: number) => (await completion({ prompt: 'Tell me', n_predict: 12, temperature: 1.5, top_k: 0, top_p: 1, min_p: 0, seed })).body;
  const a = await gen(-2);
  t.equal(a.generation_settings.seed, 4294967294);
  t.equal((await gen(-2)).content, a.content, 'seed -2 is a fixed seed');
  t.equal((await gen(4294967294)).content, a.content, 'the same seed as 4294967294');
  const randoms = new Set<string>();
  for (let i = 0; i < 4; i++) randoms.add((await gen(-1)).content);
  t.ok(randoms.size > 1, 'seed -1 draws a new seed each time');
});

t.test('generation_settings reports the parameters the task ran with', async (t) => {
  const res = await completion({ prompt: 'Hello', n_predict: 3, temperature: 0.5, top_k: 7, seed: 42, stop: ['zz'], n_probs: 2, logit_bias: [[5, 1.5]] });
  const g = res.body.generation_settings;
  t.equal(g.n_predict, 3);
  t.equal(g.max_tokens, 3);
  t.equal(g.temperature, 0.5);
  t.equal(g.top_k, 7);
  t.equal(g.top_p, 0.95, 'defaults fill what the request left out');
  t.equal(g.seed, 42);
  t.same(g.stop, ['zz']);
  t.equal(g.n_probs, 2);
  t.same(g.logit_bias, [{ bias: 1.5, token: 5 }]);
  t.same(g.samplers, ['penalties', 'dry', 'top_n_sigma', 'top_k', 'typ_p', 'top_p', 'min_p', 'xtc', 'temperature']);
  t.equal(g.stream, false);
  t.equal(g.post_sampling_probs, false);
  t.same(g.lora, []);
  const random = await completion({ prompt: 'Hello', n_predict: 1 });
  t.equal(random.body.generation_settings.seed, 4294967295, 'seed -1 (random) reads as llama-server reports it');
});

t.test('response_fields keeps only the named paths, nested ones keyed by their path', async (t) => {
  const full = await completion({ prompt: 'Hello', n_predict: 4, temperature: 0 });
  const res = await completion({ prompt: 'Hello', n_predict: 4, temperature: 0, response_fields: ['content', 'generation_settings/n_predict', 'no_such_field', 'timings/missing'] });
  t.equal(res.status, 200);
  t.same(res.body, { content: full.body.content, 'generation_settings/n_predict': 4 });
});

t.test('the final stream chunk carries generation_settings but not the streamed content or probabilities', async (t) => {
  const full = await completion({ prompt: 'Hello', n_predict: 12, temperature: 0 });
  const res = await fetch(`${base}/completion`, { method: 'POST', body: JSON.stringify({ prompt: 'Hello', n_predict: 12, temperature: 0, n_probs: 2, stream: true }) });
  const events = parseSse(await res.text()) as any[];
  const last = events.at(-1);
  t.equal(last.stop, true);
  t.equal(last.content, '');
  t.notOk('completion_probabilities' in last);
  t.equal(last.generation_settings.n_predict, 12);
  t.equal(last.generation_settings.stream, true);
  t.equal(last.has_new_line, full.body.content.includes('\n'), 'has_new_line describes the whole generated text');
  t.ok(events.slice(0, -1).every((e) => e.completion_probabilities.length > 0), 'the partial chunks carry the probabilities');
});

t.test('json_schema yields JSON that validates against the schema', async (t) => {
  const schema = { type: 'object', properties: { ok: { type: 'boolean' }, level: { type: 'string', enum: ['low', 'high'] } }, required: ['ok', 'level'], additionalProperties: false };
  const res = await completion({ prompt: 'Give JSON:', n_predict: 64, temperature: 0, json_schema: schema });
  t.equal(res.status, 200);
  const value = JSON.parse(res.body.content);
  t.type(value.ok, 'boolean');
  t.ok(['low', 'high'].includes(value.level));
  t.same(Object.keys(value).sort(), ['level', 'ok']);
});

t.test('grammar constrains the output; an invalid grammar is 400', async (t) => {
  const res = await completion({ prompt: 'x', n_predict: 16, temperature: 0, grammar: 'root ::= [0-9] [0-9] [0-9]' });
  t.match(res.body.content, /^\d{3}$/);
  const bad = await completion({ prompt: 'x', grammar: 'root ::= (' });
  t.equal(bad.status, 400);
  t.match(bad.body.error.message, /grammar/);
});

t.test('logit_bias: token ids, strings, and false bans', async (t) => {
  const forced = await completion({ prompt: 'Hello', n_predict: 3, temperature: 0, logit_bias: { [String(CHAT_TOKENS.imEnd)]: 100 } });
  t.equal(forced.body.stop_type, 'eos');
  const greedy = await completion({ prompt: 'Hello', n_predict: 1, temperature: 0, return_tokens: true });
  const banned = await completion({ prompt: 'Hello', n_predict: 1, temperature: 0, return_tokens: true, logit_bias: [[greedy.body.tokens[0], false]] });
  t.not(banned.body.tokens[0], greedy.body.tokens[0]);
  const piece = (await postJson(`${base}/detokenize`, { tokens: [greedy.body.tokens[0]] })).body.content;
  const byString = await completion({ prompt: 'Hello', n_predict: 1, temperature: 0, return_tokens: true, logit_bias: [[piece, false]] });
  t.not(byString.body.tokens[0], greedy.body.tokens[0]);
});

t.test('ignore_eos generates past end of generation', async (t) => {
  const res = await completion({ prompt: 'Hello', n_predict: 4, temperature: 0, ignore_eos: true, logit_bias: { [String(CHAT_TOKENS.imEnd)]: 100 } });
  t.equal(res.body.stop_type, 'limit');
  t.equal(res.body.tokens_predicted, 4);
});

t.test('a seed makes sampled output reproducible', async (t) => {
  const body = { prompt: 'Tell me', n_predict: 12, temperature: 1.0, top_k: 0, top_p: 1, min_p: 0, seed: 7 };
  const a = await completion(body);
  const b = await completion(body);
  const c = await completion({ ...body, seed: 8 });
  t.equal(a.body.content, b.body.content);
  t.not(a.body.content, c.body.content);
});

t.test('the samplers order and every sampling parameter are accepted', async (t) => {
  const res = await completion({
    prompt: 'x', n_predict: 4, seed: 1, temperature: 0.7, top_k: 20, top_p: 0.9, min_p: 0.01, typical_p: 0.95, xtc_probability: 0.1, xtc_threshold: 0.2,
    repeat_penalty: 1.1, repeat_last_n: 32, frequency_penalty: 0.2, presence_penalty: 0.1, dry_multiplier: 0.5, dry_base: 1.75, dry_allowed_length: 2,
    dry_penalty_last_n: -1, dry_sequence_breakers: ['\n'], mirostat: 0, mirostat_tau: 5, mirostat_eta: 0.1, min_keep: 1, samplers: ['dry', 'top_k', 'typ_p', 'top_p', 'min_p', 'xtc', 'temperature'],
    dynatemp_range: 0.1, dynatemp_exponent: 1, top_n_sigma: -1, t_max_predict_ms: 0, cache_prompt: true, id_slot: -1, timings_per_token: true,
  });
  t.equal(res.status, 200);
  t.equal(res.body.tokens_predicted, 4);
  const mirostat = await completion({ prompt: 'x', n_predict: 4, seed: 1, mirostat: 2 });
  t.equal(mirostat.status, 200);
  const bad = await completion({ prompt: 'x', mirostat: 3 });
  t.equal(bad.status, 400);
  t.match(bad.body.error.message, /mirostat/);
});

t.test('adaptive_p: adaptive_target above 1 is clamped and adaptive_decay outside [0, 0.99] is a 400, as llama-server', async (t) => {
  const ok = await completion({ prompt: 'x', n_predict: 4, seed: 1, samplers: ['top_k', 'adaptive_p'], adaptive_target: 2, adaptive_decay: 0.5 });
  t.equal(ok.status, 200);
  t.same([ok.body.generation_settings.samplers, ok.body.generation_settings.adaptive_target, ok.body.generation_settings.adaptive_decay], [['top_k', 'adaptive_p'], 1, 0.5]);
  const bad = await completion({ prompt: 'x', adaptive_decay: 1.5 });
  t.equal(bad.status, 400);
  t.match(bad.body.error.message, /adaptive_decay/);
});

t.test('prompt cache: a repeated prefix is reported as tokens_cached', async (t) => {
  const prompt = 'A long shared prefix that the second request repeats exactly, word for word.';
  await completion({ prompt, n_predict: 2, temperature: 0, id_slot: 3 });
  const again = await completion({ prompt: prompt + ' Then more.', n_predict: 2, temperature: 0 });
  const n = (await postJson(`${base}/tokenize`, { content: prompt })).body.tokens.length;
  t.ok(again.body.tokens_cached >= n - 1, `cached ${again.body.tokens_cached} of ${n}`);
  t.equal(again.body.id_slot, 3, 'the slot with the best prefix was chosen');
  const off = await completion({ prompt: prompt + ' Then more.', n_predict: 2, temperature: 0, cache_prompt: false });
  t.equal(off.body.tokens_cached, 0);
});

t.test('an oversized prompt is 400 with n_prompt_tokens and n_ctx', async (t) => {
  const res = await completion({ prompt: Array.from({ length: 5000 }, () => 100), n_predict: 1 });
  t.equal(res.status, 400);
  t.equal(res.body.error.type, 'exceed_context_size_error');
  t.equal(res.body.error.n_prompt_tokens, 5000);
  t.equal(res.body.error.n_ctx, 4096);
});

t.test('generation that fills the context stops as truncated', async (t) => {
  const small = await startTestServer(models.chat, { parallel: 1, ctxSize: 64 });
  t.teardown(small.close);
  const res = await postJson(`${small.base}/completion`, { prompt: 'Hello', n_predict: -1, temperature: 0 });
  t.equal(res.status, 200);
  t.equal(res.body.stop_type, 'limit');
  t.equal(res.body.truncated, true);
  const nCtx = (await (await fetch(`${small.base}/props`)).json()).default_generation_settings.n_ctx;
  t.equal(res.body.tokens_evaluated + res.body.tokens_predicted, nCtx, 'generated until the slot context was full');
});

t.test('n_keep and n_discard are checked; generation_settings reports them', async (t) => {
  const ok = await completion({ prompt: 'Hello', n_predict: 1, n_keep: -1, n_discard: 8 });
  t.same([ok.body.generation_settings.n_keep, ok.body.generation_settings.n_discard], [-1, 8]);
  for (const [field, value] of [['n_keep', -2], ['n_discard', -1]] as const) {
    const bad = await completion({ prompt: 'Hello', [field]: value });
    t.equal(bad.status, 400);
    t.equal(bad.body.error.field, field);
  }
});

t.test('a request whose client left while it was being prepared starts no task', async (t) => {
  const service = server.host.ready();
  const before = service.engine.native.metrics();
  const left = new AbortController();
  left.abort();
  await t.rejects(service.runAll([{ prompt: service.model.tokenize('never run', true, true), nPredict: 4 }], left.signal, null),
    { status: 400, message: 'the client closed the connection' });
  const after = service.engine.native.metrics();
  t.same([after.tasksDone, after.promptTokens + after.cachedTokens], [before.tasksDone, before.promptTokens + before.cachedTokens], 'no task ran');
});

// Generating routes have the engine count their request as being prepared from its arrival until
// it submits its tasks (an idle engine gathering a burst waits for it), and end it when it ends without:
// what the engine is told, request by request, and nothing left counting after any of them.
t.test('a generating request counts as being prepared until it submits its tasks, or ends when it fails first', async (t) => {
  const service = server.host.ready();
  const engine = service.engine;
  const told: string[] = [];
  const { beginPreparing, endPreparing, submitAll } = engine;
  engine.beginPreparing = () => {
    told.push('begin');
    beginPreparing.call(engine);
  };
  engine.endPreparing = () => {
    told.push('end');
    endPreparing.call(engine);
  };
  engine.submitAll = (specs, options) => {
    told.push(`submit ${options?.prepared ? 'prepared' : 'not prepared'}`);
    return submitAll.call(engine, specs, options);
  };
  t.teardown(() => Object.assign(engine, { beginPreparing, endPreparing, submitAll }));
  const chat = (body: object) => postJson(`${base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'Hello' }], max_tokens: 2, ...body });
  const transcription = async () => {
    const form = new FormData();
    form.append('file', new Blob([new Uint8Array(4)]), 'speech.wav');
    return { status: (await fetch(`${base}/v1/audio/transcriptions`, { method: 'POST', body: form })).status };
  };
  const cases: Array<[string, () => Promise<{ status: number }>, number, string[]]> = [
    ['a chat completion', () => chat({}), 200, ['begin', 'submit prepared']],
    ['a streamed chat completion', () => chat({ stream: true }), 200, ['begin', 'submit prepared']],
    ['two choices, one submission', () => chat({ n: 2 }), 200, ['begin', 'submit prepared']],
    ['a completion', () => completion({ prompt: 'Hello', n_predict: 2 }), 200, ['begin', 'submit prepared']],
    ['a body that fails validation', () => chat({ max_tokens: 'two' }), 400, ['begin', 'end']],
    ['a prompt longer than the context', () => completion({ prompt: 'word '.repeat(5000), n_predict: 2 }), 400, ['begin', 'end']],
    ['a transcription this model cannot take (no audio projector)', () => transcription(), 501, ['begin', 'end']],
    ['a request that generates nothing (/tokenize)', () => postJson(`${base}/tokenize`, { content: 'Hello' }), 200, []],
  ];
  for (const [what, send, status, want] of cases) {
    told.length = 0;
    const res = await send();
    t.equal(res.status, status, `${what}: ${status}`);
    t.same(told, want, `${what}: ${want.join(', ') || 'nothing told'}`);
    t.equal(engine.native.metrics().preparing, 0, `${what}: nothing left counting`);
  }
  // A client that left while its request was prepared: the submission ends its count without
  // submitting anything.
  const left = new AbortController();
  service.beginPreparing(left.signal);
  t.equal(engine.native.metrics().preparing, 1, 'counted while prepared');
  left.abort();
  await t.rejects(service.runAll([{ prompt: service.model.tokenize('never run', true, true), nPredict: 4 }], left.signal, null),
    { status: 400, message: 'the client closed the connection' });
  t.equal(engine.native.metrics().preparing, 0, 'a client gone before its submission: settled');
});

t.test('a client that disconnects frees its slot within a step', async (t) => {
  const engine = server.host.ready().engine.native;
  // The server cancels the task when it sees the disconnect: wait for that, not for a time.
  const cancelled = new Promise<void>((resolve) => {
    const cancel = engine.cancel.bind(engine);
    Object.defineProperty(engine, 'cancel', {
      configurable: true,
      value: (id: number) => {
        cancel(id);
        resolve();
      },
    });
  });
  t.teardown(() => { delete (engine as { cancel?: unknown }).cancel; });
  const controller = new AbortController();
  const res = await fetch(`${base}/completion`, { method: 'POST', body: JSON.stringify({ prompt: 'forever', n_predict: -1, stream: true, id_slot: 5 }), signal: controller.signal });
  const reader = res.body!.getReader();
  await reader.read();
  const busy = (await (await fetch(`${base}/slots`)).json())[5];
  t.equal(busy.is_processing, true);
  controller.abort();
  await cancelled;
  // A task queued after the cancellation runs in a later step than the one that frees the slot.
  const next = await completion({ prompt: 'next', n_predict: 1, id_slot: 0 });
  t.equal(next.status, 200);
  const slot = (await (await fetch(`${base}/slots`)).json())[5];
  t.equal(slot.is_processing, false);
  t.equal(engine.metrics().busySlots, 0);
});

t.test('t_max_predict_ms stops generation on a new line once the time is up', async (t) => {
  const [newline] = (await postJson(`${base}/tokenize`, { content: '\n' })).body.tokens;
  // Favour new lines so one comes soon; 3000 tokens take far longer than the 1 ms budget.
  const res = await completion({ prompt: 'Hello', n_predict: 3000, temperature: 0, t_max_predict_ms: 1, logit_bias: { [String(newline)]: 5 }, return_tokens: true });
  t.equal(res.body.stop_type, 'limit');
  t.ok(res.body.tokens_predicted < 3000);
  t.equal(res.body.tokens.at(-1), newline, 'it stopped on a new line');
});

t.test('an array of prompts may hold llama-server\'s prompt objects (text without images)', async (t) => {
  const tokens = (await postJson(`${base}/tokenize`, { content: 'I believe the meaning of life is', add_special: true })).body.tokens;
  const res = await completion({ prompt: [tokens, { prompt_string: 'I believe the meaning of life is' }], n_predict: 4, temperature: 0 });
  t.equal(res.status, 200);
  t.equal(res.body.length, 2);
  t.equal(res.body[0].content, res.body[1].content, 'the tokens and the text give the same completion');
  const withImages = await completion({ prompt: ['a', { prompt_string: 'b <__media__>', multimodal_data: ['AAAA'] }] });
  t.equal(withImages.status, 400);
  t.same(withImages.body.error.message, 'multimodal_data needs a multimodal projector: start the server with -mm', 'with images, on a server without a projector');
});

t.test('ignore_eos bans every end-of-generation token, listed in generation_settings.logit_bias as llama-server does', async (t) => {
  const res = await completion({ prompt: 'Once upon a time', n_predict: 8, temperature: 0, ignore_eos: true });
  const eog = server.host.ready().metadata.eogTokens;
  t.ok(eog.length > 0);
  t.same(res.body.generation_settings.logit_bias, eog.map((token) => ({ bias: null, token })), 'bias null is -inf in JSON');
  t.equal(res.body.tokens_predicted, 8);
  const plain = await completion({ prompt: 'Once upon a time', n_predict: 8, temperature: 0, ignore_eos: false });
  t.same(plain.body.generation_settings.logit_bias, []);
});

t.test('return_progress streams prompt_progress as llama-server: at the start, then after every batch', async (t) => {
  const small = await startTestServer(models.chat, { parallel: 1, runtime: { ...resolveRuntime({ model: models.chat }, false), ctxSize: 512, batchSize: 64, ubatchSize: 64 } });
  t.teardown(small.close);
  const prompt = 'This is a test '.repeat(40);
  const run = async (path: string, body: object) => {
    const res = await fetch(`${small.base}${path}`, { method: 'POST', body: JSON.stringify({ ...body, n_predict: 2, max_tokens: 2, stream: true, return_progress: true }) });
    return (parseSse(await res.text()) as any[]).filter((e) => e !== '[DONE]' && e.prompt_progress).map((e) => e.prompt_progress);
  };
  const first = await run('/completion', { prompt, cache_prompt: false });
  const total = first[0].total;
  t.ok(total > 128, `a prompt of ${total} tokens needs several batches of 64`);
  t.same(first.map((p) => p.processed), [0, ...Array.from({ length: Math.ceil(total / 64) }, (_, i) => Math.min(total, 64 * (i + 1)))], 'one report at the start, then one per batch');
  t.ok(first.every((p) => p.total === total && p.cache === 0));
  const filling = await run('/completion', { prompt });
  t.equal(filling[0].cache, 0, 'the first run (cache_prompt false) left nothing in the cache');
  const again = await run('/completion', { prompt });
  t.ok(again[0].cache > 0 && again[0].processed === again[0].cache, 'a cached prompt starts from its cache');
  t.equal(again.at(-1).processed, total);
  for (const reports of [first, filling, again]) {
    t.ok(reports.every((p, i) => i === 0 || p.time_ms >= reports[i - 1].time_ms), 'time_ms never goes back (the first report follows the prompt-cache copies too)');
  }
  const chat = await run('/v1/chat/completions', { messages: [{ role: 'user', content: prompt }] });
  t.ok(chat.length >= 2, 'chat streams report it too');
  t.equal(chat.at(-1).processed, chat.at(-1).total);
  const plain = await postJson(`${small.base}/completion`, { prompt, n_predict: 2, return_progress: true });
  t.notOk('prompt_progress' in plain.body, 'only streams report progress');
});

t.test('timings_per_token puts the timings so far on every prompt_progress report, as llama-server', async (t) => {
  const small = await startTestServer(models.chat, { parallel: 1, runtime: { ...resolveRuntime({ model: models.chat }, false), ctxSize: 512, batchSize: 64, ubatchSize: 64 } });
  t.teardown(small.close);
  const prompt = 'This is a test '.repeat(40);
  for (const [path, body] of [
    ['/completion', { prompt }],
    ['/v1/completions', { prompt }],
    ['/v1/chat/completions', { messages: [{ role: 'user', content: prompt }] }],
  ] as const) {
    const res = await fetch(`${small.base}${path}`, { method: 'POST', body: JSON.stringify({ ...body, n_predict: 2, max_tokens: 2, stream: true, return_progress: true, timings_per_token: true, cache_prompt: false }) });
    const reports = (parseSse(await res.text()) as any[]).filter((e) => e !== '[DONE]' && e.prompt_progress);
    t.ok(reports.length > 2, `${path}: several reports`);
    t.match(reports[0].timings, { cache_n: 0, prompt_n: 0, prompt_ms: 0, predicted_n: 0, predicted_ms: 0 }, `${path}: the first report is before any prompt token`);
    let last = 0;
    for (const r of reports) {
      t.equal(r.timings.prompt_n, r.prompt_progress.processed - r.prompt_progress.cache, `${path}: prompt_n counts the decoded prompt tokens`);
      t.ok(r.timings.prompt_ms >= last, `${path}: prompt_ms never goes back`);
      t.ok(Object.values(r.timings).every((v) => typeof v === 'number' && v >= 0), `${path}: no negative or null value`);
      last = r.timings.prompt_ms;
    }
    t.ok(last > 0, `${path}: the prompt took time`);
    const untimed = await fetch(`${small.base}${path}`, { method: 'POST', body: JSON.stringify({ ...body, n_predict: 2, max_tokens: 2, stream: true, return_progress: true, cache_prompt: false }) });
    const plainReports = (parseSse(await untimed.text()) as any[]).filter((e) => e !== '[DONE]' && e.prompt_progress);
    t.ok(plainReports.every((r) => !('timings' in r)), `${path}: no timings without timings_per_token`);
  }
});
