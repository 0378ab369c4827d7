// Refresh tokens are opaque: "rt_" and 32 random bytes in base64url. Only their SHA-256 is
// stored; 256 bits of entropy make a slow hash unnecessary.
import { createHash, randomBytes } from 'node:crypto';

const SHAPE = /^rt_[A-Za-z0-9_-]{43}$/;

export function generateRefreshToken(): { token: string; hash: Buffer } {
  const token = `rt_${randomBytes(32).toString('base64url')}`;
  return { token, hash: sha256(token) };
}

/** The stored hash of a presented token; undefined when the string cannot be one of ours. */
export function hashRefreshToken(token: string): Buffer | undefined {
  return SHAPE.test(token) ? sha256(token) : undefined;
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
