// The native /completion response and stream chunks, in llama-server's shape.
import type { CompletionOutcome, GeneratedToken } from '../engine.js';
import type { InferenceService } from '../service.js';
import { probabilityEntry, timings } from './timings.js';

export interface NativeFormatOptions {
  index: number;
  returnTokens: boolean;
  nProbs: number;
  timingsPerToken: boolean;
  prompt: string;
}

function probabilities(service: InferenceService, items: Array<{ token: number; prob: number; probs: GeneratedToken['probs'] }>) {
  return items.map((p) => probabilityEntry(p.token, service.model.tokenPiece(p.token, false), p.prob, p.probs ?? []));
}

export function completionResponse(service: InferenceService, o: CompletionOutcome, opts: NativeFormatOptions): Record<string, unknown> {
  const body: Record<string, unknown> = {
    index: opts.index,
    content: o.content,
    tokens: opts.returnTokens ? o.tokens : [],
    id_slot: o.slot,
    stop: true,
    model: service.alias,
    tokens_predicted: o.nPredicted,
    tokens_evaluated: o.nPrompt,
    prompt: opts.prompt,
    has_new_line: o.content.includes('\n'),
    truncated: o.truncated,
    stop_type: o.stop,
    stopping_word: o.stoppingWord,
    tokens_cached: o.nCached,
    timings: timings(o),
  };
  if (opts.nProbs > 0) body.completion_probabilities = probabilities(service, o.probabilities);
  return body;
}

/** A partial chunk carrying one or more tokens (several when the client reads slowly). */
export function completionChunk(service: InferenceService, tokens: GeneratedToken[], opts: NativeFormatOptions, nPrompt: number, nPredictedSoFar: number): Record<string, unknown> {
  const chunk: Record<string, unknown> = {
    index: opts.index,
    content: tokens.map((t) => t.text).join(''),
    tokens: opts.returnTokens ? tokens.filter((t) => t.token >= 0).map((t) => t.token) : [],
    stop: false,
    id_slot: -1,
    model: service.alias,
    tokens_predicted: nPredictedSoFar,
    tokens_evaluated: nPrompt,
  };
  if (opts.nProbs > 0) {
    chunk.completion_probabilities = probabilities(service, tokens.filter((t) => t.token >= 0 && t.probs).map((t) => ({ token: t.token, prob: t.prob ?? 0, probs: t.probs })));
  }
  return chunk;
}

/** The final stream chunk: no new content, every closing field. */
export function finalChunk(service: InferenceService, o: CompletionOutcome, opts: NativeFormatOptions): Record<string, unknown> {
  const body = completionResponse(service, o, opts);
  body.content = '';
  body.tokens = [];
  delete body.completion_probabilities;
  return body;
}
