// The two hub routes llama.cpp's common/hf-cache.cpp reads to list a repository (over Node's fetch):
//   GET {endpoint}api/models/{repo}/refs                          -> {branches: [{name, targetCommit}]}
//   GET {endpoint}api/models/{repo}/tree/{commit}?recursive=true  -> [{type, path, oid, size, lfs?: {oid, size}}]
// The endpoint is MODEL_ENDPOINT, else HF_ENDPOINT, else https://huggingface.co/. The branch's
// commit is written to refs/<branch> in the cache, as llama.cpp does, so an offline start finds it.
import { join } from 'node:path';
import { existsSync } from 'node:fs';
import { isValidCommit, isValidOid, isValidRepoId, isValidSubpath, repoDir, writeFileAtomic, type HubFile } from './hub-cache.js';

type Env = Readonly<Record<string, string | undefined>>;

/** common.cpp's common_get_model_endpoint, always ending in '/'. */
export function modelEndpoint(env: Env = process.env): string {
  const endpoint = env['MODEL_ENDPOINT'] || env['HF_ENDPOINT'] || 'https://huggingface.co/';
  return endpoint.endsWith('/') ? endpoint : `${endpoint}/`;
}

/** hf-cache.cpp's is_valid_hf_token: "hf_" and 34 to 253 letters or digits; others are not sent. */
export function isValidHfToken(token: string): boolean {
  return token.length >= 37 && token.length <= 256 && /^hf_[A-Za-z0-9]+$/.test(token);
}

/** The hub answered a listing route with an error status. */
export class HubError extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

export interface HubClientOptions {
  endpoint: string;
  token: string;
  userAgent: string;
  /** Receives warnings (an invalid token, skipped entries). */
  warn: (line: string) => void;
}

interface TreeEntry {
  type?: unknown;
  path?: unknown;
  oid?: unknown;
  size?: unknown;
  lfs?: { oid?: unknown; size?: unknown } | null;
}

export class HubClient {
  constructor(private readonly options: HubClientOptions) {}

  private async getJson(url: string): Promise<unknown> {
    const headers: Record<string, string> = { 'user-agent': this.options.userAgent, accept: 'application/json' };
    if (isValidHfToken(this.options.token)) headers['authorization'] = `Bearer ${this.options.token}`;
    let res: Response;
    try {
      res = await fetch(url, { headers });
    } catch (err) {
      throw new Error(`cannot reach the hub at ${this.options.endpoint} (${(err as Error & { cause?: Error }).cause?.message ?? (err as Error).message})`);
    }
    const text = await res.text();
    if (res.status === 200) return JSON.parse(text) as unknown;
    let message = text;
    try {
      const error = (JSON.parse(text) as { error?: unknown }).error;
      if (typeof error === 'string') message = error;
    } catch {
      // not JSON: the body as it is
    }
    throw new HubError(res.status, `GET ${url} failed (${res.status}): ${message}`);
  }

  /** The commit of the repository's main branch (else its first valid branch), written to refs/ in `cacheDir`. */
  async commit(repo: string, cacheDir: string): Promise<string> {
    const json = await this.getJson(`${this.options.endpoint}api/models/${repo}/refs`) as { branches?: unknown };
    const refs = join(repoDir(cacheDir, repo), 'refs');
    let chosen: { name: string; commit: string } | null = null;
    for (const branch of Array.isArray(json.branches) ? json.branches as Array<Record<string, unknown>> : []) {
      const name = branch?.['name'];
      const commit = branch?.['targetCommit'];
      if (typeof name !== 'string' || typeof commit !== 'string') continue;
      if (!isValidSubpath(refs, name) || !isValidCommit(commit)) {
        this.options.warn(`skipping branch ${JSON.stringify(name)} of ${repo} (invalid name or commit)`);
        continue;
      }
      if (name === 'main') {
        chosen = { name, commit };
        break;
      }
      chosen ??= { name, commit };
    }
    if (!chosen) throw new Error(`the hub lists no valid branch for ${repo}`);
    writeFileAtomic(join(refs, chosen.name), chosen.commit);
    return chosen.commit;
  }

  /** The repository's files at its current commit, with their cache paths (hf-cache.cpp's get_repo_files). */
  async files(repo: string, cacheDir: string): Promise<HubFile[]> {
    if (!isValidRepoId(repo)) throw new Error(`invalid Hugging Face repository '${repo}'`);
    const commit = await this.commit(repo, cacheDir);
    const tree = await this.getJson(`${this.options.endpoint}api/models/${repo}/tree/${commit}?recursive=true`);
    if (!Array.isArray(tree)) throw new Error(`the hub's file list of ${repo} is not an array`);
    const root = repoDir(cacheDir, repo);
    const snapshot = join(root, 'snapshots', commit);
    const files: HubFile[] = [];
    for (const item of tree as TreeEntry[]) {
      if (item?.type !== 'file' || typeof item.path !== 'string') continue;
      const path = item.path;
      if (!isValidSubpath(snapshot, path)) {
        this.options.warn(`skipping ${JSON.stringify(path)} of ${repo} (outside the snapshot)`);
        continue;
      }
      const lfs = item.lfs && typeof item.lfs === 'object' ? item.lfs : null;
      const oid = lfs ? (typeof lfs.oid === 'string' ? lfs.oid : '') : typeof item.oid === 'string' ? item.oid : '';
      if (oid !== '' && !isValidOid(oid)) {
        this.options.warn(`skipping ${path} of ${repo} (invalid oid ${oid})`);
        continue;
      }
      const sizeField = lfs ? lfs.size : item.size;
      const finalPath = join(snapshot, ...path.split('/'));
      files.push({
        repo,
        path,
        url: `${this.options.endpoint}${repo}/resolve/${commit}/${path}`,
        localPath: oid !== '' && !existsSync(finalPath) ? join(root, 'blobs', oid) : finalPath,
        finalPath,
        oid,
        size: typeof sizeField === 'number' ? sizeField : -1,
      });
    }
    return files;
  }
}
