// Block keys by vLLM's prefix-caching rule (vllm/v1/core/kv_cache_utils.py hash_block_tokens,
// with the sha256_cbor hash function), so that a router that knows vLLM's keys (llm-d, Dynamo)
// can name our cached prefixes. A prompt's tokens are cut into full blocks of `blockSize` tokens
// (a partial last block has no key); block i's key is
//   SHA-256(canonical CBOR of the 3-array [parent, token ids of block i, extra keys]),
// where parent is block i-1's key and, for the first block, the root: SHA-256(canonical CBOR of
// the seed string), as vLLM derives its NONE_HASH from PYTHONHASHSEED. Extra keys are null for the
// base model and [adapter name] for a LoRA adapter's blocks, as vLLM's lora extra key.
// Two chaining rules:
//   - 'sha256_cbor' (vLLM's current default): the chain runs on the full 32-byte digests (parent as
//     a CBOR byte string); a published key is the digest's low 64 bits (its last 8 bytes, big-endian),
//     as vLLM converts hashes for its events (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES).
//   - 'sha256_cbor_64bit' (vLLM's earlier rule, and llm-d's own request keys): every key, the root
//     included, is the low 64 bits, and the chain runs on them (parent as a CBOR unsigned integer),
//     so published keys equal the keys a router computes from the tokens alone.
import { createHash } from 'node:crypto';
import { cdeEncodeOptions, encode } from 'cbor2';

export type BlockHashAlgo = 'sha256_cbor' | 'sha256_cbor_64bit';

export const BLOCK_HASH_ALGOS: readonly BlockHashAlgo[] = ['sha256_cbor', 'sha256_cbor_64bit'];

/** How keys are made: the same on every replica and in the router (block size, seed, algorithm). */
export interface BlockKeyRule {
  /** Tokens per block; 16 by default, as vLLM and llm-d. */
  blockSize: number;
  /** vLLM's PYTHONHASHSEED / llm-d's hashSeed; '' by default, as llm-d's. */
  hashSeed: string;
  algo: BlockHashAlgo;
}

export const DEFAULT_BLOCK_KEY_RULE: BlockKeyRule = { blockSize: 16, hashSeed: '', algo: 'sha256_cbor' };

/** What the next block's hash takes as its parent: a 32-byte digest or a 64-bit key, by the algorithm. */
export type ChainHash = Uint8Array | bigint;

/** One full block of a sequence. */
export interface Block {
  /** The key published in events: the low 64 bits of the block's hash. */
  key: bigint;
  /** The parent the next block's hash takes. */
  chain: ChainHash;
  /** Its tokens (exactly blockSize of them). */
  tokens: number[];
}

/** Extra keys of a block: null for the base model, [name] for a LoRA adapter's blocks. */
export function extraKeysFor(adapter: string | null): string[] | null {
  return adapter === null ? null : [adapter];
}

// A plain Uint8Array: cbor2 writes a Node Buffer as a map of its fields, not as a byte string.
function sha256Cbor(value: unknown): Uint8Array {
  return new Uint8Array(createHash('sha256').update(encode(value, cdeEncodeOptions)).digest());
}

/** The low 64 bits of a digest: its last 8 bytes read big-endian. */
export function low64(digest: Uint8Array): bigint {
  return Buffer.from(digest.buffer, digest.byteOffset, digest.byteLength).readBigUInt64BE(digest.byteLength - 8);
}

/** The root parent: the hash of the seed string, as the rule's chain holds it. */
export function rootChain(rule: BlockKeyRule): ChainHash {
  const digest = sha256Cbor(rule.hashSeed);
  return rule.algo === 'sha256_cbor' ? digest : low64(digest);
}

/** The hash of one block after `parent`, as the rule's chain holds it, and its published key. */
export function hashBlock(rule: BlockKeyRule, parent: ChainHash, tokens: readonly number[], extraKeys: readonly unknown[] | null): { chain: ChainHash; key: bigint } {
  const digest = sha256Cbor([parent, tokens, extraKeys]);
  const key = low64(digest);
  return { chain: rule.algo === 'sha256_cbor' ? digest : key, key };
}

/**
 * The full blocks of `tokens` (a trailing partial block is left out), chained from `parent`
 * (the root when omitted). `tokens` must start at a block boundary of the sequence `parent` ends.
 */
export function sequenceBlocks(rule: BlockKeyRule, tokens: readonly number[], extraKeys: readonly unknown[] | null, parent: ChainHash = rootChain(rule)): Block[] {
  const blocks: Block[] = [];
  let chain = parent;
  for (let at = 0; at + rule.blockSize <= tokens.length; at += rule.blockSize) {
    const blockTokens = tokens.slice(at, at + rule.blockSize);
    const hashed = hashBlock(rule, chain, blockTokens, extraKeys);
    blocks.push({ key: hashed.key, chain: hashed.chain, tokens: blockTokens });
    chain = hashed.chain;
  }
  return blocks;
}
