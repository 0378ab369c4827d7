// Queries on the consents users gave third-party OAuth clients (migration 0024).
import type { Queryable } from '../database/client.js';

export interface ConsentRow {
  client_id: string;
  client_name: string;
  metadata_url: string | null;
  scopes: string[];
  granted_at: Date;
}

export async function findConsentScopes(sql: Queryable, userId: string, clientId: string): Promise<string[] | null> {
  const [row] = await sql<{ scopes: string[] }[]>`
    select scopes
    from oauth_consents
    where user_id = ${userId} and client_id = ${clientId}
  `;
  return row ? row.scopes : null;
}

/** Records the scopes granted, added to those granted before. */
export async function upsertConsent(sql: Queryable, consent: { userId: string; clientId: string; appId: string; scopes: string[]; now: Date }): Promise<void> {
  await sql`
    insert into oauth_consents (user_id, client_id, app_id, scopes, granted_at)
    values (${consent.userId}, ${consent.clientId}, ${consent.appId}, ${consent.scopes}::text[], ${consent.now})
    on conflict (user_id, client_id) do update
    set scopes = array(select distinct unnest(oauth_consents.scopes || excluded.scopes) order by 1), granted_at = excluded.granted_at
  `;
}

/** The user's consents (of one app, or all apps when appId is null), newest first. */
export async function listConsents(sql: Queryable, userId: string, appId: string | null): Promise<ConsentRow[]> {
  return sql<ConsentRow[]>`
    select k.client_id, c.name as client_name, c.metadata_url, k.scopes, k.granted_at
    from oauth_consents k
    join oauth_clients c on c.id = k.client_id
    where k.user_id = ${userId}
      ${appId === null ? sql`` : sql`and k.app_id = ${appId}`}
    order by k.granted_at desc, k.client_id
  `;
}

/** Deletes the consent; returns its app, or undefined when there was none. */
export async function deleteConsent(sql: Queryable, userId: string, clientId: string, appId: string | null): Promise<{ app_id: string } | undefined> {
  const [row] = await sql<{ app_id: string }[]>`
    delete from oauth_consents
    where user_id = ${userId} and client_id = ${clientId}
      ${appId === null ? sql`` : sql`and app_id = ${appId}`}
    returning app_id
  `;
  return row;
}

/** The user's live sessions of the client, locked for revocation. */
export async function lockFamiliesOfClient(sql: Queryable, userId: string, clientId: string): Promise<{ id: string; current_token_id: string }[]> {
  return sql<{ id: string; current_token_id: string }[]>`
    select id, current_token_id
    from refresh_families
    where user_id = ${userId} and client_id = ${clientId} and revoked_at is null
    order by id
    for update
  `;
}
