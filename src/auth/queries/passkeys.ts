// Queries on passkeys, the apps' relying-party settings and the ceremonies in progress (migration 0017).
import type { Queryable } from '../database/client.js';

export interface PasskeySettingsRow {
  app_id: string;
  rp_id: string;
  rp_name: string;
  origins: string[];
  updated_at: Date;
}

export async function upsertPasskeySettings(sql: Queryable, settings: { appId: string; rpId: string; rpName: string; origins: string[]; now: Date }): Promise<PasskeySettingsRow> {
  const [row] = await sql<PasskeySettingsRow[]>`
    insert into app_passkey_settings (app_id, rp_id, rp_name, origins, updated_at)
    values (${settings.appId}, ${settings.rpId}, ${settings.rpName}, ${settings.origins}, ${settings.now})
    on conflict (app_id) do update
    set rp_id = excluded.rp_id, rp_name = excluded.rp_name, origins = excluded.origins, updated_at = excluded.updated_at
    returning app_id, rp_id, rp_name, origins, updated_at
  `;
  return row!;
}

export async function findPasskeySettings(sql: Queryable, appId: string): Promise<PasskeySettingsRow | undefined> {
  const [row] = await sql<PasskeySettingsRow[]>`
    select app_id, rp_id, rp_name, origins, updated_at
    from app_passkey_settings
    where app_id = ${appId}
  `;
  return row;
}

export interface PasskeyRow {
  id: string;
  app_id: string;
  user_id: string;
  credential_id: string;
  public_key: Buffer;
  sign_count: string;
  transports: string[];
  backup_eligible: boolean;
  backed_up: boolean;
  aaguid: string;
  name: string;
  created_at: Date;
  last_used_at: Date | null;
}

export async function insertPasskey(sql: Queryable, passkey: {
  id: string; appId: string; userId: string; credentialId: string; publicKey: Uint8Array; signCount: number; transports: string[];
  backupEligible: boolean; backedUp: boolean; aaguid: string; name: string; now: Date;
}): Promise<PasskeyRow> {
  const [row] = await sql<PasskeyRow[]>`
    insert into passkeys (id, app_id, user_id, credential_id, public_key, sign_count, transports, backup_eligible, backed_up, aaguid, name, created_at)
    values (
      ${passkey.id}, ${passkey.appId}, ${passkey.userId}, ${passkey.credentialId}, ${Buffer.from(passkey.publicKey)}, ${passkey.signCount},
      ${passkey.transports}, ${passkey.backupEligible}, ${passkey.backedUp}, ${passkey.aaguid}, ${passkey.name}, ${passkey.now}
    )
    returning *
  `;
  return row!;
}

export async function listPasskeysOfUser(sql: Queryable, appId: string, userId: string): Promise<PasskeyRow[]> {
  return sql<PasskeyRow[]>`
    select * from passkeys
    where app_id = ${appId} and user_id = ${userId}
    order by created_at, id
  `;
}

/** Locks the credential for the login that uses it: two assertions of one credential are judged one after the other. */
export async function lockPasskeyByCredentialId(sql: Queryable, appId: string, credentialId: string): Promise<PasskeyRow | undefined> {
  const [row] = await sql<PasskeyRow[]>`
    select * from passkeys
    where app_id = ${appId} and credential_id = ${credentialId}
    for update
  `;
  return row;
}

export async function recordPasskeyUse(sql: Queryable, use: { id: string; signCount: number; backedUp: boolean; now: Date }): Promise<void> {
  await sql`
    update passkeys
    set sign_count = ${use.signCount}, backed_up = ${use.backedUp}, last_used_at = ${use.now}
    where id = ${use.id}
  `;
}

/** Deletes the user's passkey; returns it, or undefined when the user has no such passkey. */
export async function deletePasskey(sql: Queryable, appId: string, userId: string, id: string): Promise<PasskeyRow | undefined> {
  const [row] = await sql<PasskeyRow[]>`
    delete from passkeys
    where id = ${id} and app_id = ${appId} and user_id = ${userId}
    returning *
  `;
  return row;
}

export async function insertPasskeyCeremony(sql: Queryable, ceremony: {
  id: string; appId: string; userId: string | null; kind: 'registration' | 'login'; challenge: string; expiresAt: Date; now: Date;
}): Promise<void> {
  // Ended ceremonies of the app go on the way: the table holds only those in progress.
  await sql`delete from passkey_ceremonies where app_id = ${ceremony.appId} and expires_at <= ${ceremony.now}`;
  await sql`
    insert into passkey_ceremonies (id, app_id, user_id, kind, challenge, expires_at)
    values (${ceremony.id}, ${ceremony.appId}, ${ceremony.userId}, ${ceremony.kind}, ${ceremony.challenge}, ${ceremony.expiresAt})
  `;
}

/**
 * Uses up a ceremony: deletes it and returns its challenge when it is of this app and kind, not
 * expired. A single delete, so of two verifications presenting it only one gets the challenge.
 */
export async function takePasskeyCeremony(sql: Queryable, ceremony: { id: string; appId: string; kind: 'registration' | 'login'; now: Date }): Promise<{ user_id: string | null; challenge: string } | undefined> {
  const [row] = await sql<{ user_id: string | null; challenge: string; expires_at: Date }[]>`
    delete from passkey_ceremonies
    where id = ${ceremony.id} and app_id = ${ceremony.appId} and kind = ${ceremony.kind}
    returning user_id, challenge, expires_at
  `;
  return row && row.expires_at > ceremony.now ? { user_id: row.user_id, challenge: row.challenge } : undefined;
}
