// Queries on apps. `secret_hash` is the SHA-256 of the app secret.
import type { Queryable } from '../database/client.js';

export interface AppRow {
  id: string;
  slug: string;
  name: string;
  created_at: Date;
  secret_rotated_at: Date | null;
}

export interface AppCredentialRow {
  id: string;
  slug: string;
  secret_hash: Buffer;
}

export async function insertApp(sql: Queryable, app: { slug: string; name: string; secretHash: Buffer; now: Date }): Promise<AppRow> {
  const [row] = await sql<AppRow[]>`
    insert into apps (slug, name, secret_hash, created_at)
    values (${app.slug}, ${app.name}, ${app.secretHash}, ${app.now})
    returning id, slug, name, created_at, secret_rotated_at
  `;
  return row!;
}

export async function findApp(sql: Queryable, id: string): Promise<AppRow | undefined> {
  const [row] = await sql<AppRow[]>`
    select id, slug, name, created_at, secret_rotated_at
    from apps
    where id = ${id}
  `;
  return row;
}

export async function findAppBySlug(sql: Queryable, slug: string): Promise<AppRow | undefined> {
  const [row] = await sql<AppRow[]>`
    select id, slug, name, created_at, secret_rotated_at
    from apps
    where slug = ${slug}
  `;
  return row;
}

export async function listApps(sql: Queryable): Promise<AppRow[]> {
  return sql<AppRow[]>`
    select id, slug, name, created_at, secret_rotated_at
    from apps
    order by created_at, id
  `;
}

/** The credential check's one query; `id` must be a syntactically valid UUID. */
export async function findAppCredentials(sql: Queryable, id: string): Promise<AppCredentialRow | undefined> {
  const [row] = await sql<AppCredentialRow[]>`
    select id, slug, secret_hash
    from apps
    where id = ${id}
  `;
  return row;
}

export async function updateAppSecret(sql: Queryable, id: string, secretHash: Buffer, now: Date): Promise<AppRow | undefined> {
  const [row] = await sql<AppRow[]>`
    update apps
    set secret_hash = ${secretHash}, secret_rotated_at = ${now}
    where id = ${id}
    returning id, slug, name, created_at, secret_rotated_at
  `;
  return row;
}
