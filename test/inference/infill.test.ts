// POST /infill: the fill-in-the-middle prompt token for token (llama-server's
// format_prompt_infill), the endpoint's responses and errors, and equality with llama-server.
import t from 'tap';
import { buildInfillPrompt, CHUNK_SEPARATOR, missingFimTokens, type InfillBudget, type InfillVocab } from '../../src/inference/service/infill-prompt.js';
import { CHAT_TOKENS, ensureTestModels } from '../fixtures/models.js';
import { parseSse, postJson, startTestServer } from '../helpers/inference-server.js';
import { startLlamaServer } from '../helpers/llama-server.js';

const models = await ensureTestModels();
const { base, close, server } = await startTestServer(models.chat, { parallel: 4, ctxSize: 4096 });
t.teardown(close);
const service = await server.ready;
const infill = (body: unknown) => postJson(`${base}/infill`, body);

const { fimPrefix: PRE, fimSuffix: SUF, fimMiddle: MID, repoName: REP, fileSep: SEP } = CHAT_TOKENS;
const tok = (text: string): number[] => Array.from(service.model.tokenize(text, false, false));
/** The chat model's vocabulary, as the route passes it. */
const chat: InfillVocab = {
  tokenize: (text, addSpecial, parseSpecial) => service.model.tokenize(text, addSpecial, parseSpecial),
  fimPre: PRE, fimSuf: SUF, fimMid: MID, fimRep: REP, fimSep: SEP, bos: CHAT_TOKENS.endOfText, addBos: false,
};
/** llama-server's defaults: -b 2048, -n -1, a 4096-token slot. */
const DEFAULTS: InfillBudget = { nBatch: 2048, nPredict: -1, nCtx: 4096 };
const build = (input: Parameters<typeof buildInfillPrompt>[1], vocab = chat, budget = DEFAULTS) => Array.from(buildInfillPrompt(vocab, input, budget));

const PREFIX = 'def f(x):\n    ';
const SUFFIX = '\n    return y\n';

// ---------------------------------------------------------------------------------------------
// Prompt construction

t.test('the chat model has FIM and repo-level tokens, as the fixtures declare', async (t) => {
  const tokens = service.metadata.tokens;
  t.same([tokens.fimPre, tokens.fimSuf, tokens.fimMid, tokens.fimPad, tokens.fimRep, tokens.fimSep], [PRE, SUF, MID, CHAT_TOKENS.fimPad, REP, SEP]);
  t.equal(service.metadata.addBos, false);
  t.equal(missingFimTokens(tokens), null);
});

t.test('repo-level FIM prompt, token for token', async (t) => {
  // <repo_name>myproject\n<file_sep>filename\n<fim_prefix>def f(x):\n    <fim_suffix>\n    return y\n<fim_middle>
  t.same(build({ prefix: PREFIX, suffix: SUFFIX }), [
    REP, 1791, 2268, 222, // myproject\n
    SEP, 3633, 222, // filename\n
    PRE, 610, 315, 45, 125, 731, 294, // def f(x):\n␣␣␣␣
    SUF, 303, 461, 553, 222, // \n    return y\n
    MID,
  ]);
  t.same(build({ prefix: '', suffix: '' }), [REP, ...tok('myproject\n'), SEP, ...tok('filename\n'), PRE, SUF, MID]);
});

t.test('input_extra: each chunk is FIM_SEP, its filename (default "tmp"), a new line, its text', async (t) => {
  const extra = [{ filename: 'a.py', text: 'x = 1\n' }, { text: 'y' }, { filename: '', text: '' }];
  t.same(build({ prefix: 'a', suffix: 'b', extra }), [
    REP, 1791, 2268, 222,
    SEP, 102, 51, 997, 222, /* a.py\n */ 125, 299, 244, 54, 222, // x = 1\n
    SEP, 2887, 222, /* tmp\n */ ...tok('y'),
    SEP, 222, // an empty filename: just the new line; an empty text: nothing
    SEP, 3633, 222,
    PRE, 102, SUF, 103, MID,
  ]);
});

t.test('the prompt goes right after the prefix, before FIM_SUF', async (t) => {
  t.same(build({ prefix: 'a', suffix: 'b', prompt: [7, 8] }).slice(-7), [PRE, 102, 7, 8, SUF, 103, MID]);
});

t.test('prefix and suffix text is not parsed for special tokens; token ids may be mixed in', async (t) => {
  const special = build({ prefix: '<fim_pad>', suffix: '' });
  t.notOk(special.slice(7).includes(CHAT_TOKENS.fimPad), '<fim_pad> text stays text');
  t.same(build({ prefix: [CHAT_TOKENS.fimPad, 'a', 300], suffix: ['b', 7] }).slice(7), [PRE, CHAT_TOKENS.fimPad, 102, 300, SUF, 103, 7, MID]);
});

t.test('without repo-level tokens, extra chunks are separated by "--- snippet ---" and no repo header', async (t) => {
  const plain: InfillVocab = { ...chat, fimRep: null, fimSep: null };
  const extra = [{ filename: 'a.py', text: 'x = 1\n' }, { text: 'y' }];
  t.same(CHUNK_SEPARATOR, '\n\n--- snippet ---\n\n');
  t.same(build({ prefix: 'a', suffix: 'b', extra }, plain), [
    222, 222, 1577, 20088, 5351, 499, ...tok('x = 1\n'),
    ...tok(CHUNK_SEPARATOR), ...tok('y'),
    PRE, 102, SUF, 103, MID,
  ]);
  t.same(build({ prefix: 'a', suffix: 'b' }, plain), [PRE, 102, SUF, 103, MID], 'no extra: the bare FIM prompt');
  // FIM_SEP without FIM_REP: file separators, no repository line.
  t.same(build({ prefix: 'a', suffix: 'b', extra: [{ text: 'y' }] }, { ...chat, fimRep: null }), [SEP, ...tok('tmp\n'), ...tok('y'), SEP, ...tok('filename\n'), PRE, 102, SUF, 103, MID]);
});

t.test('BOS (when the vocabulary adds it) goes after the extra context, before the FIM prefix', async (t) => {
  const withBos: InfillVocab = { ...chat, addBos: true };
  t.same(build({ prefix: 'a', suffix: 'b' }, withBos), [REP, ...tok('myproject\n'), SEP, ...tok('filename\n'), CHAT_TOKENS.endOfText, PRE, 102, SUF, 103, MID]);
});

t.test('--spm-infill order: suffix part, then prefix part (with the prompt), then FIM_MID', async (t) => {
  t.same(build({ prefix: 'a', suffix: 'b', prompt: [7] }, chat, { ...DEFAULTS, spmInfill: true }).slice(7), [SUF, 103, PRE, 102, 7, MID]);
});

t.test('budgets: prefix keeps its last 3*(n_batch/4), suffix its first n_batch/4-2-prompt, extra its last n_ctx-n_batch-2*n_predict', async (t) => {
  // One token per character, so the arithmetic is visible.
  const chars: InfillVocab = {
    tokenize: (text) => Int32Array.from([...text].map((c) => c.charCodeAt(0))),
    fimPre: -1, fimSuf: -2, fimMid: -3, fimRep: -4, fimSep: -5, bos: -6, addBos: false,
  };
  const codes = (s: string) => [...s].map((c) => c.charCodeAt(0));
  const prefix = 'abcdefghijklmnopqrstuvwxyz';
  const suffix = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ';
  // n_batch 18: n_batch/4 = 4 (integer division), prefix 12, suffix 4-2 = 2.
  t.same(buildInfillPrompt(chars, { prefix, suffix }, { nBatch: 18, nPredict: 0, nCtx: 18 }), Int32Array.from([-1, ...codes('opqrstuvwxyz'), -2, ...codes('AB'), -3]));
  // The prompt eats into the suffix budget, never below zero; the prefix budget is unchanged.
  t.same(Array.from(buildInfillPrompt(chars, { prefix, suffix, prompt: [1] }, { nBatch: 18, nPredict: 0, nCtx: 18 })), [-1, ...codes('opqrstuvwxyz'), 1, -2, ...codes('A'), -3]);
  t.same(Array.from(buildInfillPrompt(chars, { prefix, suffix, prompt: [1, 2, 3] }, { nBatch: 18, nPredict: 0, nCtx: 18 })), [-1, ...codes('opqrstuvwxyz'), 1, 2, 3, -2, -3]);
  // Extra context: -4 myproject\n -5 f\n 0123456789 -5 filename\n = 34 tokens; its last 14 kept
  // (n_ctx 40 - n_batch 18 - 2*4), cutting into the chunk text from the left.
  const extra = [{ filename: 'f', text: '0123456789' }];
  const all = [-4, ...codes('myproject\n'), -5, ...codes('f\n0123456789'), -5, ...codes('filename\n')];
  t.equal(all.length, 34);
  t.same(Array.from(buildInfillPrompt(chars, { prefix: 'p', suffix: 's', extra }, { nBatch: 18, nPredict: 4, nCtx: 40 })), [...all.slice(-14), -1, 112, -2, 115, -3]);
  // n_predict -1 (unlimited) adds 2 to the extra budget; a budget beyond the extra keeps it all.
  t.same(Array.from(buildInfillPrompt(chars, { prefix: 'p', suffix: 's', extra }, { nBatch: 18, nPredict: -1, nCtx: 30 })).slice(0, -5), all.slice(-14));
  t.same(Array.from(buildInfillPrompt(chars, { prefix: 'p', suffix: 's', extra }, { nBatch: 18, nPredict: 0, nCtx: 1000 })).slice(0, -5), all);
  // A budget that is negative takes nothing.
  t.same(Array.from(buildInfillPrompt(chars, { prefix: 'p', suffix: 's', extra }, { nBatch: 18, nPredict: 100, nCtx: 40 })), [-1, 112, -2, 115, -3]);
});

t.test('missing FIM tokens: llama-server\'s message lists each one', async (t) => {
  t.equal(missingFimTokens({ fimPre: null, fimSuf: null, fimMid: null }), 'Infill is not supported by this model: prefix token is missing. suffix token is missing. middle token is missing. ');
  t.equal(missingFimTokens({ fimPre: 1, fimSuf: null, fimMid: 2 }), 'Infill is not supported by this model: suffix token is missing. ');
});

// ---------------------------------------------------------------------------------------------
// The endpoint

/** The prompt the server should build for `body`, with its own budgets. */
function expectedPrompt(body: { input_prefix: string; input_suffix: string; input_extra?: Array<{ filename?: string; text: string }>; prompt?: string }): Int32Array {
  return buildInfillPrompt(chat, {
    prefix: body.input_prefix,
    suffix: body.input_suffix,
    extra: body.input_extra,
    prompt: service.model.tokenize(body.prompt ?? '', false, true),
  }, { nBatch: service.info.nBatch, nPredict: service.defaultNPredict, nCtx: service.info.nCtxSlot });
}

t.test('the response is /completion\'s, evaluated over the FIM prompt', async (t) => {
  const body = { input_prefix: PREFIX, input_suffix: SUFFIX, n_predict: 8, temperature: 0, return_tokens: true, cache_prompt: false };
  const res = await infill(body);
  t.equal(res.status, 200);
  const r = res.body;
  const prompt = expectedPrompt(body);
  t.equal(prompt.length, 20);
  t.equal(r.tokens_evaluated, prompt.length);
  t.equal(r.prompt, '<repo_name>myproject\n<file_sep>filename\n<fim_prefix>def f(x):\n    <fim_suffix>\n    return y\n<fim_middle>');
  t.equal(r.index, 0);
  t.equal(r.stop, true);
  t.equal(r.stop_type, 'limit');
  t.equal(r.tokens_predicted, 8);
  t.equal(r.tokens.length, 8);
  t.type(r.content, 'string');
  t.equal((await postJson(`${base}/detokenize`, { tokens: r.tokens })).body.content, r.content);
  t.equal(r.truncated, false);
  t.equal(r.stopping_word, '');
  t.type(r.id_slot, 'number');
  t.equal(r.model, 'tiny-chat.gguf');
  for (const key of ['cache_n', 'prompt_n', 'prompt_ms', 'prompt_per_token_ms', 'prompt_per_second', 'predicted_n', 'predicted_ms', 'predicted_per_token_ms', 'predicted_per_second']) t.type(r.timings[key], 'number', key);
  t.equal(r.timings.prompt_n, 20);
  t.equal(r.timings.predicted_n, 8);
  // Greedy: the same request answers the same, and /completion over the same tokens agrees.
  const again = await infill(body);
  t.equal(again.body.content, r.content);
  const asCompletion = await postJson(`${base}/completion`, { prompt: Array.from(prompt), n_predict: 8, temperature: 0, cache_prompt: false });
  t.equal(asCompletion.body.content, r.content);
});

t.test('input_extra, prompt (special tokens parsed) and long inputs are built as the builder says', async (t) => {
  const bodies = [
    { input_prefix: 'import os\n', input_suffix: '\nprint(x)\n', input_extra: [{ filename: 'a.py', text: 'def a():\n    return 1\n' }, { text: 'no filename' }] },
    { input_prefix: 'x = ', input_suffix: ';', prompt: 'foo<fim_pad>bar' },
    {
      input_prefix: Array.from({ length: 600 }, (_, i) => `line${i} = ${i * 7}\n`).join(''),
      input_suffix: Array.from({ length: 400 }, (_, i) => `# s${i}\n`).join(''),
      input_extra: Array.from({ length: 6 }, (_, j) => ({ filename: `f${j}.py`, text: Array.from({ length: 150 }, (_, i) => `v${j}_${i} = ${i}\n`).join('') })),
      prompt: 'q '.repeat(100),
    },
  ];
  for (const body of bodies.slice(0, 2)) {
    const res = await infill({ ...body, n_predict: 2, temperature: 0 });
    const prompt = expectedPrompt(body);
    t.equal(res.body.tokens_evaluated, prompt.length);
    t.equal(res.body.prompt, service.model.detokenize(prompt, false, true));
  }
  t.match((await infill({ ...bodies[1], n_predict: 1 })).body.prompt, /^<repo_name>myproject\n<file_sep>filename\n<fim_prefix>x = foo<fim_pad>bar<fim_suffix>;<fim_middle>$/);
  // The long one: extra 2050 tokens (4096 - 2048 + 2), prefix 1536 (3*2048/4), prompt and suffix
  // together 510 (2048/4 - 2), plus FIM_PRE, FIM_SUF, FIM_MID.
  const long = bodies[2]!;
  const prompt = expectedPrompt(long);
  t.equal(prompt.length, 2050 + 1 + 1536 + 510 + 1 + 1);
  const res = await infill({ ...long, input_extra: long.input_extra!.slice(0, 1), n_predict: 1 });
  t.equal(res.status, 200);
  t.equal(res.body.tokens_evaluated, expectedPrompt({ ...long, input_extra: long.input_extra!.slice(0, 1) }).length);
  const tooLong = await infill({ ...long, n_predict: 1 });
  t.equal(tooLong.status, 400, 'extra + prefix + prompt beyond the slot');
  t.equal(tooLong.body.error.type, 'exceed_context_size_error');
  t.equal(tooLong.body.error.n_prompt_tokens, prompt.length);
});

t.test('streaming: chunks add up to the non-streamed content, then the final chunk', async (t) => {
  const body = { input_prefix: PREFIX, input_suffix: SUFFIX, n_predict: 6, temperature: 0 };
  const plain = await infill(body);
  const res = await fetch(`${base}/infill`, { method: 'POST', body: JSON.stringify({ ...body, stream: true, return_tokens: true }) });
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'text/event-stream');
  const events = parseSse(await res.text()) as any[];
  const partial = events.filter((e) => e.stop === false);
  t.ok(partial.length >= 1);
  t.equal(partial.map((e) => e.content).join(''), plain.body.content);
  t.equal(partial.flatMap((e) => e.tokens).length, 6);
  for (const e of partial) t.equal(e.tokens_evaluated, 20);
  const final = events.at(-1);
  t.equal(final.stop, true);
  t.equal(final.content, '');
  t.equal(final.stop_type, 'limit');
  t.equal(final.tokens_evaluated, 20);
  t.equal(final.tokens_predicted, 6);
  t.equal(final.prompt, plain.body.prompt);
  t.ok('timings' in final);
});

t.test('every /completion generation parameter applies (n_probs, stop, grammar)', async (t) => {
  const base8 = await infill({ input_prefix: PREFIX, input_suffix: SUFFIX, n_predict: 8, temperature: 0 });
  const probs = await infill({ input_prefix: PREFIX, input_suffix: SUFFIX, n_predict: 3, temperature: 0, n_probs: 2 });
  t.equal(probs.body.completion_probabilities.length, 3);
  t.equal(probs.body.completion_probabilities[0].top_logprobs.length, 2);
  const content: string = base8.body.content;
  const word = content.slice(4, 7);
  const stopped = await infill({ input_prefix: PREFIX, input_suffix: SUFFIX, n_predict: 8, temperature: 0, stop: [word] });
  t.equal(stopped.body.stop_type, 'word');
  t.equal(stopped.body.stopping_word, word);
  t.equal(stopped.body.content, content.slice(0, content.indexOf(word)));
  const grammar = await infill({ input_prefix: PREFIX, input_suffix: SUFFIX, n_predict: 8, temperature: 0, grammar: 'root ::= [0-9] [0-9]' });
  t.match(grammar.body.content, /^\d\d$/);
  const bad = await infill({ input_prefix: PREFIX, input_suffix: SUFFIX, temperature: 'hot' });
  t.equal(bad.status, 400);
  t.equal(bad.body.error.field, 'temperature');
});

t.test('errors: missing prefix or suffix, malformed input_extra and prompt are 400 naming the field', async (t) => {
  const cases: Array<[unknown, string, RegExp]> = [
    [{}, 'input_prefix', /^"input_prefix" is required$/],
    [{ input_suffix: 'x' }, 'input_prefix', /^"input_prefix" is required$/],
    [{ input_prefix: 'x' }, 'input_suffix', /^"input_suffix" is required$/],
    [{ input_prefix: 'a', input_suffix: 'b', prompt: 5 }, 'prompt', /^"prompt" must be a string$/],
    [{ input_prefix: 'a', input_suffix: 'b', input_extra: 5 }, 'input_extra', /^"input_extra" must be an array of \{"filename": string, "text": string\}$/],
    [{ input_prefix: 'a', input_suffix: 'b', input_extra: { text: 'x' } }, 'input_extra', /must be an array/],
    [{ input_prefix: 'a', input_suffix: 'b', input_extra: [{ filename: 'x' }] }, 'input_extra[0].text', /extra_context chunk must contain a "text" field with a string value/],
    [{ input_prefix: 'a', input_suffix: 'b', input_extra: [{ text: 'ok' }, 5] }, 'input_extra[1].text', /"input_extra\[1\]\.text"/],
    [{ input_prefix: 'a', input_suffix: 'b', input_extra: [{ text: 3 }] }, 'input_extra[0].text', /"text" field with a string value/],
    [{ input_prefix: 'a', input_suffix: 'b', input_extra: [{ text: 'x', filename: 3 }] }, 'input_extra[0].filename', /extra_context chunk's "filename" field must be a string/],
    [{ input_prefix: 5, input_suffix: 'b' }, 'input_prefix', /input_prefix/],
    [{ input_prefix: 'a', input_suffix: null }, 'input_suffix', /input_suffix/],
    [{ input_prefix: [service.vocabSize], input_suffix: 'b' }, 'input_prefix', /Invalid token id in "input_prefix"/],
    [{ input_prefix: 'a', input_suffix: [-1] }, 'input_suffix', /Invalid token id in "input_suffix"/],
  ];
  for (const [body, field, message] of cases) {
    const res = await infill(body);
    t.equal(res.status, 400, JSON.stringify(body));
    t.equal(res.body.error.type, 'invalid_request_error');
    t.equal(res.body.error.field, field, JSON.stringify(body));
    t.match(res.body.error.message, message);
  }
  const malformed = await infill('{"input_prefix": ');
  t.equal(malformed.status, 400);
  t.match(malformed.body.error.message, /Malformed JSON/);
  // Empty prefix and suffix are fine.
  t.equal((await infill({ input_prefix: '', input_suffix: '', n_predict: 1 })).status, 200);
});

t.test('a model without FIM tokens: 400 with llama-server\'s message, before anything else', async (t) => {
  const bert = await startTestServer(models.embedding, { parallel: 1, ctxSize: 512 });
  t.teardown(bert.close);
  const tokens = (await bert.server.ready).metadata.tokens;
  t.same([tokens.fimPre, tokens.fimSuf, tokens.fimMid], [null, null, null]);
  const message = 'Infill is not supported by this model: prefix token is missing. suffix token is missing. middle token is missing. ';
  for (const body of [{ input_prefix: 'a', input_suffix: 'b', n_predict: 4 }, {}, 'not json']) {
    const res = await postJson(`${bert.base}/infill`, body);
    t.equal(res.status, 400);
    t.equal(res.body.error.message, message);
    t.equal(res.body.error.type, 'invalid_request_error');
  }
  const slots = (await fetch(`${bert.base}/slots`).then((r) => r.json())) as Array<{ is_processing: boolean }>;
  t.notOk(slots.some((s) => s.is_processing), 'nothing was generated');
});

// ---------------------------------------------------------------------------------------------
// Equality with llama-server

t.test('llama-server answers the same requests with the same prompt and greedy output', async (t) => {
  // Same slot context and batch as the test server (4 slots sharing a 4096-token unified cache).
  const reference = await startLlamaServer(['-m', models.chat, '-c', '4096', '-np', '4', '-kvu', '-b', '2048']);
  t.teardown(reference.close);
  const ref = reference.base;
  const long = {
    input_prefix: Array.from({ length: 600 }, (_, i) => `line${i} = ${i * 7}\n`).join(''),
    input_suffix: Array.from({ length: 400 }, (_, i) => `# s${i}\n`).join(''),
  };
  const extra = Array.from({ length: 6 }, (_, j) => ({ filename: `f${j}.py`, text: Array.from({ length: 150 }, (_, i) => `v${j}_${i} = ${i}\n`).join('') }));
  const requests = [
    { input_prefix: PREFIX, input_suffix: SUFFIX },
    { input_prefix: 'import os\n', input_suffix: '\nprint(x)\n', input_extra: [{ filename: 'a.py', text: 'def a():\n    return 1\n' }, { text: 'no filename here' }] },
    { input_prefix: 'x = ', input_suffix: ';', prompt: 'foo<fim_pad>bar' },
    { input_prefix: [CHAT_TOKENS.fimPrefix, 'a', 300], input_suffix: ['b', 7] },
    { input_prefix: 'héllo wörld 日本 🙂', input_suffix: '', input_extra: [{ filename: '', text: '' }] },
    long, // prefix and suffix truncated
    { input_prefix: 'a', input_suffix: 'b', input_extra: extra }, // extra truncated
    { ...long, prompt: 'q '.repeat(100), input_extra: extra.slice(0, 1) }, // the prompt takes the suffix budget
  ];
  for (const [i, request] of requests.entries()) {
    const body = { ...request, n_predict: 4, temperature: 0, return_tokens: true };
    const [a, b] = await Promise.all([postJson(`${ref}/infill`, body), infill(body)]);
    t.equal(b.status, a.status, `request ${i}: status`);
    for (const key of ['tokens_evaluated', 'prompt', 'content', 'tokens', 'stop_type', 'tokens_predicted']) t.same(b.body[key], a.body[key], `request ${i}: ${key}`);
  }
  const errors = [{ input_prefix: 'a', input_suffix: 'b', input_extra: 5 }, { input_prefix: 'a', input_suffix: 'b', input_extra: [{ filename: 'x' }] }];
  for (const body of errors) {
    const [a, b] = await Promise.all([postJson(`${ref}/infill`, body), infill(body)]);
    t.equal(b.status, a.status);
    t.ok(b.body.error.message.includes(a.body.error.message), b.body.error.message);
  }
});
