import t from 'tap';
import type { EventStream } from '../../src/http/event-stream.js';
import type { GeneratedToken } from '../../src/inference/engine/engine.js';
import { TokenStream } from '../../src/inference/handlers/token-stream.js';

function slowStream() {
  const sent: string[] = [];
  let release: () => void = () => {};
  const stream: EventStream = {
    closed: false,
    send: (data) => { sent.push(data); return new Promise<void>((r) => { release = r; }); },
    sendRaw: async () => {},
    end: () => {},
  };
  return { stream, sent, release: () => release() };
}

const tok = (text: string, token = 1): GeneratedToken => ({ token, text });

t.test('tokens that arrive while a chunk waits for the client wait in order, then go one per event', async (t) => {
  const { stream, sent, release } = slowStream();
  const ts = new TokenStream(stream, (batch) => batch.map((b) => b.text).join(''));
  ts.push(tok('a'));
  for (const s of ['b', 'c', 'd', 'e']) ts.push(tok(s));
  t.same(sent, ['a'], 'one chunk in flight');
  for (const expected of [['a', 'b'], ['a', 'b', 'c'], ['a', 'b', 'c', 'd'], ['a', 'b', 'c', 'd', 'e']]) {
    release();
    await new Promise((r) => setImmediate(r));
    t.same(sent, expected, 'the next token once the client took the last');
  }
  release();
  await ts.flush();
  t.same(sent, ['a', 'b', 'c', 'd', 'e']);
});

t.test('flush settles when the renderer sends nothing', async (t) => {
  const { stream, sent } = slowStream();
  const ts = new TokenStream(stream, () => null);
  ts.push(tok(''));
  await ts.flush();
  t.same(sent, []);
  ts.push(tok('', 2));
  await ts.flush();
  t.pass('a second round settles too');
});
