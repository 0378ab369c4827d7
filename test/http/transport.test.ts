// The transport flags of llama-server, on a real socket: HTTPS (--ssl-key-file/--ssl-cert-file),
// SO_REUSEPORT (--reuse-port) and the exclusive port without it, the read timeout (-to), and SSE
// pings (--sse-ping-interval) on a stream that stays silent after its first event.
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { ErrorFormatter } from '../../src/http/errors.js';
import type { Route } from '../../src/http/router.js';
import { startHttpServer, type HttpServerOptions } from '../../src/http/server.js';
import { wholeChunks } from '../helpers/chunked.js';
import { freePort } from '../helpers/ports.js';

const formatError: ErrorFormatter = (e) => ({ status: e.status, body: { error: { code: e.code, message: e.message } } });
const hello: Route = { method: 'GET', path: '/hello', handler: () => ({ body: { hello: 'world' } }) };
const echo: Route = { method: 'POST', path: '/echo', handler: (req) => ({ text: req.body.toString() }) };
const start = (options: Partial<HttpServerOptions> = {}) =>
  startHttpServer({ host: '127.0.0.1', port: 0, formatError, maxBodyBytes: 1024, routes: [hello, echo], ...options });

const dir = mkdtempSync(join(tmpdir(), 'transport-'));
const keyFile = join(dir, 'key.pem');
const certFile = join(dir, 'cert.pem');
execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', keyFile, '-out', certFile,
  '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });

function httpsGet(port: number, path: string): Promise<{ status: number; body: string; authorized: boolean }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest({ host: '127.0.0.1', port, path, ca: readFileSync(certFile), agent: false }, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode!, body, authorized: (res.socket as import('node:tls').TLSSocket).authorized }));
    });
    req.on('error', reject);
    req.end();
  });
}

t.test('--ssl-key-file and --ssl-cert-file: the server speaks HTTPS with that certificate', async (t) => {
  const server = await start({ tls: { keyFile, certFile } });
  t.teardown(() => server.close());
  const res = await httpsGet(server.port, '/hello');
  t.same([res.status, JSON.parse(res.body), res.authorized], [200, { hello: 'world' }, true]);
  await t.rejects(fetch(`http://127.0.0.1:${server.port}/hello`), 'plain HTTP is not answered');
});

t.test('HTTPS with a missing or unusable key or certificate fails at start, naming the file', async (t) => {
  const missing = join(dir, 'missing.pem');
  await t.rejects(start({ tls: { keyFile: missing, certFile } }), { message: `--ssl-key-file: cannot read ${missing} (ENOENT)` });
  await t.rejects(start({ tls: { keyFile, certFile: missing } }), { message: `--ssl-cert-file: cannot read ${missing} (ENOENT)` });
  const garbage = join(dir, 'garbage.pem');
  writeFileSync(garbage, 'not a pem file\n');
  await t.rejects(start({ tls: { keyFile: garbage, certFile } }), {
    message: `cannot start HTTPS with --ssl-key-file ${garbage} and --ssl-cert-file ${certFile}: not a PEM private key and its certificate`,
  });
});


t.test('without --reuse-port the port is exclusive: a second server on it fails, as llama-server\'s', async (t) => {
  const port = await freePort();
  const first = await start({ port, reusePort: false });
  t.teardown(() => first.close());
  await t.rejects(start({ port, reusePort: false }), { message: `cannot listen on 127.0.0.1:${port} (address in use or not permitted)` });
  await t.rejects(start({ port, reusePort: true }), 'asking for reuse does not share a port held exclusively');
});

t.test('with --reuse-port two servers listen on the same port and both answer', async (t) => {
  const port = await freePort();
  const first = await start({ port, reusePort: true });
  t.teardown(() => first.close());
  const second = await start({ port, reusePort: true });
  t.teardown(() => second.close());
  t.same([first.port, second.port], [port, port]);
  const res = await fetch(`http://127.0.0.1:${port}/hello`);
  t.same([res.status, await res.json()], [200, { hello: 'world' }]);
});

t.test('-to N: a request body that stops arriving has its connection closed after N seconds', async (t) => {
  const server = await start({ timeoutSeconds: 1 });
  t.teardown(() => server.close());
  const socket = connect(server.port, '127.0.0.1');
  await once(socket, 'connect');
  const started = Date.now();
  socket.write('POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc');
  let answered = '';
  socket.on('data', (d) => { answered += d; });
  await once(socket, 'close');
  const elapsed = Date.now() - started;
  t.ok(elapsed >= 900 && elapsed < 8000, `closed after ${elapsed} ms (uWS's own limit is 10 s)`);
  t.equal(answered, '', 'no response to a request whose body never came');
  const whole = await fetch(`http://127.0.0.1:${server.port}/echo`, { method: 'POST', body: 'complete' });
  t.same([whole.status, await whole.text()], [200, 'complete'], 'a body that arrives is answered');
});

t.test('--sse-ping-interval N: `:\\n\\n` after N seconds of silence, on the wire', async (t) => {
  let release!: () => void;
  const released = new Promise<void>((resolve) => { release = resolve; });
  const slow: Route = {
    method: 'GET', path: '/events', handler: async (req) => {
      const stream = req.openEventStream();
      await stream.send('{"n":1}');
      await released;
      await stream.send('{"n":2}');
    },
  };
  const server = await start({ routes: [slow], ssePingIntervalSeconds: 1 });
  t.teardown(() => server.close());
  const requested = Date.now();
  const res = await fetch(`http://127.0.0.1:${server.port}/events`);
  t.equal(res.headers.get('content-type'), 'text/event-stream');
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = '';
  /** Reads until the body so far ends with `end`; returns what came since the last call. */
  const readThrough = async (end: string): Promise<string> => {
    const from = text.length;
    while (!text.endsWith(end)) text += decoder.decode((await reader.read()).value);
    return text.slice(from);
  };
  t.equal(await readThrough('data: {"n":1}\n\n\n\n'), 'data: {"n":1}\n\n\n\n', 'the event and its tail');
  t.equal(await readThrough(':\n\n\n\n'), ':\n\n\n\n', 'the ping, while the producer is silent');
  // The event was written after the request was sent, and the ping one interval after the event.
  const waited = Date.now() - requested;
  t.ok(waited >= 1000 && waited < 6000, `not before one interval (${waited} ms after the request)`);
  release();
  t.equal(await readThrough('data: {"n":2}\n\n\n\n'), 'data: {"n":2}\n\n\n\n');
  t.equal((await reader.read()).done, true);
});

t.test('an event is in whole chunks as soon as it is sent: a client that reads whole chunks (urllib3, strict SSE parsers on it) is not one event late', async (t) => {
  let release!: () => void;
  const released = new Promise<void>((resolve) => { release = resolve; });
  const route: Route = {
    method: 'GET', path: '/events', handler: async (req) => {
      const stream = req.openEventStream();
      await stream.send('{"n":"é 🙂"}');
      await released;
      await stream.send('{"n":2}');
    },
  };
  const server = await start({ routes: [route] });
  t.teardown(() => server.close());
  const socket = connect(server.port, '127.0.0.1');
  t.teardown(() => socket.destroy());
  await once(socket, 'connect');
  socket.setEncoding('latin1');
  let received = '';
  const decoded = (): string => Buffer.from(wholeChunks(received).body, 'latin1').toString('utf8');
  const arrived = (enough: () => boolean, what: string): Promise<void> => new Promise((resolve, reject) => {
    const check = (): void => {
      if (!enough()) return;
      socket.off('data', onData);
      clearTimeout(deadline);
      resolve();
    };
    const onData = (d: string): void => { received += d; check(); };
    // A deadline, not a pause: without the fix the line stays in an open chunk until the next write.
    const deadline = setTimeout(() => { socket.off('data', onData); reject(new Error(`${what} did not arrive in whole chunks: ${JSON.stringify(received)}`)); }, 5000);
    socket.on('data', onData);
    check();
  });
  socket.write('GET /events HTTP/1.1\r\nHost: x\r\n\r\n');
  await arrived(() => decoded().includes('\n\n'), 'the first event');
  t.equal(decoded(), 'data: {"n":"é 🙂"}\n\n', 'the whole event is readable while the producer waits; only its tail waits for the next write');
  release();
  await arrived(() => wholeChunks(received).ended, 'the end of the stream');
  t.equal(decoded(), 'data: {"n":"é 🙂"}\n\n\n\ndata: {"n":2}\n\n\n\n', 'the events, each with its blank-line tail');
});
