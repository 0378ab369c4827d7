// What a GGUF file's name says, read as llama.cpp's common/download.cpp reads it: the split part
// ("-00001-of-00003"), the quantization tag (the last "-TAG" or ".TAG" before ".gguf") and its bits.

export interface GgufSplitInfo {
  /** The name without ".gguf" and without the split suffix; the tag included. */
  prefix: string;
  /** Upper case; "" when the name has none. */
  tag: string;
  /** 1-based part number, 1 for a single file; 0 (and count 0) for a name not ending in .gguf. */
  index: number;
  count: number;
}

const SPLIT = /^(.+)-([0-9]{5})-of-([0-9]{5})$/i;
const TAG = /[-.]([A-Z0-9_]+)$/i;

/** llama.cpp's get_gguf_split_info. */
export function ggufSplitInfo(path: string): GgufSplitInfo {
  if (!path.endsWith('.gguf')) return { prefix: '', tag: '', index: 0, count: 0 };
  let prefix = path.slice(0, -'.gguf'.length);
  let index = 1;
  let count = 1;
  const split = SPLIT.exec(prefix);
  if (split) {
    index = Number(split[2]);
    count = Number(split[3]);
    prefix = split[1]!;
  }
  const tag = TAG.exec(prefix)?.[1]?.toUpperCase() ?? '';
  return { prefix, tag, index, count };
}

/** Bits of a quantization tag's first number: Q4_K_M 4, F16 16, Q8_0 8; 0 when it has none. */
export function tagBits(tag: string): number {
  const digits = /[0-9]+/.exec(tag);
  return digits ? Number(digits[0]) : 0;
}

/** llama.cpp's extract_quant_bits: the bits of a file name's tag. */
export function quantBits(path: string): number {
  return tagBits(ggufSplitInfo(path).tag);
}

/** "owner/repo:Q8_0" -> ["owner/repo", "Q8_0"]; the tag is "" when absent. Throws on a repo that is not owner/name. */
export function splitRepoTag(repoWithTag: string): { repo: string; tag: string } {
  const parts = repoWithTag.split(':');
  const tag = parts.length > 1 ? parts[parts.length - 1]! : '';
  const repo = parts[0]!;
  if (repo.split('/').length !== 2) throw new Error(`invalid Hugging Face repository '${repoWithTag}': expected <user>/<model>[:quant]`);
  return { repo, tag };
}

/** Every part's URL of a split GGUF named by its URL (the one given, for a single file): common_download_get_all_parts. */
export function splitParts(url: string): string[] {
  const split = ggufSplitInfo(url);
  if (split.count <= 1) return [url];
  return Array.from({ length: split.count }, (_, i) => `${split.prefix}-${String(i + 1).padStart(5, '0')}-of-${String(split.count).padStart(5, '0')}.gguf`);
}
