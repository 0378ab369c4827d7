// Prompt forms accepted by the completion endpoints, as llama-server accepts them: a string,
// an array of tokens, a mixed array of tokens and strings (one prompt), or an array of strings
// or token arrays (several prompts, answered as an array).
import type { NativeModel } from '../../native/binding.js';
import { badRequest } from '../errors.js';
import { checkTokenId } from './vocabulary.js';

export type PromptInput = string | Array<string | number | Array<string | number>>;

/** Splits a prompt field into the prompts it holds. */
export function splitPrompts(prompt: PromptInput): Array<string | Array<string | number>> {
  if (typeof prompt === 'string') return [prompt];
  if (prompt.length === 0) return [[]];
  const several = prompt.every((p) => typeof p === 'string' || Array.isArray(p));
  if (several && prompt.some((p) => typeof p === 'string' || Array.isArray(p))) {
    // ["a", "b"] or [[1, 2], "c"]: several prompts. A lone string is one prompt either way.
    return prompt as Array<string | Array<string | number>>;
  }
  if (prompt.some((p) => Array.isArray(p))) throw badRequest('"prompt" mixes token arrays with single tokens');
  return [prompt as Array<string | number>];
}

/**
 * Tokenizes one prompt. Text is tokenized with the model's special tokens added (BOS) and
 * special-token text parsed, as llama-server does; token ids are checked against the vocabulary.
 * Text is tokenized on a worker thread.
 */
export async function tokenizePrompt(model: NativeModel, vocabSize: number, prompt: string | Array<string | number>): Promise<Int32Array> {
  if (typeof prompt === 'string') return model.tokenizeAsync(prompt, true, true);
  const out: number[] = [];
  for (const [i, piece] of prompt.entries()) {
    if (typeof piece === 'string') {
      out.push(...(await model.tokenizeAsync(piece, i === 0, true)));
    } else {
      checkTokenId(piece, vocabSize, 'prompt');
      out.push(piece);
    }
  }
  return Int32Array.from(out);
}
