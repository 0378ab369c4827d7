// What llm-d (since v0.5) does with a pod's BlockStored events: it recomputes its own request key
// for each block from the block's token ids, chained from the request key of the event's parent
// (the root when the parent is nil), and maps the engine's key to it; an event whose parent it has
// not seen is dropped. It decodes each event into a fixed struct whose field count the array's
// element count must equal (its msgpack library refuses any other): an event of another length is
// dropped too. Removals name engine keys. A test drives this with decoded events and asks which
// of a prompt's request keys the pod holds.
import { createHash } from 'node:crypto';
import { cbor } from './reference-keys.js';
import { keys } from './subscriber.js';

const low64 = (b: Buffer): bigint => createHash('sha256').update(b).digest().readBigUInt64BE(24);

export class LlmdIndex {
  /** engine key -> request key */
  private readonly engineToRequest = new Map<bigint, bigint>();
  readonly held = new Set<bigint>();
  dropped = 0;

  constructor(private readonly blockSize: number, private readonly seed: string) {}

  private root(): bigint {
    return low64(cbor(this.seed));
  }

  apply(event: unknown[]): void {
    const [tag] = event;
    const fields = { BlockStored: 9, BlockRemoved: 3 }[tag as string];
    if (fields !== undefined && event.length !== fields) {
      this.dropped++;
      return;
    }
    if (tag === 'AllBlocksCleared') {
      this.engineToRequest.clear();
      this.held.clear();
    } else if (tag === 'BlockRemoved') {
      for (const k of keys(event[1])) {
        const request = this.engineToRequest.get(k);
        this.engineToRequest.delete(k);
        if (request !== undefined) this.held.delete(request);
      }
    } else if (tag === 'BlockStored') {
      this.store(event);
    }
  }

  private store(event: unknown[]): void {
    const engineKeys = keys(event[1]);
    const parentEngine = event[2] === null ? null : BigInt(event[2] as number | bigint);
    const tokens = event[3] as number[];
    const loraName = event[7] as string | null;
    let parent = parentEngine === null ? this.root() : this.engineToRequest.get(parentEngine);
    if (parent === undefined) {
      this.dropped++;
      return;
    }
    engineKeys.forEach((engineKey, i) => {
      const block = tokens.slice(i * this.blockSize, (i + 1) * this.blockSize);
      parent = low64(cbor([parent!, block, loraName === null ? null : [loraName]]));
      this.engineToRequest.set(engineKey, parent);
      this.held.add(parent);
    });
  }
}
