// The RS256 signing keys of this process, loaded from the signing_keys table: the active key
// (signs), the next key (a standby that signs nothing yet), and the keys retired less than
// RETIRED_KEY_PUBLISH_MS ago. All of them verify and are published in the JWKS. A rotation
// makes the next key active and creates a new next key, so the key that signs after a rotation
// has been in every JWKS served since the previous rotation (as Auth0's "next" signing key):
// verifiers holding a cached JWKS accept its tokens at once. Private keys are stored encrypted
// with AES-256-GCM under a key derived from the master key; the kid is the RFC 7638 thumbprint
// of the public key.
//
// Several instances may share one database: creation and rotation take an advisory lock, and
// each instance re-reads the table every KEY_RING_RELOAD_MS and whenever it meets an unknown kid.
// Within one auth-server, the rings of its worker threads reload together on a rotation
// (SigningKeyRingOptions.onRotated).
import { createPrivateKey, generateKeyPair, type KeyObject } from 'node:crypto';
import { promisify } from 'node:util';
import { calculateJwkThumbprint, importJWK, type CryptoKey, type JWK, type JWTVerifyGetKey } from 'jose';
import type { Clock } from '../clock.js';
import type { Sql, TransactionSql } from '../database/client.js';
import { KEY_RING_RELOAD_MS, RETIRED_KEY_PUBLISH_MS } from '../limits.js';
import { seal, unseal } from './sealed-box.js';
import { activateNextSigningKey, findCurrentSigningKids, insertSigningKey, listPublishedSigningKeys, lockSigningKeys, retireActiveSigningKey, type SigningKeyRow } from '../queries/signing-keys.js';

const generateRsaKeyPair = promisify(generateKeyPair);

/** A key that signs access tokens. */
export interface SigningKey {
  readonly kid: string;
  readonly privateKey: KeyObject;
  /** base64url of the JWS header `{"alg":"RS256","typ":"JWT","kid":...}`, computed once. */
  readonly encodedHeader: string;
}

interface LoadedKey {
  row: SigningKeyRow;
  signing: SigningKey;
  /** Imported once for jose's verify (WebCrypto); reused by every verification. */
  verification: CryptoKey;
}

/** Minimum time between two reloads triggered by unknown kids, so a flood of forged kids cannot hammer the database. */
const UNKNOWN_KID_RELOAD_INTERVAL_MS = 1000;

export interface SigningKeyRingOptions {
  /** Receives one line per failed reload, background or for an unknown kid (the ring keeps the keys it has). Default: stderr. */
  log?: (line: string) => void;
  /** Period of the background reload; KEY_RING_RELOAD_MS unless a test shortens it. */
  reloadIntervalMs?: number;
  /**
   * Awaited after a rotation by this ring has committed and this ring has reloaded, before
   * `rotate` resolves: the worker threads of one auth-server use it to make every other ring of
   * the process reload first, so no thread signs with the retired key once the rotation is
   * answered. Other instances see the rotation by their periodic or unknown-kid reload.
   */
  onRotated?: () => Promise<void>;
}

export class SigningKeyRing {
  private keys = new Map<string, LoadedKey>();
  private active: LoadedKey | null = null;
  /** When the last reload started, successful or not: unknown kids trigger at most one per UNKNOWN_KID_RELOAD_INTERVAL_MS. */
  private reloadStartedAt = Number.NEGATIVE_INFINITY;
  private reloading: Promise<void> | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly log: (line: string) => void;
  private readonly reloadIntervalMs: number;
  private readonly onRotated: () => Promise<void>;

  constructor(
    private readonly sql: Sql,
    private readonly clock: Clock,
    private readonly encryptionKey: Buffer,
    options: SigningKeyRingOptions = {},
  ) {
    this.log = options.log ?? ((line) => { process.stderr.write(`[auth-server] ${line}\n`); });
    this.reloadIntervalMs = options.reloadIntervalMs ?? KEY_RING_RELOAD_MS;
    this.onRotated = options.onRotated ?? (async () => {});
  }

  /** jose's key resolver over this ring: the key of the header's kid; rejects for an unknown kid. */
  readonly resolveKey: JWTVerifyGetKey = async (header) => {
    const key = await this.verificationKey(header.kid);
    if (!key) throw new Error('unknown signing key');
    return key;
  };

  /** Creates the active and the next key when the table lacks them, loads the keys, starts reloading. */
  async start(): Promise<void> {
    const current = await findCurrentSigningKids(this.sql);
    if (!current.active || !current.next) {
      await this.sql.begin(async (tx) => {
        await lockSigningKeys(tx);
        await this.completeKeys(tx);
      });
    }
    await this.reload();
    // A failed background reload (database unreachable, ...) must not crash the process: the
    // ring keeps signing and verifying with the keys it has and tries again next period.
    this.timer = setInterval(() => {
      this.reload().catch((error: unknown) => {
        this.log(`signing keys: background reload failed, keeping the keys loaded before: ${error instanceof Error ? error.message : String(error)}`);
      });
    }, this.reloadIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** The key to sign with now. */
  signingKey(): SigningKey {
    if (!this.active) throw new Error('signing key ring is not started');
    return this.active.signing;
  }

  /**
   * The public key for a kid, for verification; undefined for an unknown or unpublished kid. An
   * unknown kid may be a rotation by another instance, so it triggers a reload, at most one per
   * UNKNOWN_KID_RELOAD_INTERVAL_MS (failed reloads count: a flood of forged kids must not hammer
   * a failing database). A failed reload is logged and the kid stays unknown.
   */
  async verificationKey(kid: unknown): Promise<CryptoKey | undefined> {
    if (typeof kid !== 'string' || kid.length === 0 || kid.length > 128) return undefined;
    let key = this.published(kid);
    if (!key && this.clock.now() - this.reloadStartedAt >= UNKNOWN_KID_RELOAD_INTERVAL_MS) {
      try {
        await this.reload();
      } catch (error) {
        this.log(`signing keys: reload for an unknown kid failed, keeping the keys loaded before: ${error instanceof Error ? error.message : String(error)}`);
      }
      key = this.published(kid);
    }
    return key?.verification;
  }

  /** The public JWKs to publish: the active key first, then the next key, then recently retired ones. */
  publishedJwks(): JWK[] {
    return [...this.keys.values()].filter((key) => this.isPublished(key)).map((key) => ({ ...key.row.public_jwk }));
  }

  /**
   * Retires the active key, makes the next key (already published) active, and creates a new
   * next key; returns the kids of the new active key and of the retired one. `record` runs in
   * the rotation's transaction, under the lock (the admin route writes the audit event there).
   */
  async rotate(record?: (tx: TransactionSql, rotated: { kid: string; retiredKid: string | null }) => Promise<void>): Promise<{ kid: string; retiredKid: string | null }> {
    const standby = await this.generate();
    const rotated = await this.sql.begin(async (tx) => {
      await lockSigningKeys(tx);
      const retired = await retireActiveSigningKey(tx, new Date(this.clock.now()));
      const activated = await activateNextSigningKey(tx);
      if (activated) await insertSigningKey(tx, standby, 'next');
      const { active } = await this.completeKeys(tx);
      const result = { kid: active, retiredKid: retired ?? null };
      await record?.(tx, result);
      return result;
    });
    await this.reload();
    await this.onRotated();
    return rotated;
  }

  /** Under the signing-keys lock: creates the active and the next key where missing; returns the active kid. */
  private async completeKeys(tx: TransactionSql): Promise<{ active: string }> {
    const current = await findCurrentSigningKids(tx);
    let active = current.active;
    if (!active) {
      const key = await this.generate();
      await insertSigningKey(tx, key, 'active');
      active = key.kid;
    }
    if (!current.next) await insertSigningKey(tx, await this.generate(), 'next');
    return { active };
  }

  /** Re-reads the table. Concurrent callers share one reload. */
  reload(): Promise<void> {
    this.reloading ??= this.load().finally(() => { this.reloading = null; });
    return this.reloading;
  }

  private async load(): Promise<void> {
    const now = this.clock.now();
    this.reloadStartedAt = now;
    const rows = await listPublishedSigningKeys(this.sql, new Date(now - RETIRED_KEY_PUBLISH_MS));
    const keys = new Map<string, LoadedKey>();
    let active: LoadedKey | null = null;
    for (const row of rows) {
      const loaded = this.keys.get(row.kid);
      const key = loaded ? { ...loaded, row } : await this.decode(row);
      keys.set(row.kid, key);
      if (row.status === 'active') active = key;
    }
    if (!active) throw new Error('no active signing key in the database');
    this.keys = keys;
    this.active = active;
  }

  private published(kid: string): LoadedKey | undefined {
    const key = this.keys.get(kid);
    return key && this.isPublished(key) ? key : undefined;
  }

  private isPublished(key: LoadedKey): boolean {
    const retiredAt = key.row.retired_at;
    return retiredAt === null || retiredAt.getTime() > this.clock.now() - RETIRED_KEY_PUBLISH_MS;
  }

  private async decode(row: SigningKeyRow): Promise<LoadedKey> {
    let der: Buffer;
    try {
      der = unseal(this.encryptionKey, row.private_key_ciphertext, row.kid);
    } catch (error) {
      throw new Error(`cannot decrypt signing key ${row.kid}: the key directory's master.key is not the one that created it`, { cause: error });
    }
    const privateKey = createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
    const header = Buffer.from(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: row.kid })).toString('base64url');
    const verification = (await importJWK(row.public_jwk, 'RS256')) as CryptoKey;
    return { row, signing: { kid: row.kid, privateKey, encodedHeader: header }, verification };
  }

  private async generate(): Promise<{ kid: string; publicJwk: JWK; privateKeyCiphertext: Buffer; now: Date }> {
    const { publicKey, privateKey } = await generateRsaKeyPair('rsa', { modulusLength: 2048 });
    const exported = publicKey.export({ format: 'jwk' }) as JWK;
    const kid = await calculateJwkThumbprint({ kty: exported.kty, n: exported.n, e: exported.e });
    const publicJwk: JWK = { kty: 'RSA', n: exported.n, e: exported.e, kid, alg: 'RS256', use: 'sig' };
    const der = privateKey.export({ format: 'der', type: 'pkcs8' });
    return { kid, publicJwk, privateKeyCiphertext: seal(this.encryptionKey, der, kid), now: new Date(this.clock.now()) };
  }
}
