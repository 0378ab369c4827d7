// The completion tasks of one request, followed to their outcomes: the request span's usage and
// finish reasons, counted as the response's usage is (dialects/openai.ts), and three child spans
// per task laid end to end on the task's timeline:
//   queue wait          from the submission (InferenceService.startAll) until a slot took the task
//   prompt processing   the engine's timings.prompt_ms, with the prompt's and the cache's tokens
//   generation          the engine's timings.predicted_ms, with the tokens generated
// The engine reports only the two durations, with the task's end; the spans end when the outcome
// reaches JavaScript, generation starts predicted_ms before, prompt processing prompt_ms before
// that, and the queue wait is what remains since the submission (so it also holds the delivery of
// the engine's last event, well under a millisecond).
import type { Context, Span, Tracer } from '@opentelemetry/api';
import {
  ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, ATTR_GEN_AI_USAGE_INPUT_TOKENS, ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
} from '@opentelemetry/semantic-conventions/incubating';
import type { CompletionOutcome } from '../inference/engine/engine.js';
import { finishReason, usage } from '../inference/dialects/openai.js';
import type { CompletionTrace } from './tracing.js';

export const SPAN_QUEUE = 'queue wait';
export const SPAN_PROMPT = 'prompt processing';
export const SPAN_GENERATION = 'generation';

export class CompletionSpans implements CompletionTrace {
  private readonly submittedAt: number;

  constructor(
    private readonly tracer: Tracer,
    private readonly span: Span,
    private readonly context: Context,
    /** The request span's clock (milliseconds since the epoch). */
    private readonly now: () => number,
    /** Receives the finish reasons, one per task, with the last outcome. */
    private readonly finished: (reasons: string[]) => void,
  ) {
    this.submittedAt = now();
  }

  /**
   * Follows the outcomes without handling them for the caller. Each task's spans are recorded in
   * the reaction registered first on its outcome, and the request's usage with the last outcome:
   * both before the handler, which awaits the same promises later, writes its response and so
   * ends the request span.
   */
  follow(outcomes: ReadonlyArray<Promise<CompletionOutcome>>): void {
    const settled: CompletionOutcome[] = [];
    let remaining = outcomes.length;
    outcomes.forEach((outcome, index) => {
      outcome.then((o) => {
        this.recordTask(index, o, this.now());
        settled[index] = o;
        if (--remaining === 0) this.recordUsage(settled);
      }, () => {});
    });
  }

  private recordUsage(outcomes: CompletionOutcome[]): void {
    const counted = usage(outcomes);
    this.span.setAttributes({
      [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: counted.prompt_tokens,
      [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: counted.completion_tokens,
      [ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS]: counted.prompt_tokens_details.cached_tokens,
    });
    this.finished(outcomes.map((o) => finishReason(o.stop)));
  }

  private recordTask(index: number, o: CompletionOutcome, doneAt: number): void {
    const generationStart = doneAt - o.tPredictMs;
    const promptStart = Math.max(this.submittedAt, generationStart - o.tPromptMs);
    const task = { 'llama.task.index': index, 'llama.slot.id': o.slot };
    this.child(SPAN_QUEUE, this.submittedAt, promptStart, task);
    this.child(SPAN_PROMPT, promptStart, generationStart, {
      ...task,
      'llama.prompt.tokens': o.nPrompt,
      'llama.prompt.cached_tokens': o.nCached,
      'llama.timings.prompt_ms': o.tPromptMs,
    });
    this.child(SPAN_GENERATION, generationStart, doneAt, {
      ...task,
      'llama.generation.tokens': o.nPredicted,
      'llama.timings.predicted_ms': o.tPredictMs,
    });
  }

  private child(name: string, start: number, end: number, attributes: Record<string, number>): void {
    this.tracer.startSpan(name, { startTime: start, attributes }, this.context).end(end);
  }
}
