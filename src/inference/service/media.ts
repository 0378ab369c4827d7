// Where the bytes of an image or an audio clip in a request come from: a base64 data URL, a file
// under --media-path (file://), or, with --media-allow-remote, an http(s) URL; an audio part's
// data may also be bare base64 (OpenAI's input_audio). The decoder sniffs the real format from
// the bytes, whatever a URL's MIME type says.
import { open, realpath } from 'node:fs/promises';
import { isAbsolute, relative, resolve } from 'node:path';
import { badRequest } from '../errors.js';

/** Largest accepted image or audio file. */
export const MAX_MEDIA_BYTES = 20 * 1024 * 1024;

/** What a media file is called in error messages. */
export type MediaNoun = 'image' | 'audio file';

export interface MediaPolicy {
  /** Fetch http(s) image URLs (--media-allow-remote); off by default. */
  allowRemote: boolean;
  /** --media-path: file:// URLs name files under this directory; without it they are refused. */
  mediaPath?: string;
}

/** Base64 text, the image or clip checked for size. */
function decodeBase64(text: string, field: string, noun: MediaNoun): Uint8Array {
  const bytes = Buffer.from(text, 'base64');
  if (bytes.length === 0) throw badRequest(`Invalid field "${field}": the ${noun} is empty`, { field });
  if (bytes.length > MAX_MEDIA_BYTES) throw badRequest(`Invalid field "${field}": the ${noun} is larger than ${MAX_MEDIA_BYTES} bytes`, { field });
  return bytes;
}

/** Decodes `data:image/...;base64,...` (the decoder sniffs the real format from the bytes). */
export function decodeDataUrl(url: string, field: string, noun: MediaNoun = 'image'): Uint8Array {
  const m = /^data:([\w.+/-]*)(;[\w=.+-]+)*;base64,/i.exec(url);
  if (!m) throw badRequest(`Invalid field "${field}": expected a base64 data URL (data:${noun === 'image' ? 'image/png' : 'audio/wav'};base64,...)`, { field });
  return decodeBase64(url.slice(m[0].length), field, noun);
}

async function fetchMedia(url: string, field: string, policy: MediaPolicy, noun: MediaNoun): Promise<Uint8Array> {
  if (!policy.allowRemote) {
    throw badRequest(`Invalid field "${field}": remote ${noun === 'image' ? 'image' : 'audio'} URLs are not allowed (start the server with --media-allow-remote); send a base64 data URL`, { field });
  }
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    const bytes = new Uint8Array(await res.arrayBuffer());
    if (bytes.length > MAX_MEDIA_BYTES) throw new Error(`larger than ${MAX_MEDIA_BYTES} bytes`);
    return bytes;
  } catch (err) {
    throw badRequest(`Invalid field "${field}": could not fetch the ${noun} (${(err as Error).message})`, { field });
  }
}

/**
 * A file:// URL names a file under --media-path, as llama-server: the rest of the URL is a path
 * relative to that directory (leading and doubled slashes ignored); `..` segments are refused,
 * and so is a path that leaves the directory through a symbolic link.
 */
async function readLocalMedia(url: string, field: string, mediaPath: string | undefined, noun: MediaNoun): Promise<Uint8Array> {
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
    if (size > MAX_MEDIA_BYTES) throw badRequest(`Invalid field "${field}": the ${noun} is larger than ${MAX_MEDIA_BYTES} bytes`, { field });
    if (size === 0) throw badRequest(`Invalid field "${field}": the ${noun} is empty`, { field });
    return new Uint8Array(await file.readFile());
  } catch (err) {
    if (err instanceof Error && err.name === 'HttpError') throw err;
    throw notFound();
  } finally {
    await file.close();
  }
}

/** The bytes of the image an image_url names. */
export function loadImage(url: string, field: string, policy: MediaPolicy): Promise<Uint8Array> {
  return loadMedia(url, field, policy, 'image');
}

/** The bytes of an input_audio part's clip: its data (bare base64, as OpenAI sends it, or a data URL), or a URL as an image's. */
export function loadAudio(data: string, field: string, policy: MediaPolicy): Promise<Uint8Array> {
  if (/^(https?|file|data):/i.test(data)) return loadMedia(data, field, policy, 'audio file');
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(data.replace(/\s+/g, ''))) throw badRequest(`Invalid field "${field}": expected base64 audio data`, { field });
  return Promise.resolve(decodeBase64(data, field, 'audio file'));
}

async function loadMedia(url: string, field: string, policy: MediaPolicy, noun: MediaNoun): Promise<Uint8Array> {
  if (/^https?:\/\//i.test(url)) return fetchMedia(url, field, policy, noun);
  if (/^file:\/\//i.test(url)) return readLocalMedia(url, field, policy.mediaPath, noun);
  return decodeDataUrl(url, field, noun);
}
