// --sse-ping-interval: a stream silent that long after an event gets llama-server's ping, the SSE
// comment `:\n\n`, again after each further interval; none before the first event, none once
// it ended, none when the interval is 0 or less.
import t from 'tap';
import { createEventStream, SSE_PING, type EventSink } from '../../src/http/event-stream.js';

// Ping timers are unref'd (they never hold a process open); in a server the socket does that.
const keepAlive = setInterval(() => {}, 1000);
t.teardown(() => clearInterval(keepAlive));

/** Records writes with the milliseconds since the sink was made. */
function recordingSink(): EventSink & { writes: Array<{ chunk: string; at: number }>; next: () => Promise<string>; ended: boolean } {
  const started = Date.now();
  const writes: Array<{ chunk: string; at: number }> = [];
  let waiting: ((chunk: string) => void) | null = null;
  let ended = false;
  return {
    writes,
    get ended() { return ended; },
    write(chunk) {
      const text = typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString();
      writes.push({ chunk: text, at: Date.now() - started });
      waiting?.(text);
      waiting = null;
      return true;
    },
    whenWritable: (ready) => ready(),
    end() { ended = true; },
    isOpen: () => !ended,
    hasStarted: () => writes.length > 0,
    next: () => new Promise((resolve) => { waiting = resolve; }),
  };
}

t.test('the ping is `:\\n\\n`, sent after each interval of silence that follows an event', async (t) => {
  const sink = recordingSink();
  const stream = createEventStream(sink, { pingIntervalMs: 60 });
  t.equal(SSE_PING, ':\n\n');
  await stream.send('{"a":1}');
  t.equal(await sink.next(), ':\n\n');
  t.equal(await sink.next(), ':\n\n', 'and again after the next interval');
  await stream.send('{"a":2}');
  t.equal(await sink.next(), ':\n\n', 'an event restarts the interval');
  stream.end();
  const [first, ping1, ping2, second, ping3] = sink.writes;
  t.same(sink.writes.map((w) => w.chunk), ['data: {"a":1}\n\n', ':\n\n', ':\n\n', 'data: {"a":2}\n\n', ':\n\n']);
  t.ok(ping1!.at - first!.at >= 55, `first ping after the interval (${ping1!.at - first!.at} ms)`);
  t.ok(ping2!.at - ping1!.at >= 55, 'second ping one interval later');
  t.ok(ping3!.at - second!.at >= 55, 'the interval counts from the last event');
});

t.test('no ping before the first event, none after the end, none when disabled', async (t) => {
  const sink = recordingSink();
  const stream = createEventStream(sink, { pingIntervalMs: 20 });
  const quietSink = recordingSink();
  const quiet = createEventStream(quietSink, { pingIntervalMs: 0 });
  // Three intervals with nothing sent: the first event is what starts the pings.
  await new Promise((resolve) => setTimeout(resolve, 70));
  t.same(sink.writes, []);
  await stream.send('x');
  stream.end();
  await new Promise((resolve) => setTimeout(resolve, 70));
  t.same(sink.writes.map((w) => w.chunk), ['data: x\n\n'], 'ending stops the pings');
  await quiet.send('y');
  await new Promise((resolve) => setTimeout(resolve, 70));
  t.same(quietSink.writes.map((w) => w.chunk), ['data: y\n\n'], 'an interval of 0 never pings');
});
