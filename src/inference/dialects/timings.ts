// Timings and token probabilities in llama-server's shapes.
import type { TokenProbability } from '../../native/binding.js';
import type { CompletionOutcome, GeneratedToken, PromptProgress } from '../engine/engine.js';

export interface Timings {
  cache_n: number;
  prompt_n: number;
  prompt_ms: number;
  prompt_per_token_ms: number;
  prompt_per_second: number;
  predicted_n: number;
  predicted_ms: number;
  predicted_per_token_ms: number;
  predicted_per_second: number;
  /** Speculative decoding, when the task drafted: drafted tokens and those accepted (llama-server's names). */
  draft_n?: number;
  draft_n_accepted?: number;
}

/**
 * As llama-server's slot stats: generation speed counts decode steps, one fewer than the tokens,
 * since the first token comes from the logits of the prompt's last batch.
 */
export function timings(
  o: Pick<CompletionOutcome, 'nPrompt' | 'nCached' | 'nPredicted' | 'tPromptMs' | 'tPredictMs'> & Partial<Pick<CompletionOutcome, 'nDraft' | 'nDraftAccepted'>>,
): Timings {
  const promptN = o.nPrompt - o.nCached;
  const steps = Math.max(0, o.nPredicted - 1);
  const draft = o.nDraft ? { draft_n: o.nDraft, draft_n_accepted: o.nDraftAccepted ?? 0 } : {};
  return {
    cache_n: o.nCached,
    prompt_n: promptN,
    prompt_ms: o.tPromptMs,
    prompt_per_token_ms: promptN > 0 ? o.tPromptMs / promptN : 0,
    prompt_per_second: o.tPromptMs > 0 ? (1000 * promptN) / o.tPromptMs : 0,
    predicted_n: o.nPredicted,
    predicted_ms: o.tPredictMs,
    predicted_per_token_ms: steps > 0 ? o.tPredictMs / steps : 0,
    predicted_per_second: o.tPredictMs > 0 ? (1000 / o.tPredictMs) * steps : 0,
    ...draft,
  };
}

/**
 * Timings on a prompt_progress report (timings_per_token), as llama-server's slot stats at that
 * point: the prompt tokens decoded so far (cached ones apart) and the time since the prompt
 * started; zero before the first batch, nothing generated yet.
 */
export function progressTimings(p: PromptProgress): Timings {
  const promptN = p.processed - p.cache;
  return timings({ nPrompt: p.processed, nCached: p.cache, nPredicted: 0, tPromptMs: promptN > 0 ? p.time_ms : 0, tPredictMs: 0 });
}

/**
 * Timings of a task while it streams (timings_per_token): the prompt's measured from submission
 * to the first token, generation's from then on. The final chunk carries the engine's own.
 */
export class StreamTimer {
  private readonly started = performance.now();
  private firstTokenAt = 0;
  private nPrompt: number;
  private predicted = 0;

  constructor(nPrompt: number) {
    this.nPrompt = nPrompt;
  }

  /** Counts a batch of streamed tokens (negative ids are text-only flushes). */
  add(batch: readonly GeneratedToken[]): void {
    for (const t of batch) {
      if (t.nPrompt !== undefined) this.nPrompt = t.nPrompt;
      if (t.token < 0) continue;
      if (this.predicted === 0) this.firstTokenAt = performance.now();
      this.predicted++;
    }
  }

  get nPredicted(): number {
    return this.predicted;
  }

  /** With images, the prompt's length is known once the engine has tokenized it. */
  get promptTokens(): number {
    return this.nPrompt;
  }

  timings(): Timings {
    const now = performance.now();
    const promptMs = (this.firstTokenAt || now) - this.started;
    return timings({ nPrompt: this.nPrompt, nCached: 0, nPredicted: this.predicted, tPromptMs: promptMs, tPredictMs: this.firstTokenAt ? now - this.firstTokenAt : 0 });
  }
}

const decoder = new TextDecoder('utf-8', { fatal: false });

/**
 * A token's text. A multi-byte character cut off at the end (a token holding half a character) is
 * dropped, as llama-server does; the bytes are reported separately.
 */
export function tokenText(bytes: Uint8Array): string {
  let end = bytes.length;
  for (let i = 1; i <= 4 && i <= bytes.length; i++) {
    const b = bytes[bytes.length - i]!;
    const needs = (b & 0xe0) === 0xc0 ? 2 : (b & 0xf0) === 0xe0 ? 3 : (b & 0xf8) === 0xf0 ? 4 : 0;
    if (needs > i) {
      end = bytes.length - i;
      break;
    }
  }
  return decoder.decode(bytes.subarray(0, end));
}

/** log(p), with llama-server's stand-in for log(0) (the lowest float) since JSON has no -Infinity. */
export function logprob(p: number): number {
  return p > 0 ? Math.log(p) : -3.4028234663852886e38;
}

/**
 * One entry of `completion_probabilities` in llama-server's two shapes: log-probabilities over the
 * whole vocabulary (default), or with `post_sampling_probs` the probabilities the sampler chain
 * left (`prob`, `top_probs`).
 */
export function probabilityEntry(
  token: number,
  piece: Uint8Array,
  prob: number,
  top: TokenProbability[],
  postSampling: boolean,
): Record<string, unknown> {
  const entry = (id: number, bytes: Uint8Array, p: number): Record<string, unknown> =>
    postSampling
      ? { id, token: tokenText(bytes), bytes: [...bytes], prob: p }
      : { id, token: tokenText(bytes), bytes: [...bytes], logprob: logprob(p) };
  return { ...entry(token, piece, prob), [postSampling ? 'top_probs' : 'top_logprobs']: top.map((t) => entry(t.id, t.piece, t.p)) };
}
