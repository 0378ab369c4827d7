#!/usr/bin/env node
// auth-server: the auth routes on their own port. Without DATABASE_URL it starts an embedded
// PostgreSQL in <data-dir>/postgres, so one command runs the whole service on a fresh machine.
import { startHttpServer } from '../http/server.js';
import net from 'node:net';
import { AUTH_SERVER_USAGE, defaultIssuer, parseAuthServerArgs, type AuthServerOptions } from './config.js';
import { formatAuthError } from './errors.js';
import { MAX_BODY_BYTES } from './limits.js';
import { createAuthService } from './mount.js';

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
  let reservation: net.Server | null = null;
  if (options.port === 0 && options.issuerIsDefault) {
    // The issuer names the port, so a port chosen by the system must be known before start-up.
    // It stays reserved (bound) until the HTTP server takes it, so the embedded PostgreSQL
    // cannot pick the same free port meanwhile.
    reservation = await reservePort(options.host);
    options.port = (reservation.address() as net.AddressInfo).port;
    options.service.issuer = defaultIssuer(options.host, options.port);
  }
  const service = await createAuthService({ ...options.service, log });
  await new Promise((resolve) => (reservation ? reservation.close(resolve) : resolve(undefined)));
  const server = await startHttpServer({
    host: options.host,
    port: options.port,
    routes: service.routes,
    formatError: formatAuthError,
    maxBodyBytes: MAX_BODY_BYTES,
    logError: (error, req) => log(`${req.method} ${req.path} failed: ${error.code} ${String(error.cause ?? error.message)}`),
  }).catch(async (error: unknown) => {
    await service.close();
    throw error;
  });
  log(`listening on http://${options.host}:${server.port} (issuer ${service.issuer})`);

  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log(`${signal}: shutting down`);
    server.close();
    service.close().then(() => process.exit(0), (error: unknown) => {
      log(`shutdown failed: ${String(error)}`);
      process.exit(1);
    });
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

function reservePort(host: string): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.on('error', reject);
    probe.listen(0, host, () => resolve(probe));
  });
}

main().catch((error: unknown) => {
  log(`failed to start: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
