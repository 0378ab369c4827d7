// Where the bytes of an image in a request come from: a base64 data URL, a file under
// --media-path (file://), or, with --media-allow-remote, an http(s) URL. The decoder sniffs the
// real format from the bytes, whatever a URL's MIME type says.
import { open, realpath } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { badRequest } from '../errors.js';

/** Largest accepted image file. */
export const MAX_IMAGE_BYTES = 20 * 1024 * 1024;

export interface MediaPolicy {
  /** Fetch http(s) image URLs (--media-allow-remote); off by default. */
  allowRemote: boolean;
  /** --media-path: file:// URLs name files under this directory; without it they are refused. */
  mediaPath?: string;
}

/** Decodes `data:image/...;base64,...` (the decoder sniffs the real format from the bytes). */
export function decodeDataUrl(url: string, field: string): Uint8Array {
  const m = /^data:([\w.+/-]*)(;[\w=.+-]+)*;base64,/i.exec(url);
  if (!m) throw badRequest(`Invalid field "${field}": expected a base64 data URL (data:image/png;base64,...)`, { field });
  const bytes = Buffer.from(url.slice(m[0].length), 'base64');
  if (bytes.length === 0) throw badRequest(`Invalid field "${field}": the image is empty`, { field });
  if (bytes.length > MAX_IMAGE_BYTES) throw badRequest(`Invalid field "${field}": the image is larger than ${MAX_IMAGE_BYTES} bytes`, { field });
  return bytes;
}

async function fetchImage(url: string, field: string, policy: MediaPolicy): Promise<Uint8Array> {
  if (!policy.allowRemote) {
    throw badRequest(`Invalid field "${field}": remote image URLs are not allowed (start the server with --media-allow-remote); send a base64 data URL`, { field });
  }
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const bytes = new Uint8Array(await res.arrayBuffer());
    if (bytes.length > MAX_IMAGE_BYTES) throw new Error(`larger than ${MAX_IMAGE_BYTES} bytes`);
    return bytes;
  } catch (err) {
    throw badRequest(`Invalid field "${field}": could not fetch the image (${(err as Error).message})`, { field });
  }
}

/**
 * A file:// URL names a file under --media-path, as llama-server: the rest of the URL is a path
 * relative to that directory (leading and doubled slashes ignored); `..` segments are refused,
 * and so is a path that leaves the directory through a symbolic link.
 */
async function readLocalImage(url: string, field: string, mediaPath: string | undefined): Promise<Uint8Array> {
  if (mediaPath === undefined) throw badRequest(`Invalid field "${field}": file:// URLs are not allowed unless --media-path is specified`, { field });
  const rel = url.slice('file://'.length);
  if (rel.split('/').some((segment) => segment === '..') || rel.includes('\\') || rel.includes('\0')) {
    throw badRequest(`Invalid field "${field}": file path is not allowed: ${rel}`, { field });
  }
  const notFound = () => badRequest(`Invalid field "${field}": cannot read the file ${rel}`, { field });
  let path: string;
  try {
    const root = await realpath(mediaPath);
    path = await realpath(resolve(root, rel.replace(/^\/+/, '')));
    const inside = relative(root, path);
    if (inside === '' || inside.startsWith('..') || isAbsolute(inside)) throw badRequest(`Invalid field "${field}": file path is not allowed: ${rel}`, { field });
  } catch (err) {
    if (err instanceof Error && err.name === 'HttpError') throw err;
    throw notFound();
  }
  let file;
  try {
    file = await open(path, 'r');
  } catch {
    throw notFound();
  }
  try {
    const { size } = await file.stat();
    if (size > MAX_IMAGE_BYTES) throw badRequest(`Invalid field "${field}": the image is larger than ${MAX_IMAGE_BYTES} bytes`, { field });
    if (size === 0) throw badRequest(`Invalid field "${field}": the image is empty`, { field });
    return new Uint8Array(await file.readFile());
  } catch (err) {
    if (err instanceof Error && err.name === 'HttpError') throw err;
    throw notFound();
  } finally {
    await file.close();
  }
}

/** The bytes of the image an image_url names. */
export async function loadImage(url: string, field: string, policy: MediaPolicy): Promise<Uint8Array> {
  if (/^https?:\/\//i.test(url)) return fetchImage(url, field, policy);
  if (/^file:\/\//i.test(url)) return readLocalImage(url, field, policy.mediaPath);
  return decodeDataUrl(url, field);
}
