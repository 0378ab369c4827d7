// Every streaming route's events are complete on the wire when they are sent: a client that
// reads the body in whole HTTP chunks (Python's urllib3, strict SSE parsers on it) sees each event
// as soon as the server wrote it, not with the next one. Read over a raw socket, chunk by chunk,
// while the server holds each request's later tokens: whenever bytes arrive, the whole chunks so
// far end where an event ends; and the body splits on blank lines into whole events only.
import { connect } from 'node:net';
import t from 'tap';
import type { InferenceService } from '../../src/inference/service/service.js';
import { ensureAudioProjector } from '../fixtures/audio-projector.js';
import { ensureTestModels } from '../fixtures/models.js';
import { wholeChunks } from '../helpers/chunked.js';
import { startTestServer, type TestServer } from '../helpers/inference-server.js';
import { wav } from '../helpers/wav.js';

const models = await ensureTestModels();

/**
 * Holds a request's tokens after its first with text (an empty one may send no event), and the
 * request's end, until released.
 */
function holdAfterFirstToken(service: InferenceService): { firstToken: Promise<void>; release(): void } {
  const startAll = service.startAll;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let firstToken!: () => void;
  const first = new Promise<void>((resolve) => (firstToken = resolve));
  let isReleased = false;
  void released.then(() => (isReleased = true));
  service.startAll = async (specs, signal, tenant, onToken) => {
    let passed = false;
    const held: Array<() => void> = [];
    const gated = onToken && ((index: number) => {
      const deliver = onToken(index);
      return (token: Parameters<typeof deliver>[0]) => {
        if (isReleased) return deliver(token);
        if (passed) return void held.push(() => deliver(token));
        deliver(token);
        if (token.text === '') return;
        passed = true;
        firstToken();
      };
    });
    const runs = await startAll.call(service, specs, signal, tenant, gated);
    void released.then(() => held.forEach((deliver) => deliver()));
    return runs.map((run) => run.then(async (outcome) => {
      // A task that ended before a token with text has sent all it will before the release.
      firstToken();
      await released;
      return outcome;
    }));
  };
  return {
    firstToken: first,
    release: () => {
      service.startAll = startAll;
      release();
    },
  };
}

interface RawRequest {
  path: string;
  contentType: string;
  body: Buffer;
}

/** A JSON request, greedy and to its token limit, so that every run sends the same events. */
const json = (path: string, body: object): RawRequest => ({ path, contentType: 'application/json', body: Buffer.from(JSON.stringify({ ...body, temperature: 0, ignore_eos: true })) });

/**
 * Sends `request` over a raw socket and reads its chunked body: at each arrival of bytes, the
 * whole chunks so far must end where an event ends (or hold nothing yet). Resolves to the body
 * of whole chunks once the first token's events are in and, after `release`, the whole body.
 */
async function readWhileHeld(t: Test, server: TestServer, request: RawRequest): Promise<{ held: string; whole: string }> {
  const gate = holdAfterFirstToken(server.server.host.ready());
  t.teardown(() => gate.release());
  const socket = connect(Number(new URL(server.base).port), '127.0.0.1');
  t.teardown(() => socket.destroy());
  socket.setEncoding('latin1');
  let received = '';
  const body = (): string => Buffer.from(wholeChunks(received).body, 'latin1').toString('utf8');
  let waiting: { enough: () => boolean; resolve: () => void } | null = null;
  const torn: string[] = [];
  socket.on('data', (d: string) => {
    received += d;
    const text = body();
    if (text !== '' && !text.endsWith('\n\n')) torn.push(text);
    if (waiting?.enough()) waiting.resolve();
  });
  // A deadline, not a pause: without complete chunks the awaited bytes would never arrive.
  const until = (enough: () => boolean, what: string): Promise<void> => new Promise((resolve, reject) => {
    const deadline = setTimeout(() => reject(new Error(`${what} did not arrive in whole chunks: ${JSON.stringify(received)}`)), 20_000);
    waiting = { enough, resolve: () => { clearTimeout(deadline); resolve(); } };
    if (enough()) waiting.resolve();
  });
  const head = `POST ${request.path} HTTP/1.1\r\nHost: x\r\nContent-Type: ${request.contentType}\r\nContent-Length: ${request.body.length}\r\n\r\n`;
  socket.write(Buffer.concat([Buffer.from(head, 'latin1'), request.body]));
  await gate.firstToken;
  // The first token's events are sent once it is in: wait for the first whole event.
  await until(() => body().includes('\n\n'), 'the first event');
  const held = body();
  gate.release();
  await until(() => wholeChunks(received).ended, 'the end of the stream');
  t.same(torn, [], 'whenever bytes arrived, the whole chunks ended with a whole event');
  return { held, whole: body() };
}

type Test = Parameters<Parameters<typeof t.test>[1]>[0];

/** The events of a body split on blank lines: empty parts (the tails) skipped, every other a whole event. */
function events(t: Test, text: string): string[] {
  const blocks = text.split('\n\n').filter((block) => block !== '');
  for (const block of blocks) t.match(block, /^(event: \S+\n)?data: .+$/, 'a whole event');
  return blocks;
}

const server = await startTestServer(models.chat, { ctxSize: 2048, parallel: 2 });
t.teardown(() => server.close());

const routes: Array<[string, RawRequest, RegExp]> = [
  ['/completion', json('/completion', { prompt: 'Hello', n_predict: 4, stream: true }), /"stop":true/],
  ['/infill', json('/infill', { input_prefix: 'def f(', input_suffix: '):', n_predict: 4, stream: true }), /"stop":true/],
  ['/v1/completions', json('/v1/completions', { prompt: 'Hello', max_tokens: 4, stream: true }), /^data: \[DONE\]$/],
  ['/v1/chat/completions', json('/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 4, stream: true }), /^data: \[DONE\]$/],
  ['/v1/responses', json('/v1/responses', { input: 'Hi', max_output_tokens: 4, stream: true }), /^event: response\.completed\n/],
  ['/v1/messages', json('/v1/messages', { model: 'm', max_tokens: 4, messages: [{ role: 'user', content: 'Hi' }], stream: true }), /^event: message_stop\n/],
];

for (const [path, request, last] of routes) {
  t.test(`${path}: each event is complete on the wire when it is sent`, async (t) => {
    const { held, whole } = await readWhileHeld(t, server, request);
    t.ok(events(t, held).length >= 1, 'the first token\'s events arrived whole while the rest were held');
    const all = events(t, whole);
    t.match(all.at(-1), last, 'the stream ran to its last event');
    t.ok(whole.startsWith(held), 'the held events began the body');
  });
}

t.test('/v1/audio/transcriptions: each event is complete on the wire when it is sent', async (t) => {
  const audio = await startTestServer(models.chat, { ctxSize: 2048, parallel: 1, mmproj: await ensureAudioProjector(), maxBodyBytes: 8 << 20 });
  t.teardown(() => audio.close());
  const form = new FormData();
  form.append('file', new Blob([wav(0.1)], { type: 'audio/wav' }), 'speech.wav');
  form.append('max_tokens', '4');
  form.append('stream', 'true');
  form.append('temperature', '0');
  const encoded = new Response(form);
  const request = { path: '/v1/audio/transcriptions', contentType: encoded.headers.get('content-type')!, body: Buffer.from(await encoded.arrayBuffer()) };
  const { held, whole } = await readWhileHeld(t, audio, request);
  t.ok(events(t, held).length >= 1, 'the first token\'s events arrived whole while the rest were held');
  t.match(events(t, whole).at(-1), /^data: \[DONE\]$/, 'the stream ran to its last event');
});

