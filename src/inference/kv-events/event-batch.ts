// vLLM's KV-cache event batch as its ZmqEventPublisher sends it (vllm/distributed/kv_events.py):
// msgspec structs encoded as msgpack arrays (array_like), events tagged by their class name as the
// array's first element, fields in vLLM's order, with the element counts vLLM's releases of this
// layout write and llm-d's fixed structs decode (its msgpack library refuses an array-encoded
// struct whose element count differs from its field count; docs/scaling.md says why this layout):
//   EventBatch       [ts: float64, events, data_parallel_rank]   (vLLM's publisher always sets
//                     the rank: 0 without data parallelism)
//   BlockStored      ['BlockStored', block_hashes, parent_block_hash | nil, token_ids, block_size,
//                     lora_id | nil, medium | nil, lora_name | nil, extra_keys]   (vLLM writes one
//                     extra_keys entry per block, nil for a block without any)
//   BlockRemoved     ['BlockRemoved', block_hashes, medium | nil]
//   AllBlocksCleared ['AllBlocksCleared']
// Hashes are unsigned 64-bit integers and every integer takes msgpack's shortest form, as msgspec
// writes a Python int; ts is always a float64, as msgspec writes a Python float.
import { Encoder } from '@msgpack/msgpack';

/**
 * Where a block is held: 'GPU' the engine's own KV cells (vLLM's name for its pool, whatever the
 * device), 'CPU' host memory (vLLM's CPU offload medium), 'STORAGE' local disk (the name llm-d's
 * scorer weighs offloaded storage by).
 */
export type Medium = 'GPU' | 'CPU' | 'STORAGE';

export interface BlockStored {
  type: 'BlockStored';
  blockHashes: bigint[];
  /** The key of the block before the first one, published before; null for a sequence's first block. */
  parentBlockHash: bigint | null;
  /** Every block's tokens, one after the other (blockHashes.length * blockSize of them). */
  tokenIds: number[];
  blockSize: number;
  /** The adapter's id (vLLM's lora_int_id: here its index + 1), null for the base model. */
  loraId: number | null;
  medium: Medium | null;
  loraName: string | null;
  /** One entry per block: the extra keys its hash took (null for none). */
  extraKeys: (unknown[] | null)[];
}

export interface BlockRemoved {
  type: 'BlockRemoved';
  blockHashes: bigint[];
  medium: Medium | null;
}

export interface AllBlocksCleared {
  type: 'AllBlocksCleared';
}

export type KvCacheEvent = BlockStored | BlockRemoved | AllBlocksCleared;

/** A 64-bit key as msgspec writes a Python int: the shortest form (a bigint only past 2^32). */
function int64(key: bigint): number | bigint {
  return key < 0x1_0000_0000n ? Number(key) : key;
}

/** An event as the array msgspec writes. */
export function eventArray(event: KvCacheEvent): unknown[] {
  switch (event.type) {
    case 'BlockStored': {
      return ['BlockStored', event.blockHashes.map(int64), event.parentBlockHash === null ? null : int64(event.parentBlockHash),
        event.tokenIds, event.blockSize, event.loraId, event.medium, event.loraName, event.extraKeys];
    }
    case 'BlockRemoved':
      return ['BlockRemoved', event.blockHashes.map(int64), event.medium];
    case 'AllBlocksCleared':
      return ['AllBlocksCleared'];
  }
}

const encoder = new Encoder({ useBigInt64: true, ignoreUndefined: true });

/** The msgpack EventBatch payload. `ts` is seconds since the epoch; the data-parallel rank is 0 unless given. */
export function encodeEventBatch(ts: number, events: readonly KvCacheEvent[], dataParallelRank = 0): Uint8Array {
  const rest = encoder.encode(events.map(eventArray));
  const rank = encoder.encode(dataParallelRank);
  const out = new Uint8Array(1 + 9 + rest.byteLength + rank.byteLength);
  const view = new DataView(out.buffer);
  out[0] = 0x93; // fixarray of 3
  out[1] = 0xcb; // float64, even for a whole number of seconds
  view.setFloat64(2, ts);
  out.set(rest, 10);
  out.set(rank, 10 + rest.byteLength);
  return out;
}
