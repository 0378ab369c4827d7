// Removing a model from the hub cache, as llama.cpp's common_download_remove does (router mode's
// DELETE /models): "owner/name" removes the repository's whole folder; "owner/name:TAG" removes
// the snapshot entries of that quantization tag, then the blobs no remaining entry links to.
import { rmSync } from 'node:fs';
import { ggufSplitInfo, splitRepoTag } from './gguf-names.js';
import { cachedFiles, linkedBlob, removeCachedRepo } from './hub-cache.js';

/** True when anything was removed. */
export function removeCachedModel(cacheDir: string, repoWithTag: string): boolean {
  const { repo, tag } = splitRepoTag(repoWithTag);
  if (tag === '') return removeCachedRepo(cacheDir, repo);
  const wanted = tag.toUpperCase();
  const doomed = cachedFiles(cacheDir, repo).filter((f) => ggufSplitInfo(f.path).tag === wanted).map((f) => f.localPath);
  if (doomed.length === 0) return false;
  const blobs = doomed.map(linkedBlob).filter((b): b is string => b !== null);
  for (const path of doomed) rmSync(path, { force: true });
  const kept = new Set(cachedFiles(cacheDir, repo).map((f) => linkedBlob(f.localPath)));
  for (const blob of blobs) if (!kept.has(blob)) rmSync(blob, { force: true });
  return true;
}
