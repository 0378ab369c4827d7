// Models named by the hub (-hf, -hfd) or by URL (-mu, -mmu) made local files before anything
// loads, as llama-server's common_models_handler_apply does at start-up: the repository is listed
// (or, --offline or unreachable, read from the cache), its files chosen (model-plan.ts), fetched
// into the shared cache one after another and linked into the snapshot; the paths that come out
// are what -m, -mm and -md would have named.
import { join } from 'node:path';
import { existsSync } from 'node:fs';
import { downloadFile, type DownloadOptions } from './file-download.js';
import { splitParts, splitRepoTag } from './gguf-names.js';
import { HubClient, HubError, isValidHfToken, modelEndpoint } from './hub-api.js';
import { cachedFiles, finalizeFile, hubCacheDir, urlCacheDir, type HubFile } from './hub-cache.js';
import { planModel } from './model-plan.js';
import { fileNameOf, type ProgressSink } from './progress.js';

/** The command line's model sources (ServerParamValues' fields of the same names). */
export interface ModelSources {
  model: string;
  mmproj: string;
  noMmproj: boolean;
  hfRepo: string;
  hfFile: string;
  hfToken: string;
  modelUrl: string;
  mmprojUrl: string;
  offline: boolean;
  draftHfRepo: string;
  draftModel: string;
}

export interface ResolvedModels {
  model: string;
  /** "" when none. */
  mmproj: string;
  /** "" when none. */
  draftModel: string;
}

export interface ResolveOptions {
  env: Readonly<Record<string, string | undefined>>;
  /** Warnings and notices (stderr, or the common log). */
  log: (line: string) => void;
  progress: ProgressSink;
  userAgent: string;
  /** Passed to downloadFile (tests shorten it). */
  retryDelayMs?: number;
  signal?: AbortSignal;
}

/** True when the command line names a model that may have to be downloaded. */
export function namesRemoteModel(s: Pick<ModelSources, 'hfRepo' | 'modelUrl' | 'mmprojUrl' | 'draftHfRepo'>): boolean {
  return s.hfRepo !== '' || s.modelUrl !== '' || s.mmprojUrl !== '' || s.draftHfRepo !== '';
}

function downloadOptions(token: string, options: ResolveOptions): DownloadOptions {
  return {
    headers: { 'user-agent': options.userAgent, ...(token !== '' ? { authorization: `Bearer ${token}` } : {}) },
    progress: options.progress,
    warn: options.log,
    ...(options.retryDelayMs !== undefined ? { retryDelayMs: options.retryDelayMs } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  };
}

/**
 * The repository's files: listed by the hub, or from the cache when --offline or when the hub
 * cannot be reached (as llama.cpp falls back). A hub that refuses (401, 403, 404) is an error
 * unless the cache holds the repository.
 */
async function repoFiles(repo: string, flag: string, sources: ModelSources, cacheDir: string, options: ResolveOptions): Promise<HubFile[]> {
  if (sources.offline) {
    const cached = cachedFiles(cacheDir, repo);
    if (cached.length === 0) throw new Error(`${flag} ${repo}: not in the cache at ${cacheDir}, and --offline forbids downloading it`);
    return cached;
  }
  const endpoint = modelEndpoint(options.env);
  const hub = new HubClient({ endpoint, token: sources.hfToken, userAgent: options.userAgent, warn: options.log });
  if (sources.hfToken !== '' && !isValidHfToken(sources.hfToken)) options.log('warning: the Hugging Face token (-hft or HF_TOKEN) is not of the form hf_...: it is not sent to the hub\'s API');
  try {
    return await hub.files(repo, cacheDir);
  } catch (err) {
    const cached = cachedFiles(cacheDir, repo);
    const why = (err as Error).message;
    if (err instanceof HubError && (err.status === 401 || err.status === 403)) {
      throw new Error(`${flag} ${repo}: the hub at ${endpoint} refused access (${err.status}): a gated or private repository needs a token (-hft or HF_TOKEN)`);
    }
    if (cached.length === 0) throw new Error(`${flag} ${repo}: cannot list it on the hub (${why}) and the cache at ${cacheDir} does not hold it`);
    options.log(`warning: ${flag} ${repo}: cannot list it on the hub (${why}); using the cached files`);
    return cached;
  }
}

/** Makes each file local (downloads it unless --offline), then links it into its snapshot. */
async function fetchFiles(files: readonly HubFile[], sources: ModelSources, options: ResolveOptions): Promise<void> {
  for (const file of files) {
    if (sources.offline) {
      if (!existsSync(file.localPath)) throw new Error(`required file is not available in the cache (--offline): ${file.localPath}`);
      continue;
    }
    await downloadFile({ url: file.url, path: file.localPath, oid: file.oid, size: file.size, etag: false }, downloadOptions(sources.hfToken, options));
  }
  for (const file of files) finalizeFile(file);
}

/** -hf repo[:tag] (with -hff file): the model's local path and its mmproj's ("" when not wanted or the repo has none). */
export async function resolveHubModel(repoWithTag: string, file: string, withMmproj: boolean, flag: string, sources: ModelSources, options: ResolveOptions): Promise<{ model: string; mmproj: string }> {
  const { repo, tag } = splitRepoTag(repoWithTag);
  const cacheDir = hubCacheDir(options.env);
  const files = await repoFiles(repo, flag, sources, cacheDir, options);
  if (files.some((f) => f.path === 'preset.ini')) throw new Error(`${flag} ${repo}: a preset repository (preset.ini) is not supported by this server; name a model repository`);
  const plan = planModel(files, repo, tag, file, withMmproj);
  const wanted = plan.mmproj ? [...plan.modelFiles, plan.mmproj] : plan.modelFiles;
  await fetchFiles(wanted, sources, options);
  return { model: plan.primary.finalPath, mmproj: plan.mmproj?.finalPath ?? '' };
}

/** -mu URL (every part of a split model): downloaded beside -m's path when given, else into the cache directory. */
async function resolveUrlModel(url: string, path: string, sources: ModelSources, options: ResolveOptions): Promise<string> {
  const parts = splitParts(url);
  const dir = urlCacheDir(options.env);
  const baseDir = path !== '' ? path.slice(0, Math.max(0, path.lastIndexOf('/'))) || '.' : '';
  const locals = parts.map((part) => (parts.length === 1 && path !== '' ? path : join(baseDir || dir, fileNameOf(part.split('#')[0]!))));
  for (let i = 0; i < parts.length; i++) {
    if (sources.offline) {
      if (!existsSync(locals[i]!)) throw new Error(`required file is not available in the cache (--offline): ${locals[i]}`);
      continue;
    }
    await downloadFile({ url: parts[i]!, path: locals[i]!, oid: '', size: -1, etag: true }, downloadOptions(sources.hfToken, options));
  }
  return locals[0]!;
}

export async function resolveModels(sources: ModelSources, options: ResolveOptions): Promise<ResolvedModels> {
  const out: ResolvedModels = { model: sources.model, mmproj: sources.mmproj, draftModel: sources.draftModel };
  if (sources.modelUrl !== '') out.model = await resolveUrlModel(sources.modelUrl, sources.model, sources, options);
  if (sources.mmprojUrl !== '') out.mmproj = await resolveUrlModel(sources.mmprojUrl, sources.mmproj, sources, options);
  if (sources.draftHfRepo !== '') {
    // -md names the draft repository's file, as llama.cpp reads it with -hfd.
    out.draftModel = (await resolveHubModel(sources.draftHfRepo, sources.draftModel, false, '-hfd', sources, options)).model;
  }
  if (sources.hfRepo !== '') {
    const withMmproj = !sources.noMmproj && sources.mmproj === '' && sources.mmprojUrl === '';
    const hub = await resolveHubModel(sources.hfRepo, sources.hfFile, withMmproj, '-hf', sources, options);
    out.model = hub.model;
    if (hub.mmproj !== '') out.mmproj = hub.mmproj;
  }
  return out;
}
