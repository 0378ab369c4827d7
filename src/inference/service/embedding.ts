// Embedding vectors: normalisation as llama.cpp's common_embd_normalize, and the rerank prompt
// as llama-server's format_prompt_rerank.
import type { ModelMetadata, NativeModel } from '../../native/binding.js';

/**
 * -1 none, 0 max-absolute scaled to the int16 range, 1 taxicab, 2 Euclidean, p > 2 p-norm.
 * A zero vector stays zero. The arithmetic mirrors llama.cpp's (float products summed in
 * double, a float scale), so the vectors equal llama-server's bit for bit.
 */
export function normalize(vector: Float32Array, mode: number): number[] {
  const f = Math.fround;
  let sum = 0;
  if (mode === -1) {
    sum = 1;
  } else if (mode === 0) {
    for (const x of vector) sum = Math.max(sum, Math.abs(x));
    sum /= 32760;
  } else if (mode === 2) {
    for (const x of vector) sum += f(x * x);
    sum = Math.sqrt(sum);
  } else {
    for (const x of vector) sum += Math.abs(x) ** mode;
    sum = sum ** (1 / mode);
  }
  const k = sum > 0 ? f(1 / sum) : 0;
  return Array.from(vector, (x) => f(x * k));
}

/** Splits a row-major block of `n` vectors. */
export function rows(block: Float32Array, n: number): Float32Array[] {
  const width = block.length / n;
  return Array.from({ length: n }, (_, i) => block.subarray(i * width, (i + 1) * width));
}

/** Little-endian float32 bytes, base64 (OpenAI's encoding_format "base64"). */
export function base64Floats(values: readonly number[]): string {
  const buf = Buffer.alloc(values.length * 4);
  values.forEach((v, i) => buf.writeFloatLE(v, i * 4));
  return buf.toString('base64');
}

/** [BOS] query [EOS] [SEP] document [EOS], each part only when the vocabulary adds it. */
export function rerankPrompt(model: NativeModel, m: ModelMetadata, query: string, document: string): Int32Array {
  const template = m.kv['tokenizer.chat_template.rerank'];
  if (template) {
    return model.tokenize(template.replaceAll('{query}', query).replaceAll('{document}', document), false, true);
  }
  const eos = m.tokens.eos ?? m.tokens.sep;
  const out: number[] = [];
  if (m.addBos && m.tokens.bos !== null) out.push(m.tokens.bos);
  out.push(...model.tokenize(query, false, false));
  if (m.addEos && eos !== null) out.push(eos);
  if (m.addSep && m.tokens.sep !== null) out.push(m.tokens.sep);
  out.push(...model.tokenize(document, false, false));
  if (m.addEos && eos !== null) out.push(eos);
  return Int32Array.from(out);
}
