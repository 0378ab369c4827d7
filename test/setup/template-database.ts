// A database of its own for one test file, copied from the run's migrated template
// (shared-postgres.ts): every migration applied, no rows, no signing key.
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';
import { sharedPostgres, withDatabase } from './shared-postgres-state.js';

export interface TestDatabase {
  url: string;
  /** Drops the database, ending any connection still open to it. */
  drop(): Promise<void>;
}

/** A fresh copy of the template, or null when the run shares no cluster (the caller starts its own). */
export async function copyTemplateDatabase(): Promise<TestDatabase | null> {
  const shared = sharedPostgres();
  if (!shared) return null;
  const name = `test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = postgres(shared.adminUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`create database ${name} template ${shared.template}`);
  } finally {
    await admin.end();
  }
  return {
    url: withDatabase(shared.adminUrl, name),
    async drop() {
      const admin = postgres(shared.adminUrl, { max: 1, onnotice: () => {} });
      try {
        await admin.unsafe(`drop database if exists ${name} with (force)`);
      } finally {
        await admin.end();
      }
    },
  };
}
