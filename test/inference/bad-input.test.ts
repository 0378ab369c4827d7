// Hostile and malformed input: every refusal is a 4xx in the error shape, never a 500, and the
// server keeps serving (no slot is left busy) afterwards.
import t from 'tap';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';
import { grammarNesting, MAX_GRAMMAR_NESTING } from '../../src/inference/service/generation.js';

const models = await ensureTestModels();
const { base, close } = await startTestServer(models.chat, { parallel: 4, ctxSize: 2048 });
t.teardown(close);

const bodies: Record<string, Record<string, unknown>> = {
  '/completion': { prompt: 'Hello', n_predict: 2 },
  '/v1/completions': { prompt: 'Hello', max_tokens: 2 },
  '/v1/chat/completions': { messages: [{ role: 'user', content: 'Hello' }], max_tokens: 2 },
  '/infill': { input_prefix: 'def f(', input_suffix: ')', n_predict: 2 },
};

async function slotsIdle(): Promise<boolean> {
  for (let i = 0; i < 50; i++) {
    const slots = await (await fetch(`${base}/slots`)).json() as Array<{ is_processing: boolean }>;
    if (slots.every((s) => !s.is_processing)) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
}

t.test('an integer beyond int32 is a 400 naming the field, not a value wrapped in the engine', async (t) => {
  const cases: Array<[string, number, string]> = [
    ['n_predict', 2 ** 40, 'Invalid field "n_predict": Expected integer to be less or equal to 2147483647'],
    ['top_k', 1e300, 'Invalid field "top_k": Expected integer to be less or equal to 2147483647'],
    ['min_keep', -(2 ** 40), 'Invalid field "min_keep": Expected integer to be greater or equal to -2147483648'],
    ['id_slot', 2 ** 40, 'Invalid field "id_slot": Expected integer to be less or equal to 2147483647'],
    ['seed', 2 ** 32, 'Invalid field "seed": Expected integer to be less or equal to 4294967295'],
  ];
  for (const [path, body] of Object.entries(bodies)) {
    for (const [field, value, message] of cases) {
      const res = await postJson(`${base}${path}`, { ...body, [field]: value });
      t.equal(res.status, 400, `${path} ${field}`);
      t.same(res.body, { error: { code: 400, message, type: 'invalid_request_error', field } }, `${path} ${field}`);
    }
  }
  const maxTokens = await postJson(`${base}/v1/chat/completions`, { ...bodies['/v1/chat/completions'], max_tokens: 2 ** 40 });
  t.same(maxTokens.body, { error: { code: 400, message: 'Invalid field "max_tokens": Expected integer to be less or equal to 2147483647', type: 'invalid_request_error', field: 'max_tokens' } });
  const tokens = await postJson(`${base}/detokenize`, { tokens: [2 ** 53] });
  t.same(tokens.body, { error: { code: 400, message: 'Invalid field "tokens[0]": Expected integer to be less or equal to 2147483647', type: 'invalid_request_error', field: 'tokens[0]' } });
});

t.test('the largest uint32 seed is still accepted, as llama-server accepts it', async (t) => {
  const res = await postJson(`${base}/completion`, { prompt: 'Hello', n_predict: 1, seed: 4294967295 });
  t.equal(res.status, 200);
});

t.test('an id_slot past the last slot wraps around, as llama-server does, instead of failing', async (t) => {
  const res = await postJson(`${base}/completion`, { prompt: 'Hello', n_predict: 1, id_slot: 99 });
  t.equal(res.status, 200);
  t.equal(res.body.id_slot, 99 % 4);
  const chat = await postJson(`${base}/v1/chat/completions`, { ...bodies['/v1/chat/completions'], id_slot: 6, stream: true });
  t.equal(chat.status, 200);
  t.match(chat.body, /data: \[DONE\]/);
});

t.test('a streamed request the engine refuses at submission gets its error status, not a 200 stream', async (t) => {
  for (const [path, body] of Object.entries(bodies)) {
    const res = await postJson(`${base}${path}`, { ...body, stream: true, grammar: 'root ::= [' });
    t.equal(res.status, 400, path);
    t.match(res.headers.get('content-type'), /application\/json/, path);
    t.same(res.body, { error: { code: 400, message: 'invalid sampling parameters: failed to parse grammar', type: 'invalid_request_error' } }, path);
  }
  const several = await postJson(`${base}/v1/chat/completions`, { ...bodies['/v1/chat/completions'], n: 3, stream: true, grammar: 'root ::= [' });
  t.equal(several.status, 400, 'with several choices too');
  t.ok(await slotsIdle(), 'no slot is left busy');
  const after = await postJson(`${base}/completion`, { prompt: 'Hello', n_predict: 2, stream: true });
  t.equal(after.status, 200, 'the server keeps serving');
});

t.test('text that has no UTF-8 form is a 400, not silently replaced by U+FFFD', async (t) => {
  const what = 'a string holds a lone UTF-16 surrogate (\\ud800-\\udfff not in a pair)';
  // JSON.stringify would keep the surrogate as an escape anyway; the raw text carries it as \uXXXX.
  const cases: Array<[string, string, string]> = [
    ['/completion', '{"prompt":"a\\ud800b","n_predict":1}', 'prompt'],
    ['/v1/completions', '{"prompt":["ok","\\udc00"],"max_tokens":1}', 'prompt[1]'],
    ['/v1/chat/completions', '{"messages":[{"role":"user","content":[{"type":"text","text":"\\udbff"}]}]}', 'messages[0].content[0].text'],
    ['/infill', '{"input_prefix":"a","input_suffix":"\\ud800"}', 'input_suffix'],
    ['/tokenize', '{"content":"\\ud800"}', 'content'],
    ['/apply-template', '{"messages":[{"role":"\\udfff","content":"x"}]}', 'messages[0].role'],
  ];
  for (const [path, body, field] of cases) {
    const res = await postJson(`${base}${path}`, body);
    t.equal(res.status, 400, path);
    t.same(res.body, { error: { code: 400, message: `Invalid field "${field}": ${what}`, type: 'invalid_request_error', field } }, path);
  }
  const pair = await postJson(`${base}/tokenize`, '{"content":"\\ud83e\\udd99"}');
  t.equal(pair.status, 200, 'a surrogate pair is a character like any other');
  const bytes = Buffer.from([...Buffer.from('{"prompt":"'), 0xc3, 0x28, ...Buffer.from('"}')]);
  const res = await fetch(`${base}/completion`, { method: 'POST', body: bytes });
  t.equal(res.status, 400);
  t.same(await res.json(), { error: { code: 400, message: 'Malformed JSON in request body: the body is not valid UTF-8', type: 'invalid_request_error' } });
});

t.test('a grammar nested deeper than the parser can recurse is a 400, not a crash of the server', async (t) => {
  const nested = (levels: number): string => `root ::= ${'('.repeat(levels)}"a"${')'.repeat(levels)}`;
  for (const path of ['/completion', '/v1/chat/completions']) {
    const res = await postJson(`${base}${path}`, { ...bodies[path], grammar: nested(20_000) });
    t.equal(res.status, 400, path);
    t.same(res.body, { error: { code: 400, message: `Invalid field "grammar": groups are nested more than ${MAX_GRAMMAR_NESTING} levels deep`, type: 'invalid_request_error', field: 'grammar' } }, path);
  }
  const deepest = await postJson(`${base}/completion`, { prompt: 'x', n_predict: 1, grammar: nested(MAX_GRAMMAR_NESTING) });
  t.equal(deepest.status, 200, 'the limit itself is accepted');
  t.equal(deepest.body.content, 'a');
  t.equal(grammarNesting('root ::= "(((\\"((" [(\\]] # ((((\n  ( x ( y ) )'), 2, 'parentheses in literals, classes and comments do not count');
  const after = await postJson(`${base}/tokenize`, { content: 'still serving' });
  t.equal(after.status, 200);
});

t.test('a body nested more than 128 levels deep is a 400 naming its field, not a 500 from a recursion', async (t) => {
  // Raw text: JSON.stringify of such values would itself overflow.
  const arrays = (levels: number): string => '['.repeat(levels) + ']'.repeat(levels);
  const schema = (levels: number): string => '{"type":"array","items":'.repeat(levels) + '{"type":"string"}' + '}'.repeat(levels);
  const chat = '"messages":[{"role":"user","content":"x"}],"max_tokens":1';
  const cases: Array<[string, string, string]> = [
    ['/v1/chat/completions', `{${chat},"chat_template_kwargs":{"deep":${arrays(20_000)}}}`, 'chat_template_kwargs'],
    ['/apply-template', `{${chat},"chat_template_kwargs":{"deep":${arrays(20_000)}}}`, 'chat_template_kwargs'],
    ['/completion', `{"prompt":"x","n_predict":1,"json_schema":${schema(10_000)}}`, 'json_schema'],
    ['/v1/chat/completions', `{${chat},"response_format":{"type":"json_schema","json_schema":{"schema":${schema(10_000)}}}}`, 'response_format'],
  ];
  for (const [path, raw, field] of cases) {
    const res = await postJson(`${base}${path}`, raw);
    t.equal(res.status, 400, `${path} ${field}`);
    t.same(res.body, { error: { code: 400, message: `Invalid field "${field}": nested more than 128 levels deep`, type: 'invalid_request_error', field } }, `${path} ${field}`);
  }
  const schema40 = await postJson(`${base}/completion`, `{"prompt":"x","n_predict":1,"json_schema":${schema(40)}}`);
  t.equal(schema40.status, 200, 'a json_schema 40 levels deep is fine');
});
