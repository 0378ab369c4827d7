// Files of a directory served as they are, as llama-server's --path (cpp-httplib's mount point):
// GET and HEAD under the mount path answer the file at the same relative path, `index.html` for
// a path ending in `/`, a 301 to `path/` for a directory, a weak ETag and Last-Modified from the
// file's mtime and size (304 on If-None-Match). Paths that climb out with `..` are not found;
// a file whose real path (symbolic links resolved) leaves the directory is a 403, as there.
import { constants } from 'node:fs';
import { open, realpath, stat } from 'node:fs/promises';
import { extname, join, sep } from 'node:path';
import type { HttpResult } from './request.js';

/** cpp-httplib's table (find_content_type); any other extension is application/octet-stream. */
const CONTENT_TYPES: Readonly<Record<string, string>> = {
  css: 'text/css', csv: 'text/csv', htm: 'text/html', html: 'text/html', js: 'text/javascript', mjs: 'text/javascript',
  txt: 'text/plain', vtt: 'text/vtt', apng: 'image/apng', avif: 'image/avif', bmp: 'image/bmp', gif: 'image/gif',
  png: 'image/png', svg: 'image/svg+xml', webp: 'image/webp', ico: 'image/x-icon', tif: 'image/tiff', tiff: 'image/tiff',
  jpg: 'image/jpeg', jpeg: 'image/jpeg', mp4: 'video/mp4', mpeg: 'video/mpeg', webm: 'video/webm', mp3: 'audio/mp3',
  mpga: 'audio/mpeg', weba: 'audio/webm', wav: 'audio/wave', otf: 'font/otf', ttf: 'font/ttf', woff: 'font/woff',
  woff2: 'font/woff2', '7z': 'application/x-7z-compressed', atom: 'application/atom+xml', pdf: 'application/pdf',
  json: 'application/json', rss: 'application/rss+xml', tar: 'application/x-tar', xht: 'application/xhtml+xml',
  xhtml: 'application/xhtml+xml', xslt: 'application/xslt+xml', xml: 'application/xml', gz: 'application/gzip',
  zip: 'application/zip', wasm: 'application/wasm',
};

/** A static directory mounted at a URL path ("/" or "/prefix/"). */
export interface StaticDirectory {
  /** The answer for a GET/HEAD of `path` (as sent, not decoded), or null when no file is there. */
  lookup(path: string, ifNoneMatch: string | undefined): Promise<HttpResult | null>;
}

/** The relative path under the mount, decoded, or null when it is outside the mount or climbs above it. */
function relativePath(mount: string, path: string): string | null {
  if (!path.startsWith(mount)) return null;
  let sub: string;
  try {
    sub = decodeURIComponent(path.slice(mount.length));
  } catch {
    return null;
  }
  if (sub.includes('\0') || sub.includes('\\')) return null;
  let depth = 0;
  for (const segment of sub.split('/')) {
    if (segment === '..') depth--;
    else if (segment !== '' && segment !== '.') depth++;
    if (depth < 0) return null;
  }
  return sub;
}

function isWithin(base: string, path: string): boolean {
  return path === base || path.startsWith(base.endsWith(sep) ? base : base + sep);
}

/** Throws at start when `dir` is not a directory (llama-server: "static assets path not found"). */
export async function openStaticDirectory(dir: string, mount: string): Promise<StaticDirectory> {
  const base = await realpath(dir).catch(() => null);
  if (base === null || !(await stat(base)).isDirectory()) throw new Error(`static assets path not found: ${dir}`);
  return {
    async lookup(path, ifNoneMatch) {
      const sub = relativePath(mount, path);
      if (sub === null) return null;
      const file = join(base, sub, sub === '' || sub.endsWith('/') ? 'index.html' : '');
      const real = await realpath(file).catch(() => null);
      if (real === null) return null;
      if (!isWithin(base, real)) return { status: 403 };
      const info = await stat(real);
      if (info.isDirectory()) return { status: 301, headers: { Location: `${path}/` } };
      if (!info.isFile()) return null;
      const etag = `W/"${Math.floor(info.mtimeMs / 1000).toString(16)}-${info.size.toString(16)}"`;
      const headers = { ETag: etag, 'Last-Modified': info.mtime.toUTCString() };
      if (ifNoneMatch !== undefined && ifNoneMatch.split(',').some((tag) => tag.trim() === etag || tag.trim() === '*')) {
        return { status: 304, headers };
      }
      // O_NOFOLLOW: the checked path is opened, not a link swapped in since.
      const handle = await open(real, constants.O_RDONLY | constants.O_NOFOLLOW);
      try {
        const bytes = await handle.readFile();
        return { bytes, contentType: CONTENT_TYPES[extname(real).slice(1).toLowerCase()] ?? 'application/octet-stream', headers };
      } finally {
        await handle.close();
      }
    },
  };
}
