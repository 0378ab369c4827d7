// The one mapping of the addon's error codes to the inference API's errors. Refusals of what a
// request asked for are 400s (an oversized prompt is llama-server's exceed_context_size_error),
// what this server cannot do is 501, and everything else (our own bugs, a disposed engine, an
// embedding input beyond the physical batch, as llama-server answers it) is a 500.
import type { NativeError } from '../../native/binding.js';
import type { HttpError } from '../../http/errors.js';
import { ErrorType, inferenceError } from '../errors.js';

/** llama-server's answer to an embedding input longer than a physical batch. */
export function inputTooLarge(nTokens: number, nBatch: number): HttpError {
  return inferenceError(ErrorType.SERVER, `input (${nTokens} tokens) is too large to process. increase the physical batch size (current batch size: ${nBatch})`);
}

export function nativeErrorToHttp(err: NativeError): HttpError {
  switch (err.code) {
    case 'EXCEEDS_CONTEXT':
      return inferenceError(ErrorType.EXCEED_CONTEXT, err.message, { n_prompt_tokens: err.nPromptTokens, n_ctx: err.nCtx });
    case 'EXCEEDS_BATCH':
      return inputTooLarge(err.nPromptTokens ?? 0, err.nBatch ?? 0);
    case 'BAD_SAMPLING':
    case 'BAD_SCHEMA':
    case 'BAD_MEDIA':
    case 'TOKEN_OUT_OF_RANGE':
    case 'EMPTY_PROMPT':
    case 'BAD_SLOT_FILE':
      return inferenceError(ErrorType.INVALID_REQUEST, err.message);
    // A chat the template or its tools cannot render: the request's to fix.
    case 'BAD_TOOLS':
      return inferenceError(ErrorType.INVALID_REQUEST, err.message, { field: 'tools' });
    case 'BAD_JSON':
    case 'TEMPLATE_FAILED':
      return inferenceError(ErrorType.INVALID_REQUEST, err.message, { field: 'messages' });
    case 'NOT_SUPPORTED':
      return inferenceError(ErrorType.NOT_SUPPORTED, err.message);
    default:
      return inferenceError(ErrorType.SERVER, err.message);
  }
}
