// The Hugging Face cache as llama.cpp's common/hf-cache.cpp lays it out (huggingface_hub's layout),
// so that llama-server and this server share one cache:
//
//   <cache>/models--<owner>--<name>/refs/main            the commit the files below belong to
//   <cache>/models--<owner>--<name>/blobs/<oid>          a file's bytes, named by its hash
//   <cache>/models--<owner>--<name>/snapshots/<commit>/<path>   relative symbolic link to the blob
//
// The cache directory: LLAMA_CACHE, HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME/hub,
// XDG_CACHE_HOME/huggingface/hub, ~/.cache/huggingface/hub, the first that is set.
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, readlinkSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync, copyFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';

/** One file of a repository: where it comes from and where it lives in the cache. */
export interface HubFile {
  repo: string;
  /** Its path in the repository (and under its snapshot). */
  path: string;
  /** Where it is downloaded from ("" for a file found only in the cache). */
  url: string;
  /** Where its bytes go: the blob (named by oid) while the snapshot has no link to it yet, else the snapshot path. */
  localPath: string;
  /** Its path in the snapshot: what the model is loaded from. */
  finalPath: string;
  /** sha256 (LFS files, 64 hex digits) or git blob sha1 (40) of its bytes; "" when unknown. */
  oid: string;
  /** Its size in bytes from the hub's listing; -1 when unknown. */
  size: number;
}

type Env = Readonly<Record<string, string | undefined>>;

/** hf-cache.cpp's get_cache_directory. */
export function hubCacheDir(env: Env = process.env): string {
  const entries: Array<[string, string[]]> = [
    ['LLAMA_CACHE', []],
    ['HF_HUB_CACHE', []],
    ['HUGGINGFACE_HUB_CACHE', []],
    ['HF_HOME', ['hub']],
    ['XDG_CACHE_HOME', ['huggingface', 'hub']],
    ['HOME', ['.cache', 'huggingface', 'hub']],
  ];
  for (const [name, under] of entries) {
    const value = env[name];
    if (value) return join(value, ...under);
  }
  return join(homedir(), '.cache', 'huggingface', 'hub');
}

/**
 * Where -mu URL downloads go (common.cpp's fs_get_cache_directory): LLAMA_CACHE, else
 * XDG_CACHE_HOME/llama.cpp, else ~/.cache/llama.cpp.
 */
export function urlCacheDir(env: Env = process.env): string {
  if (env['LLAMA_CACHE']) return env['LLAMA_CACHE'];
  if (env['XDG_CACHE_HOME']) return join(env['XDG_CACHE_HOME'], 'llama.cpp');
  return join(env['HOME'] || homedir(), '.cache', 'llama.cpp');
}

const isAlnum = (c: string): boolean => /^[A-Za-z0-9]$/.test(c);

/** hf-cache.cpp's is_valid_repo_id: owner/name of [A-Za-z0-9_] with single . - between, at most 256 characters. */
export function isValidRepoId(repo: string): boolean {
  if (repo.length === 0 || repo.length > 256) return false;
  let slashes = 0;
  let special = true;
  for (const c of repo) {
    if (isAlnum(c) || c === '_') special = false;
    else if (c === '/' || c === '.' || c === '-') {
      if (special) return false;
      if (c === '/') slashes++;
      special = true;
    } else return false;
  }
  return !special && slashes === 1;
}

export const isValidCommit = (s: string): boolean => /^[0-9a-fA-F]{40}$/.test(s);
export const isValidOid = (s: string): boolean => /^([0-9a-fA-F]{40}|[0-9a-fA-F]{64})$/.test(s);

/** True when `sub` (relative) stays inside `base`. */
export function isValidSubpath(base: string, sub: string): boolean {
  if (isAbsolute(sub)) return false;
  const root = resolve(base);
  const target = resolve(root, sub);
  return target === root || target.startsWith(root + sep);
}

export const repoFolder = (repo: string): string => `models--${repo.replaceAll('/', '--')}`;
export const repoDir = (cacheDir: string, repo: string): string => join(cacheDir, repoFolder(repo));

function folderRepo(folder: string): string {
  if (!folder.startsWith('models--')) return '';
  return folder.slice('models--'.length).replaceAll('--', '/');
}

/** Writes a small file whole or not at all (a unique temporary name, then a rename): concurrent writers never mix. */
export function writeFileAtomic(path: string, data: string): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  try {
    writeFileSync(tmp, data);
    renameSync(tmp, path);
  } catch (err) {
    rmSync(tmp, { force: true });
    throw err;
  }
}

/** hf-cache.cpp's get_cached_ref: refs/main, else the first valid ref; "" when none. */
function cachedRef(repoPath: string): string {
  const refs = join(repoPath, 'refs');
  let names: string[];
  try {
    names = readdirSync(refs);
  } catch {
    return '';
  }
  let fallback = '';
  for (const name of names) {
    let commit: string;
    try {
      if (!statSync(join(refs, name)).isFile()) continue;
      commit = readFileSync(join(refs, name), 'utf8').split('\n')[0]!;
    } catch {
      continue;
    }
    if (!isValidCommit(commit)) continue;
    if (name === 'main') return commit;
    if (fallback === '') fallback = commit;
  }
  return fallback;
}

function listTree(root: string, dir: string, out: string[]): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = join(dir, entry.name);
    if (entry.isDirectory()) listTree(root, full, out);
    else if (entry.isFile() || entry.isSymbolicLink()) out.push(relative(root, full).split(sep).join('/'));
  }
}

/** hf-cache.cpp's get_cached_files: the files of each repository's current snapshot (one repository's when named). */
export function cachedFiles(cacheDir: string, repo = ''): HubFile[] {
  if (repo !== '' && !isValidRepoId(repo)) return [];
  let folders: string[];
  try {
    folders = readdirSync(cacheDir);
  } catch {
    return [];
  }
  const files: HubFile[] = [];
  for (const folder of folders.sort()) {
    const repoPath = join(cacheDir, folder);
    const id = folderRepo(folder);
    if (!isValidRepoId(id) || (repo !== '' && id !== repo)) continue;
    if (!existsSync(join(repoPath, 'snapshots'))) continue;
    const commit = cachedRef(repoPath);
    const snapshot = join(repoPath, 'snapshots', commit);
    if (commit === '' || !existsSync(snapshot)) continue;
    const paths: string[] = [];
    listTree(snapshot, snapshot, paths);
    paths.sort();
    for (const path of paths) {
      const local = join(snapshot, ...path.split('/'));
      files.push({ repo: id, path, url: '', localPath: local, finalPath: local, oid: '', size: -1 });
    }
  }
  return files;
}

/**
 * hf-cache.cpp's finalize_file: links the snapshot path to the downloaded blob (a relative
 * symbolic link, as huggingface_hub makes them; moved there where links cannot be made). Returns
 * the snapshot path. A link another process made first is kept.
 */
export function finalizeFile(file: HubFile): string {
  if (file.localPath === file.finalPath || existsSync(file.finalPath) || !existsSync(file.localPath)) return file.finalPath;
  mkdirSync(dirname(file.finalPath), { recursive: true });
  try {
    symlinkSync(relative(dirname(file.finalPath), file.localPath), file.finalPath);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return file.finalPath;
    try {
      renameSync(file.localPath, file.finalPath);
    } catch {
      copyFileSync(file.localPath, file.finalPath);
    }
  }
  return file.finalPath;
}

/** The blob a snapshot entry links to, or null when it is a plain file. */
export function linkedBlob(snapshotPath: string): string | null {
  try {
    if (!lstatSync(snapshotPath).isSymbolicLink()) return null;
    return resolve(dirname(snapshotPath), readlinkSync(snapshotPath));
  } catch {
    return null;
  }
}

/** Removes a repository's whole cache folder; true when there was one. */
export function removeCachedRepo(cacheDir: string, repo: string): boolean {
  if (!isValidRepoId(repo)) return false;
  const path = repoDir(cacheDir, repo);
  if (!existsSync(path)) return false;
  rmSync(path, { recursive: true, force: true });
  return true;
}
