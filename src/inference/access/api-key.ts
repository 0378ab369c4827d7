// API-key checking (--api-key): `Authorization: Bearer KEY` or `X-Api-Key: KEY`, compared in
// constant time (both sides hashed to equal length first, every configured key checked).
import { createHash, timingSafeEqual } from 'node:crypto';
import { bearerToken } from '../../http/bearer.js';
import type { HttpRequest } from '../../http/request.js';
import { ErrorType, inferenceError } from '../errors.js';

const digest = (s: string): Buffer => createHash('sha256').update(s, 'utf8').digest();

export function presentedKey(req: Pick<HttpRequest, 'headers'>): string | undefined {
  // X-Api-Key counts only without an Authorization header.
  const auth = req.headers['authorization'];
  if (auth !== undefined) return bearerToken(auth) ?? undefined;
  return req.headers['x-api-key'];
}

export class ApiKeys {
  private readonly digests: Buffer[];

  constructor(keys: readonly string[]) {
    this.digests = keys.map(digest);
  }

  get enabled(): boolean {
    return this.digests.length > 0;
  }

  matches(key: string | undefined): boolean {
    return this.indexOf(key) >= 0;
  }

  /** The position of `key` among the configured keys (its tenant is "key-<position + 1>"), -1 when none. */
  indexOf(key: string | undefined): number {
    if (key === undefined) return -1;
    const presented = digest(key);
    let found = -1;
    this.digests.forEach((d, i) => {
      if (timingSafeEqual(d, presented) && found < 0) found = i;
    });
    return found;
  }
}

export const invalidApiKey = () => inferenceError(ErrorType.AUTHENTICATION, 'Invalid API Key');
