// Timings and token probabilities in llama-server's shapes.
import type { TokenProbability } from '../../native/binding.js';
import type { CompletionOutcome } from '../engine.js';

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
}

export function timings(o: Pick<CompletionOutcome, 'nPrompt' | 'nCached' | 'nPredicted' | 'tPromptMs' | 'tPredictMs'>): Timings {
  const promptN = o.nPrompt - o.nCached;
  return {
    cache_n: o.nCached,
    prompt_n: promptN,
    prompt_ms: o.tPromptMs,
    prompt_per_token_ms: promptN > 0 ? o.tPromptMs / promptN : 0,
    prompt_per_second: o.tPromptMs > 0 ? (1000 * promptN) / o.tPromptMs : 0,
    predicted_n: o.nPredicted,
    predicted_ms: o.tPredictMs,
    predicted_per_token_ms: o.nPredicted > 0 ? o.tPredictMs / o.nPredicted : 0,
    predicted_per_second: o.tPredictMs > 0 ? (1000 * o.nPredicted) / o.tPredictMs : 0,
  };
}

const decoder = new TextDecoder('utf-8', { fatal: false });

function pieceText(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

export interface TokenLogprob {
  id: number;
  token: string;
  bytes: number[];
  logprob: number;
}

/** One entry of `completion_probabilities` (llama-server, pre-sampling probabilities). */
export function probabilityEntry(
  token: number,
  piece: Uint8Array,
  prob: number,
  top: TokenProbability[],
): TokenLogprob & { top_logprobs: TokenLogprob[] } {
  return {
    id: token,
    token: pieceText(piece),
    bytes: [...piece],
    logprob: Math.log(prob),
    top_logprobs: top.map((t) => ({ id: t.id, token: pieceText(t.piece), bytes: [...t.piece], logprob: Math.log(t.p) })),
  };
}
