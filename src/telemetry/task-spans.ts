// The tasks of one request, followed to their outcomes: the request span's usage (and finish
// reasons), counted as the response's usage is (dialects/openai.ts), and child spans per task laid
// end to end on the task's timeline:
//   queue wait          from the submission (InferenceService.startAll, .embed) until a slot took the task
//   prompt processing   the engine's timings.prompt_ms, with the prompt's and the cache's tokens
//                       (an embedding: the time from the slot taking the input to its vector)
//   generation          the engine's timings.predicted_ms, with the tokens generated (completions only)
// The engine reports only the durations, with the task's end; the spans end when the outcome
// reaches JavaScript, generation starts predicted_ms before, prompt processing prompt_ms before
// that, and the queue wait is what remains since the submission (so it also holds the delivery of
// the engine's last event, well under a millisecond).
import type { Context, Span, Tracer } from '@opentelemetry/api';
import {
  ATTR_GEN_AI_EMBEDDINGS_DIMENSION_COUNT, ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS, ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
} from '@opentelemetry/semantic-conventions/incubating';
import type { CompletionOutcome, EmbeddingOutcome } from '../inference/engine/engine.js';
import { finishReason, requestUsage } from '../inference/engine/request-usage.js';
import type { CompletionTrace, EmbeddingTrace } from './traces.js';

export const SPAN_QUEUE = 'queue wait';
export const SPAN_PROMPT = 'prompt processing';
export const SPAN_GENERATION = 'generation';

/** What a task's outcome says of its slot and prompt, for its spans. */
interface TaskOutcome {
  slot: number;
  nPrompt: number;
  tPromptMs: number;
}

abstract class TaskSpans<O extends TaskOutcome> {
  private readonly submittedAt: number;

  constructor(
    private readonly tracer: Tracer,
    protected readonly span: Span,
    private readonly context: Context,
    /** The request span's clock (milliseconds since the epoch). */
    private readonly now: () => number,
  ) {
    this.submittedAt = now();
  }

  /**
   * Follows the outcomes without handling them for the caller. Each task's spans are recorded in
   * the reaction registered first on its outcome, and the request's attributes with the last
   * outcome: both before the handler, which awaits the same promises later, writes its response
   * and so ends the request span.
   */
  follow(outcomes: ReadonlyArray<Promise<O>>): void {
    const settled: O[] = [];
    let remaining = outcomes.length;
    outcomes.forEach((outcome, index) => {
      outcome.then((o) => {
        this.recordTask(index, o, this.now());
        settled[index] = o;
        if (--remaining === 0) this.recordRequest(settled);
      }, () => {});
    });
  }

  /** Task `index`'s spans; its outcome reached JavaScript at `doneAt`. */
  protected abstract recordTask(index: number, o: O, doneAt: number): void;
  /** The request span's attributes, from every task's outcome. */
  protected abstract recordRequest(outcomes: O[]): void;

  /** The queue wait and prompt processing spans of a task whose prompt was processed by `promptEnd`; the task's attributes. */
  protected queueAndPrompt(index: number, o: O, promptEnd: number, promptAttributes: Record<string, number>): Record<string, number> {
    const promptStart = Math.max(this.submittedAt, promptEnd - o.tPromptMs);
    const task = { 'llama.task.index': index, 'llama.slot.id': o.slot };
    this.child(SPAN_QUEUE, this.submittedAt, promptStart, task);
    this.child(SPAN_PROMPT, promptStart, promptEnd, { ...task, 'llama.prompt.tokens': o.nPrompt, ...promptAttributes, 'llama.timings.prompt_ms': o.tPromptMs });
    return task;
  }

  protected child(name: string, start: number, end: number, attributes: Record<string, number>): void {
    this.tracer.startSpan(name, { startTime: start, attributes }, this.context).end(end);
  }
}

export class CompletionSpans extends TaskSpans<CompletionOutcome> implements CompletionTrace {
  constructor(
    tracer: Tracer, span: Span, context: Context, now: () => number,
    /** Receives the finish reasons, one per task, with the last outcome. */
    private readonly finished: (reasons: string[]) => void,
  ) {
    super(tracer, span, context, now);
  }

  protected recordRequest(outcomes: CompletionOutcome[]): void {
    const counted = requestUsage(outcomes);
    this.span.setAttributes({
      [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: counted.promptTokens,
      [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: counted.completionTokens,
      [ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS]: counted.cachedPromptTokens,
    });
    this.finished(outcomes.map((o) => finishReason(o.stop)));
  }

  protected recordTask(index: number, o: CompletionOutcome, doneAt: number): void {
    const generationStart = doneAt - o.tPredictMs;
    const task = this.queueAndPrompt(index, o, generationStart, { 'llama.prompt.cached_tokens': o.nCached });
    this.child(SPAN_GENERATION, generationStart, doneAt, {
      ...task,
      'llama.generation.tokens': o.nPredicted,
      'llama.timings.predicted_ms': o.tPredictMs,
    });
  }
}

/** Embedding (and reranking) inputs: no cache, no generation. */
export class EmbeddingSpans extends TaskSpans<EmbeddingOutcome> implements EmbeddingTrace {
  protected recordRequest(outcomes: EmbeddingOutcome[]): void {
    this.span.setAttribute(ATTR_GEN_AI_USAGE_INPUT_TOKENS, outcomes.reduce((n, o) => n + o.nPrompt, 0));
    const first = outcomes[0];
    if (first && first.nVectors > 0) this.span.setAttribute(ATTR_GEN_AI_EMBEDDINGS_DIMENSION_COUNT, first.embedding.length / first.nVectors);
  }

  protected recordTask(index: number, o: EmbeddingOutcome, doneAt: number): void {
    this.queueAndPrompt(index, o, doneAt, {});
  }
}
