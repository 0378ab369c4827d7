// What one request's tasks used, and why each ended, counted here once for every reader: the
// dialects' answers (dialects/openai.ts `usage`), the tenant's metering (tenants/tenancy.ts) and
// the request's trace (telemetry/task-spans.ts).
import type { StopType } from '../../native/binding.js';
import type { CompletionOutcome } from './engine.js';

/** The tokens of one request: what its answer's `usage` says and what its tenant is metered for. */
export interface RequestUsage {
  /** The prompt's tokens, those taken from the cache included. */
  promptTokens: number;
  cachedPromptTokens: number;
  completionTokens: number;
}

/**
 * The usage of a request's tasks, submitted together: with n > 1 every choice shares one prompt,
 * so the first task's prompt and cached tokens count once; every task's generated tokens count.
 */
export function requestUsage(outcomes: readonly CompletionOutcome[]): RequestUsage {
  let completionTokens = 0;
  for (const o of outcomes) completionTokens += o.nPredicted;
  return { promptTokens: outcomes[0]?.nPrompt ?? 0, cachedPromptTokens: outcomes[0]?.nCached ?? 0, completionTokens };
}

/** Why a task ended, as OpenAI's finish_reason and the GenAI conventions name it: "length" at its limit, else "stop". */
export function finishReason(stop: StopType): 'stop' | 'length' {
  return stop === 'limit' ? 'length' : 'stop';
}
