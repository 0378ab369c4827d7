// Prompt forms accepted by the completion endpoints, as llama-server accepts them: a string,
// an array of tokens, a mixed array of tokens and strings (one prompt), or an array of strings
// or token arrays (several prompts, answered as an array).
import type { NativeModel } from '../../native/binding.js';
import { badRequest } from '../errors.js';
import { checkTokenId } from './vocabulary.js';

/** llama-server's prompt object; in an array of prompts, one without images is its text. */
interface PromptObject {
  prompt_string: string;
  multimodal_data?: string[];
}

export type PromptInput = string | Array<string | number | Array<string | number> | PromptObject>;

function textOf(p: PromptObject, i: number): string {
  if ((p.multimodal_data?.length ?? 0) > 0) throw badRequest(`Invalid field "prompt[${i}]": images are only accepted in a single prompt`, { field: `prompt[${i}]` });
  return p.prompt_string;
}

/** Splits a prompt field into the prompts it holds. */
export function splitPrompts(prompt: PromptInput): Array<string | Array<string | number>> {
  if (typeof prompt === 'string') return [prompt];
  if (prompt.length === 0) return [[]];
  const several = prompt.every((p) => typeof p !== 'number');
  if (several && prompt.some((p) => typeof p !== 'number')) {
    // ["a", "b"], [[1, 2], "c"] or [[1, 2], {prompt_string}]: several prompts. A lone string is one prompt either way.
    return prompt.map((p, i) => (typeof p === 'object' && !Array.isArray(p) ? textOf(p, i) : p)) as Array<string | Array<string | number>>;
  }
  if (prompt.some((p) => typeof p === 'object')) throw badRequest('"prompt" mixes token arrays with single tokens');
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
