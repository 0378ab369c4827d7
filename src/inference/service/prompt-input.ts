// Prompt forms accepted by the completion and embedding endpoints, as llama-server accepts them:
// a string, an array of tokens, a mixed array of tokens and strings (one prompt), llama-server's
// prompt object (text with media markers and base64 images), or an array of strings, token arrays
// and prompt objects (several prompts, answered as an array).
import type { NativeModel } from '../../native/binding.js';
import { badRequest } from '../errors.js';
import { decodeDataUrl } from './media.js';
import { checkTokenId } from './vocabulary.js';

/** llama-server's prompt object; without images it is its text. */
interface PromptObject {
  prompt_string: string;
  multimodal_data?: string[];
}

export type PromptInput = string | PromptObject | Array<string | number | Array<string | number> | PromptObject>;

/**
 * A prompt with images: text holding the projector's media marker once per image, and each
 * image's bytes. The engine tokenizes it when its task is submitted (it refuses it without a
 * projector, or when the markers and images differ in number).
 */
export interface MediaPrompt {
  text: string;
  media: Uint8Array[];
}

/** One prompt of a request: text, tokens and text pieces, or text with images. */
export type Prompt = string | Array<string | number> | MediaPrompt;

export const isMediaPrompt = (p: Prompt): p is MediaPrompt => typeof p === 'object' && !Array.isArray(p);

/** A prompt object's text, or its text and decoded images; `at` prefixes its fields in errors. */
function fromPromptObject(p: PromptObject, at: string): string | MediaPrompt {
  const images = p.multimodal_data ?? [];
  if (images.length === 0) return p.prompt_string;
  return { text: p.prompt_string, media: images.map((b64, j) => decodeDataUrl(`data:;base64,${b64}`, `${at}multimodal_data[${j}]`)) };
}

/** Prompts with images need a projector: 400 before any is tokenized. */
export function checkProjector(prompts: Prompt[], hasProjector: boolean): void {
  if (!hasProjector && prompts.some(isMediaPrompt)) {
    throw badRequest('multimodal_data needs a multimodal projector: start the server with -mm', { field: 'multimodal_data' });
  }
}

/** Splits a prompt field into the prompts it holds. */
export function splitPrompts(prompt: PromptInput): Prompt[] {
  if (typeof prompt === 'string') return [prompt];
  if (!Array.isArray(prompt)) return [fromPromptObject(prompt, 'prompt.')];
  if (prompt.length === 0) return [[]];
  const several = prompt.every((p) => typeof p !== 'number');
  if (several && prompt.some((p) => typeof p !== 'number')) {
    // ["a", "b"], [[1, 2], "c"] or [[1, 2], {prompt_string}]: several prompts. A lone string is one prompt either way.
    return prompt.map((p, i) => (typeof p === 'object' && !Array.isArray(p) ? fromPromptObject(p, `prompt[${i}].`) : p)) as Prompt[];
  }
  if (prompt.some((p) => typeof p === 'object')) throw badRequest('"prompt" mixes token arrays with single tokens');
  return [prompt as Array<string | number>];
}

/**
 * A task's prompt fields for one prompt: its tokens, or, with images, no tokens and the text and
 * images, which the engine tokenizes (and checks against the context) when the task is submitted.
 */
export async function taskPrompt(model: NativeModel, vocabSize: number, prompt: Prompt): Promise<{ prompt: Int32Array; promptText?: string; media?: Uint8Array[] }> {
  if (isMediaPrompt(prompt)) return { prompt: new Int32Array(0), promptText: prompt.text, media: prompt.media };
  return { prompt: await tokenizePrompt(model, vocabSize, prompt) };
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
