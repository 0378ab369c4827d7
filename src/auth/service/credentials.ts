// App and admin credentials. App secrets are 256-bit random strings, so their SHA-256 is stored
// (no slow hash needed); comparisons are constant-time. An unknown app and a wrong secret take
// the same path: one query, one hash, one comparison (against a dummy hash when no app is found).
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Queryable } from '../database/client.js';
import { authError } from '../errors.js';
import { findAppCredentials } from '../queries/apps.js';

export interface AuthenticatedApp {
  /** App UUID. */
  id: string;
  slug: string;
}

const UUID = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/;
/** Looked up instead of an app_id that is not a UUID, so the query still runs and finds nothing. */
const NO_APP = '00000000-0000-0000-0000-000000000000';
const DUMMY_HASH = createHash('sha256').update('no such app').digest();

/** Credentials as a query checks them: the app UUID (a nil UUID when app_id is not one) and the SHA-256 of the secret. */
export interface PresentedCredentials {
  appId: string;
  secretHash: Buffer;
}

export function presentedCredentials(appId: string, appSecret: string): PresentedCredentials {
  return { appId: UUID.test(appId) ? appId.toLowerCase() : NO_APP, secretHash: sha256(appSecret) };
}

/** 401 TOKEN_INVALID unless app_id names an app whose secret is app_secret. */
export async function authenticateApp(sql: Queryable, appId: string, appSecret: string): Promise<AuthenticatedApp> {
  const presented = presentedCredentials(appId, appSecret);
  const row = await findAppCredentials(sql, presented.appId);
  const matches = timingSafeEqual(presented.secretHash, row?.secret_hash ?? DUMMY_HASH);
  if (!row || !matches) throw authError('TOKEN_INVALID', 'Invalid app credentials');
  return { id: row.id, slug: row.slug };
}

/** A new app secret ("as_" + 32 random bytes, base64url) and the hash to store. */
export function generateAppSecret(): { secret: string; hash: Buffer } {
  const secret = `as_${randomBytes(32).toString('base64url')}`;
  return { secret, hash: sha256(secret) };
}

export function hashAdminKey(adminKey: string): Buffer {
  return sha256(adminKey);
}

/** 401 ADMIN_KEY_INVALID unless the X-Admin-Key header equals the configured admin key. */
export function checkAdminKey(expectedHash: Buffer, header: string | undefined): void {
  const matches = timingSafeEqual(sha256(header ?? ''), expectedHash);
  if (header === undefined || !matches) throw authError('ADMIN_KEY_INVALID');
}

export function isUuid(value: string): boolean {
  return UUID.test(value);
}

function sha256(text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest();
}
