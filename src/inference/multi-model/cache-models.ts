// Router mode's cache models added and removed by hub name (llama-server's POST /models and
// DELETE /models), through download/: a model named by its
// hub name ("owner/name[:tag]") is fetched into the cache, with its mmproj, while the router keeps
// serving; /models/sse reports it as llama-server does (model_status "downloading",
// download_progress with {progress: {url: {done, total}}} at most every 100 ms, then
// download_finished or download_failed). Once in the cache it is one of the router's cache models
// (the list is read again). Downloads run in this process (Node's fetch), not in a child.
import { removeCachedModel } from '../download/cache-removal.js';
import { splitRepoTag } from '../download/gguf-names.js';
import { HubClient, modelEndpoint } from '../download/hub-api.js';
import { hubCacheDir } from '../download/hub-cache.js';
import { planModel } from '../download/model-plan.js';
import type { ProgressSink } from '../download/progress.js';
import { resolveHubModel, type ModelSources } from '../download/resolve-models.js';
import { badRequest, ErrorType, inferenceError } from '../errors.js';
import { modelProcess, ModelRegistry } from './model-registry.js';

export interface DownloadSettings {
  env: Readonly<Record<string, string | undefined>>;
  /** The router's -hft / HF_TOKEN. */
  hfToken: string;
  userAgent: string;
  log: (line: string) => void;
}

interface Download {
  /** url -> bytes done and total, as llama-server's loaded_info.progress. */
  progress: Record<string, { done: number; total: number }>;
  abort: AbortController;
  finished: Promise<void>;
}

/** Progress events are sent at most this often per download, as llama-server's child throttles them. */
const PROGRESS_EVERY_MS = 100;

export class CacheModels {
  private readonly active = new Map<string, Download>();

  constructor(private readonly registry: ModelRegistry, private readonly settings: DownloadSettings) {}

  /** The names being downloaded. */
  names(): string[] {
    return [...this.active.keys()];
  }

  private sources(): ModelSources {
    return { model: '', mmproj: '', noMmproj: false, hfRepo: '', hfFile: '', hfToken: this.settings.hfToken, modelUrl: '', mmprojUrl: '', offline: false, draftHfRepo: '', draftModel: '' };
  }

  private emit(model: string, event: string, data?: Record<string, unknown>): void {
    this.registry.emit('event', { model, event, ...(data ? { data } : {}) });
  }

  /**
   * POST /models: checks that the hub has the model (400 with the reason when it does not, or
   * when the router already has a model of that name), then starts its download and returns.
   */
  async start(name: string): Promise<void> {
    let repo: string;
    let tag: string;
    try {
      ({ repo, tag } = splitRepoTag(name));
    } catch (err) {
      throw badRequest((err as Error).message);
    }
    const cacheDir = hubCacheDir(this.settings.env);
    const hub = new HubClient({ endpoint: modelEndpoint(this.settings.env), token: this.settings.hfToken, userAgent: this.settings.userAgent, warn: this.settings.log });
    try {
      planModel(await hub.files(repo, cacheDir), repo, tag, '', true);
    } catch (err) {
      throw badRequest(`model validation failed, unable to download: ${(err as Error).message}`);
    }
    if (this.active.has(name) || this.registry.list().some((e) => e.spec.name === name)) throw badRequest(`model '${name}' already exists`);
    const abort = new AbortController();
    const download: Download = { progress: {}, abort, finished: Promise.resolve() };
    this.active.set(name, download);
    this.settings.log(`starting download for model '${name}'`);
    this.emit(name, 'model_status', { status: 'downloading' });
    download.finished = this.run(name, download);
  }

  private async run(name: string, download: Download): Promise<void> {
    let last = 0;
    const report = (url: string, done: number, total: number, force: boolean): void => {
      download.progress[url] = { done, total };
      const now = Date.now();
      if (!force && now - last < PROGRESS_EVERY_MS) return;
      last = now;
      this.emit(name, 'download_progress', { progress: structuredClone(download.progress) });
    };
    const progress: ProgressSink = {
      start: (p) => report(p.url, p.downloaded, p.total, true),
      update: (p) => report(p.url, p.downloaded, p.total, false),
      done: (p) => report(p.url, p.downloaded, p.total, true),
    };
    let ok = false;
    try {
      await resolveHubModel(name, '', true, 'POST /models', this.sources(), { env: this.settings.env, log: this.settings.log, progress, userAgent: this.settings.userAgent, signal: download.abort.signal });
      ok = true;
      // Listed (as a cache model) before the event says it is there.
      await this.registry.reload();
    } catch (err) {
      if (!download.abort.signal.aborted) this.settings.log(`download failed for model '${name}': ${(err as Error).message}`);
    } finally {
      this.active.delete(name);
    }
    this.emit(name, ok ? 'download_finished' : 'download_failed');
  }

  /**
   * DELETE /models: cancels the model's download or stops its process, then removes its files
   * from the cache (as llama-server: 500 when the router has no such model or it is not a cache
   * model).
   */
  async remove(name: string): Promise<void> {
    const cacheDir = hubCacheDir(this.settings.env);
    const download = this.active.get(name);
    if (download) {
      this.settings.log(`cancelling download for model '${name}'`);
      download.abort.abort();
      await download.finished;
    } else {
      const entry = this.registry.list().find((e) => e.spec.name === name);
      if (!entry) throw inferenceError(ErrorType.SERVER, `model name=${name} is not found`);
      if (entry.spec.source !== 'cache') throw inferenceError(ErrorType.SERVER, `model name=${name} is not removable (not from cache)`);
      if (ModelRegistry.isRunning(entry)) {
        const exited = modelProcess(entry)?.exited;
        this.registry.unload(entry);
        await exited;
      }
    }
    const removed = removeCachedModel(cacheDir, name);
    this.settings.log(`removing model '${name}' from the cache (${removed ? 'succeeded' : 'nothing cached'})`);
    await this.registry.reload();
    this.emit(name, 'model_remove');
  }

  /** Cancels every download (the router is closing). */
  async close(): Promise<void> {
    const all = [...this.active.values()];
    for (const d of all) d.abort.abort();
    await Promise.all(all.map((d) => d.finished));
  }
}
