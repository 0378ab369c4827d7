// Queries on API keys (migration 0020). `key_hash` is the SHA-256 of the whole key.
import type { Queryable } from '../database/client.js';
import type { TenantSettings } from '../../inference/tenants/tenant.js';

export interface ApiKeyRow {
  id: string;
  app_id: string;
  tenant_id: string | null;
  name: string;
  role: string;
  display_prefix: string;
  concurrent_requests: number | null;
  requests_per_minute: number | null;
  tokens_per_minute: number | null;
  weight: TenantSettings['weight'];
  priority_class: TenantSettings['priorityClass'];
  created_at: Date;
  expires_at: Date | null;
  rotated_at: Date | null;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

/** A live key found by its hash, with its app's slug (what a verifier needs). */
export interface ApiKeyIdentityRow extends ApiKeyRow {
  app_slug: string;
}

export interface NewApiKey {
  appId: string;
  tenantId: string | null;
  name: string;
  role: string;
  keyHash: Buffer;
  displayPrefix: string;
  concurrentRequests: number | null;
  requestsPerMinute: number | null;
  tokensPerMinute: number | null;
  weight: TenantSettings['weight'];
  priorityClass: TenantSettings['priorityClass'];
  expiresAt: Date | null;
  now: Date;
}

const COLUMNS = `id, app_id, tenant_id, name, role, display_prefix, concurrent_requests, requests_per_minute, tokens_per_minute,
  weight, priority_class, created_at, expires_at, rotated_at, revoked_at, last_used_at`;
/** COLUMNS of the table aliased `k`. */
const K_COLUMNS = COLUMNS.split(',').map((column) => `k.${column.trim()}`).join(', ');

export async function insertApiKey(sql: Queryable, key: NewApiKey): Promise<ApiKeyRow> {
  const [row] = await sql<ApiKeyRow[]>`
    insert into api_keys (
      app_id, tenant_id, name, role, key_hash, display_prefix, concurrent_requests, requests_per_minute, tokens_per_minute,
      weight, priority_class, created_at, expires_at
    )
    values (
      ${key.appId}, ${key.tenantId}, ${key.name}, ${key.role}, ${key.keyHash}, ${key.displayPrefix}, ${key.concurrentRequests},
      ${key.requestsPerMinute}, ${key.tokensPerMinute}, ${key.weight}, ${key.priorityClass}, ${key.now}, ${key.expiresAt}
    )
    returning ${sql.unsafe(COLUMNS)}
  `;
  return row!;
}

/** The app's keys, oldest first, revoked ones included. */
export async function listApiKeys(sql: Queryable, appId: string): Promise<ApiKeyRow[]> {
  return sql<ApiKeyRow[]>`
    select ${sql.unsafe(COLUMNS)}
    from api_keys
    where app_id = ${appId}
    order by created_at, id
  `;
}

/** The key if the app has it; locked for the caller's transaction. */
export async function lockApiKey(sql: Queryable, appId: string, id: string): Promise<ApiKeyRow | undefined> {
  const [row] = await sql<ApiKeyRow[]>`
    select ${sql.unsafe(COLUMNS)}
    from api_keys
    where id = ${id} and app_id = ${appId}
    for update
  `;
  return row;
}

/** Replaces the key's hash (a rotation): the previous key no longer matches any row. */
export async function updateApiKeyHash(sql: Queryable, id: string, key: { keyHash: Buffer; displayPrefix: string; now: Date }): Promise<ApiKeyRow> {
  const [row] = await sql<ApiKeyRow[]>`
    update api_keys
    set key_hash = ${key.keyHash}, display_prefix = ${key.displayPrefix}, rotated_at = ${key.now}
    where id = ${id}
    returning ${sql.unsafe(COLUMNS)}
  `;
  return row!;
}

export async function setApiKeyRevokedAt(sql: Queryable, id: string, now: Date): Promise<ApiKeyRow> {
  const [row] = await sql<ApiKeyRow[]>`
    update api_keys
    set revoked_at = ${now}
    where id = ${id}
    returning ${sql.unsafe(COLUMNS)}
  `;
  return row!;
}

/** The key whose hash this is, unless it is revoked or expired at `now`. */
export async function findLiveApiKeyByHash(sql: Queryable, keyHash: Buffer, now: Date): Promise<ApiKeyIdentityRow | undefined> {
  const [row] = await sql<ApiKeyIdentityRow[]>`
    select ${sql.unsafe(K_COLUMNS)}, a.slug as app_slug
    from api_keys k
    join apps a on a.id = k.app_id
    where k.key_hash = ${keyHash}
      and k.revoked_at is null
      and (k.expires_at is null or k.expires_at > ${now})
  `;
  return row;
}

/**
 * Sets last_used_at unless it was set less than a minute before `now` (by this process or
 * another): concurrent writers of one key write the row once a minute at most.
 */
export async function touchApiKey(sql: Queryable, id: string, now: Date): Promise<void> {
  await sql`
    update api_keys
    set last_used_at = ${now}
    where id = ${id}
      and (last_used_at is null or last_used_at <= ${new Date(now.getTime() - 60_000)})
  `;
}

/** The channel on which a rotation or revocation names its key, at commit, to every process on the database. */
export const API_KEY_CHANNEL = 'auth_api_key_changes';

/** Tells the listeners of every instance (ApiKeyChanges.listen) that the key changed, when the caller's transaction commits. */
export async function notifyApiKeyChanged(sql: Queryable, id: string): Promise<void> {
  await sql`select pg_notify(${API_KEY_CHANNEL}, ${id})`;
}
