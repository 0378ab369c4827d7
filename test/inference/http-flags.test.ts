// llama-server's HTTP-side flags on inference-server, from its command line to the wire:
// --path, --ssl-key-file/--ssl-cert-file, -to, --sse-ping-interval, --reuse-port, --ui-mcp-proxy
// (GET/POST /cors-proxy), and the 403 of /cors-proxy without it.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { UsageError } from '../../src/cli/flags.js';
import { native } from '../../src/native/binding.js';
import { refusedOptions, serverOptions } from '../../src/inference/server-config.js';
import { startInferenceServer } from '../../src/inference/server.js';
import { ensureTestModels } from '../fixtures/models.js';

const models = await ensureTestModels();
const options = (...argv: string[]) => serverOptions(native.ServerParams.parse(['llama-server', '-m', models.chat, '-c', '512', ...argv]).values(), {}, false);
async function start(...argv: string[]) {
  const server = await startInferenceServer({ ...options(...argv), host: '127.0.0.1', port: 0 });
  t.teardown(() => server.close());
  await server.ready;
  return { server, base: `http://127.0.0.1:${server.port}` };
}

const dir = mkdtempSync(join(tmpdir(), 'http-flags-'));

t.test('the transport flags map to the server\'s options; llama-server\'s defaults without them', async (t) => {
  const d = options();
  t.same([d.timeoutSeconds, d.ssePingIntervalSeconds, d.reusePort, d.corsProxy, d.tls, d.publicPath], [3600, 30, false, false, undefined, undefined]);
  const o = options('-to', '7', '--sse-ping-interval', '2', '--reuse-port', '--ui-mcp-proxy', '--path', dir);
  t.same([o.timeoutSeconds, o.ssePingIntervalSeconds, o.reusePort, o.corsProxy, o.publicPath], [7, 2, true, true, dir]);
  process.env.LLAMA_ARG_TIMEOUT = '9';
  t.teardown(() => { delete process.env.LLAMA_ARG_TIMEOUT; });
  t.equal(options().timeoutSeconds, 9, 'LLAMA_ARG_TIMEOUT');
});

t.test('--path DIR: its files at the root instead of the chat page; with --no-ui neither', async (t) => {
  const site = mkdtempSync(join(dir, 'site-'));
  writeFileSync(join(site, 'index.html'), '<h1>mine</h1>');
  writeFileSync(join(site, 'app.js'), 'console.log(1)');
  const { base } = await start('--path', site);
  const index = await fetch(`${base}/`);
  t.same([index.status, index.headers.get('content-type'), await index.text()], [200, 'text/html', '<h1>mine</h1>']);
  const js = await fetch(`${base}/app.js`);
  t.same([js.status, js.headers.get('content-type')], [200, 'text/javascript']);
  t.equal((await fetch(`${base}/webui/chat.js`)).status, 404, 'the built-in page is not served');
  const health = await fetch(`${base}/health`);
  t.same([health.status, await health.json()], [200, { status: 'ok' }], 'the API still answers');

  const { base: noUi } = await start('--path', site, '--no-ui');
  t.equal((await fetch(`${noUi}/`)).status, 404, '--no-ui turns the files off too, as in llama-server');
});

t.test('--path to a folder that does not exist fails at start, as llama-server', async (t) => {
  const missing = join(dir, 'missing');
  await t.rejects(startInferenceServer({ ...options('--path', missing), host: '127.0.0.1', port: 0 }), { message: `static assets path not found: ${missing}` });
});

/** A self-signed certificate for 127.0.0.1 and its key, in `dir`. */
function selfSigned(): { keyFile: string; certFile: string } {
  const keyFile = join(dir, 'key.pem');
  const certFile = join(dir, 'cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', keyFile, '-out', certFile,
    '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  return { keyFile, certFile };
}

/** GET `path` over HTTPS trusting `certFile`: "<status> <body>". */
function httpsGet(port: number, path: string, certFile: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path, ca: readFileSync(certFile), agent: false }, (res) => {
      let text = '';
      res.on('data', (c) => { text += c; });
      res.on('end', () => resolve(`${res.statusCode} ${text}`));
    });
    req.on('error', reject);
    req.end();
  });
}

t.test('--ssl-key-file with --ssl-cert-file serves HTTPS; one without the other is refused', async (t) => {
  const { keyFile, certFile } = selfSigned();
  const { server } = await start('--ssl-key-file', keyFile, '--ssl-cert-file', certFile);
  t.equal(await httpsGet(server.port, '/health', certFile), '200 {"status":"ok"}');
  t.throws(() => options('--ssl-key-file', keyFile), new UsageError('--ssl-key-file needs --ssl-cert-file too: HTTPS takes both a key and its certificate'));
  t.throws(() => options('--ssl-cert-file', certFile), new UsageError('--ssl-cert-file needs --ssl-key-file too: HTTPS takes both a key and its certificate'));
});

t.test('without --reuse-port a second server on the same port fails to start; with it both run', async (t) => {
  const { server } = await start();
  const second = { ...options(), host: '127.0.0.1', port: server.port };
  await t.rejects(startInferenceServer(second), { message: `cannot listen on 127.0.0.1:${server.port} (address in use or not permitted)` });
  // (A port picked by the kernel for port 0 is not shared; llama-server's tests name one.)
  const probe = await startInferenceServer({ ...options(), host: '127.0.0.1', port: 0 });
  const port = probe.port;
  await probe.close();
  const shared = await startInferenceServer({ ...options('--reuse-port'), host: '127.0.0.1', port });
  t.teardown(() => shared.close());
  const sibling = await startInferenceServer({ ...options('--reuse-port'), host: '127.0.0.1', port: shared.port });
  t.teardown(() => sibling.close());
  t.equal(sibling.port, shared.port);
});

/** A target that records the headers and body of the last request it got. */
async function captureTarget(t: Tap.Test) {
  const seen: { method?: string; headers?: IncomingHttpHeaders; body?: string } = {};
  const target = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      Object.assign(seen, { method: req.method, headers: req.headers, body });
      res.writeHead(201, { 'Content-Type': 'application/json', 'X-Upstream': 'yes', 'Access-Control-Allow-Origin': 'https://evil.example' });
      res.end('{"ok":true}');
    });
  });
  target.listen(0, '127.0.0.1');
  await new Promise((resolve) => target.once('listening', resolve));
  t.teardown(() => target.close());
  return { seen, url: `http://127.0.0.1:${(target.address() as { port: number }).port}/capture?x=1` };
}

t.test('/cors-proxy without --ui-mcp-proxy: 403 feature_disabled, as llama-server', async (t) => {
  const { base } = await start();
  for (const method of ['GET', 'POST']) {
    const res = await fetch(`${base}/cors-proxy?url=http://127.0.0.1:1/`, { method });
    t.same([res.status, await res.json()], [403, { error: { message: 'this feature is disabled', type: 'feature_disabled' } }], method);
  }
});

t.test('--ui-mcp-proxy: only x-llama-server-proxy-header-* headers reach the target, renamed; its answer comes back', async (t) => {
  const { seen, url } = await captureTarget(t);
  const { base } = await start('--ui-mcp-proxy', '--api-key', 'k1');
  const res = await fetch(`${base}/cors-proxy?url=${encodeURIComponent(url)}`, {
    headers: {
      Authorization: 'Bearer k1', 'Proxy-Authorization': 'Basic secret', 'X-Api-Key': 'k1', Cookie: 'session=secret',
      'x-llama-server-proxy-header-accept': 'application/json', 'x-llama-server-proxy-header-authorization': 'Bearer explicit',
    },
  });
  t.same([res.status, res.headers.get('content-type'), res.headers.get('x-upstream'), await res.text()], [201, 'application/json', 'yes', '{"ok":true}']);
  t.not(res.headers.get('access-control-allow-origin'), 'https://evil.example', 'the target\'s CORS headers are not passed on');
  t.equal(seen.method, 'GET');
  t.equal(seen.headers!.accept, 'application/json');
  t.equal(seen.headers!.authorization, 'Bearer explicit');
  for (const name of ['proxy-authorization', 'x-api-key', 'cookie']) t.notOk(name in seen.headers!, `${name} is not forwarded`);

  const post = await fetch(`${base}/cors-proxy?url=${encodeURIComponent(url)}`, {
    method: 'POST', body: '{"jsonrpc":"2.0"}',
    headers: { Authorization: 'Bearer k1', 'x-llama-server-proxy-header-content-type': 'application/json' },
  });
  t.equal(post.status, 201);
  t.same([seen.method, seen.body, seen.headers!['content-type']], ['POST', '{"jsonrpc":"2.0"}', 'application/json'], 'POST forwards the body');
  t.equal((await fetch(`${base}/cors-proxy?url=${encodeURIComponent(url)}`)).status, 401, 'the API key is required');
});

t.test('--ui-mcp-proxy with a bad target: a clear 400, or 502 when it cannot be reached', async (t) => {
  const { base } = await start('--ui-mcp-proxy');
  const cases: Array<[string, number, string]> = [
    ['', 400, 'invalid target URL: missing url parameter'],
    ['?url=not%20a%20url', 400, 'invalid target URL: not a url'],
    ['?url=ftp://127.0.0.1/x', 400, 'unsupported URL scheme in target URL: ftp'],
    ['?url=http://user:pw@127.0.0.1/x', 400, 'authentication in target URL is not supported'],
  ];
  for (const [query, status, message] of cases) {
    const res = await fetch(`${base}/cors-proxy${query}`);
    t.same([res.status, await res.json()], [status, { error: { code: status, message, type: 'invalid_request_error' } }], query || '(no url)');
  }
  const closed = createServer();
  closed.listen(0, '127.0.0.1');
  await new Promise((resolve) => closed.once('listening', resolve));
  const port = (closed.address() as { port: number }).port;
  closed.close();
  const res = await fetch(`${base}/cors-proxy?url=http://127.0.0.1:${port}/`);
  const body = await res.json();
  t.equal(res.status, 502);
  t.match(body, { error: { code: 502, type: 'server_error', message: /^proxy error: connect ECONNREFUSED/ } });
});

t.test('--ui-mcp-proxy streams the target\'s answer as it comes; a client that leaves ends the request to the target', async (t) => {
  let targetClosed!: () => void;
  const closed = new Promise<void>((resolve) => { targetClosed = resolve; });
  const target = createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/event-stream' });
    res.write('data: first\n\n');
    res.on('close', () => targetClosed());
  });
  target.listen(0, '127.0.0.1');
  await new Promise((resolve) => target.once('listening', resolve));
  t.teardown(() => target.close());
  const { base } = await start('--ui-mcp-proxy');
  const abort = new AbortController();
  const res = await fetch(`${base}/cors-proxy?url=http://127.0.0.1:${(target.address() as { port: number }).port}/sse`, { signal: abort.signal });
  t.same([res.status, res.headers.get('content-type')], [200, 'text/event-stream']);
  const reader = res.body!.getReader();
  t.equal(new TextDecoder().decode((await reader.read()).value), 'data: first\n\n', 'the first chunk arrives while the target is still writing');
  abort.abort();
  await closed;
  t.pass('the target saw its request end');
});

t.test('--tools, --tools-runtime and -ag are served: the tools, the runtime, the CORS proxy and the localhost CORS default', async (t) => {
  const given = (...argv: string[]) => refusedOptions(native.ServerParams.parse(['llama-server', '-m', models.chat, ...argv]).given());
  t.same(given('--tools', 'all', '--tools-runtime', 'docker:alpine', '-ag'), [], 'none is refused');
  t.same(options('--tools', 'read_file,get_info').tools, { names: ['read_file', 'get_info'], runtime: '' });
  t.same(options('--tools', 'all', '--tools-runtime', 'ssh:box').tools, { names: ['all'], runtime: 'ssh:box' });
  const agent = options('-ag');
  t.same([agent.tools?.names, agent.corsProxy], [['all'], true], '-ag: every tool and the CORS proxy');
  const off = options('--agent', '--no-agent');
  t.same([off.tools?.names, off.corsProxy], [[], false], 'the last word turned them off');
  t.equal(options('--tools', 'all').cors?.origins, 'localhost', '--tools limits CORS to localhost');
  t.equal(options('-ag').cors?.origins, 'localhost', '-ag too');
  t.equal(options('--tools', 'all', '--cors-origins', 'https://a.example').cors?.origins, 'https://a.example', 'unless --cors-origins is given');
  t.equal(options().cors?.origins, '*', 'without tools the default stays "*"');
});

// Router mode (no -m): the flags apply to the router's own port, as in llama-server, whose router
// and single-model server share one HTTP layer. (Its model processes get no --ssl-* flags: they
// answer the router on the loopback, as llama-server's children do.)
t.test('router mode: the transport flags apply to the router\'s port (HTTPS, --path, -to, --sse-ping-interval, --reuse-port)', async (t) => {
  const { startRouterServer } = await import('../../src/inference/multi-model/server.js');
  const { routerOptions } = await import('../../src/inference/server-config.js');
  const emptyModels = mkdtempSync(join(dir, 'models-'));
  const routerArgs = (...argv: string[]) => native.ServerParams.parse(['llama-server', '--models-dir', emptyModels, ...argv]);
  const d = routerOptions(routerArgs().values(), {});
  t.same([d.timeoutSeconds, d.ssePingIntervalSeconds, d.reusePort, d.tls, d.publicPath], [3600, 30, false, undefined, undefined], 'llama-server\'s defaults');
  const site = mkdtempSync(join(dir, 'router-site-'));
  writeFileSync(join(site, 'index.html'), '<h1>router</h1>');
  const { keyFile, certFile } = selfSigned();
  const params = routerArgs('--ssl-key-file', keyFile, '--ssl-cert-file', certFile, '--path', site, '-to', '7', '--sse-ping-interval', '2', '--reuse-port');
  const o = routerOptions(params.values(), {});
  t.same([o.timeoutSeconds, o.ssePingIntervalSeconds, o.reusePort, o.tls, o.publicPath], [7, 2, true, { keyFile, certFile }, site]);
  const router = await startRouterServer({ ...o, port: 0, buildInfo: 'b1-test', readSpecs: () => params.routerModels(), command: [process.execPath], log: () => {} });
  t.teardown(() => router.close());
  t.equal(await httpsGet(router.port, '/', certFile), '200 <h1>router</h1>', '--path\'s files over HTTPS');
  t.equal(await httpsGet(router.port, '/models', certFile), '200 {"data":[],"object":"list"}', 'the router\'s API over HTTPS');
  t.match(await httpsGet(router.port, '/webui/chat.js', certFile), /^404 /, 'not the built-in page');
  await t.rejects(fetch(`http://127.0.0.1:${router.port}/models`), 'no plain HTTP');
});
