// The one rule for token ids a client sends (prompts, inputs, logit_bias, /detokenize, infill
// parts): an integer id of the model's vocabulary, else a 400 naming the field.
import { badRequest } from '../errors.js';

export function checkTokenId(token: number, vocabSize: number, field: string): void {
  if (!Number.isInteger(token) || token < 0 || token >= vocabSize) {
    throw badRequest(`Invalid token id in "${field}": ${token} is outside the vocabulary (size ${vocabSize})`, { field });
  }
}

export function checkTokenIds(tokens: Iterable<number | string>, vocabSize: number, field: string): void {
  for (const token of tokens) if (typeof token === 'number') checkTokenId(token, vocabSize, field);
}
