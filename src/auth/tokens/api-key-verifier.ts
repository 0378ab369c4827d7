// Verifies API keys for the inference server (mount.ts createApiKeyVerifier): in the service's
// own process through its database, or remotely through POST /api-keys/introspect.
//
// Contract:
// - verify(key) resolves with the key's identity, or null for a key that is malformed, unknown,
//   revoked, expired (at the source's clock, checked again on every cache hit) or, with
//   `appSlug`, of another app. It rejects only when the source cannot answer (the database or
//   the auth-server is unreachable, a 5xx or 429 answer): the caller should answer 503, not 401.
// - Answers are cached by the key's SHA-256 (the key itself is not kept): a found key for ttlMs
//   (default 30 s), a refused one for negativeTtlMs (default 5 s), at most maxEntries entries
//   (default 10,000), the least recently used dropped first. So a revoked or rotated key stops
//   working on every verifier within ttlMs of the change; in the service's own process a change
//   made through that service ends it at once (ApiKeyChanges, api-key-changes.ts).
// - Concurrent verifies of one key share one lookup.
// - Race with a change: a lookup that was under way when a key changed may have read the old row,
//   so its answer is returned to the verifies that were waiting for it but not cached (the
//   generation counter), and verifies that start after the change start a lookup of their own.
import { createHash } from 'node:crypto';
import type { Clock } from '../clock.js';
import { apiKeyIdentityFromJson, hasApiKeyFormat, type ApiKeyIdentity } from './api-key.js';

export interface ApiKeyVerifier {
  verify(key: string): Promise<ApiKeyIdentity | null>;
  /** Stops listening for the service's changes and empties the cache. */
  close(): void;
}

/** Where a verifier looks keys up. */
export interface ApiKeySource {
  /** The live key's identity or null; rejects when the source cannot answer. */
  lookup(key: string): Promise<ApiKeyIdentity | null>;
  /** Called on every accepted verify (the in-process source records last_used_at, throttled). */
  used?(keyId: string): void;
  /** Calls `listener` with the id of each key rotated or revoked; returns the unsubscribe. */
  subscribe?(listener: (keyId: string) => void): () => void;
  readonly clock: Clock;
}

export interface ApiKeyVerifierOptions {
  /** How long a found key is trusted without a lookup (default 30,000 ms): the revocation bound. */
  ttlMs?: number;
  /** How long a refused key is refused without a lookup (default 5,000 ms). */
  negativeTtlMs?: number;
  /** Only keys of this app are accepted. */
  appSlug?: string;
  /** Cache entries at most (default 10,000). */
  maxEntries?: number;
}

export const API_KEY_CACHE_TTL_MS = 30_000;
export const API_KEY_NEGATIVE_CACHE_TTL_MS = 5_000;
export const API_KEY_CACHE_ENTRIES = 10_000;

interface Entry {
  identity: ApiKeyIdentity | null;
  /** Clock ms after which the entry is looked up again. */
  staleAt: number;
}

export function verifierOn(source: ApiKeySource, options: ApiKeyVerifierOptions = {}): ApiKeyVerifier {
  const ttlMs = options.ttlMs ?? API_KEY_CACHE_TTL_MS;
  const negativeTtlMs = options.negativeTtlMs ?? API_KEY_NEGATIVE_CACHE_TTL_MS;
  const maxEntries = options.maxEntries ?? API_KEY_CACHE_ENTRIES;
  const entries = new Map<string, Entry>();
  const lookups = new Map<string, Promise<ApiKeyIdentity | null>>();
  let generation = 0;
  const unsubscribe = source.subscribe?.((keyId) => {
    generation += 1;
    lookups.clear();
    for (const [hash, entry] of entries) if (entry.identity?.keyId === keyId) entries.delete(hash);
  });

  const lookup = (hash: string, key: string): Promise<ApiKeyIdentity | null> => {
    const pending = lookups.get(hash);
    if (pending) return pending;
    const started = generation;
    const promise = source.lookup(key).then((identity) => {
      if (generation === started) {
        entries.delete(hash);
        entries.set(hash, { identity, staleAt: source.clock.now() + (identity ? ttlMs : negativeTtlMs) });
        if (entries.size > maxEntries) entries.delete(entries.keys().next().value!);
      }
      return identity;
    }).finally(() => {
      if (lookups.get(hash) === promise) lookups.delete(hash);
    });
    lookups.set(hash, promise);
    return promise;
  };

  return {
    async verify(key) {
      if (typeof key !== 'string' || !hasApiKeyFormat(key)) return null;
      const hash = createHash('sha256').update(key).digest('base64url');
      const nowMs = source.clock.now();
      const entry = entries.get(hash);
      let identity: ApiKeyIdentity | null;
      if (entry && entry.staleAt > nowMs) {
        entries.delete(hash);
        entries.set(hash, entry);
        identity = entry.identity;
      } else {
        identity = await lookup(hash, key);
      }
      if (!identity) return null;
      if (identity.expiresAt !== null && Date.parse(identity.expiresAt) <= source.clock.now()) return null;
      if (options.appSlug !== undefined && identity.appSlug !== options.appSlug) return null;
      source.used?.(identity.keyId);
      return identity;
    },
    close() {
      unsubscribe?.();
      entries.clear();
      lookups.clear();
    },
  };
}

/** Longest wait for the auth-server's introspection answer. */
const INTROSPECTION_TIMEOUT_MS = 5_000;

/**
 * Keys looked up by `POST <issuer>/api-keys/introspect` with `Authorization: Bearer <key>`:
 * 200 is the identity, 401 a refused key; any other answer, or none, rejects. The auth-server
 * records last_used_at when it answers.
 */
export function remoteApiKeySource(issuer: string, clock: Clock): ApiKeySource {
  const url = new URL('api-keys/introspect', `${issuer.replace(/\/+$/, '')}/`);
  return {
    clock,
    async lookup(key) {
      const response = await fetch(url, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}` },
        signal: AbortSignal.timeout(INTROSPECTION_TIMEOUT_MS),
      });
      if (response.status === 401) {
        await response.body?.cancel();
        return null;
      }
      if (response.status !== 200) {
        await response.body?.cancel();
        throw new Error(`API key introspection at ${url} answered ${response.status}`);
      }
      return apiKeyIdentityFromJson(await response.json());
    },
  };
}
