// Access tokens whose signature this process has already verified. An app presents the same
// access token on every call of its user for the token's whole 30-minute life (GET /auth/me, a
// backend route behind createAccessTokenGuard), so after the first call the RSA verification,
// the JSON parsing and the claim checks that cannot change are skipped.
//
// Contract (enforced by verifyAccessToken, the only user):
// - One cache serves one verifier configuration (issuer, app slug): an entry records that the
//   token passed every check that does not depend on the time under that configuration.
// - Only tokens that passed are stored, keyed by their exact string, so a forged or altered
//   token can never hit; it is verified in full like any unknown token, and never stored.
// - A hit is honoured only when the key resolver still returns, for the token's header, the very
//   key object that verified it: a key that is unpublished or replaced ends its tokens' hits at
//   once. The time-dependent checks (exp, nbf, iat) run on every hit, as jose runs them.
// - At most `capacity` entries, the least recently used dropped first; an entry found expired
//   is dropped. 0 disables the cache.
import type { JWTHeaderParameters } from 'jose';

export interface VerifiedToken<C> {
  /** The token's protected header, as the key resolver is called with it. */
  readonly header: JWTHeaderParameters;
  /** The object the key resolver returned when the signature was verified. */
  readonly key: unknown;
  /** The verified claims (frozen: every hit returns this same object). */
  readonly claims: C;
}

export class VerifiedTokenCache<C> {
  private readonly entries = new Map<string, VerifiedToken<C>>();

  constructor(readonly capacity: number) {
    if (!Number.isInteger(capacity) || capacity < 0) throw new RangeError(`capacity must be an integer >= 0, got ${capacity}`);
  }

  get size(): number {
    return this.entries.size;
  }

  /** The entry of `token`, now the most recently used; undefined when absent. */
  get(token: string): VerifiedToken<C> | undefined {
    const entry = this.entries.get(token);
    if (entry) {
      this.entries.delete(token);
      this.entries.set(token, entry);
    }
    return entry;
  }

  /** Stores a verified token, dropping the least recently used entry beyond capacity. */
  set(token: string, entry: VerifiedToken<C>): void {
    if (this.capacity === 0) return;
    this.entries.delete(token);
    this.entries.set(token, entry);
    if (this.entries.size > this.capacity) this.entries.delete(this.entries.keys().next().value!);
  }

  delete(token: string): void {
    this.entries.delete(token);
  }
}
