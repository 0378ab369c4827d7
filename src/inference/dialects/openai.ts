// OpenAI-compatible response objects and stream chunks (chat.completion, text_completion).
import { randomBytes } from 'node:crypto';
import type { StopType, TokenProbability } from '../../native/binding.js';
import type { CompletionOutcome, GeneratedToken } from '../engine/engine.js';
import { logprob, timings, tokenText } from './timings.js';
import { recordResponseId } from '../../telemetry/tracing.js';
import { finishReason, requestUsage } from '../engine/request-usage.js';

/** A new response id; it is recorded on the request's trace (gen_ai.response.id) when tracing is on. */
export function completionId(prefix: 'chatcmpl' | 'cmpl'): string {
  const id = `${prefix}-${randomBytes(12).toString('base64url')}`;
  recordResponseId(id);
  return id;
}

/** A chat that ended on its own with tool calls finished for them, as llama-server says. */
export function chatFinishReason(stop: StopType, toolCalls: boolean): 'stop' | 'length' | 'tool_calls' {
  const reason = finishReason(stop);
  return reason === 'stop' && toolCalls ? 'tool_calls' : reason;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
  /** The prompt's tokens taken from the cache (llama-server's usage_json_oaicompat). */
  prompt_tokens_details: { cached_tokens: number };
}

/** A request's usage (engine/request-usage.ts) in OpenAI's shape. */
export function usage(outcomes: CompletionOutcome[]): Usage {
  const u = requestUsage(outcomes);
  return { prompt_tokens: u.promptTokens, completion_tokens: u.completionTokens, total_tokens: u.promptTokens + u.completionTokens, prompt_tokens_details: { cached_tokens: u.cachedPromptTokens } };
}

const decoder = new TextDecoder();

/** OpenAI's logprob item; `id` (the token id) is llama-server's addition. */
export interface LogprobItem {
  id: number;
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: Array<{ id: number; token: string; logprob: number; bytes: number[] }>;
}

/** Chat logprobs: one item per generated token; `top` alternatives (0..20) each. */
export function chatLogprobs(
  items: CompletionOutcome['probabilities'],
  piece: (token: number) => Uint8Array,
  top: number,
): { content: LogprobItem[] } {
  return {
    content: items.map((it) => {
      const bytes = piece(it.token);
      return {
        id: it.token,
        token: tokenText(bytes),
        logprob: logprob(it.prob),
        bytes: [...bytes],
        top_logprobs: it.probs.slice(0, top).map((p: TokenProbability) => ({ id: p.id, token: tokenText(p.piece), logprob: logprob(p.p), bytes: [...p.piece] })),
      };
    }),
  };
}

/** Legacy completions logprobs: tokens, token_logprobs, top_logprobs maps, text_offset. */
export function textLogprobs(items: CompletionOutcome['probabilities'], piece: (token: number) => Uint8Array, top: number) {
  let offset = 0;
  const tokens: string[] = [];
  const tokenLogprobs: number[] = [];
  const topLogprobs: Array<Record<string, number>> = [];
  const textOffset: number[] = [];
  for (const it of items) {
    const text = decoder.decode(piece(it.token));
    tokens.push(text);
    tokenLogprobs.push(logprob(it.prob));
    topLogprobs.push(Object.fromEntries(it.probs.slice(0, top).map((p) => [decoder.decode(p.piece), logprob(p.p)])));
    textOffset.push(offset);
    offset += text.length;
  }
  return { tokens, token_logprobs: tokenLogprobs, top_logprobs: topLogprobs, text_offset: textOffset };
}

export function withTimings(body: Record<string, unknown>, outcome: CompletionOutcome | undefined): Record<string, unknown> {
  if (outcome) body.timings = timings(outcome);
  return body;
}

/** The per-token probabilities carried by a batch of streamed tokens. */
export function tokenProbabilities(batch: readonly GeneratedToken[]): Array<{ token: number; prob: number; probs: TokenProbability[] }> {
  return batch.filter((t) => t.token >= 0 && t.probs).map((t) => ({ token: t.token, prob: t.prob ?? 0, probs: t.probs ?? [] }));
}

/** `system_fingerprint`: the model architecture and context size, stable for a running server. */
export function systemFingerprint(service: { metadata: { architecture: string }; info: { nCtx: number } }): string {
  return `b-${service.metadata.architecture}-${service.info.nCtx}`;
}
