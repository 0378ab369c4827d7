// Queries on RS256 signing keys.
import type { JWK } from 'jose';
import type { Queryable } from '../database/client.js';

export type SigningKeyStatus = 'next' | 'active' | 'retired';

export interface SigningKeyRow {
  kid: string;
  public_jwk: JWK;
  private_key_ciphertext: Buffer;
  /** next: published, signs nothing yet; active: signs; retired: published for a while, then not. */
  status: SigningKeyStatus;
  created_at: Date;
  retired_at: Date | null;
}

/** The active key, the next key and every key retired after `retiredAfter` (still published), in that order. */
export async function listPublishedSigningKeys(sql: Queryable, retiredAfter: Date): Promise<SigningKeyRow[]> {
  return sql<SigningKeyRow[]>`
    select kid, public_jwk, private_key_ciphertext, status, created_at, retired_at
    from signing_keys
    where status in ('active', 'next') or retired_at > ${retiredAfter}
    order by case status when 'active' then 0 when 'next' then 1 else 2 end, retired_at desc, created_at desc
  `;
}

export type SigningKeySummary = Pick<SigningKeyRow, 'kid' | 'status' | 'created_at' | 'retired_at'>;

/** Every key without its key material: active, next, then retired keys newest first. */
export async function listSigningKeys(sql: Queryable): Promise<SigningKeySummary[]> {
  return sql<SigningKeySummary[]>`
    select kid, status, created_at, retired_at
    from signing_keys
    order by case status when 'active' then 0 when 'next' then 1 else 2 end, retired_at desc, created_at desc
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

/** Makes the next key active; returns its kid, if there was a next key. */
export async function activateNextSigningKey(sql: Queryable): Promise<string | undefined> {
  const [row] = await sql<{ kid: string }[]>`
    update signing_keys
    set status = 'active'
    where status = 'next'
    returning kid
  `;
  return row?.kid;
}

export async function insertSigningKey(sql: Queryable, key: { kid: string; publicJwk: JWK; privateKeyCiphertext: Buffer; now: Date }, status: 'active' | 'next'): Promise<void> {
  await sql`
    insert into signing_keys (kid, public_jwk, private_key_ciphertext, status, created_at)
    values (${key.kid}, ${sql.json(key.publicJwk as Record<string, string>)}, ${key.privateKeyCiphertext}, ${status}, ${key.now})
  `;
}

/** The kids of the active and the next key (either may be missing). */
export async function findCurrentSigningKids(sql: Queryable): Promise<{ active?: string; next?: string }> {
  const rows = await sql<{ kid: string; status: 'active' | 'next' }[]>`
    select kid, status
    from signing_keys
    where status in ('active', 'next')
  `;
  return Object.fromEntries(rows.map((row) => [row.status, row.kid]));
}

/** Serialises key creation and rotation across instances (transaction-level advisory lock). */
export async function lockSigningKeys(sql: Queryable): Promise<void> {
  await sql`select pg_advisory_xact_lock(${SIGNING_KEYS_LOCK_KEY})`;
}

const SIGNING_KEYS_LOCK_KEY = 0x6a776b73; // "jwks"
