// The mapping of the addon's error codes to the inference API's errors (engine/native-errors.ts).
import t from 'tap';
import { isNativeError, type NativeError, type NativeErrorCode } from '../../src/native/binding.js';
import { nativeErrorToHttp } from '../../src/inference/engine/native-errors.js';

const nativeError = (code: NativeErrorCode, message: string, extra: Partial<NativeError> = {}): NativeError =>
  Object.assign(new Error(message), { code }, extra);

const http = (err: NativeError) => {
  const e = nativeErrorToHttp(err);
  return { status: e.status, code: e.code, message: e.message, details: e.details };
};

t.test('isNativeError recognises the addon codes only', async (t) => {
  t.equal(isNativeError(nativeError('BAD_MEDIA', 'x')), true);
  t.equal(isNativeError(Object.assign(new Error('x'), { code: 'ENOENT' })), false);
  t.equal(isNativeError({ code: 'BAD_MEDIA', message: 'not an Error' }), false);
});

t.test('a prompt beyond the context is exceed_context_size_error with both sizes', async (t) => {
  t.same(http(nativeError('EXCEEDS_CONTEXT', 'the prompt (600 tokens) does not fit the context of 512 tokens', { nPromptTokens: 600, nCtx: 512 })), {
    status: 400, code: 'exceed_context_size_error', message: 'the prompt (600 tokens) does not fit the context of 512 tokens', details: { n_prompt_tokens: 600, n_ctx: 512 },
  });
});

t.test("an input beyond the batch is a 500 with llama-server's message", async (t) => {
  t.same(http(nativeError('EXCEEDS_BATCH', 'the input (900 tokens) is larger than the batch size of 512 tokens', { nPromptTokens: 900, nBatch: 512 })), {
    status: 500, code: 'server_error', message: 'input (900 tokens) is too large to process. increase the physical batch size (current batch size: 512)', details: {},
  });
});

t.test('refusals of what the request asked for are 400 invalid_request_error', async (t) => {
  for (const code of ['BAD_SAMPLING', 'BAD_SCHEMA', 'BAD_MEDIA', 'TOKEN_OUT_OF_RANGE', 'EMPTY_PROMPT'] as const) {
    t.same(http(nativeError(code, `refused: ${code}`)), { status: 400, code: 'invalid_request_error', message: `refused: ${code}`, details: {} }, code);
  }
});

t.test('what this server cannot do is 501 not_supported_error', async (t) => {
  t.same(http(nativeError('NOT_SUPPORTED', 'audio input is not supported')), { status: 501, code: 'not_supported_error', message: 'audio input is not supported', details: {} });
});

t.test('a chat its template or tools cannot render is a 400 naming the field', async (t) => {
  t.same(http(nativeError('BAD_TOOLS', 'tools[0].name must be a non-empty string')), { status: 400, code: 'invalid_request_error', message: 'tools[0].name must be a non-empty string', details: { field: 'tools' } });
  for (const code of ['TEMPLATE_FAILED', 'BAD_JSON'] as const) {
    t.same(http(nativeError(code, `failed: ${code}`)), { status: 400, code: 'invalid_request_error', message: `failed: ${code}`, details: { field: 'messages' } }, code);
  }
});

t.test('every other code is a 500 server_error', async (t) => {
  for (const code of ['INVALID_ARGUMENT', 'DISPOSED', 'IN_USE', 'LOAD_FAILED', 'BAD_ARGUMENTS', 'BAD_PARSER', 'PARSE_FAILED', 'INVALID_DIFF'] as const) {
    t.same(http(nativeError(code, `failed: ${code}`)), { status: 500, code: 'server_error', message: `failed: ${code}`, details: {} }, code);
  }
});
