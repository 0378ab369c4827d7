// Converts the generation fields of a request (llama-server's names and defaults) into the
// native task specification. Semantic checks that a schema cannot express live here.
import { native, type CompletionTaskSpec, type NativeModel, type ChatSamplingKey, type SamplingParams } from '../../native/binding.js';
import { badRequest } from '../errors.js';
import { checkTokenId } from './vocabulary.js';
import type { GenerationFields } from '../schemas.js';
import type { Static, TObject } from '@sinclair/typebox';
import type { LoraRegistry } from './lora-registry.js';

export type GenerationRequest = Static<TObject<typeof GenerationFields>>;

/** llama-server's default sampler order (common_params_sampling). */
export const DEFAULT_SAMPLERS = ['penalties', 'dry', 'top_n_sigma', 'top_k', 'typ_p', 'top_p', 'min_p', 'xtc', 'temperature'];

/**
 * The server's generation defaults: what a request leaves out (reported by /props and in
 * generation_settings). llama-server's own unless its sampling flags (--temp, --top-k, ...) set them.
 */
export interface GenerationDefaults {
  sampling: Required<Omit<SamplingParams, 'grammarFromSchema' | 'nProbs' | ChatSamplingKey>>;
  nProbs: number;
  nKeep: number;
  cachePrompt: boolean;
  /** --cache-reuse: the shortest cached chunk shifted into place (0: off). */
  nCacheReuse: number;
  /** -r / --reverse-prompt: stop strings of every request, besides its own. */
  stop: string[];
}

/** llama-server's defaults (common_params_sampling), used when no flag sets them. */
export const LLAMA_SERVER_DEFAULTS: GenerationDefaults = {
  sampling: {
    seed: -1,
    temperature: 0.8,
    dynatempRange: 0,
    dynatempExponent: 1,
    topK: 40,
    topP: 0.95,
    minP: 0.05,
    topNSigma: -1,
    typicalP: 1,
    xtcProbability: 0,
    xtcThreshold: 0.1,
    repeatLastN: 64,
    repeatPenalty: 1,
    presencePenalty: 0,
    frequencyPenalty: 0,
    dryMultiplier: 0,
    dryBase: 1.75,
    dryAllowedLength: 2,
    dryPenaltyLastN: 64,
    drySequenceBreakers: ['\n', ':', '"', '*'],
    mirostat: 0,
    mirostatTau: 5,
    mirostatEta: 0.1,
    adaptiveTarget: -1,
    adaptiveDecay: 0.9,
    minKeep: 0,
    ignoreEos: false,
    backendSampling: false,
    samplers: DEFAULT_SAMPLERS,
    grammar: '',
    logitBias: [],
  },
  nProbs: 0,
  nKeep: 0,
  cachePrompt: true,
  nCacheReuse: 0,
  stop: [],
};

export interface GenerationContext {
  model: NativeModel;
  lora: LoraRegistry;
  vocabSize: number;
  /** Server-wide default for n_predict (-n); -1 = unlimited. */
  defaultNPredict: number;
  /** Number of slots (-np). */
  nSlots: number;
  defaults: GenerationDefaults;
  /** The vocabulary's end-of-generation tokens (banned by ignore_eos). */
  eogTokens: readonly number[];
}

const SAMPLER_CHARS: Record<string, string> = { d: 'dry', k: 'top_k', y: 'typ_p', p: 'top_p', s: 'top_n_sigma', m: 'min_p', t: 'temperature', x: 'xtc', i: 'infill', e: 'penalties', a: 'adaptive_p' };

function samplerList(samplers: string | readonly string[] | undefined): string[] {
  let names: string[];
  if (typeof samplers === 'string') {
    names = [...samplers].map((c) => {
      const name = SAMPLER_CHARS[c];
      if (!name) throw badRequest(`Invalid field "samplers": unknown sampler character "${c}"`, { field: 'samplers' });
      return name;
    });
  } else {
    names = (samplers ?? DEFAULT_SAMPLERS).map((n) => (n === 'typical_p' ? 'typ_p' : n));
  }
  // As llama-server: the list as given; repetition penalties apply only when "penalties" is in it.
  return names;
}

function logitBias(model: NativeModel, vocabSize: number, bias: GenerationRequest['logit_bias']): Array<[number, number]> {
  if (!bias) return [];
  const entries: Array<[string | number, number | boolean]> = Array.isArray(bias) ? bias : Object.entries(bias);
  const out: Array<[number, number]> = [];
  for (const [key, value] of entries) {
    const amount = value === false ? -Infinity : value === true ? 0 : value;
    if (typeof amount === 'number' && Number.isNaN(amount)) throw badRequest('Invalid field "logit_bias": bias must be a number or false', { field: 'logit_bias' });
    const asNumber = typeof key === 'number' ? key : /^\d+$/.test(key) ? Number(key) : NaN;
    if (!Number.isNaN(asNumber)) {
      checkTokenId(asNumber, vocabSize, 'logit_bias');
      out.push([asNumber, amount]);
    } else {
      // A string key biases every token of its tokenization, as llama-server does.
      for (const token of model.tokenize(String(key), false, false)) out.push([token, amount]);
    }
  }
  return out;
}


/**
 * Deepest nesting of ( ) groups accepted in a GBNF grammar. llama.cpp's grammar parser recurses
 * once per level on the libuv worker that prepares the task (its stack is as large as the main
 * thread's): about 20,000 levels overflow it and end the process, so a grammar is measured before
 * it reaches the parser.
 */
export const MAX_GRAMMAR_NESTING = 1000;

/** The deepest ( ) nesting of a GBNF text; quoted literals, [ ] classes and # comments skipped. */
export function grammarNesting(grammar: string): number {
  let depth = 0;
  let deepest = 0;
  for (let i = 0; i < grammar.length; i++) {
    const c = grammar[i];
    if (c === '"' || c === '[') {
      const close = c === '"' ? '"' : ']';
      for (i++; i < grammar.length && grammar[i] !== close; i++) if (grammar[i] === '\\') i++;
    } else if (c === '#') {
      while (i < grammar.length && grammar[i] !== '\n') i++;
    } else if (c === '(') {
      deepest = Math.max(deepest, ++depth);
    } else if (c === ')') {
      depth--;
    }
  }
  return deepest;
}

/** JSON schema -> GBNF through llama.cpp's converter; an unsupported schema is a 400. */
export function grammarFromSchema(schema: unknown): string {
  try {
    return native.jsonSchemaToGrammar(JSON.stringify(schema));
  } catch (err) {
    throw badRequest(`Invalid field "json_schema": ${(err as Error).message}`, { field: 'json_schema' });
  }
}

export function stopStrings(stop: GenerationRequest['stop']): string[] {
  if (stop === undefined || stop === null) return [];
  return (typeof stop === 'string' ? [stop] : stop).filter((s) => s !== '');
}

/** The sampling fields of a request over the server's defaults (llama-server's names). */
function samplingParams(ctx: GenerationContext, body: GenerationRequest, grammar: string | undefined, fromSchema: boolean): SamplingParams {
  const d = ctx.defaults.sampling;
  return {
    seed: body.seed ?? d.seed,
    temperature: body.temperature ?? d.temperature,
    dynatempRange: body.dynatemp_range ?? d.dynatempRange,
    dynatempExponent: body.dynatemp_exponent ?? d.dynatempExponent,
    topK: body.top_k ?? d.topK,
    topP: body.top_p ?? d.topP,
    minP: body.min_p ?? d.minP,
    topNSigma: body.top_n_sigma ?? d.topNSigma,
    typicalP: body.typical_p ?? d.typicalP,
    xtcProbability: body.xtc_probability ?? d.xtcProbability,
    xtcThreshold: body.xtc_threshold ?? d.xtcThreshold,
    repeatPenalty: body.repeat_penalty ?? d.repeatPenalty,
    repeatLastN: body.repeat_last_n ?? d.repeatLastN,
    frequencyPenalty: body.frequency_penalty ?? d.frequencyPenalty,
    presencePenalty: body.presence_penalty ?? d.presencePenalty,
    dryMultiplier: body.dry_multiplier ?? d.dryMultiplier,
    dryBase: body.dry_base ?? d.dryBase,
    dryAllowedLength: body.dry_allowed_length ?? d.dryAllowedLength,
    dryPenaltyLastN: body.dry_penalty_last_n ?? d.dryPenaltyLastN,
    drySequenceBreakers: body.dry_sequence_breakers ?? d.drySequenceBreakers,
    mirostat: body.mirostat ?? d.mirostat,
    mirostatTau: body.mirostat_tau ?? d.mirostatTau,
    mirostatEta: body.mirostat_eta ?? d.mirostatEta,
    // As llama-server: a target above 1 is clamped; the decay must lie in [0, 0.99] (schema).
    adaptiveTarget: Math.min(1, body.adaptive_target ?? d.adaptiveTarget),
    adaptiveDecay: body.adaptive_decay ?? d.adaptiveDecay,
    minKeep: body.min_keep ?? d.minKeep,
    ignoreEos: body.ignore_eos ?? d.ignoreEos,
    backendSampling: body.backend_sampling ?? d.backendSampling,
    samplers: samplerList(body.samplers ?? d.samplers),
    grammar,
    grammarFromSchema: fromSchema,
    // llama-server adds a request's biases to those of -l / --logit-bias, and with ignore_eos
    // bans every end-of-generation token the same way (reported in generation_settings).
    logitBias: [
      ...d.logitBias,
      ...logitBias(ctx.model, ctx.vocabSize, body.logit_bias),
      ...((body.ignore_eos ?? d.ignoreEos) ? ctx.eogTokens.map((t): [number, number] => [t, -Infinity]) : []),
    ],
  };
}

/** The fields a request may give its token limit in, on any route. */
export interface TokenLimitFields {
  n_predict?: number | null;
  max_completion_tokens?: number | null;
  max_tokens?: number | null;
}

/**
 * The request's token limit, as llama-server reads it on every route (params_from_json: the
 * n_predict field, then its aliases in order): n_predict, else max_completion_tokens, else
 * max_tokens; a null counts as absent. Undefined when none is given (the server's -n applies).
 */
export function requestedNPredict(body: TokenLimitFields): number | undefined {
  return body.n_predict ?? body.max_completion_tokens ?? body.max_tokens ?? undefined;
}

/**
 * Builds the native task for one prompt. `overrides` lets the OpenAI endpoints supply values
 * that come from their own fields (response_format, logprobs/top_logprobs).
 */
export function buildTaskSpec(
  ctx: GenerationContext,
  body: GenerationRequest & TokenLimitFields,
  prompt: Int32Array,
  overrides: { grammar?: string; grammarFromSchema?: boolean; nProbs?: number } = {},
): CompletionTaskSpec {
  if (body.grammar !== undefined && body.json_schema !== undefined) throw badRequest('Use either "grammar" or "json_schema", not both');
  if (body.grammar !== undefined && grammarNesting(body.grammar) > MAX_GRAMMAR_NESTING) {
    throw badRequest(`Invalid field "grammar": groups are nested more than ${MAX_GRAMMAR_NESTING} levels deep`, { field: 'grammar' });
  }

  let grammar = overrides.grammar ?? body.grammar;
  let fromSchema = overrides.grammarFromSchema ?? false;
  if (grammar === undefined && body.json_schema !== undefined) {
    grammar = grammarFromSchema(body.json_schema);
    fromSchema = true;
  }
  const nPredict = requestedNPredict(body) ?? ctx.defaultNPredict;
  if (nPredict < -1) throw badRequest('Invalid field "n_predict": must be -1 (unlimited) or >= 0', { field: 'n_predict' });

  if (grammar === undefined && ctx.defaults.sampling.grammar !== '') grammar = ctx.defaults.sampling.grammar;
  const sampling = samplingParams(ctx, body, grammar, fromSchema);
  return {
    prompt,
    nPredict,
    // An id past the last slot wraps around, as llama-server's get_slot_by_id does.
    idSlot: body.id_slot === undefined || body.id_slot === -1 ? -1 : body.id_slot % ctx.nSlots,
    cachePrompt: body.cache_prompt ?? ctx.defaults.cachePrompt,
    // As llama-server, progress is reported on streams only.
    returnProgress: Boolean(body.return_progress && body.stream),
    nProbs: overrides.nProbs ?? body.n_probs ?? ctx.defaults.nProbs,
    postSamplingProbs: body.post_sampling_probs ?? false,
    tMaxPredictMs: body.t_max_predict_ms ?? 0,
    nIndent: body.n_indent ?? 0,
    nKeep: body.n_keep ?? ctx.defaults.nKeep,
    nDiscard: body.n_discard ?? 0,
    nCacheReuse: body.n_cache_reuse ?? ctx.defaults.nCacheReuse,
    stop: [...ctx.defaults.stop, ...stopStrings(body.stop)],
    sampling,
    loraScales: body.lora ? ctx.lora.resolve(body.lora, 'lora') : ctx.lora.forModel(body.model) ?? ctx.lora.scales(),
    ...(body.priority !== undefined ? { priority: body.priority } : {}),
  };
}
