// The last published batches, kept for subscribers that missed some (vLLM's buffer_steps, 10000 by
// default): a bounded list of (sequence number, payload), oldest dropped first.

export interface BufferedBatch {
  seq: bigint;
  payload: Uint8Array;
}

export class ReplayBuffer {
  private batches: BufferedBatch[] = [];
  /** Index of the oldest kept batch in `batches` (dropped ones are cut off in chunks). */
  private start = 0;

  constructor(private readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`replay buffer capacity must be a positive integer, got ${capacity}`);
  }

  push(batch: BufferedBatch): void {
    this.batches.push(batch);
    if (this.batches.length - this.start > this.capacity) this.start++;
    if (this.start >= this.capacity) {
      this.batches = this.batches.slice(this.start);
      this.start = 0;
    }
  }

  /** The kept batches whose sequence number is `from` or later, oldest first. */
  since(from: bigint): BufferedBatch[] {
    const kept = this.batches.slice(this.start);
    const first = kept.findIndex((b) => b.seq >= from);
    return first < 0 ? [] : kept.slice(first);
  }

  get size(): number {
    return this.batches.length - this.start;
  }
}
