// Queries on upstream identities linked to users (migration 0030), keyed by (issuer, subject).
import type { Queryable } from '../database/client.js';

export interface UserIdentityRow {
  id: string;
  user_id: string;
  provider_id: string | null;
  issuer: string;
  subject: string;
  email: string | null;
  email_verified: boolean;
  created_at: Date;
  last_used_at: Date;
}

/** The identity, locked `for update` until the caller's transaction ends. */
export async function lockIdentity(sql: Queryable, issuer: string, subject: string): Promise<UserIdentityRow | undefined> {
  const [row] = await sql<UserIdentityRow[]>`
    select * from user_identities
    where issuer = ${issuer} and subject = ${subject}
    for update
  `;
  return row;
}

/** Links an identity; returns undefined when (issuer, subject) is already linked (a concurrent first sign-in). */
export async function insertIdentity(sql: Queryable, identity: {
  id: string; userId: string; providerId: string; issuer: string; subject: string; email: string | null; emailVerified: boolean; now: Date;
}): Promise<UserIdentityRow | undefined> {
  const [row] = await sql<UserIdentityRow[]>`
    insert into user_identities (id, user_id, provider_id, issuer, subject, email, email_verified, created_at, last_used_at)
    values (${identity.id}, ${identity.userId}, ${identity.providerId}, ${identity.issuer}, ${identity.subject}, ${identity.email}, ${identity.emailVerified}, ${identity.now}, ${identity.now})
    on conflict (issuer, subject) do nothing
    returning *
  `;
  return row;
}

/** Records a sign-in with the identity and what the provider now says about the address. */
export async function recordIdentityUse(sql: Queryable, id: string, use: { email: string | null; emailVerified: boolean; now: Date }): Promise<void> {
  await sql`
    update user_identities
    set email = ${use.email}, email_verified = ${use.emailVerified}, last_used_at = ${use.now}
    where id = ${id}
  `;
}

export async function listIdentitiesOfUser(sql: Queryable, userId: string): Promise<UserIdentityRow[]> {
  return sql<UserIdentityRow[]>`
    select * from user_identities
    where user_id = ${userId}
    order by created_at, id
  `;
}

export async function deleteIdentity(sql: Queryable, userId: string, id: string): Promise<UserIdentityRow | undefined> {
  const [row] = await sql<UserIdentityRow[]>`
    delete from user_identities
    where id = ${id} and user_id = ${userId}
    returning *
  `;
  return row;
}

/**
 * How many ways the user has to sign in other than the identity `exceptId`: an e-mail address
 * or phone number (a code), a passkey of any app, another linked identity.
 */
export async function countOtherSignInMethods(sql: Queryable, userId: string, exceptId: string): Promise<number> {
  const [row] = await sql<{ count: number }[]>`
    select
      (select (email is not null)::int + (phone is not null)::int from users where id = ${userId})
      + (select count(*)::int from passkeys where user_id = ${userId})
      + (select count(*)::int from user_identities where user_id = ${userId} and id <> ${exceptId})
      as count
  `;
  return row!.count;
}
