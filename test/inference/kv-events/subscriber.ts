// A test's own view of a KV-event stream: a ZMQ SUB socket and a DEALER for replay, decoding
// batches with msgpack as a router does. Nothing here comes from src/.
import { Dealer, Subscriber } from 'zeromq';
import { decode } from '@msgpack/msgpack';

export interface DecodedBatch {
  topic: string | null;
  seq: bigint;
  ts: number;
  events: unknown[][];
  /** The payload's bytes as received. */
  payload: Buffer;
}

export function decodeBatch(topic: string | null, seq: Buffer, payload: Buffer): DecodedBatch {
  const batch = decode(payload, { useBigInt64: true }) as unknown[];
  return { topic, seq: seq.readBigInt64BE(), ts: batch[0] as number, events: batch[1] as unknown[][], payload };
}

/** Block hashes as bigints whatever width msgpack gave them. */
export function keys(list: unknown): bigint[] {
  return (list as (number | bigint)[]).map((k) => BigInt(k));
}

/**
 * A SUB socket read from the start, as a router reads it: ZMQ hands a new publisher its
 * subscription only while the application calls into the socket, so a SUB nobody reads from
 * receives nothing. Batches wait in order for next().
 */
export class TestSubscriber {
  readonly sub = new Subscriber({ linger: 0 });
  private readonly received: DecodedBatch[] = [];
  private waiting: ((b: DecodedBatch) => void) | null = null;

  constructor() {
    this.sub.subscribe('kv@');
    void this.read();
  }

  private async read(): Promise<void> {
    try {
      for await (const [topic, seq, payload] of this.sub) {
        const batch = decodeBatch(topic!.toString(), seq!, payload!);
        const waiter = this.waiting;
        this.waiting = null;
        if (waiter) waiter(batch);
        else this.received.push(batch);
      }
    } catch {
      // Closed.
    }
  }

  next(): Promise<DecodedBatch> {
    const batch = this.received.shift();
    if (batch) return Promise.resolve(batch);
    return new Promise((resolve) => (this.waiting = resolve));
  }

  close(): void {
    this.sub.close();
  }
}

/** Asks a replay endpoint for every batch from `from` on, as llm-d does: [ '', seq ] from a DEALER. */
export async function replay(endpoint: string, from: bigint): Promise<DecodedBatch[]> {
  const dealer = new Dealer({ linger: 0 });
  dealer.connect(endpoint);
  const start = Buffer.alloc(8);
  start.writeBigUInt64BE(from);
  await dealer.send(['', start]);
  const out: DecodedBatch[] = [];
  try {
    for (;;) {
      const [, seq, payload] = (await dealer.receive()) as Buffer[];
      if (seq!.readBigInt64BE() === -1n) return out;
      out.push(decodeBatch(null, seq!, payload!));
    }
  } finally {
    dealer.close();
  }
}
