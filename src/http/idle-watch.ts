// IdleWatch: many "nothing happened for `ms`" deadlines kept by one timer (llama-server's read
// timeout, -to, on each request body being read), instead of a timer set and cleared per request
// and again per chunk: under many small requests those timers were a measurable part of each
// request's cost (docs/benchmarks.md, "/tokenize: the request path").
//
// Contract: a watched thing that is not touched for `ms` is reported idle (its onIdle runs, once)
// between `ms` and `ms` + one step later; a touch starts its quiet time again; stop() ends the
// watch (onIdle never runs after it). The step is a tenth of `ms`, at least 10 ms and at most
// 1 s. The timer runs only while something is watched and never keeps the process alive.
export class IdleWatch {
  readonly stepMs: number;
  /** Steps taken since the watch began; a watched thing remembers the one it was last touched in. */
  private tick = 0;
  private readonly watched = new Set<Watched>();
  private timer: NodeJS.Timeout | null = null;
  /** Whole steps of quiet after which a thing is idle: one more than `ms` covers, since a touch may come just before a step. */
  private readonly idleSteps: number;

  constructor(readonly ms: number) {
    if (!(ms > 0)) throw new RangeError(`IdleWatch: ms must be positive, got ${ms}`);
    this.stepMs = Math.min(1000, Math.max(10, Math.floor(ms / 10)));
    this.idleSteps = Math.ceil(ms / this.stepMs) + 1;
  }

  /** Starts watching; `onIdle` runs once if the thing stays untouched, unless stopped first. */
  watch(onIdle: () => void): Watched {
    const w = new Watched(this, onIdle);
    this.watched.add(w);
    if (!this.timer) {
      this.timer = setInterval(() => this.step(), this.stepMs);
      this.timer.unref();
    }
    return w;
  }

  /** Stops every watch (a closing server): no onIdle runs afterwards. */
  close(): void {
    this.watched.clear();
    this.stopTimer();
  }

  /** @internal */
  now(): number {
    return this.tick;
  }

  /** @internal */
  forget(w: Watched): void {
    this.watched.delete(w);
  }

  private step(): void {
    this.tick++;
    for (const w of this.watched) {
      if (this.tick - w.lastTick < this.idleSteps) continue;
      this.watched.delete(w);
      w.onIdle();
    }
    if (this.watched.size === 0) this.stopTimer();
  }

  private stopTimer(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

export class Watched {
  /** @internal */
  lastTick: number;

  constructor(private readonly owner: IdleWatch, /** @internal */ readonly onIdle: () => void) {
    this.lastTick = owner.now();
  }

  /** Something happened: the quiet time starts again. */
  touch(): void {
    this.lastTick = this.owner.now();
  }

  stop(): void {
    this.owner.forget(this);
  }
}
