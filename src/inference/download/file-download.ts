// One file from the hub or a URL into the cache, as llama.cpp's common_download_file_single does
// it (a partial "<path>.downloadInProgress" resumed with a Range request, three attempts 2 s and
// 4 s apart, an ETag file beside -mu downloads), with what it leaves out: the size and the hash
// (the hub's oid: sha256 of an LFS file, git's blob sha1 of a small one) are checked before the
// file takes its final name, so a truncated or corrupt download is never loaded; and one process
// at a time writes a file (cache-lock.ts).
import { createHash, type Hash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { setTimeout as delay } from 'node:timers/promises';
import { withFileLock } from './cache-lock.js';
import { fileNameOf, NO_PROGRESS, type DownloadProgress, type ProgressSink } from './progress.js';

export interface FileToDownload {
  url: string;
  /** Where it goes. */
  path: string;
  /** Expected sha256 (64 hex digits) or git blob sha1 (40); "" when unknown. */
  oid: string;
  /** Expected size in bytes; -1 when unknown. */
  size: number;
  /** Keep "<path>.etag" and fetch again when the server's ETag changed (-mu URLs); hub blobs are named by their hash instead. */
  etag: boolean;
}

export interface DownloadOptions {
  /** Sent with every request (User-Agent, Authorization). */
  headers: Record<string, string>;
  progress?: ProgressSink;
  warn: (line: string) => void;
  /** Default 3, as llama.cpp. */
  attempts?: number;
  /** Before the second attempt; doubled before each later one. Default 2000, as llama.cpp. */
  retryDelayMs?: number;
  signal?: AbortSignal;
}

/** The server answered with an error status: not retried. */
export class DownloadRefused extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/** A hash of the file's bytes in the form the hub's oid has; null when the oid cannot be checked. */
function oidHash(oid: string, size: number): Hash | null {
  if (oid.length === 64) return createHash('sha256');
  if (oid.length === 40 && size >= 0) return createHash('sha1').update(`blob ${size}\0`);
  return null;
}

async function hashFile(hash: Hash, path: string): Promise<void> {
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
}

/** HEAD's ETag; null when the server cannot be asked (then a cached file is used, as llama.cpp does). */
async function remoteEtag(url: string, options: DownloadOptions): Promise<string | null> {
  try {
    const res = await fetch(url, { method: 'HEAD', headers: options.headers, ...(options.signal ? { signal: options.signal } : {}) });
    if (res.status < 200 || res.status >= 300) return null;
    return res.headers.get('etag') ?? '';
  } catch {
    return null;
  }
}

/** True when the file at `path` can be used as it is (removed when it cannot). */
async function cachedCopyUsable(file: FileToDownload, options: DownloadOptions): Promise<boolean> {
  if (!existsSync(file.path)) return false;
  if (!file.etag) {
    const size = statSync(file.path).size;
    if (file.size < 0 || size === file.size) return true;
    options.warn(`${file.path} has ${size} bytes, the hub lists ${file.size}: downloading it again`);
    rmSync(file.path, { force: true });
    return false;
  }
  const etag = await remoteEtag(file.url, options);
  if (etag === null || etag === '') return true;
  let last = '';
  try {
    last = readFileSync(`${file.path}.etag`, 'utf8').split('\n')[0]!;
  } catch {
    // no ETag kept: fetched again
  }
  if (last === etag) return true;
  rmSync(file.path, { force: true });
  return false;
}

/** One GET into `partial`, resumed from its current size; returns the file's whole size when the server said it. */
async function fetchInto(file: FileToDownload, partial: string, options: DownloadOptions, p: DownloadProgress, progress: ProgressSink, first: boolean): Promise<{ total: number; etag: string }> {
  let offset = existsSync(partial) ? statSync(partial).size : 0;
  const headers: Record<string, string> = { ...options.headers };
  if (offset > 0) headers['range'] = `bytes=${offset}-`;
  const res = await fetch(file.url, { headers, redirect: 'follow', ...(options.signal ? { signal: options.signal } : {}) });
  if (offset > 0 && res.status === 416) {
    // Nothing left to send: the partial file is complete (or longer than the file); its checks decide.
    await res.body?.cancel();
    return { total: offset, etag: res.headers.get('etag') ?? '' };
  }
  if (res.status !== 200 && res.status !== 206) {
    await res.body?.cancel();
    throw new DownloadRefused(res.status, `GET ${file.url}: the server answered ${res.status}${res.status === 401 || res.status === 403 ? ' (a gated or private repository needs a token: -hft or HF_TOKEN)' : ''}`);
  }
  // A server that ignores the range sends the whole file again.
  if (res.status === 200) offset = 0;
  const length = Number(res.headers.get('content-length') ?? '');
  const total = Number.isFinite(length) && res.headers.has('content-length') ? offset + length : file.size >= 0 ? file.size : 0;
  Object.assign(p, { downloaded: offset, total });
  if (first) progress.start({ ...p });
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      p.downloaded += chunk.length;
      progress.update({ ...p });
      done(null, chunk);
    },
  });
  mkdirSync(dirname(partial), { recursive: true });
  await pipeline(Readable.fromWeb(res.body as import('node:stream/web').ReadableStream), counter, createWriteStream(partial, { flags: offset > 0 ? 'a' : 'w' }));
  return { total, etag: res.headers.get('etag') ?? '' };
}

/** Why the downloaded bytes cannot be used yet (short: resumed; wrong: discarded); null when they can. */
async function verify(file: FileToDownload, partial: string, total: number): Promise<{ reason: string; short: boolean } | null> {
  const size = statSync(partial).size;
  const expected = file.size >= 0 ? file.size : total;
  if (expected > 0 && size < expected) return { reason: `the connection ended at ${size} bytes of ${expected}`, short: true };
  if (expected > 0 && size > expected) return { reason: `got ${size} bytes, ${expected} expected`, short: false };
  const hash = oidHash(file.oid, size);
  if (!hash) return null;
  await hashFile(hash, partial);
  const got = hash.digest('hex');
  return got === file.oid.toLowerCase() ? null : { reason: `checksum mismatch: the hub lists ${file.oid}, the downloaded bytes hash to ${got}`, short: false };
}

/**
 * Makes `file.path` hold the file: kept when it is already there (and, for -mu, its ETag is
 * unchanged), else downloaded. Resolves to 'cached' or 'downloaded'; throws once every attempt
 * failed, or at once when the server refuses (an HTTP error status).
 */
export async function downloadFile(file: FileToDownload, options: DownloadOptions): Promise<'cached' | 'downloaded'> {
  mkdirSync(dirname(file.path), { recursive: true });
  const progress = options.progress ?? NO_PROGRESS;
  return withFileLock(`${file.path}.lock`, async () => {
    if (await cachedCopyUsable(file, options)) return 'cached';
    const partial = `${file.path}.downloadInProgress`;
    const p: DownloadProgress = { name: fileNameOf(file.url), url: file.url, downloaded: 0, total: 0 };
    const attempts = options.attempts ?? 3;
    let wait = options.retryDelayMs ?? 2000;
    let reason = '';
    for (let attempt = 0; attempt < attempts; attempt++) {
      if (attempt > 0) {
        options.warn(`${p.name}: ${reason}; retrying in ${(wait / 1000).toFixed(1)} s`);
        await delay(wait, undefined, options.signal ? { signal: options.signal } : undefined);
        wait *= 2;
      }
      let fetched: { total: number; etag: string };
      try {
        fetched = await fetchInto(file, partial, options, p, progress, attempt === 0);
      } catch (err) {
        if (err instanceof DownloadRefused || options.signal?.aborted) {
          // As llama.cpp: a cancelled download leaves no partial file behind.
          if (options.signal?.aborted) rmSync(partial, { force: true });
          progress.done({ ...p }, false);
          throw err;
        }
        // What reached the disk is what the next attempt resumes from.
        reason = `interrupted at ${existsSync(partial) ? statSync(partial).size : 0} bytes (${(err as Error & { cause?: Error }).cause?.message ?? (err as Error).message})`;
        continue;
      }
      const bad = await verify(file, partial, fetched.total);
      if (bad) {
        // Bytes that fail the checks are never resumed from.
        if (!bad.short) rmSync(partial, { force: true });
        reason = bad.reason;
        continue;
      }
      renameSync(partial, file.path);
      if (file.etag && fetched.etag !== '') writeFileSync(`${file.path}.etag`, fetched.etag);
      progress.done({ ...p }, true);
      return 'downloaded';
    }
    progress.done({ ...p }, false);
    throw new Error(`download of ${file.url} failed after ${attempts} attempts: ${reason}${existsSync(partial) ? ` (the partial file ${partial} is resumed next time)` : ''}`);
  }, () => options.warn(`${fileNameOf(file.url)} is being downloaded by another process (into ${file.path}): waiting for it`), options.signal);
}
