// Where a test finds the PostgreSQL cluster that the test run shares (test/setup/before.ts starts
// it, after.ts stops it): a state file named after the tap runner's PID, which is the parent of
// every test file. A process that a test file spawns (the auth suite on worker threads) gets the
// file's path in AUTH_TEST_POSTGRES_STATE.
import { readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface SharedPostgres {
  /** Superuser URL of the cluster's `postgres` database (for CREATE/DROP DATABASE). */
  adminUrl: string;
  /** The database that holds every migration and nothing else: copied by each test file. */
  template: string;
  /** The process that holds the cluster (it stops it at SIGTERM or when the runner is gone). */
  pid: number;
}

export const STATE_DIRECTORY = join(tmpdir(), 'llama-auth-suite-test-postgres');
export const STATE_ENV = 'AUTH_TEST_POSTGRES_STATE';

/** The state file of the run whose runner is `runnerPid`. */
export function stateFileOf(runnerPid: number): string {
  return join(STATE_DIRECTORY, `${runnerPid}.json`);
}

/** This process's state file: AUTH_TEST_POSTGRES_STATE, else its parent's (the tap runner). */
export function ownStateFile(): string {
  return process.env[STATE_ENV] || stateFileOf(process.ppid);
}

/** The run's shared cluster, or null (a test file run without tap: it starts its own). */
export function sharedPostgres(): SharedPostgres | null {
  try {
    return JSON.parse(readFileSync(ownStateFile(), 'utf8')) as SharedPostgres;
  } catch {
    return null;
  }
}

/** `url` naming another database of the same cluster. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}
