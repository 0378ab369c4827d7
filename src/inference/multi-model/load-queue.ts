// The queue of requests waiting for a model to be loaded (llama-server's server_lru_sched): one
// entry per model, shared by every request waiting for it, served first come first served. With
// --models-max N, the entry at the head loads its model once fewer than N models run; while more
// entries wait than there are free places, idle models are given up, least recently used first.

export interface QueueEntry {
  model: string;
  /** Requests waiting for this model. */
  waiters: number;
  /** One of the waiters is loading the model now. */
  loading: boolean;
}

/** What the queue needs to know of the models. */
export interface ModelPlaces {
  /** --models-max; <= 0 is no limit. */
  readonly max: number;
  /** Models whose process runs (loading, loaded, or stopping). */
  running(): number;
  /** Of those, the ones asked to stop. */
  stopping(): number;
  /** Whether a model's process runs. */
  isRunning(model: string): boolean;
  /** The idle, loaded model used least recently that nobody waits for, or null. */
  victim(excluded: (model: string) => boolean): string | null;
  /** Asks a model's process to stop. */
  stop(model: string): void;
}

export class LoadQueue {
  private readonly entries: QueueEntry[] = [];

  constructor(private readonly places: ModelPlaces) {}

  has(model: string): boolean {
    return this.find(model) !== undefined;
  }

  /** A request starts waiting for `model`; requests for the same model share its entry. */
  join(model: string): void {
    const entry = this.find(model);
    if (entry) entry.waiters++;
    else this.entries.push({ model, waiters: 1, loading: false });
  }

  /** A request stops waiting; the entry goes with its last waiter. */
  leave(model: string): void {
    const i = this.entries.findIndex((e) => e.model === model);
    if (i < 0) return;
    if (--this.entries[i]!.waiters <= 0) this.entries.splice(i, 1);
  }

  hasCapacity(): boolean {
    return this.places.max <= 0 || this.places.running() < this.places.max;
  }

  /** True when it is `model`'s turn to load, a place is free, and nobody loads it yet; claims the load. */
  tryClaim(model: string): boolean {
    const head = this.entries[0];
    if (!head || head.model !== model || head.loading || !this.hasCapacity()) return false;
    head.loading = true;
    return true;
  }

  /** A failed load puts the entry back in line; a good one keeps it until its waiters leave. */
  claimDone(model: string, ok: boolean): void {
    if (ok) return;
    const entry = this.find(model);
    if (entry) entry.loading = false;
  }

  /** Stops idle models while the waiting entries outnumber the places free or being freed. */
  tick(): void {
    const { max } = this.places;
    if (max <= 0 || this.entries.length === 0) return;
    let needed = 0;
    let claimed = 0;
    for (const e of this.entries) {
      if (!e.loading) needed++;
      else if (!this.places.isRunning(e.model)) claimed++;
    }
    let free = max - this.places.running() + this.places.stopping() - claimed;
    while (free < needed) {
      const victim = this.places.victim((m) => this.has(m));
      if (victim === null) return;
      this.places.stop(victim);
      free++;
    }
  }

  private find(model: string): QueueEntry | undefined {
    return this.entries.find((e) => e.model === model);
  }
}
