// The disk tier's settings at load (--cache-disk): the identity of the files a saved state depends
// on, and the default budget. The engine adds to the identity what it alone knows (the llama.cpp
// build, KV types, context and sequence layout) and keeps each fingerprint's states apart
// (native/disk-cache.h).
import { createHash } from 'node:crypto';
import { mkdir, open, statfs } from 'node:fs/promises';

/** Bytes sampled from a file for its identity: this many chunks, evenly spread, of CHUNK bytes. */
const SAMPLES = 16;
const CHUNK = 64 * 1024;

/**
 * A file's identity by content, not by name: its size and a hash of 16 chunks spread over it (the
 * GGUF header and metadata, and tensor data throughout). A model copied or moved keeps its
 * states; another model, or the same name over other weights, gets other ones. Reads 1 MiB.
 */
export async function fileIdentity(path: string): Promise<string> {
  const handle = await open(path, 'r');
  try {
    const { size } = await handle.stat();
    const hash = createHash('sha256');
    const buffer = Buffer.alloc(CHUNK);
    for (let i = 0; i < SAMPLES; i++) {
      const offset = Math.floor(((size - CHUNK) * i) / (SAMPLES - 1));
      const { bytesRead } = await handle.read(buffer, 0, CHUNK, Math.max(0, offset));
      hash.update(buffer.subarray(0, bytesRead));
    }
    return `${size}:${hash.digest('hex')}`;
  } finally {
    await handle.close();
  }
}

/** The model's and the adapters' identities, in the order the engine indexes the adapters. */
export async function diskCacheIdentity(modelPath: string, loraPaths: readonly string[]): Promise<string> {
  const parts = [`model ${await fileIdentity(modelPath)}`];
  for (const path of loraPaths) parts.push(`lora ${await fileIdentity(path)}`);
  return parts.join('\n');
}

/**
 * The default budget (MiB) for a directory: a tenth of its file system, at most half the space
 * free at start-up, at least 64 MiB. Creates the directory (its parent must be writable).
 */
export async function defaultDiskCacheMib(dir: string): Promise<number> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const fs = await statfs(dir);
  const total = fs.blocks * fs.bsize;
  const free = fs.bavail * fs.bsize;
  return Math.max(64, Math.floor(Math.min(total / 10, free / 2) / (1024 * 1024)));
}
