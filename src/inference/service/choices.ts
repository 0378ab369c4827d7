// Several completions of one prompt: OpenAI's `n`, llama-server's `n_cmpl`. Each runs in its own
// slot, so they generate in parallel.
import type { CompletionTaskSpec } from '../../native/binding.js';
import { badRequest } from '../errors.js';
import type { InferenceService } from './service.js';

const MAX_CHOICES = 16;

/** The requested count (default 1), checked against the slots the server has. */
export function choiceCount(n: number | undefined, field: string, service: InferenceService): number {
  const count = n ?? 1;
  if (count < 1 || count > MAX_CHOICES) throw badRequest(`Invalid field "${field}": must be between 1 and ${MAX_CHOICES}`, { field });
  if (count > service.info.nParallel) {
    throw badRequest(`Invalid field "${field}": ${count} completions need ${count} slots, the server has ${service.info.nParallel} (-np)`, { field });
  }
  return count;
}

/** n tasks for one prompt: with a fixed seed, completion i samples with seed + i (as llama-server). */
export function perChoice(spec: CompletionTaskSpec, n: number): CompletionTaskSpec[] {
  return Array.from({ length: n }, (_, i) => {
    const seed = spec.sampling?.seed ?? -1;
    return i === 0 || seed < 0 ? spec : { ...spec, sampling: { ...spec.sampling, seed: (seed + i) >>> 0 } };
  });
}
