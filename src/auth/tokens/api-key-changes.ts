// ApiKeyChanges: the fan-out that tells the in-process API key verifiers (api-key-verifier.ts)
// which key was rotated or revoked. A change made by this service is published as soon as it
// commits; a change made by another thread or instance on the database arrives by LISTEN on
// API_KEY_CHANNEL (the NOTIFY is sent with that change's commit, queries/api-keys.ts).
import type { Sql } from '../database/client.js';
import { API_KEY_CHANNEL } from '../queries/api-keys.js';

/** Listeners told the id of a key that was rotated or revoked, once the change committed. */
export class ApiKeyChanges {
  private readonly listeners = new Set<(keyId: string) => void>();
  private listening: Promise<{ unlisten(): Promise<void> } | null> | null = null;

  constructor(private readonly sql: Sql, private readonly log: (line: string) => void) {}

  /**
   * Adds a listener; the first one also starts listening for the changes that other threads and
   * instances notify (one connection of the pool is then held for it).
   */
  subscribe(listener: (keyId: string) => void): () => void {
    this.listeners.add(listener);
    this.listening ??= this.sql.listen(API_KEY_CHANNEL, (keyId) => this.publish(keyId)).catch((error: unknown) => {
      this.log(`API keys: cannot listen for other instances' revocations (their verifiers' cache TTL applies): ${String(error)}`);
      return null;
    });
    return () => { this.listeners.delete(listener); };
  }

  /** Resolves once the listening connection is ready (tests). */
  async ready(): Promise<void> {
    await this.listening;
  }

  /** Stops listening (the service's close). */
  async stop(): Promise<void> {
    const listening = await this.listening;
    this.listening = null;
    await listening?.unlisten().catch(() => {});
  }

  publish(keyId: string): void {
    for (const listener of this.listeners) listener(keyId);
  }
}
