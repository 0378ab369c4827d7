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

function read(chunks: string[], declared: number, max: number, closed = false, drain = { bytes: 1000, ms: 60_000 }): BodyOutcome[] {
  const outcomes: BodyOutcome[] = [];
  const src = source(chunks);
  readBody(src, declared, max, () => closed, (o) => outcomes.push(o), undefined, drain);
  src.flush();
  return outcomes;
}

t.test('joins the chunks of a body within the cap', async (t) => {
  const [outcome, ...rest] = read(['{"a":', '1}'], 7, 16);
  t.same(rest, []);
  t.equal(outcome!.kind, 'body');
  t.equal(outcome!.kind === 'body' && outcome!.body.toString(), '{"a":1}');
});

t.test('a declared length beyond the cap and the drain bound is refused before reading', async (t) => {
  const outcomes: BodyOutcome[] = [];
  let listened = false;
  readBody({ onData() { listened = true; } }, 1017, 16, () => false, (o) => outcomes.push(o), undefined, { bytes: 1000, ms: 60_000 });
  t.same(outcomes, [{ kind: 'too-large' }]);
  t.equal(listened, false);
});

t.test('a refused body is read to its end before the refusal, so that closing the connection finds nothing unread', async (t) => {
  const outcomes: BodyOutcome[] = [];
  const src = source(['0123456789', '0123456789', 'x']);
  let delivered = 0;
  readBody({ onData(h) { src.onData((chunk, isLast) => { delivered++; h(chunk, isLast); if (!isLast) t.same(outcomes, [], `nothing reported after chunk ${delivered}`); }); } },
    0, 16, () => false, (o) => outcomes.push(o), undefined, { bytes: 1000, ms: 60_000 });
  src.flush();
  t.equal(delivered, 3);
  t.same(outcomes, [{ kind: 'too-large' }], 'reported once, after the last chunk');
  t.same(read(['x'.repeat(17)], 17, 16), [{ kind: 'too-large' }], 'a declared length over the cap is drained the same way');
});

t.test('a refused body is thrown away only up to the drain bound: past it the refusal comes at once', async (t) => {
  const outcomes: Array<[BodyOutcome, number]> = [];
  const src = source(['0123456789', '0123456789', 'x'.repeat(20), 'the rest']);
  let delivered = 0;
  readBody({ onData(h) { src.onData((chunk, isLast) => { delivered++; h(chunk, isLast); }); } },
    0, 16, () => false, (o) => outcomes.push([o, delivered]), undefined, { bytes: 10, ms: 60_000 });
  src.flush();
  t.same(outcomes, [[{ kind: 'too-large' }, 3]], 'refused with the chunk that went 10 bytes past the cap, not at the last one');
});

t.test('a refused body that stops arriving is refused when the drain time runs out', async (t) => {
  const outcomes: BodyOutcome[] = [];
  const src = source(['0123456789', '0123456789']);
  let first = true;
  readBody({ onData(h) { src.onData((chunk, isLast) => { if (first) h(chunk, false); first = false; }); } },
    30, 16, () => false, (o) => outcomes.push(o), undefined, { bytes: 1000, ms: 20 });
  src.flush();
  t.same(outcomes, []);
  await new Promise((resolve) => setTimeout(resolve, 60));
  t.same(outcomes, [{ kind: 'too-large' }]);
});

t.test('a body exactly at the cap is accepted', async (t) => {
  const [outcome] = read(['0123456789abcdef'], 16, 16);
  t.equal(outcome!.kind === 'body' && outcome!.body.length, 16);
});

t.test('nothing is delivered after the client went away', async (t) => {
  t.same(read(['{}'], 2, 16, true), []);
});
