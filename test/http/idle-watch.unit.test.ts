// IdleWatch: many idle deadlines on one timer (the read timeout of request bodies).
import t from 'tap';
import { IdleWatch } from '../../src/http/idle-watch.js';

// The watch's timer never keeps the process alive: the test's own does while it waits.
const keepAlive = setInterval(() => {}, 1000);
t.teardown(() => clearInterval(keepAlive));

const idleAfter = (watch: IdleWatch, touchedAt: () => number): Promise<number> => new Promise((resolve) => {
  watch.watch(() => resolve(performance.now() - touchedAt()));
});

t.test('a thing left untouched is idle after ms (and not before); touching it starts its quiet time again', async (t) => {
  const watch = new IdleWatch(60);
  t.teardown(() => watch.close());
  t.equal(watch.stepMs, 10, 'a tenth of ms');
  let lastTouch = performance.now();
  let touchedIdle = false;
  const touched = watch.watch(() => { touchedIdle = true; });
  const toucher = setInterval(() => touched.touch(), 20);
  // The untouched thing goes idle while the other, touched every 20 ms, stays; for 300 ms more too.
  const quietFor = await idleAfter(watch, () => lastTouch);
  t.ok(quietFor >= 60, `idle ${quietFor.toFixed(0)} ms after its start`);
  await new Promise((r) => setTimeout(r, 300));
  clearInterval(toucher);
  t.equal(touchedIdle, false, 'touched every 20 ms: never idle');
  touched.stop();
  lastTouch = performance.now();
  const later = await idleAfter(watch, () => lastTouch);
  t.ok(later >= 60, `a later watch on the same timer is idle too (${later.toFixed(0)} ms)`);
  t.equal(touchedIdle, false, 'the stopped one never was');
});

t.test('steps stay within 10 ms and 1 s; a non-positive ms is refused', async (t) => {
  t.equal(new IdleWatch(50).stepMs, 10);
  t.equal(new IdleWatch(3_600_000).stepMs, 1000);
  t.throws(() => new IdleWatch(0), RangeError);
});
