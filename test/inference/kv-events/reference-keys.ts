// Block keys recomputed by the routers' rules with a CBOR writer of this file's own (shortest
// integers, definite lengths: canonical for arrays, byte strings, text and null), so a test does
// not check the server's encoder against itself.
import { createHash } from 'node:crypto';

function head(major: number, n: bigint): number[] {
  const m = major << 5;
  if (n < 24n) return [m | Number(n)];
  if (n < 0x100n) return [m | 24, Number(n)];
  if (n < 0x10000n) return [m | 25, Number(n >> 8n), Number(n & 0xffn)];
  const bytes = n < 0x1_0000_0000n ? 4 : 8;
  const out = [m | (bytes === 4 ? 26 : 27)];
  for (let i = bytes - 1; i >= 0; i--) out.push(Number((n >> BigInt(8 * i)) & 0xffn));
  return out;
}

export function cbor(value: unknown): Buffer {
  if (value === null) return Buffer.from([0xf6]);
  if (typeof value === 'number' || typeof value === 'bigint') return Buffer.from(head(0, BigInt(value)));
  if (typeof value === 'string') {
    const utf8 = Buffer.from(value, 'utf8');
    return Buffer.concat([Buffer.from(head(3, BigInt(utf8.length))), utf8]);
  }
  if (value instanceof Uint8Array) return Buffer.concat([Buffer.from(head(2, BigInt(value.length))), value]);
  if (Array.isArray(value)) return Buffer.concat([Buffer.from(head(4, BigInt(value.length))), ...value.map(cbor)]);
  throw new Error(`no CBOR for ${typeof value}`);
}

const sha256 = (b: Buffer): Buffer => createHash('sha256').update(b).digest();
const low64 = (d: Buffer): bigint => d.readBigUInt64BE(24);

function chunks(tokens: number[], size: number): number[][] {
  const out: number[][] = [];
  for (let i = 0; i + size <= tokens.length; i += size) out.push(tokens.slice(i, i + size));
  return out;
}

/** vLLM's keys (sha256_cbor): chained on 32-byte digests from sha256(cbor(seed)); published as the low 64 bits. */
export function vllmKeys(tokens: number[], blockSize: number, seed: string, extra: unknown[] | null = null): bigint[] {
  let parent = sha256(cbor(seed));
  return chunks(tokens, blockSize).map((block) => {
    parent = sha256(cbor([parent, block, extra]));
    return low64(parent);
  });
}

/** llm-d's request keys (ChunkedTokenDatabase): chained on the low 64 bits, the root from the seed. */
export function llmdKeys(tokens: number[], blockSize: number, seed: string, extra: unknown[] | null = null): bigint[] {
  let parent = low64(sha256(cbor(seed)));
  return chunks(tokens, blockSize).map((block) => (parent = low64(sha256(cbor([parent, block, extra])))));
}
