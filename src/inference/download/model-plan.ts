// Which files of a hub repository a model needs, chosen as llama.cpp's common_download_get_hf_plan
// chooses them: the file named by -hff, else the first GGUF whose name carries the :TAG (default
// Q4_K_M, then Q8_0, then the first model file), every part of a split model, and the mmproj that
// best matches it (same directory, closest quantization).
import { ggufSplitInfo, quantBits, tagBits } from './gguf-names.js';
import type { HubFile } from './hub-cache.js';

export interface ModelPlan {
  /** The file that is loaded (a split model's first part). */
  primary: HubFile;
  /** Every file of the model: the primary, or each part of a split model. */
  modelFiles: HubFile[];
  mmproj: HubFile | null;
}

/** llama.cpp's default tags, in order, when -hf names none. */
const DEFAULT_TAGS = ['Q4_K_M', 'Q8_0'];

/** Sidecar files that are not models by themselves. */
const NOT_A_MODEL = ['mmproj', 'imatrix', 'mtp-', 'eagle3-', 'dflash-', 'dspark-'];

function isModelFile(path: string): boolean {
  if (!path.endsWith('.gguf')) return false;
  const name = path.slice(path.lastIndexOf('/') + 1);
  return !NOT_A_MODEL.some((word) => name.includes(word));
}

/** Not a later part of a split model (the first part stands for it). */
function isFirstPart(path: string): boolean {
  const split = ggufSplitInfo(path);
  return !(split.count > 1 && split.index !== 1);
}

const escapeRegExp = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** llama.cpp's find_best_model; null when nothing matches. */
export function findBestModel(files: readonly HubFile[], tag: string): HubFile | null {
  for (const t of tag !== '' ? [tag] : DEFAULT_TAGS) {
    const pattern = new RegExp(`${escapeRegExp(t)}[.-]`, 'i');
    const found = files.find((f) => isModelFile(f.path) && pattern.test(f.path) && isFirstPart(f.path));
    if (found) return found;
  }
  // Only without a tag: the first model file there is.
  if (tag === '') return files.find((f) => isModelFile(f.path) && isFirstPart(f.path)) ?? null;
  return null;
}

/** Every part of the split model `file` starts (just `file` when it is not split). */
export function splitFiles(files: readonly HubFile[], file: HubFile): HubFile[] {
  const split = ggufSplitInfo(file.path);
  if (split.count <= 1) return [file];
  return files.filter((f) => {
    const other = ggufSplitInfo(f.path);
    return other.count === split.count && other.prefix === split.prefix;
  });
}

/**
 * llama.cpp's find_best_sibling: the GGUF whose path contains `keyword` in the model's directory
 * or one above it, the deepest shared directory first, then an exact -TAG. match, then the
 * closest quantization bits (to the tag when given, else to the model's).
 */
export function findBestSibling(files: readonly HubFile[], model: string, keyword: string, tag = ''): HubFile | null {
  const tagUpper = tag.toUpperCase();
  const modelBits = tagUpper !== '' ? tagBits(tagUpper) : quantBits(model);
  const modelDirs = model.split('/').slice(0, -1);
  let best: { file: HubFile; depth: number; diff: number; exact: boolean } | null = null;
  for (const f of files) {
    if (!f.path.endsWith('.gguf') || !f.path.includes(keyword)) continue;
    const dirs = f.path.split('/').slice(0, -1);
    // The sibling's directory must be the model's or one of its parents.
    let depth = 0;
    while (depth < modelDirs.length && depth < dirs.length && modelDirs[depth] === dirs[depth]) depth++;
    if (depth !== dirs.length) continue;
    const diff = Math.abs(quantBits(f.path) - modelBits);
    const exact = tagUpper !== '' && f.path.toUpperCase().includes(`-${tagUpper}.`);
    if (!best || depth > best.depth || (depth === best.depth && exact && !best.exact) || (depth === best.depth && exact === best.exact && diff < best.diff)) {
      best = { file: f, depth, diff, exact };
    }
  }
  return best?.file ?? null;
}

/**
 * The plan for -hf repo[:tag] (with -hff `file`): throws with the repository's GGUF files listed
 * when nothing matches.
 */
export function planModel(files: readonly HubFile[], repo: string, tag: string, file: string, withMmproj: boolean): ModelPlan {
  const primary = file !== '' ? files.find((f) => f.path === file) ?? null : findBestModel(files, tag);
  if (!primary) {
    const available = files.filter((f) => f.path.endsWith('.gguf')).map((f) => `\n  - ${f.path}`).join('');
    const what = file !== '' ? `file '${file}' not found in repository ${repo}` : tag !== '' ? `no GGUF file with the tag ${tag} in repository ${repo}` : `no GGUF files found in repository ${repo}`;
    throw new Error(`${what}${available ? `; available GGUF files:${available}` : ''}`);
  }
  return { primary, modelFiles: splitFiles(files, primary), mmproj: withMmproj ? findBestSibling(files, primary.path, 'mmproj') : null };
}
