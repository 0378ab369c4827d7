import t from 'tap';
import { HttpError } from '../../src/http/errors.js';
import { ResponseWriter, type ResponseSink } from '../../src/http/response-writer.js';

/** Records what a ResponseWriter writes, as uWS would receive it. */
class FakeResponse implements ResponseSink {
  readonly writes: string[] = [];
  /** Each write call's chunk, as uWS frames it (one HTTP chunk per call). */
  readonly chunks: Array<string | number[]> = [];
  ended: { body?: string; close?: boolean; reported?: number } | null = null;
  private aborted: (() => void) | null = null;
  private writable: ((offset: number) => boolean) | null = null;
  backpressure = false;
  onAborted(h: () => void) { this.aborted = h; }
  onWritable(h: (offset: number) => boolean) { this.writable = h; }
  /** Writes inside one cork leave in one send: they are recorded as one chunk. */
  private corkStart = -1;
  cork(cb: () => void) {
    this.corkStart = this.writes.length;
    cb();
    this.corkStart = -1;
  }
  writeStatus(s: string) { this.writes.push(`status ${s}`); }
  writeHeader(k: string, v: string) { this.writes.push(`${k}: ${v}`); }
  write(chunk: string | Uint8Array) {
    this.chunks.push(typeof chunk === 'string' ? chunk : [...chunk]);
    if (typeof chunk !== 'string') chunk = Buffer.from(chunk).toString('latin1');
    const last = this.writes.length - 1;
    if (this.corkStart >= 0 && last >= this.corkStart && this.writes[last].startsWith('chunk ')) this.writes[last] += chunk;
    else this.writes.push(`chunk ${chunk}`);
    return !this.backpressure;
  }
  end(body?: string, close?: boolean) { this.ended = { body, close }; }
  endWithoutBody(reported?: number, close?: boolean) { this.ended = { reported, close }; }
  closed = false;
  close() { this.closed = true; this.aborted?.(); }
  clientLeaves() { this.aborted?.(); }
  drain() { this.backpressure = false; this.writable?.(0); }
}

const CORS = [['Access-Control-Allow-Origin', '*']] as const;
const settings = (logged: HttpError[] = []) => ({
  formatError: (e: HttpError) => ({ status: e.status, body: { error: { code: e.code } } }),
  logError: (e: HttpError) => { logged.push(e); },
});

t.test('writes a JSON result with the default headers', async (t) => {
  const res = new FakeResponse();
  new ResponseWriter(res, { method: 'GET', path: '/x' }, settings(), CORS).writeResult({ body: { a: 1 } });
  t.same(res.writes, ['status 200 OK', 'Access-Control-Allow-Origin: *', 'Content-Type: application/json; charset=utf-8']);
  t.same(res.ended, { body: '{"a":1}', close: false });
});

t.test('HEAD gets the GET Content-Length and no body', async (t) => {
  const res = new FakeResponse();
  new ResponseWriter(res, { method: 'HEAD', path: '/x' }, settings(), CORS).writeResult({ body: { a: 1 } });
  t.same(res.ended, { reported: 7, close: false });
});

t.test('writes nothing after the client left, and the signal is aborted', async (t) => {
  const res = new FakeResponse();
  const writer = new ResponseWriter(res, { method: 'GET', path: '/x' }, settings(), CORS);
  res.clientLeaves();
  t.equal(writer.signal.aborted, true);
  t.equal(writer.isOpen, false);
  writer.writeResult({ body: {} });
  t.same(res.writes, []);
  t.equal(res.ended, null);
});

t.test('an internal error is logged with its cause and answered 500 without it', async (t) => {
  const res = new FakeResponse();
  const logged: HttpError[] = [];
  new ResponseWriter(res, { method: 'GET', path: '/x' }, settings(logged), CORS).writeError(new Error('secret'));
  t.equal(logged.length, 1);
  t.equal((logged[0]!.cause as Error).message, 'secret');
  t.same(res.ended, { body: '{"error":{"code":"INTERNAL"}}', close: false });
});

t.test('a 413 closes the connection', async (t) => {
  const res = new FakeResponse();
  new ResponseWriter(res, { method: 'POST', path: '/x' }, settings(), CORS).writeError(new HttpError(413, 'BODY_TOO_LARGE', 'big'));
  t.equal(res.ended?.close, true);
});

t.test('an event stream sends its head with the first event; a failure before it is a plain error', async (t) => {
  const res = new FakeResponse();
  const writer = new ResponseWriter(res, { method: 'GET', path: '/x' }, settings(), CORS);
  writer.openEventStream();
  t.same(res.writes, []);
  await writer.fail(new HttpError(400, 'BAD', 'bad'));
  t.equal(res.writes[0], 'status 400 Bad Request');
  t.same(res.ended, { body: '{"error":{"code":"BAD"}}', close: false });
});

t.test('a failure after the first event is sent as the last event', async (t) => {
  const res = new FakeResponse();
  const writer = new ResponseWriter(res, { method: 'GET', path: '/x' }, settings(), CORS);
  const stream = writer.openEventStream();
  await stream.send('1');
  await writer.fail(new HttpError(400, 'BAD', 'bad'));
  t.same(res.writes.slice(0, 4), ['status 200 OK', 'Access-Control-Allow-Origin: *', 'Content-Type: text/event-stream', 'Cache-Control: no-cache']);
  t.same(res.writes.slice(4), ['chunk data: 1\n\n\n\n', 'chunk data: {"error":{"code":"BAD"}}\n\n\n\n']);
  t.same(res.ended, { body: undefined, close: undefined });
});

t.test('an event leaves as its own chunk, then a blank-line tail, so the event is complete on the wire at once', async (t) => {
  const res = new FakeResponse();
  const stream = new ResponseWriter(res, { method: 'GET', path: '/x' }, settings(), CORS).openEventStream({ ping: false });
  await stream.send('1');
  await stream.send({ event: 'message_stop', data: '{}' });
  await stream.sendRaw('data: replayed\n\n', true);
  t.same(res.chunks, ['data: 1\n\n', '\n\n', 'event: message_stop\ndata: {}\n\n', '\n\n', 'data: replayed\n\n', '\n\n']);
});

t.test('relayed bytes leave as two chunks, all but their last code point then it, so their lines are complete at once', async (t) => {
  const res = new FakeResponse();
  const stream = new ResponseWriter(res, { method: 'GET', path: '/x' }, settings(), CORS).openEventStream({ ping: false });
  await stream.sendRaw('relayed text ending in 🙂');
  await stream.sendRaw(new Uint8Array([1, 2, 3]));
  await stream.sendRaw('x');
  t.same(res.chunks, ['relayed text ending in ', '🙂', [1, 2], [3], 'x'], 'a surrogate pair stays whole; a single byte stays one chunk');
});

t.test('a stream opened but not started yields to the handler\'s result', async (t) => {
  const res = new FakeResponse();
  const writer = new ResponseWriter(res, { method: 'GET', path: '/x' }, settings(), CORS);
  writer.openEventStream();
  t.equal(writer.streamStarted, false);
  writer.finish({ status: 429, body: { type: 'error' } });
  t.equal(res.writes[0], 'status 429 Too Many Requests');
  t.same(res.ended, { body: '{"type":"error"}', close: false });
});

t.test('a full socket holds the next event until it drains', async (t) => {
  const res = new FakeResponse();
  const stream = new ResponseWriter(res, { method: 'GET', path: '/x' }, settings(), CORS).openEventStream();
  res.backpressure = true;
  let firstDone = false;
  const first = stream.send('1').then(() => { firstDone = true; });
  await Promise.resolve();
  t.equal(firstDone, false);
  res.drain();
  await first;
  t.equal(firstDone, true);
});

t.test('write timeout (-to): a client that takes nothing that long while the socket is full loses its connection', async (t) => {
  const res = new FakeResponse();
  const writer = new ResponseWriter(res, { method: 'GET', path: '/x' }, { ...settings(), writeTimeoutMs: 30 }, CORS);
  const stream = writer.openEventStream();
  const aborted = new Promise<void>((resolve) => writer.signal.addEventListener('abort', () => resolve()));
  res.backpressure = true;
  const started = Date.now();
  await stream.send('1');
  await aborted;
  t.ok(Date.now() - started >= 25, 'not before the timeout');
  t.equal(res.closed, true, 'the connection is closed');
  t.equal(writer.isOpen, false);
  t.equal(stream.closed, true, 'the handler sees its stream closed');
});

t.test('write timeout: a client that drains in time keeps its connection', async (t) => {
  const res = new FakeResponse();
  const writer = new ResponseWriter(res, { method: 'GET', path: '/x' }, { ...settings(), writeTimeoutMs: 200 }, CORS);
  const stream = writer.openEventStream();
  res.backpressure = true;
  const sent = stream.send('1');
  res.drain();
  await sent;
  await stream.send('2');
  stream.end();
  t.equal(res.closed, false);
  t.same(res.writes.slice(-2), ['chunk data: 1\n\n\n\n', 'chunk data: 2\n\n\n\n']);
});
