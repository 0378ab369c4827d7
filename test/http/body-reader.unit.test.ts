import t from 'tap';
import { readBody, type BodyOutcome, type BodySource } from '../../src/http/body-reader.js';

/** A body source that delivers the given chunks when `flush` is called. */
function source(chunks: string[]): BodySource & { flush(): void } {
  let handler: ((chunk: ArrayBuffer, isLast: boolean) => void) | null = null;
  return {
    onData(h) { handler = h; },
    flush() {
      chunks.forEach((c, i) => {
        const bytes = new TextEncoder().encode(c);
        handler!(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength), i === chunks.length - 1);
      });
    },
  };
}

function read(chunks: string[], declared: number, max: number, closed = false): BodyOutcome[] {
  const outcomes: BodyOutcome[] = [];
  const src = source(chunks);
  readBody(src, declared, max, () => closed, (o) => outcomes.push(o));
  src.flush();
  return outcomes;
}

t.test('joins the chunks of a body within the cap', async (t) => {
  const [outcome, ...rest] = read(['{"a":', '1}'], 7, 16);
  t.same(rest, []);
  t.equal(outcome!.kind, 'body');
  t.equal(outcome!.kind === 'body' && outcome!.body.toString(), '{"a":1}');
});

t.test('a declared length over the cap is refused before reading', async (t) => {
  const outcomes: BodyOutcome[] = [];
  let listened = false;
  readBody({ onData() { listened = true; } }, 17, 16, () => false, (o) => outcomes.push(o));
  t.same(outcomes, [{ kind: 'too-large' }]);
  t.equal(listened, false);
});

t.test('a body that grows past the cap is refused once, and later chunks are ignored', async (t) => {
  t.same(read(['0123456789', '0123456789', 'x'], 0, 16), [{ kind: 'too-large' }]);
});

t.test('a body exactly at the cap is accepted', async (t) => {
  const [outcome] = read(['0123456789abcdef'], 16, 16);
  t.equal(outcome!.kind === 'body' && outcome!.body.length, 16);
});

t.test('nothing is delivered after the client went away', async (t) => {
  t.same(read(['{}'], 2, 16, true), []);
});
