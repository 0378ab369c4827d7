// The one streaming loop of every completion dialect (llama-server's /completion and /infill,
// OpenAI chat and text completions, and the dialects to come): the tasks of a request stream
// their tokens as SSE events, each task's events in order, tasks interleaved as they generate.
import type { HttpRequest } from '../../http/request.js';
import type { CompletionTaskSpec } from '../../native/binding.js';
import type { CompletionOutcome, GeneratedToken } from '../engine/engine.js';
import type { InferenceService } from '../service/service.js';
import { TokenStream } from './token-stream.js';

/** How a dialect renders the events of task `index`. Each returns an event's `data:` payload. */
export interface TaskEvents {
  /** Before any token of the task (OpenAI's role chunk, an echoed prompt); null sends nothing. */
  opening?(index: number): string | null;
  /** A renderer for the task's tokens (it may keep per-task state): events to send, or null for none. */
  tokens(index: number): (batch: GeneratedToken[]) => string | readonly string[] | null;
  /** The task's last events, once it has finished. */
  closing(outcome: CompletionOutcome, index: number): string | readonly string[];
}

/**
 * Streams the tasks and resolves to their outcomes. The stream's status line goes out with its
 * first event, and every task is submitted before that: a task the engine refuses is answered
 * with its own error status, as llama-server does. The caller sends what follows the tasks
 * (usage, `[DONE]`) through `req.openEventStream()`, which returns the same stream.
 */
export async function streamTasks(req: HttpRequest, service: InferenceService, specs: readonly CompletionTaskSpec[], events: TaskEvents): Promise<CompletionOutcome[]> {
  const stream = req.openEventStream();
  const tokenStreams = specs.map((_, index) => new TokenStream(stream, events.tokens(index)));
  // The first tokens arrive only after this await has returned (NativeEngine.submit): each
  // opening event below is queued before them.
  const runs = await service.startAll(specs, req.signal, (index) => (t) => tokenStreams[index]!.push(t));
  return Promise.all(runs.map(async (run, index) => {
    const opening = events.opening?.(index);
    if (opening) await stream.send(opening);
    let outcome: CompletionOutcome;
    try {
      outcome = await run;
    } finally {
      await tokenStreams[index]!.flush();
    }
    const closing = events.closing(outcome, index);
    for (const event of typeof closing === 'string' ? [closing] : closing) await stream.send(event);
    return outcome;
  }));
}
