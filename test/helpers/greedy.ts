// Greedy output compared across cache or batch paths. The same request computed over other KV
// cells, in another order in the pool, or in a batch of another shape, rounds the same arithmetic
// differently (by about 1e-3 in log-probability with the test model: ggml's CPU attention
// accumulates in f16 in the order of the pool's cells), so where the two best candidates are
// closer than that the greedy pick may go the other way. The generated models' distributions
// are flat: a long answer meets such a near tie every few dozen tokens. A test comparing greedy
// answers that took different paths asserts that they agree token for token until they part, if
// they do, at one of the reference's near ties (sameGreedyAnswer; docs/llama-server-differences.md,
// "one answer per request").

/**
 * A greedy pick whose two best candidates are closer than this in log-probability is a near tie.
 * test/inference/prefix-sharing.test.ts and test/native/engine.test.ts use the same margin.
 */
export const NEAR_TIE = 0.01;

/** One generated token with the log-probability margin of its greedy pick over the runner-up. */
export interface GreedyToken {
  id: number;
  bytes: number[];
  /** logprob(best) - logprob(second best); NEAR_TIE or less is a near tie. */
  margin: number;
}

/** A token's entry in llama-server's completion_probabilities and in OpenAI's logprobs.content. */
interface LogprobEntry { id: number; bytes: number[]; top_logprobs: Array<{ logprob: number }> }

/** Tokens from their log-probability entries (asked with n_probs, or top_logprobs, of 2 or more). */
export function greedyTokens(entries: LogprobEntry[]): GreedyToken[] {
  return entries.map((p) => {
    if (p.top_logprobs.length < 2) throw new Error('near ties need the top two log-probabilities (n_probs or top_logprobs >= 2)');
    return { id: p.id, bytes: p.bytes, margin: p.top_logprobs[0]!.logprob - p.top_logprobs[1]!.logprob };
  });
}

/** The tokens of a chat completion stream asked with `logprobs: true, top_logprobs: 2` (or more). */
export function chatStreamTokens(events: unknown[]): GreedyToken[] {
  return greedyTokens((events as any[]).flatMap((e) => (e === '[DONE]' ? [] : (e.choices?.[0]?.logprobs?.content ?? []))));
}

/** The tokens of a /completion answer asked with `n_probs: 2` (or more): the body, or a stream's events. */
export function completionTokens(answer: unknown): GreedyToken[] {
  const parts = (Array.isArray(answer) ? answer : [answer]) as any[];
  return greedyTokens(parts.flatMap((e) => (e === '[DONE]' ? [] : (e.completion_probabilities ?? []))));
}

/** Token ids without log-probabilities (a request that could not ask for them), to compare with a reference that has them. */
export function idsOnly(ids: number[]): GreedyToken[] {
  return ids.map((id) => ({ id, bytes: [], margin: Number.NaN }));
}

/**
 * Where `got` first differs from `reference` (their common length when it never does), and
 * whether that is a near tie of the reference. Two computations of one request that differ only
 * in rounding agree token for token until the reference's pick there was a near tie: from then on
 * they may go separate ways. A first difference at a decided pick is a different answer.
 */
export function greedyAgreement(got: GreedyToken[], reference: GreedyToken[]): { agreed: number; atNearTie: boolean } {
  const n = Math.min(got.length, reference.length);
  let agreed = 0;
  while (agreed < n && got[agreed]!.id === reference[agreed]!.id) agreed++;
  return { agreed, atNearTie: agreed < n && reference[agreed]!.margin < NEAR_TIE };
}

/** How many tokens come before the first near tie (all of them when there is none). */
export function decidedLength(tokens: GreedyToken[]): number {
  const tie = tokens.findIndex((t) => t.margin < NEAR_TIE);
  return tie < 0 ? tokens.length : tie;
}

/**
 * Asserts that `got` is the greedy answer `reference` is, but for where a near tie went
 * (greedyAgreement); and that the reference decides at least its first `minDecided` tokens, so
 * that a different answer cannot pass as a near tie at its start.
 */
export function sameGreedyAnswer(t: Tap.Test, got: GreedyToken[], reference: GreedyToken[], what: string, minDecided = 8): void {
  const { agreed, atNearTie } = greedyAgreement(got, reference);
  const n = Math.min(got.length, reference.length);
  t.ok(decidedLength(reference) >= Math.min(minDecided, reference.length), `${what}: the reference's first near tie comes after ${minDecided} tokens or more (${decidedLength(reference)})`);
  t.ok(n > 0 && got.length === reference.length, `${what}: ${got.length} tokens, as the reference`);
  t.ok(agreed === n || atNearTie, `${what}: the reference's tokens, or its tokens up to one of its near ties (the same ${agreed} of ${n}${agreed < n ? `, then ${got[agreed]!.id} for ${reference[agreed]!.id} at a margin of ${reference[agreed]!.margin.toFixed(5)}` : ''})`);
}
