// The KV-cache event publisher, vLLM's ZmqEventPublisher on the wire:
//   - a PUB socket sending three frames per batch: the topic (`kv@<pod>@<model>`), the batch's
//     sequence number (8 bytes, big-endian, from 0, one counter for all topics), the msgpack EventBatch;
//   - optionally a ROUTER socket for replay: a request [identity, '', start seq (8 bytes big-endian)]
//     is answered with [identity, '', seq, payload] for every kept batch from `start` on, then
//     [identity, '', -1 (8 bytes), ''] to end.
// publish() never waits: it numbers and encodes the batch, keeps it for replay and queues it for
// the socket, whose sends run one at a time on the event loop. PUB drops past its high-water mark
// (and so does this queue past `maxQueue`, oldest first): a subscriber sees the gap in sequence
// numbers and asks for replay. A replayed batch carries no topic (as vLLM's); its stored blocks
// name their adapter in lora_name, and keys differ between models, so nothing is ambiguous.
import { Publisher, Router } from 'zeromq';
import { encodeEventBatch, type KvCacheEvent } from './event-batch.js';
import { endpointMode } from './endpoint.js';
import type { PublisherOptions } from './publisher-options.js';
import { ReplayBuffer } from './replay-buffer.js';

export { DEFAULT_ENDPOINT, DEFAULT_PUBLISHER_OPTIONS, eventTopic, type PublisherOptions } from './publisher-options.js';

/** The end-of-replay marker: -1 as 8 bytes. */
const END_SEQ = Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);

function seqBytes(seq: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(seq);
  return b;
}

interface Outgoing {
  topic: string;
  seq: bigint;
  payload: Uint8Array;
}

export class KvEventPublisher {
  private nextSeq = 0n;
  private readonly queue: Outgoing[] = [];
  private sending = false;
  private closed = false;
  /** Batches dropped from the queue (the socket could not keep up). */
  dropped = 0;
  private drained: (() => void) | null = null;

  private constructor(
    private readonly pub: Publisher,
    private readonly router: Router | null,
    private readonly buffer: ReplayBuffer,
    private readonly maxQueue: number,
  ) {
    if (router) void this.serveReplay(router);
  }

  /** Opens the sockets (binds or connects); rejects when an endpoint cannot be bound. */
  static async open(options: PublisherOptions): Promise<KvEventPublisher> {
    const pub = new Publisher({ sendHighWaterMark: options.hwm, linger: 0 });
    let router: Router | null = null;
    try {
      if (endpointMode(options.endpoint) === 'bind') await pub.bind(options.endpoint);
      else pub.connect(options.endpoint);
      if (options.replayEndpoint !== null) {
        router = new Router({ linger: 0 });
        await router.bind(options.replayEndpoint);
      }
    } catch (err) {
      pub.close();
      router?.close();
      throw err;
    }
    return new KvEventPublisher(pub, router, new ReplayBuffer(options.bufferSteps), options.maxQueue);
  }

  /** Numbers, encodes, keeps and queues one batch; returns its sequence number. Never waits. */
  publish(topic: string, events: readonly KvCacheEvent[], ts = Date.now() / 1000): bigint {
    const seq = this.nextSeq++;
    const payload = encodeEventBatch(ts, events);
    this.buffer.push({ seq, payload });
    if (this.closed) return seq;
    this.queue.push({ topic, seq, payload });
    if (this.queue.length > this.maxQueue) {
      this.queue.shift();
      this.dropped++;
    }
    if (!this.sending) void this.sendQueued();
    return seq;
  }

  /** Resolves once every queued batch has been handed to the socket. */
  flush(): Promise<void> {
    if (!this.sending && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => {
      const previous = this.drained;
      this.drained = () => { previous?.(); resolve(); };
    });
  }

  private async sendQueued(): Promise<void> {
    this.sending = true;
    try {
      for (let next = this.queue.shift(); next && !this.closed; next = this.queue.shift()) {
        await this.pub.send([next.topic, seqBytes(next.seq), next.payload]);
      }
    } catch {
      // The socket was closed under a send: nothing more goes out.
    } finally {
      this.sending = false;
      const drained = this.drained;
      this.drained = null;
      drained?.();
    }
  }

  private async serveReplay(router: Router): Promise<void> {
    try {
      for await (const frames of router) {
        // [identity, empty delimiter, start seq]; anything else is not a replay request.
        if (frames.length !== 3 || frames[2]!.length !== 8) continue;
        const [identity, , start] = frames as [Buffer, Buffer, Buffer];
        for (const batch of this.buffer.since(start.readBigUInt64BE())) {
          await router.send([identity, '', seqBytes(batch.seq), batch.payload]);
        }
        await router.send([identity, '', END_SEQ, '']);
      }
    } catch {
      // Closed: the loop ends.
    }
  }

  /** Stops sending and closes both sockets; idempotent. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.queue.length = 0;
    this.pub.close();
    this.router?.close();
  }
}
