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

export class TestSubscriber {
  readonly sub = new Subscriber({ linger: 0 });
  private readonly iterator: AsyncIterator<Buffer[]>;

  constructor() {
    this.sub.subscribe('kv@');
    this.iterator = this.sub[Symbol.asyncIterator]();
  }

  async next(): Promise<DecodedBatch> {
    const { value } = await this.iterator.next();
    const [topic, seq, payload] = value as Buffer[];
    return decodeBatch(topic!.toString(), seq!, payload!);
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
