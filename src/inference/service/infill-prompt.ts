// The fill-in-the-middle prompt of POST /infill, token for token as llama-server builds it
// (format_prompt_infill in tools/server/server-common.cpp). Pure: the tokenizer and the FIM token
// ids come in as arguments, so the construction is testable without a model.
//
// With the repo-level tokens (FIM_REP and FIM_SEP, https://arxiv.org/pdf/2409.12186):
//
//   [FIM_REP]myproject\n
//   [FIM_SEP]{filename 0}\n{text 0}
//   [FIM_SEP]{filename 1}\n{text 1}
//   ...
//   [FIM_SEP]filename\n
//   [BOS][FIM_PRE]{prefix}{prompt}[FIM_SUF]{suffix}[FIM_MID]
//
// Without FIM_SEP each extra chunk is preceded by "\n\n--- snippet ---\n\n" instead. With
// `spmInfill` the suffix part comes before the prefix part (SPM order). Budgets: the prefix keeps
// its last 3*(n_batch/4) tokens, the suffix its first n_batch/4 - (2 + prompt) tokens, and the
// extra context its last n_ctx - n_batch - 2*n_predict tokens (n_predict being the server's -n).

/** Tokenizes text: (text, addSpecial, parseSpecial), as NativeModel.tokenize. */
export type Tokenizer = (text: string, addSpecial: boolean, parseSpecial: boolean) => ArrayLike<number>;

/** The vocabulary facts the prompt depends on. */
export interface InfillVocab {
  tokenize: Tokenizer;
  fimPre: number;
  fimSuf: number;
  fimMid: number;
  /** Repo-level tokens; null when the vocabulary has none. */
  fimRep: number | null;
  fimSep: number | null;
  bos: number | null;
  addBos: boolean;
}

/** Text, or a mix of text and token ids (llama-server's tokenize_mixed). */
export type InfillText = string | ReadonlyArray<string | number>;

export interface InfillChunk {
  /** Defaults to "tmp", as in llama-server. */
  filename?: string;
  text: string;
}

export interface InfillInput {
  prefix: InfillText;
  suffix: InfillText;
  extra?: readonly InfillChunk[];
  /** The tokens of the request's `prompt`, inserted right after the prefix. */
  prompt?: ArrayLike<number>;
}

export interface InfillBudget {
  /** The logical batch size (-b). */
  nBatch: number;
  /** The server's n_predict (-n, -1 = unlimited), not the request's. */
  nPredict: number;
  /** The context of one slot. */
  nCtx: number;
  /** Suffix/prefix/middle order (--spm-infill). */
  spmInfill?: boolean;
}

/** "\n\n--- snippet ---\n\n": separates extra chunks when the vocabulary has no FIM_SEP. */
export const CHUNK_SEPARATOR = '\n\n--- snippet ---\n\n';
/** llama-server's placeholder repository and current file names. */
export const REPO_NAME = 'myproject';
export const CURRENT_FILENAME = 'filename';

/** Text pieces tokenized without special tokens and without parsing special-token text. */
function tokenizeMixed(tokenize: Tokenizer, input: InfillText): number[] {
  if (typeof input === 'string') return Array.from(tokenize(input, false, false));
  let out: number[] = [];
  for (const piece of input) out = typeof piece === 'string' ? out.concat(Array.from(tokenize(piece, false, false))) : out.concat(piece);
  return out;
}

/** The FIM prompt for `input`, truncated to `budget` exactly as llama-server truncates it. */
export function buildInfillPrompt(vocab: InfillVocab, input: InfillInput, budget: InfillBudget): Int32Array {
  const tok = (text: string) => Array.from(vocab.tokenize(text, false, false));
  const prompt = Array.from(input.prompt ?? []);

  let prefix = tokenizeMixed(vocab.tokenize, input.prefix);
  let suffix = tokenizeMixed(vocab.tokenize, input.suffix);

  // (concat, not push(...): inputs may be longer than the engine's argument limit)
  let extra: number[] = [];
  if (vocab.fimRep !== null) extra = extra.concat(vocab.fimRep, tok(`${REPO_NAME}\n`));
  for (const chunk of input.extra ?? []) {
    extra = vocab.fimSep !== null ? extra.concat(vocab.fimSep, tok(`${chunk.filename ?? 'tmp'}\n`)) : extra.concat(tok(CHUNK_SEPARATOR));
    extra = extra.concat(tok(chunk.text));
  }
  if (vocab.fimSep !== null) extra = extra.concat(vocab.fimSep, tok(`${CURRENT_FILENAME}\n`));

  // C++ integer arithmetic: n_batch/4 truncates toward zero.
  const quarter = Math.trunc(budget.nBatch / 4);
  const nPrefixTake = Math.min(prefix.length, 3 * quarter);
  const nSuffixTake = Math.min(suffix.length, Math.max(0, quarter - (2 + prompt.length)));
  const nExtraTake = Math.min(Math.max(0, budget.nCtx - budget.nBatch - 2 * budget.nPredict), extra.length);

  prefix = prefix.slice(prefix.length - nPrefixTake);
  suffix = suffix.slice(0, nSuffixTake);

  const prefixPart = [vocab.fimPre].concat(prefix, prompt);
  const suffixPart = [vocab.fimSuf].concat(suffix);
  const [first, second] = budget.spmInfill ? [suffixPart, prefixPart] : [prefixPart, suffixPart];

  // The extra context (its last n_extra_take tokens) goes before BOS and the FIM prefix.
  const bos = vocab.addBos && vocab.bos !== null ? [vocab.bos] : [];
  return Int32Array.from(extra.slice(extra.length - nExtraTake).concat(bos, first, second, vocab.fimMid));
}

/**
 * llama-server's refusal when the vocabulary lacks a FIM token: the message, or null when the
 * model can infill.
 */
export function missingFimTokens(tokens: { fimPre: number | null; fimSuf: number | null; fimMid: number | null }): string | null {
  let err = '';
  if (tokens.fimPre === null) err += 'prefix token is missing. ';
  if (tokens.fimSuf === null) err += 'suffix token is missing. ';
  if (tokens.fimMid === null) err += 'middle token is missing. ';
  return err === '' ? null : `Infill is not supported by this model: ${err}`;
}
