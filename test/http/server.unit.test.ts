import { Type } from '@sinclair/typebox';
import { connect } from 'node:net';
import t from 'tap';
import { HttpError, type ErrorFormatter } from '../../src/http/errors.js';
import { startHttpServer } from '../../src/http/server.js';
import { compileBody } from '../../src/http/validation.js';

const formatError: ErrorFormatter = (e) => ({ status: e.status, body: { error: { code: e.code, message: e.message } } });
const EchoSchema = Type.Object({ name: Type.String(), tags: Type.Optional(Type.Array(Type.String())) });
const Echo = compileBody(EchoSchema);
const EchoWellFormed = compileBody(EchoSchema, { wellFormedStrings: true });
const EchoShallow = compileBody(Type.Object({ name: Type.String(), extra: Type.Optional(Type.Unknown()) }), { maxDepth: 3 });

// The /slow handler reports when it starts and when its signal aborts, so tests await events.
const slow = { entered: deferred(), aborted: deferred() };
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => { resolve = r; });
  return { promise, resolve };
}
const server = await startHttpServer({
  host: '127.0.0.1',
  port: 0,
  maxBodyBytes: 1024,
  formatError,
  routes: [
    { method: 'GET', path: '/hello', handler: () => ({ body: { hello: 'world' } }) },
    { method: 'POST', path: '/echo', handler: (req) => ({ body: Echo.parse(req) }) },
    { method: 'POST', path: '/echo/well-formed', handler: (req) => ({ body: EchoWellFormed.parse(req) }) },
    { method: 'POST', path: '/echo/shallow', handler: (req) => ({ body: EchoShallow.parse(req) }) },
    { method: 'GET', path: '/items/:id', handler: (req) => ({ body: { id: req.params.id } }) },
    { method: 'GET', path: '/teapot', handler: () => { throw new HttpError(418, 'TEAPOT', 'short and stout'); } },
    { method: 'GET', path: '/boom', handler: () => { throw new Error('secret internals'); } },
    {
      method: 'GET', path: '/events', handler: async (req) => {
        const stream = req.openEventStream();
        for (let i = 0; i < 3; i++) await stream.send(JSON.stringify({ i }));
        await stream.send({ event: 'done', data: '[DONE]' });
      },
    },
    {
      method: 'GET', path: '/events/refused', handler: (req) => {
        req.openEventStream();
        throw new HttpError(400, 'REFUSED', 'refused before the first event');
      },
    },
    {
      method: 'GET', path: '/events/failed', handler: async (req) => {
        const stream = req.openEventStream();
        await stream.send(JSON.stringify({ i: 0 }));
        throw new HttpError(400, 'FAILED', 'failed after the first event');
      },
    },
    {
      method: 'GET', path: '/slow', handler: (req) => new Promise((resolve) => {
        req.signal.addEventListener('abort', () => { slow.aborted.resolve(); resolve(undefined); });
        slow.entered.resolve();
      }),
    },
  ],
  cors: { origins: '*', methods: 'GET, POST', headers: '*', credentials: false },
  logError: () => {},
});
t.teardown(() => server.close());
const base = `http://127.0.0.1:${server.port}`;

t.test('routes a GET to its handler and answers JSON', async (t) => {
  const res = await fetch(`${base}/hello`);
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /application\/json/);
  t.same(await res.json(), { hello: 'world' });
});

t.test('path parameters are decoded', async (t) => {
  const res = await fetch(`${base}/items/a%20b`);
  t.same(await res.json(), { id: 'a b' });
});

t.test('unknown path is 404 and wrong method is 405 with Allow', async (t) => {
  const missing = await fetch(`${base}/nope`);
  t.equal(missing.status, 404);
  t.equal((await missing.json()).error.code, 'NOT_FOUND');
  const wrong = await fetch(`${base}/hello`, { method: 'POST', body: '{}' });
  t.equal(wrong.status, 405);
  t.equal(wrong.headers.get('allow'), 'GET');
  t.equal((await wrong.json()).error.code, 'METHOD_NOT_ALLOWED');
});

/** Sends raw bytes and returns what comes back before `ms` of silence or the close. */
function exchange(request: string, ms = 300): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(server.port, '127.0.0.1');
    let received = '';
    let timer = setTimeout(() => socket.destroy(), ms);
    socket.on('data', (d) => {
      received += d.toString('latin1');
      clearTimeout(timer);
      timer = setTimeout(() => socket.destroy(), ms);
    });
    socket.on('close', () => resolve(received));
    socket.write(request);
  });
}

t.test('HEAD is answered as GET, with its Content-Length and without a body', async (t) => {
  const head = await exchange('HEAD /hello HTTP/1.1\r\nHost: x\r\n\r\n');
  t.match(head, /^HTTP\/1\.1 200 OK\r\n/);
  t.match(head, /\r\nContent-Length: 17\r\n/i);
  t.ok(head.endsWith('\r\n\r\n'), 'no body follows the headers');
  const wrong = await exchange('HEAD /echo HTTP/1.1\r\nHost: x\r\n\r\n');
  t.match(wrong, /^HTTP\/1\.1 405 Method Not Allowed\r\n/);
  t.ok(wrong.endsWith('\r\n\r\n'), 'an error to HEAD has no body either');
});

t.test('OPTIONS is a CORS preflight answered before routing, with the preflight headers', async (t) => {
  for (const path of ['/echo', '/nope']) {
    const res = await fetch(`${base}${path}`, { method: 'OPTIONS', headers: { origin: 'http://example.test', 'access-control-request-method': 'POST' } });
    t.equal(res.status, 200, path);
    t.equal(res.headers.get('access-control-allow-methods'), 'GET, POST', path);
    t.equal(await res.text(), '', path);
  }
});

t.test('a valid JSON body is parsed and validated', async (t) => {
  const res = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'x', tags: ['a'] }) });
  t.equal(res.status, 200);
  t.same(await res.json(), { name: 'x', tags: ['a'] });
});

t.test('malformed JSON is 400 MALFORMED_JSON', async (t) => {
  const res = await fetch(`${base}/echo`, { method: 'POST', body: '{"name":' });
  t.equal(res.status, 400);
  t.equal((await res.json()).error.code, 'MALFORMED_JSON');
});

t.test('a body that is not valid UTF-8 is 400 MALFORMED_JSON, not decoded with replacement characters', async (t) => {
  const res = await fetch(`${base}/echo`, { method: 'POST', body: Buffer.from([...Buffer.from('{"name":"'), 0xff, 0xfe, ...Buffer.from('"}')]) });
  t.equal(res.status, 400);
  t.same(await res.json(), { error: { code: 'MALFORMED_JSON', message: 'Malformed JSON in request body: the body is not valid UTF-8' } });
});

t.test('with wellFormedStrings, a lone UTF-16 surrogate escape is 400 VALIDATION_ERROR naming the field; a pair is accepted', async (t) => {
  const cases: Array<[string, string]> = [['{"name":"a\\ud800b"}', 'name'], ['{"name":"x","tags":["ok","\\udfff"]}', 'tags[1]'], ['{"name":"x","\\udbff":1}', '']];
  for (const [body, field] of cases) {
    const res = await fetch(`${base}/echo/well-formed`, { method: 'POST', body });
    t.equal(res.status, 400, body);
    const what = 'a string holds a lone UTF-16 surrogate (\\ud800-\\udfff not in a pair)';
    t.same(await res.json(), { error: { code: 'VALIDATION_ERROR', message: field ? `Invalid field "${field}": ${what}` : `Invalid request body: ${what}` } }, body);
  }
  const pair = await fetch(`${base}/echo/well-formed`, { method: 'POST', body: '{"name":"\\ud83e\\udd99"}' });
  t.same(await pair.json(), { name: '\u{1F999}' });
  const lax = await fetch(`${base}/echo`, { method: 'POST', body: '{"name":"a\\ud800b"}' });
  t.equal(lax.status, 200, 'without the option, the schema alone decides');
});

t.test('with maxDepth, nesting deeper is 400 VALIDATION_ERROR naming the top-level field, at any depth', async (t) => {
  const ok = await fetch(`${base}/echo/shallow`, { method: 'POST', body: '{"name":"x","extra":[{"a":1}]}' });
  t.equal(ok.status, 200, 'three levels are accepted');
  for (const extra of ['[[{"a":1}]]', '['.repeat(400) + ']'.repeat(400)]) {
    const res = await fetch(`${base}/echo/shallow`, { method: 'POST', body: `{"name":"x","extra":${extra}}` });
    t.equal(res.status, 400);
    t.same(await res.json(), { error: { code: 'VALIDATION_ERROR', message: 'Invalid field "extra": nested more than 3 levels deep' } });
  }
});

t.test('the first flaw in document order is named by its field, through arrays and keys holding / and ~', async (t) => {
  const any = compileBody(Type.Unknown(), { wellFormedStrings: true, maxDepth: 4 });
  const refusal = (value: unknown): string => {
    try {
      any.check(value);
      return 'accepted';
    } catch (err) {
      return `${(err as HttpError).message} ${JSON.stringify((err as HttpError).details)}`;
    }
  };
  const lone = 'a string holds a lone UTF-16 surrogate (\\ud800-\\udfff not in a pair)';
  t.equal(refusal({ a: [1, { 'b/c~d': ['ok', 'x\ud800'] }], z: '\udc00' }), `Invalid field "a[1].b/c~d[1]": ${lone} {"field":"a[1].b/c~d[1]"}`);
  t.equal(refusal({ a: 'fine', b: { ['k\ud800']: 1 } }), `Invalid field "b": ${lone} {"field":"b"}`, 'a key is reported at its object');
  t.equal(refusal('\ud800'), `Invalid request body: ${lone} {}`);
  t.equal(refusal({ ['\udfff']: 1 }), `Invalid request body: ${lone} {}`, 'a key of the body itself');
  t.equal(refusal({ a: 1, deep: [[[{}]]] }), 'Invalid field "deep": nested more than 4 levels deep {"field":"deep"}');
  t.equal(refusal({ a: [[[1]]], b: 'x\ud83e\udd99', c: [] }), 'accepted', 'four levels, a pair');
});

t.test('a wrong type is 400 VALIDATION_ERROR naming the field', async (t) => {
  const res = await fetch(`${base}/echo`, { method: 'POST', body: JSON.stringify({ name: 'x', tags: ['a', 3] }) });
  t.equal(res.status, 400);
  const body = await res.json();
  t.equal(body.error.code, 'VALIDATION_ERROR');
  t.match(body.error.message, /tags\[1\]/);
});

t.test('a non-JSON content type is 415 when strict', async (t) => {
  const res = await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: 'name=x' });
  t.equal(res.status, 415);
  t.equal((await res.json()).error.code, 'UNSUPPORTED_MEDIA_TYPE');
});

t.test('a body over the cap is 413, declared or streamed', async (t) => {
  const res = await fetch(`${base}/echo`, { method: 'POST', body: JSON.stringify({ name: 'x'.repeat(5000) }) });
  t.equal(res.status, 413);
  t.equal((await res.json()).error.code, 'BODY_TOO_LARGE');
  const chunked = new ReadableStream({
    start(c) { c.enqueue(new TextEncoder().encode(JSON.stringify({ name: 'y'.repeat(5000) }))); c.close(); },
  });
  const streamed = await fetch(`${base}/echo`, { method: 'POST', body: chunked, duplex: 'half' } as RequestInit);
  t.equal(streamed.status, 413);
});

t.test('a client still sending an 8 MiB body reads the 413, every time (the connection closes only after the body was read)', async (t) => {
  const body = Buffer.alloc(8 * 1024 * 1024, 0x20);
  const answers: string[] = [];
  for (let i = 0; i < 20; i++) {
    answers.push(await fetch(`${base}/echo`, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
      .then(async (res) => `${res.status} ${(await res.json()).error.code}`, (error: Error) => `${error.message}: ${String((error.cause as Error | undefined)?.message)}`));
  }
  t.same(answers, Array(20).fill('413 BODY_TOO_LARGE'));
  const after = await fetch(`${base}/hello`);
  t.equal(after.status, 200, 'the server serves on');
});

t.test('an HttpError is answered with its status and code', async (t) => {
  const res = await fetch(`${base}/teapot`);
  t.equal(res.status, 418);
  t.same(await res.json(), { error: { code: 'TEAPOT', message: 'short and stout' } });
});

t.test('an unexpected exception is 500 without internals', async (t) => {
  const res = await fetch(`${base}/boom`);
  t.equal(res.status, 500);
  const text = await res.text();
  t.notMatch(text, /secret internals/);
  t.equal(JSON.parse(text).error.code, 'INTERNAL');
});

t.test('an event stream sends whole events in order, each followed by a blank-line tail', async (t) => {
  const res = await fetch(`${base}/events`);
  t.equal(res.headers.get('content-type'), 'text/event-stream');
  t.equal(await res.text(), 'data: {"i":0}\n\n\n\ndata: {"i":1}\n\n\n\ndata: {"i":2}\n\n\n\nevent: done\ndata: [DONE]\n\n\n\n');
});

t.test('an event stream whose handler throws before the first event is answered with a plain error', async (t) => {
  const res = await fetch(`${base}/events/refused`);
  t.equal(res.status, 400);
  t.match(res.headers.get('content-type'), /application\/json/);
  t.same(await res.json(), { error: { code: 'REFUSED', message: 'refused before the first event' } });
});

t.test('an event stream whose handler throws after the first event ends with the error as its last event', async (t) => {
  const res = await fetch(`${base}/events/failed`);
  t.equal(res.status, 200);
  t.equal(res.headers.get('content-type'), 'text/event-stream');
  t.equal(await res.text(), 'data: {"i":0}\n\n\n\ndata: {"error":{"code":"FAILED","message":"failed after the first event"}}\n\n\n\n');
});

t.test('a client that disconnects aborts the request signal', async (t) => {
  const controller = new AbortController();
  const pending = fetch(`${base}/slow`, { signal: controller.signal }).catch(() => null);
  await slow.entered.promise;
  controller.abort();
  await pending;
  await slow.aborted.promise;
  t.pass('the handler saw its signal abort');
});

t.test('extra addresses listen on the same port', async (t) => {
  const both = await startHttpServer({
    host: '127.0.0.1', extraHosts: ['::1'], port: 0, maxBodyBytes: 1024, formatError,
    routes: [{ method: 'GET', path: '/hello', handler: () => ({ body: { hello: 'world' } }) }],
  });
  t.teardown(() => both.close());
  t.same(await (await fetch(`http://127.0.0.1:${both.port}/hello`)).json(), { hello: 'world' });
  t.same(await (await fetch(`http://[::1]:${both.port}/hello`)).json(), { hello: 'world' });
});
