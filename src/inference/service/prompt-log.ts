// llama-server's --log-prompts-dir (a debugging aid): the prompt of each completion request is
// written to `<dir>/<milliseconds, 12 digits>.txt` before it runs. One prompt is written as its
// text; several (an array of prompts, or n choices) as a JSON array of texts, indented by 2 as
// llama-server dumps a prompt array. The text is the prompt's tokens written back as text, the
// model's own BOS/EOS left out and other special tokens written out (for a chat, the rendered
// template). A file that cannot be written is reported on stderr; the request still runs.
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { CompletionTaskSpec, NativeModel } from '../../native/binding.js';

/** A task's prompt as text (its text when it has images, else its tokens detokenized). */
function promptText(model: NativeModel, spec: CompletionTaskSpec): string {
  return spec.promptText ?? model.detokenize(spec.prompt, true, true);
}

/** The file's name: llama-server's `%012lld.txt` of the wall clock in milliseconds. */
export function promptLogName(nowMs: number): string {
  return `${String(nowMs).padStart(12, '0')}.txt`;
}

/** Resolves once the file is written (or its failure reported): the caller then runs the tasks. */
export async function logPrompts(dir: string, model: NativeModel, specs: readonly CompletionTaskSpec[]): Promise<void> {
  const texts = specs.map((spec) => promptText(model, spec));
  const content = texts.length === 1 ? texts[0]! : JSON.stringify(texts, null, 2);
  const file = join(dir, promptLogName(Date.now()));
  await writeFile(file, content).catch((err: unknown) => {
    console.error(`inference-server: failed to create ${file}: ${(err as Error).message}`);
  });
}
