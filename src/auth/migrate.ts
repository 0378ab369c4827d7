// Applies the numbered SQL files of migrations/ (`0001_create_apps.sql`, ...) in order, inside one
// transaction, and records each in schema_migrations. An advisory lock serialises instances that
// start at the same time: the second waits, then finds everything applied.
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Sql } from './db.js';

/** Key of the transaction-level advisory lock held while migrating ("auth" in ASCII). */
const MIGRATION_LOCK_KEY = 0x61757468;
const FILE_NAME = /^(\d{4})_([a-z0-9_]+)\.sql$/;

/**
 * The migrations directory: next to this module when running from src/ (ts-node), or
 * `<package root>/src/auth/migrations` when running the compiled dist/auth/migrate.js
 * (tsc does not copy .sql files).
 */
export function migrationsDirectory(moduleUrl: string = import.meta.url): string {
  const beside = fileURLToPath(new URL('./migrations/', moduleUrl));
  if (existsSync(beside)) return beside;
  return fileURLToPath(new URL('../../src/auth/migrations/', moduleUrl));
}

/** Returns the file names applied by this call (empty when the schema was up to date). */
export async function applyMigrations(sql: Sql, directory = migrationsDirectory()): Promise<string[]> {
  const files = (await fs.readdir(directory)).filter((name) => FILE_NAME.test(name)).sort();
  const sources = await Promise.all(files.map(async (name) => ({ name, version: Number(FILE_NAME.exec(name)![1]), text: await fs.readFile(path.join(directory, name), 'utf8') })));
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(${MIGRATION_LOCK_KEY})`;
    await tx`
      create table if not exists schema_migrations (
        version integer primary key,
        name text not null,
        applied_at timestamptz not null default now()
      )
    `;
    const applied = new Set((await tx<{ version: number }[]>`select version from schema_migrations`).map((row) => row.version));
    const done: string[] = [];
    for (const migration of sources) {
      if (applied.has(migration.version)) continue;
      await tx.unsafe(migration.text);
      await tx`insert into schema_migrations (version, name) values (${migration.version}, ${migration.name})`;
      done.push(migration.name);
    }
    return done;
  });
}
