// POST /v1/audio/transcriptions (and /audio/transcriptions): llama-server turns the uploaded
// audio into a chat request for a model whose projector reads audio. No projector this server
// loads reads audio (the engine takes images only), so it answers as llama-server does for a
// model without audio input, whatever the body.
import { ErrorType, inferenceError } from '../errors.js';

export function handleTranscriptions(): never {
  throw inferenceError(ErrorType.NOT_SUPPORTED, 'The current model does not support audio input.');
}
