// Queries on RS256 signing keys.
import type { JWK } from 'jose';
import type { Queryable } from '../db.js';

export interface SigningKeyRow {
  kid: string;
  public_jwk: JWK;
  private_key_ciphertext: Buffer;
  status: 'active' | 'retired';
  created_at: Date;
  retired_at: Date | null;
}

/** The active key and every key retired after `retiredAfter` (still published). */
export async function listPublishedSigningKeys(sql: Queryable, retiredAfter: Date): Promise<SigningKeyRow[]> {
  return sql<SigningKeyRow[]>`
    select kid, public_jwk, private_key_ciphertext, status, created_at, retired_at
    from signing_keys
    where status = 'active' or retired_at > ${retiredAfter}
    order by created_at desc
  `;
}

/** Retires the active key, if any; returns its kid. */
export async function retireActiveSigningKey(sql: Queryable, now: Date): Promise<string | undefined> {
  const [row] = await sql<{ kid: string }[]>`
    update signing_keys
    set status = 'retired', retired_at = ${now}
    where status = 'active'
    returning kid
  `;
  return row?.kid;
}

export async function insertActiveSigningKey(sql: Queryable, key: { kid: string; publicJwk: JWK; privateKeyCiphertext: Buffer; now: Date }): Promise<void> {
  await sql`
    insert into signing_keys (kid, public_jwk, private_key_ciphertext, status, created_at)
    values (${key.kid}, ${sql.json(key.publicJwk as Record<string, string>)}, ${key.privateKeyCiphertext}, 'active', ${key.now})
  `;
}

export async function hasActiveSigningKey(sql: Queryable): Promise<boolean> {
  const rows = await sql`
    select 1 from signing_keys where status = 'active'
  `;
  return rows.length > 0;
}

/** Serialises key creation and rotation across instances (transaction-level advisory lock). */
export async function lockSigningKeys(sql: Queryable): Promise<void> {
  await sql`select pg_advisory_xact_lock(${SIGNING_KEYS_LOCK_KEY})`;
}

const SIGNING_KEYS_LOCK_KEY = 0x6a776b73; // "jwks"
