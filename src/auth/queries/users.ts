// Queries on users (global identities) and app memberships.
import type { Queryable } from '../database/client.js';

export interface UserRow {
  id: string;
  email: string | null;
  phone: string | null;
  created_at: Date;
  deleted_at: Date | null;
}

export type Identifier = { channel: 'email' | 'phone'; value: string };

/**
 * Returns the user with this e-mail address or phone number, creating it when absent. Safe
 * against two first logins at once: the loser's insert does nothing and the select (a new
 * statement, so a new snapshot) sees the winner's committed row. An existing user is locked
 * `for share` until the caller's transaction ends, so a concurrent soft-delete (which locks the
 * user `for update`) either commits first, and this returns deleted_at set, or waits, and then
 * sees and revokes the session this login starts.
 */
export async function findOrInsertUser(sql: Queryable, identifier: Identifier, now: Date): Promise<UserRow> {
  const email = identifier.channel === 'email' ? identifier.value : null;
  const phone = identifier.channel === 'phone' ? identifier.value : null;
  const [inserted] = await sql<UserRow[]>`
    insert into users (email, phone, created_at)
    values (${email}, ${phone}, ${now})
    on conflict do nothing
    returning id, email, phone, created_at, deleted_at
  `;
  if (inserted) return inserted;
  const [existing] = identifier.channel === 'email'
    ? await sql<UserRow[]>`
        select id, email, phone, created_at, deleted_at
        from users
        where email = ${identifier.value}
        for share
      `
    : await sql<UserRow[]>`
        select id, email, phone, created_at, deleted_at
        from users
        where phone = ${identifier.value}
        for share
      `;
  return existing!;
}

/** A user known by a linked upstream identity only: the provider proved no address we trust. */
export async function insertUserWithoutAddress(sql: Queryable, now: Date): Promise<UserRow> {
  const [row] = await sql<UserRow[]>`
    insert into users (email, phone, created_at)
    values (null, null, ${now})
    returning id, email, phone, created_at, deleted_at
  `;
  return row!;
}

export async function findUser(sql: Queryable, id: string): Promise<UserRow | undefined> {
  const [row] = await sql<UserRow[]>`
    select id, email, phone, created_at, deleted_at
    from users
    where id = ${id}
  `;
  return row;
}

/** The user with this normalised e-mail address or phone number (see service/identity.ts). */
export async function findUserByIdentifier(sql: Queryable, identifier: Identifier): Promise<UserRow | undefined> {
  const [row] = identifier.channel === 'email'
    ? await sql<UserRow[]>`
        select id, email, phone, created_at, deleted_at
        from users
        where email = ${identifier.value}
      `
    : await sql<UserRow[]>`
        select id, email, phone, created_at, deleted_at
        from users
        where phone = ${identifier.value}
      `;
  return row;
}

/** Locks the user row: soft-delete, restore and role assignment serialise on it. */
export async function lockUser(sql: Queryable, id: string): Promise<UserRow | undefined> {
  const [row] = await sql<UserRow[]>`
    select id, email, phone, created_at, deleted_at
    from users
    where id = ${id}
    for update
  `;
  return row;
}

export async function setUserDeletedAt(sql: Queryable, id: string, deletedAt: Date | null): Promise<UserRow | undefined> {
  const [row] = await sql<UserRow[]>`
    update users
    set deleted_at = ${deletedAt}
    where id = ${id}
    returning id, email, phone, created_at, deleted_at
  `;
  return row;
}

/** Records a login to the app: creates the membership or refreshes last_login_at. */
export async function upsertMembership(sql: Queryable, appId: string, userId: string, now: Date): Promise<void> {
  await sql`
    insert into app_memberships (app_id, user_id, created_at, last_login_at)
    values (${appId}, ${userId}, ${now}, ${now})
    on conflict (app_id, user_id) do update
    set last_login_at = excluded.last_login_at
  `;
}

/** The member of an app, locked (`for share` of the user) so a concurrent soft-delete waits. */
export async function findMember(sql: Queryable, appId: string, userId: string): Promise<UserRow | undefined> {
  const [row] = await sql<UserRow[]>`
    select u.id, u.email, u.phone, u.created_at, u.deleted_at
    from app_memberships m
    join users u on u.id = m.user_id
    where m.app_id = ${appId} and m.user_id = ${userId}
    for share of u
  `;
  return row;
}
