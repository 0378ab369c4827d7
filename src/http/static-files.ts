// A built web page served from memory: its files are read once when the routes are made, each
// answered with its content type, a strong ETag (304 on If-None-Match) and `Cache-Control:
// no-cache` (file names carry no hash, so the browser revalidates, which costs one 304).
// HEAD is answered by the HTTP layer as GET without the body.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HttpRequest, HttpResult } from './request.js';
import type { Route } from './router.js';

/** Text formats only: the pages ship no images or fonts. */
const CONTENT_TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.json': 'application/json; charset=utf-8',
};

export interface StaticPageOptions {
  /** Directory holding index.html and the page's assets (one level, no sub-folders). */
  dir: string;
  /** Where index.html is answered, e.g. `/` or `/admin/`. */
  indexPath: string;
  /** URL folder of every other file, e.g. `/webui/`: `<dir>/chat.js` is `<assetPrefix>chat.js`. */
  assetPrefix: string;
  /** Added to every answer (Content-Security-Policy and other security headers). */
  headers?: Record<string, string>;
}

/** `dist/web/<name>`: where `npm run build:web` puts a page (the same path from src/ and dist/). */
export function builtPageDir(name: string): string {
  return fileURLToPath(new URL(`../../dist/web/${name}/`, import.meta.url));
}

/** GET routes for every file of the page. Throws when the folder or its index.html is missing. */
export function staticPageRoutes(options: StaticPageOptions): Route[] {
  const index = join(options.dir, 'index.html');
  if (!existsSync(index)) throw new Error(`the web page's files are missing (${index}): run "npm run build:web"`);
  const routes: Route[] = [];
  for (const entry of readdirSync(options.dir, { withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const contentType = CONTENT_TYPES[extname(entry.name)];
    if (!contentType) continue;
    const path = entry.name === 'index.html' ? options.indexPath : `${options.assetPrefix}${entry.name}`;
    routes.push({ method: 'GET', path, handler: fileHandler(readFileSync(join(options.dir, entry.name), 'utf8'), contentType, options.headers ?? {}) });
  }
  return routes;
}

function fileHandler(text: string, contentType: string, extraHeaders: Record<string, string>): (req: HttpRequest) => HttpResult {
  const etag = `"${createHash('sha256').update(text).digest('base64url').slice(0, 22)}"`;
  const headers = { ...extraHeaders, ETag: etag, 'Cache-Control': 'no-cache', 'X-Content-Type-Options': 'nosniff' };
  return (req) => {
    const match = req.headers['if-none-match'];
    if (match !== undefined && match.split(',').some((tag) => tag.trim() === etag || tag.trim() === '*')) {
      return { status: 304, headers };
    }
    return { text, contentType, headers };
  };
}
