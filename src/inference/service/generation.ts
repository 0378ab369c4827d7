// Converts the generation fields of a request (llama-server's names and defaults) into the
// native task specification. Semantic checks that a schema cannot express live here.
import { native, type CompletionTaskSpec, type NativeModel, type SamplingParams } from '../../native/binding.js';
import { badRequest } from '../errors.js';
import { checkTokenId } from './vocabulary.js';
import type { GenerationFields } from '../schemas.js';
import type { Static, TObject } from '@sinclair/typebox';
import type { LoraRegistry } from './lora-registry.js';

export type GenerationRequest = Static<TObject<typeof GenerationFields>>;

/** llama-server's default sampler order (common_params_sampling); penalties run first unless listed elsewhere. */
export const DEFAULT_SAMPLERS = ['penalties', 'dry', 'top_n_sigma', 'top_k', 'typ_p', 'top_p', 'min_p', 'xtc', 'temperature'];

/** The server's sampling defaults: what a request leaves out (reported by /props). */
export const DEFAULT_SAMPLING = {
  temperature: 0.8,
  dynatemp_range: 0,
  dynatemp_exponent: 1,
  top_k: 40,
  top_p: 0.95,
  min_p: 0.05,
  top_n_sigma: -1,
  typical_p: 1,
  xtc_probability: 0,
  xtc_threshold: 0.1,
  repeat_last_n: 64,
  repeat_penalty: 1,
  presence_penalty: 0,
  frequency_penalty: 0,
  dry_multiplier: 0,
  dry_base: 1.75,
  dry_allowed_length: 2,
  dry_penalty_last_n: 64,
  dry_sequence_breakers: ['\n', ':', '"', '*'],
  mirostat: 0,
  mirostat_tau: 5,
  mirostat_eta: 0.1,
  seed: -1,
  n_probs: 0,
  min_keep: 0,
  ignore_eos: false,
  samplers: DEFAULT_SAMPLERS,
  n_predict: -1,
};

export interface GenerationContext {
  model: NativeModel;
  lora: LoraRegistry;
  vocabSize: number;
  /** Server-wide default for n_predict (-n); -1 = unlimited. */
  defaultNPredict: number;
  /** Number of slots (-np). */
  nSlots: number;
}

const SAMPLER_CHARS: Record<string, string> = { d: 'dry', k: 'top_k', y: 'typ_p', p: 'top_p', s: 'top_n_sigma', m: 'min_p', t: 'temperature', x: 'xtc', i: 'infill', e: 'penalties', a: 'adaptive_p' };

function samplerList(samplers: GenerationRequest['samplers']): string[] {
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
  return names.includes('penalties') ? names : ['penalties', ...names];
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
 * once per level on the thread that submits the task: about 20,000 levels overflow its stack
 * and end the process, so a grammar is measured before it reaches the parser.
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

/**
 * Builds the native task for one prompt. `overrides` lets the OpenAI endpoints supply values
 * that come from their own fields (max_tokens, response_format, top_logprobs).
 */
export function buildTaskSpec(
  ctx: GenerationContext,
  body: GenerationRequest,
  prompt: Int32Array,
  overrides: { nPredict?: number; grammar?: string; grammarFromSchema?: boolean; nProbs?: number } = {},
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
  const nPredict = overrides.nPredict ?? body.n_predict ?? (body.max_tokens ?? undefined) ?? ctx.defaultNPredict;
  if (nPredict < -1) throw badRequest('Invalid field "n_predict": must be -1 (unlimited) or >= 0', { field: 'n_predict' });

  const d = DEFAULT_SAMPLING;
  const sampling: SamplingParams = {
    seed: body.seed ?? d.seed,
    temperature: body.temperature ?? d.temperature,
    dynatempRange: body.dynatemp_range ?? d.dynatemp_range,
    dynatempExponent: body.dynatemp_exponent ?? d.dynatemp_exponent,
    topK: body.top_k ?? d.top_k,
    topP: body.top_p ?? d.top_p,
    minP: body.min_p ?? d.min_p,
    topNSigma: body.top_n_sigma ?? d.top_n_sigma,
    typicalP: body.typical_p ?? d.typical_p,
    xtcProbability: body.xtc_probability ?? d.xtc_probability,
    xtcThreshold: body.xtc_threshold ?? d.xtc_threshold,
    repeatPenalty: body.repeat_penalty ?? d.repeat_penalty,
    repeatLastN: body.repeat_last_n ?? d.repeat_last_n,
    frequencyPenalty: body.frequency_penalty ?? d.frequency_penalty,
    presencePenalty: body.presence_penalty ?? d.presence_penalty,
    dryMultiplier: body.dry_multiplier ?? d.dry_multiplier,
    dryBase: body.dry_base ?? d.dry_base,
    dryAllowedLength: body.dry_allowed_length ?? d.dry_allowed_length,
    dryPenaltyLastN: body.dry_penalty_last_n ?? d.dry_penalty_last_n,
    drySequenceBreakers: body.dry_sequence_breakers ?? d.dry_sequence_breakers,
    mirostat: body.mirostat ?? d.mirostat,
    mirostatTau: body.mirostat_tau ?? d.mirostat_tau,
    mirostatEta: body.mirostat_eta ?? d.mirostat_eta,
    minKeep: body.min_keep ?? d.min_keep,
    ignoreEos: body.ignore_eos ?? d.ignore_eos,
    samplers: samplerList(body.samplers),
    grammar,
    grammarFromSchema: fromSchema,
    logitBias: logitBias(ctx.model, ctx.vocabSize, body.logit_bias),
  };
  return {
    prompt,
    nPredict,
    // An id past the last slot wraps around, as llama-server's get_slot_by_id does.
    idSlot: body.id_slot === undefined || body.id_slot === -1 ? -1 : body.id_slot % ctx.nSlots,
    cachePrompt: body.cache_prompt ?? true,
    nProbs: overrides.nProbs ?? body.n_probs ?? 0,
    postSamplingProbs: body.post_sampling_probs ?? false,
    tMaxPredictMs: body.t_max_predict_ms ?? 0,
    nIndent: body.n_indent ?? 0,
    nKeep: body.n_keep ?? 0,
    nDiscard: body.n_discard ?? 0,
    stop: stopStrings(body.stop),
    sampling,
    loraScales: body.lora ? ctx.lora.resolve(body.lora, 'lora') : ctx.lora.scales(),
  };
}
