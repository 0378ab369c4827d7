// The one streaming loop of every completion dialect (llama-server's /completion and /infill,
// OpenAI chat and text completions, and the dialects to come): the tasks of a request stream
// their tokens as SSE events, each task's events in order, tasks interleaved as they generate.
import type { HttpRequest } from '../../http/request.js';
import type { CompletionTaskSpec } from '../../native/binding.js';
import type { CompletionOutcome, GeneratedToken } from '../engine/engine.js';
import type { Admitted } from '../guards.js';
import { eventList, TokenStream, type StreamEvent } from './token-stream.js';

/** How a dialect renders the events of task `index`, and what closes the stream. */
export interface TaskEvents {
  /** Before any token of the task (OpenAI's role chunk, an echoed prompt); null sends nothing. */
  opening?(index: number): StreamEvent | null;
  /** A renderer for the task's tokens (it may keep per-task state): events to send, or null for none. */
  tokens(index: number): (batch: GeneratedToken[]) => StreamEvent | readonly StreamEvent[] | null;
  /** The task's last events, once it has finished. */
  closing(outcome: CompletionOutcome, index: number): StreamEvent | readonly StreamEvent[];
  /** The stream's last events, once every task has closed (usage, `[DONE]`). */
  final?(outcomes: CompletionOutcome[]): readonly StreamEvent[];
}


/**
 * Streams the tasks, then the final events, and resolves to the tasks' outcomes. The stream's
 * status line goes out with its first event, and every task is submitted before that: a task the
 * engine refuses is answered with its own error status, as llama-server does.
 */
export async function streamTasks(req: HttpRequest, { service, tenant }: Admitted, specs: readonly CompletionTaskSpec[], events: TaskEvents): Promise<CompletionOutcome[]> {
  const stream = req.openEventStream();
  const tokenStreams = specs.map((_, index) => new TokenStream(stream, events.tokens(index)));
  // The first tokens arrive only after this await has returned (NativeEngine.submit): each
  // opening event below is queued before them.
  const runs = await service.startAll(specs, req.signal, tenant, (index) => (t) => tokenStreams[index]!.push(t));
  const outcomes = await Promise.all(runs.map(async (run, index) => {
    const opening = events.opening?.(index);
    if (opening) await stream.send(opening);
    let outcome: CompletionOutcome;
    try {
      outcome = await run;
    } finally {
      await tokenStreams[index]!.flush();
    }
    for (const event of eventList(events.closing(outcome, index))) await stream.send(event);
    return outcome;
  }));
  for (const event of events.final?.(outcomes) ?? []) await stream.send(event);
  return outcomes;
}
