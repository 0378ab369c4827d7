// Static pages from memory: one route per file, content types, ETag and 304, HEAD, extra headers,
// files read once at start, and a clear error when the page was not built.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { ErrorFormatter } from '../../src/http/errors.js';
import { startHttpServer } from '../../src/http/server.js';
import { staticPageRoutes } from '../../src/http/static-files.js';

const formatError: ErrorFormatter = (e) => ({ status: e.status, body: { error: { code: e.code } } });
const dir = mkdtempSync(join(tmpdir(), 'static-files-'));
writeFileSync(join(dir, 'index.html'), '<!doctype html><title>x</title>');
writeFileSync(join(dir, 'app.js'), 'export const answer = 42;\n');
writeFileSync(join(dir, 'style.css'), 'body { color: red }');
writeFileSync(join(dir, 'icon.svg'), '<svg xmlns="http://www.w3.org/2000/svg"/>');
writeFileSync(join(dir, 'notes.txt'), 'not served');

const routes = staticPageRoutes({ dir, indexPath: '/page/', assetPrefix: '/page/assets/', headers: { 'X-Test': 'yes' } });
const server = await startHttpServer({ host: '127.0.0.1', port: 0, routes, formatError, maxBodyBytes: 1024 });
t.teardown(() => server.close());
const base = `http://127.0.0.1:${server.port}`;

t.test('one GET route per served file: index at indexPath, the rest under assetPrefix; other extensions are left out', async (t) => {
  t.same(routes.map((r) => `${r.method} ${r.path}`).sort(), ['GET /page/', 'GET /page/assets/app.js', 'GET /page/assets/icon.svg', 'GET /page/assets/style.css']);
});

t.test('each file has its content type, the extra headers, nosniff and no-cache', async (t) => {
  const expected: Array<[string, string, string]> = [
    ['/page/', 'text/html; charset=utf-8', '<!doctype html><title>x</title>'],
    ['/page/assets/app.js', 'text/javascript; charset=utf-8', 'export const answer = 42;\n'],
    ['/page/assets/style.css', 'text/css; charset=utf-8', 'body { color: red }'],
    ['/page/assets/icon.svg', 'image/svg+xml', '<svg xmlns="http://www.w3.org/2000/svg"/>'],
  ];
  for (const [path, type, body] of expected) {
    const reply = await fetch(`${base}${path}`);
    t.equal(reply.status, 200, path);
    t.equal(reply.headers.get('content-type'), type, path);
    t.equal(reply.headers.get('x-test'), 'yes', path);
    t.equal(reply.headers.get('x-content-type-options'), 'nosniff', path);
    t.equal(reply.headers.get('cache-control'), 'no-cache', path);
    t.equal(await reply.text(), body, path);
  }
  t.equal((await fetch(`${base}/page/assets/notes.txt`)).status, 404);
  t.equal((await fetch(`${base}/page/index.html`)).status, 404, 'index.html is served only at indexPath');
});

t.test('a matching If-None-Match is 304 with no body; another ETag or * behaves as HTTP says', async (t) => {
  const first = await fetch(`${base}/page/assets/app.js`);
  const etag = first.headers.get('etag')!;
  t.match(etag, /^"[A-Za-z0-9_-]{22}"$/);
  const cached = await fetch(`${base}/page/assets/app.js`, { headers: { 'if-none-match': `"other", ${etag}` } });
  t.equal(cached.status, 304);
  t.equal(cached.headers.get('etag'), etag);
  t.equal(await cached.text(), '');
  t.equal((await fetch(`${base}/page/assets/app.js`, { headers: { 'if-none-match': '*' } })).status, 304);
  t.equal((await fetch(`${base}/page/assets/app.js`, { headers: { 'if-none-match': '"stale"' } })).status, 200);
  t.not((await fetch(`${base}/page/assets/style.css`)).headers.get('etag'), etag, 'each file has its own ETag');
});

t.test('HEAD answers the headers and length without the body', async (t) => {
  const reply = await fetch(`${base}/page/`, { method: 'HEAD' });
  t.equal(reply.status, 200);
  t.equal(reply.headers.get('content-length'), String('<!doctype html><title>x</title>'.length));
  t.equal(await reply.text(), '');
});

t.test('files are read once: changing one on disk changes nothing served', async (t) => {
  writeFileSync(join(dir, 'app.js'), 'changed');
  t.equal(await (await fetch(`${base}/page/assets/app.js`)).text(), 'export const answer = 42;\n');
});

t.test('a folder without index.html is refused with the command that builds it', async (t) => {
  t.throws(() => staticPageRoutes({ dir: join(dir, 'missing'), indexPath: '/', assetPrefix: '/x/' }), /run "npm run build:web"/);
});
