#!/usr/bin/env node
// auth-server: the auth routes on their own port, served by --workers threads (default: one per
// core; see workers/auth-workers.ts). Without DATABASE_URL it starts an embedded PostgreSQL in
// <data-dir>/postgres, so one command runs the whole service on a fresh machine.
import { AUTH_SERVER_USAGE, defaultIssuer, parseAuthServerArgs, type AuthServerOptions } from './config.js';
import { startAuthWorkers, type AuthWorkers } from './workers/auth-workers.js';

const log = (line: string): void => { process.stderr.write(`[auth-server] ${line}\n`); };

async function main(): Promise<void> {
  let options: AuthServerOptions | 'help';
  try {
    options = parseAuthServerArgs(process.argv.slice(2), process.env);
  } catch (error) {
    process.stderr.write(`auth-server: ${(error as Error).message}\n\n${AUTH_SERVER_USAGE}\n`);
    process.exit(2);
  }
  if (options === 'help') {
    process.stdout.write(`${AUTH_SERVER_USAGE}\n`);
    return;
  }
  const { host } = options;
  let server: AuthWorkers | null = null;
  let stopping = false;
  const stop = (reason: string, exitCode: number): void => {
    if (stopping) return;
    stopping = true;
    log(`${reason}: shutting down`);
    // Every worker closes its HTTP server, then its pool and key ring; then the primary's pool
    // and the embedded PostgreSQL stop.
    (server?.close() ?? Promise.resolve()).then(() => process.exit(exitCode), (error: unknown) => {
      log(`shutdown failed: ${String(error)}`);
      process.exit(1);
    });
  };
  server = await startAuthWorkers({
    host,
    port: options.port,
    // The issuer names the port, so a port chosen by the system is known before start-up.
    issuerForPort: options.issuerIsDefault ? (port) => defaultIssuer(host, port) : undefined,
    workers: options.workers,
    service: { ...options.service, log },
    onWorkerLost: () => stop('a worker thread failed', 1),
  });
  log(`listening on http://${host}:${server.port} (issuer ${server.service.issuer}; ${server.workers} worker threads, ${options.service.databasePoolSize} database connections each)`);
  process.on('SIGINT', () => stop('SIGINT', 0));
  process.on('SIGTERM', () => stop('SIGTERM', 0));
}

main().catch((error: unknown) => {
  log(`failed to start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
