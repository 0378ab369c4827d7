// The native /completion response and stream chunks, in llama-server's shape.
import type { CompletionTaskSpec } from '../../native/binding.js';
import type { CompletionOutcome, GeneratedToken } from '../engine/engine.js';
import type { GenerationRequest } from '../service/generation.js';
import type { InferenceService } from '../service/service.js';
import { probabilityEntry, timings } from './timings.js';

export interface NativeFormatOptions {
  index: number;
  returnTokens: boolean;
  nProbs: number;
  postSamplingProbs: boolean;
  timingsPerToken: boolean;
  prompt: string;
  /** The task's resolved parameters, reported as `generation_settings`. */
  generationSettings: Record<string, unknown>;
  /** llama-server's `response_fields`: when not empty, the final response keeps only these paths. */
  responseFields: string[];
}

/** The parameters a task actually ran with, in llama-server's `generation_settings` shape. */
export function generationSettings(spec: CompletionTaskSpec, body: GenerationRequest): Record<string, unknown> {
  const s = spec.sampling ?? {};
  return {
    seed: s.seed === undefined ? undefined : s.seed >>> 0, // as llama-server's uint32: -1 (random) is 4294967295
    temperature: s.temperature,
    dynatemp_range: s.dynatempRange,
    dynatemp_exponent: s.dynatempExponent,
    top_k: s.topK,
    top_p: s.topP,
    min_p: s.minP,
    top_n_sigma: s.topNSigma,
    xtc_probability: s.xtcProbability,
    xtc_threshold: s.xtcThreshold,
    typical_p: s.typicalP,
    repeat_last_n: s.repeatLastN,
    repeat_penalty: s.repeatPenalty,
    presence_penalty: s.presencePenalty,
    frequency_penalty: s.frequencyPenalty,
    dry_multiplier: s.dryMultiplier,
    dry_base: s.dryBase,
    dry_allowed_length: s.dryAllowedLength,
    dry_penalty_last_n: s.dryPenaltyLastN,
    dry_sequence_breakers: s.drySequenceBreakers,
    mirostat: s.mirostat,
    mirostat_tau: s.mirostatTau,
    mirostat_eta: s.mirostatEta,
    adaptive_target: s.adaptiveTarget,
    adaptive_decay: s.adaptiveDecay,
    stop: spec.stop ?? [],
    max_tokens: spec.nPredict,
    n_predict: spec.nPredict,
    n_keep: spec.nKeep ?? 0,
    n_discard: spec.nDiscard ?? 0,
    ignore_eos: s.ignoreEos,
    backend_sampling: s.backendSampling,
    stream: body.stream ?? false,
    logit_bias: (s.logitBias ?? []).map(([token, bias]) => ({ bias: Number.isFinite(bias) ? bias : null, token })),
    n_probs: spec.nProbs ?? 0,
    min_keep: s.minKeep,
    grammar: s.grammar ?? '',
    samplers: s.samplers,
    timings_per_token: body.timings_per_token ?? false,
    post_sampling_probs: spec.postSamplingProbs ?? false,
    lora: (spec.loraScales ?? []).map((scale, id) => ({ id, scale })),
  };
}

/** llama-server's response_fields: each path ("a/b") present in the body, keyed by the path itself. */
function pickFields(body: Record<string, unknown>, paths: string[]): Record<string, unknown> {
  const picked: Record<string, unknown> = {};
  for (const path of paths) {
    let current: unknown = body;
    let found = true;
    for (const key of path.split('/')) {
      if (current !== null && typeof current === 'object' && !Array.isArray(current) && Object.hasOwn(current, key)) {
        current = (current as Record<string, unknown>)[key];
      } else {
        found = false;
        break;
      }
    }
    if (found) picked[path] = current;
  }
  return picked;
}

function probabilities(service: InferenceService, postSampling: boolean, items: Array<{ token: number; prob: number; probs: GeneratedToken['probs'] }>) {
  return items.map((p) => probabilityEntry(p.token, service.model.tokenPiece(p.token, false), p.prob, p.probs ?? [], postSampling));
}

/** The whole response of a finished task; the final stream chunk leaves out what was streamed. */
export function completionResponse(service: InferenceService, o: CompletionOutcome, opts: NativeFormatOptions, streamed = false): Record<string, unknown> {
  const body: Record<string, unknown> = {
    index: opts.index,
    content: streamed ? '' : o.content,
    tokens: opts.returnTokens && !streamed ? o.tokens : [],
    id_slot: o.slot,
    stop: true,
    model: service.alias,
    tokens_predicted: o.nPredicted,
    tokens_evaluated: o.nPrompt,
    generation_settings: opts.generationSettings,
    prompt: opts.prompt,
    has_new_line: o.content.includes('\n'),
    truncated: o.truncated,
    stop_type: o.stop,
    stopping_word: o.stoppingWord,
    tokens_cached: o.nCached,
    timings: timings(o),
  };
  if (opts.nProbs > 0 && !streamed) body.completion_probabilities = probabilities(service, opts.postSamplingProbs, o.probabilities);
  return opts.responseFields.length > 0 ? pickFields(body, opts.responseFields) : body;
}

/** A partial chunk carrying one or more tokens (several when the client reads slowly). */
export function completionChunk(service: InferenceService, tokens: GeneratedToken[], opts: NativeFormatOptions, nPrompt: number, nPredictedSoFar: number): Record<string, unknown> {
  const chunk: Record<string, unknown> = {
    index: opts.index,
    content: tokens.map((t) => t.text).join(''),
    // As llama-server, a streamed chunk always carries its token's id.
    tokens: tokens.filter((t) => t.token >= 0).map((t) => t.token),
    stop: false,
    id_slot: -1,
    model: service.alias,
    tokens_predicted: nPredictedSoFar,
    tokens_evaluated: nPrompt,
  };
  if (opts.nProbs > 0) {
    chunk.completion_probabilities = probabilities(service, opts.postSamplingProbs, tokens.filter((t) => t.token >= 0 && t.probs).map((t) => ({ token: t.token, prob: t.prob ?? 0, probs: t.probs })));
  }
  return chunk;
}

