// Time source of the service. Every expiry decision (access tokens, refresh tokens, sessions,
// one-time codes, send windows) reads this clock and passes the instant to SQL explicitly, so
// tests can move time forward without waiting. SQL never calls now() for such decisions.

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * A clock that stands still until `advance` moves it, for tests and benchmarks. Its time lives in
 * a SharedArrayBuffer, so the same clock can be handed to the service's worker threads
 * (`new ManualClock(clock.shared)` there): every thread reads the same instant, and an advance
 * made by one is seen by all at once.
 */
export class ManualClock implements Clock {
  private readonly ms: BigInt64Array;

  /** Starts at `start` ms (default: the real time now), or joins the clock whose `shared` this is. */
  constructor(start: number | SharedArrayBuffer = Date.now()) {
    if (start instanceof SharedArrayBuffer) {
      this.ms = new BigInt64Array(start);
    } else {
      this.ms = new BigInt64Array(new SharedArrayBuffer(8));
      Atomics.store(this.ms, 0, BigInt(Math.floor(start)));
    }
  }

  /** The shared memory holding this clock's time. */
  get shared(): SharedArrayBuffer {
    return this.ms.buffer as SharedArrayBuffer;
  }

  now(): number {
    return Number(Atomics.load(this.ms, 0));
  }

  advance(ms: number): void {
    Atomics.add(this.ms, 0, BigInt(Math.floor(ms)));
  }
}
