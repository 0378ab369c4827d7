// The PostgreSQL cluster one test run shares, held by this process (started detached by
// before.ts): an embedded cluster in a temporary directory (fsync off), a database `auth_template`
// with every migration applied, and the state file that tells test files where it is. Each test
// file that needs the auth schema copies the template (CREATE DATABASE ... TEMPLATE, tens of
// milliseconds) instead of starting a cluster and migrating it (seconds).
//
// Stops the cluster and removes its directory and state file at SIGTERM (after.ts) or once the
// tap runner (argv[2]) is gone, so an interrupted run leaves nothing behind.
//
// Usage: node --import ./scripts/ts-loader.mjs test/setup/shared-postgres.ts <runner pid>
// Prints "ready" on stdout once the state file is written.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm, chmod } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import postgres from 'postgres';
import { startEmbeddedPostgres } from '../../src/auth/database/embedded-postgres.js';
import { applyMigrations } from '../../src/auth/database/migrate.js';
import { STATE_DIRECTORY, stateFileOf, withDatabase, type SharedPostgres } from './shared-postgres-state.js';

const TEMPLATE_DATABASE = 'auth_template';
/** How often the holder checks that the runner is still there. */
const RUNNER_CHECK_MS = 1000;

const runnerPid = Number(process.argv[2]);
if (!Number.isInteger(runnerPid) || runnerPid <= 0) throw new Error('usage: shared-postgres.ts <runner pid>');

const dir = await mkdtemp(join(tmpdir(), 'test-postgres-'));
await chmod(dir, 0o711); // as root, PostgreSQL runs as the postgres user and must enter it
const cluster = await startEmbeddedPostgres({ dir: join(dir, 'cluster'), disposable: true });
const stateFile = stateFileOf(runnerPid);

async function stop(): Promise<void> {
  rmSync(stateFile, { force: true });
  await cluster.stop();
  await rm(dir, { recursive: true, force: true });
  process.exit(0);
}
process.on('SIGTERM', () => void stop());
process.on('SIGINT', () => void stop());
setInterval(() => {
  try {
    process.kill(runnerPid, 0);
  } catch {
    void stop();
  }
}, RUNNER_CHECK_MS);

try {
  const admin = postgres(cluster.url, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${TEMPLATE_DATABASE}`);
  await admin.end();
  const template = postgres(withDatabase(cluster.url, TEMPLATE_DATABASE), { max: 1, onnotice: () => {} });
  await applyMigrations(template);
  await template.end(); // CREATE DATABASE ... TEMPLATE needs the template without connections
  mkdirSync(STATE_DIRECTORY, { recursive: true });
  const state: SharedPostgres = { adminUrl: cluster.url, template: TEMPLATE_DATABASE, pid: process.pid };
  writeFileSync(stateFile, JSON.stringify(state));
  process.stdout.write('ready\n');
} catch (error) {
  process.stderr.write(`shared PostgreSQL: ${(error as Error).stack}\n`);
  await cluster.stop();
  await rm(dir, { recursive: true, force: true });
  process.exit(1);
}
