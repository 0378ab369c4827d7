// Applies the numbered SQL files of src/auth/migrations/ (`0001_create_apps.sql`, ...) in order, inside one
// transaction, and records each in schema_migrations. An advisory lock serialises instances that
// start at the same time: the second waits, then finds everything applied.
//
// Then the function definitions of migrations/functions/ (`<function>.sql`, each the one current
// text of a function, `create or replace`): in the same transaction, each file whose SHA-256
// differs from the one recorded in schema_functions is run and recorded. A function changes by
// editing its file, so its history is the file's diff, not a new migration restating it whole
// (as 0012 and 0014 did for rotate_refresh_token). Numbered migrations are never edited once
// applied; a function file always is.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Sql } from './client.js';

/** Key of the transaction-level advisory lock held while migrating ("auth" in ASCII). */
const MIGRATION_LOCK_KEY = 0x61757468;
const FILE_NAME = /^(\d{4})_([a-z0-9_]+)\.sql$/;
const FUNCTION_FILE_NAME = /^[a-z0-9_]+\.sql$/;

/**
 * The migrations directory, src/auth/migrations: beside this module's folder when running from
 * src/ (ts-node) or from a copy that has them there; otherwise (tsc does not copy .sql files) in
 * the package root, the nearest folder above this module that holds src/auth/migrations: three
 * levels up from the compiled dist/auth/database/migrate.js, two from the bundle's
 * dist/bundle/<chunk>.js (scripts/bundle.mjs).
 */
export function migrationsDirectory(moduleUrl: string = import.meta.url): string {
  const beside = fileURLToPath(new URL('../migrations/', moduleUrl));
  if (existsSync(beside)) return beside;
  for (let dir = path.dirname(fileURLToPath(moduleUrl)); path.dirname(dir) !== dir; dir = path.dirname(dir)) {
    const inRoot = path.join(dir, 'src', 'auth', 'migrations');
    if (existsSync(inRoot)) return `${inRoot}${path.sep}`;
  }
  return beside; // reported by the caller's readdir, naming the path it looked for
}

/**
 * Returns the file names applied by this call, the numbered ones then `functions/<name>.sql`
 * (empty when the schema was up to date).
 */
export async function applyMigrations(sql: Sql, directory = migrationsDirectory()): Promise<string[]> {
  const files = (await fs.readdir(directory)).filter((name) => FILE_NAME.test(name)).sort();
  const sources = await Promise.all(files.map(async (name) => ({ name, version: Number(FILE_NAME.exec(name)![1]), text: await fs.readFile(path.join(directory, name), 'utf8') })));
  const functionsDirectory = path.join(directory, 'functions');
  const functionFiles = existsSync(functionsDirectory) ? (await fs.readdir(functionsDirectory)).filter((name) => FUNCTION_FILE_NAME.test(name)).sort() : [];
  const functions = await Promise.all(functionFiles.map(async (name) => {
    const text = await fs.readFile(path.join(functionsDirectory, name), 'utf8');
    return { name, text, checksum: createHash('sha256').update(text).digest('hex') };
  }));
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
    await tx`
      create table if not exists schema_functions (
        name text primary key,
        checksum text not null,
        applied_at timestamptz not null default now()
      )
    `;
    const recorded = new Map((await tx<{ name: string; checksum: string }[]>`select name, checksum from schema_functions`).map((row) => [row.name, row.checksum]));
    for (const definition of functions) {
      if (recorded.get(definition.name) === definition.checksum) continue;
      await tx.unsafe(definition.text);
      await tx`
        insert into schema_functions (name, checksum) values (${definition.name}, ${definition.checksum})
        on conflict (name) do update set checksum = excluded.checksum, applied_at = now()
      `;
      done.push(`functions/${definition.name}`);
    }
    return done;
  });
}
