// A directory served as llama-server's --path serves it: files by relative path, index.html for
// a folder path, 301 for a folder without its slash, cpp-httplib's content types, weak ETag and
// 304, HEAD; no way out of the directory by `..`, encoded `..` or a symbolic link.
import { mkdirSync, mkdtempSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { ErrorFormatter } from '../../src/http/errors.js';
import { startHttpServer } from '../../src/http/server.js';
import { openStaticDirectory } from '../../src/http/static-directory.js';

const formatError: ErrorFormatter = (e) => ({ status: e.status, body: { error: { code: e.code } } });
const root = mkdtempSync(join(tmpdir(), 'static-dir-'));
const dir = join(root, 'public');
mkdirSync(join(dir, 'docs'), { recursive: true });
writeFileSync(join(dir, 'index.html'), '<h1>home</h1>');
writeFileSync(join(dir, 'logo.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 255]));
writeFileSync(join(dir, 'data.bin'), 'raw');
writeFileSync(join(dir, 'docs', 'index.html'), '<h1>docs</h1>');
writeFileSync(join(dir, 'docs', 'a b.txt'), 'spaced');
writeFileSync(join(root, 'secret.txt'), 'outside');
symlinkSync(join(root, 'secret.txt'), join(dir, 'leak.txt'));
symlinkSync(join(dir, 'data.bin'), join(dir, 'alias.bin'));

const server = await startHttpServer({
  host: '127.0.0.1', port: 0, formatError, maxBodyBytes: 1024,
  routes: [{ method: 'GET', path: '/health', handler: () => ({ body: { status: 'ok' } }) }],
  staticDirectory: await openStaticDirectory(dir, '/'),
});
t.teardown(() => server.close());

/** A raw GET (fetch would normalise `..` away), with the status, headers and body bytes. */
function get(path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: server.port, path, method, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end();
  });
}

t.test('files by path with cpp-httplib\'s content types; index.html for / and for a folder path', async (t) => {
  const home = await get('/');
  t.same([home.status, home.headers['content-type'], home.body.toString()], [200, 'text/html', '<h1>home</h1>']);
  const png = await get('/logo.png');
  t.same([png.status, png.headers['content-type']], [200, 'image/png']);
  t.same([...png.body], [0x89, 0x50, 0x4e, 0x47, 0, 1, 2, 255], 'binary bytes unchanged');
  const bin = await get('/data.bin');
  t.same([bin.status, bin.headers['content-type'], bin.body.toString()], [200, 'application/octet-stream', 'raw']);
  const docs = await get('/docs/');
  t.same([docs.status, docs.body.toString()], [200, '<h1>docs</h1>']);
  const spaced = await get('/docs/a%20b.txt');
  t.same([spaced.status, spaced.headers['content-type'], spaced.body.toString()], [200, 'text/plain', 'spaced']);
});

t.test('a folder without its slash is a 301 to the slash; a missing file is the usual 404', async (t) => {
  const folder = await get('/docs');
  t.same([folder.status, folder.headers.location], [301, '/docs/']);
  const missing = await get('/nope.js');
  t.equal(missing.status, 404);
  t.same(JSON.parse(missing.body.toString()), { error: { code: 'NOT_FOUND' } });
});

t.test('routes come first: a GET route answers, not a file', async (t) => {
  const health = await get('/health');
  t.same([health.status, JSON.parse(health.body.toString())], [200, { status: 'ok' }]);
});

t.test('weak ETag and Last-Modified from mtime and size; If-None-Match gives 304; HEAD has no body', async (t) => {
  const info = statSync(join(dir, 'data.bin'));
  const etag = `W/"${Math.floor(info.mtimeMs / 1000).toString(16)}-${(3).toString(16)}"`;
  const first = await get('/data.bin');
  t.equal(first.headers.etag, etag);
  t.equal(first.headers['last-modified'], info.mtime.toUTCString());
  const again = await get('/data.bin', { 'If-None-Match': etag });
  t.same([again.status, again.body.length], [304, 0]);
  const head = await get('/data.bin', {}, 'HEAD');
  t.same([head.status, head.headers['content-length'], head.body.length], [200, '3', 0]);
});

t.test('no way out: .. and encoded .. are not found, a link leaving the folder is 403, one inside is served', async (t) => {
  for (const path of ['/../secret.txt', '/docs/../../secret.txt', '/%2e%2e/secret.txt', '/docs/%2E%2E/%2e%2e/secret.txt', '/..%2fsecret.txt']) {
    const res = await get(path);
    t.equal(res.status, 404, path);
    t.notMatch(res.body.toString(), /outside/, path);
  }
  const inside = await get('/docs/../data.bin');
  t.same([inside.status, inside.body.toString()], [200, 'raw'], '.. that stays inside is resolved');
  const leak = await get('/leak.txt');
  t.same([leak.status, leak.body.length], [403, 0]);
  const alias = await get('/alias.bin');
  t.same([alias.status, alias.body.toString()], [200, 'raw']);
});

t.test('a mount under a prefix serves only below it; a missing folder fails at start', async (t) => {
  const prefixed = await startHttpServer({ host: '127.0.0.1', port: 0, formatError, maxBodyBytes: 1024, routes: [], staticDirectory: await openStaticDirectory(dir, '/llama/') });
  t.teardown(() => prefixed.close());
  const under = await fetch(`http://127.0.0.1:${prefixed.port}/llama/data.bin`);
  t.same([under.status, await under.text()], [200, 'raw']);
  t.equal((await fetch(`http://127.0.0.1:${prefixed.port}/data.bin`)).status, 404);
  await t.rejects(openStaticDirectory(join(root, 'missing'), '/'), { message: `static assets path not found: ${join(root, 'missing')}` });
  await t.rejects(openStaticDirectory(join(dir, 'data.bin'), '/'), { message: `static assets path not found: ${join(dir, 'data.bin')}` });
});
