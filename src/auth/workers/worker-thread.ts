// Entry of one auth-server worker thread: its own pool and key ring on the database the primary
// prepared (connectAuthService), and the auth routes on a uWS app listening on the shared port.
// Started by auth-workers.ts with a WorkerSetup as workerData; never run directly.
import { parentPort, workerData } from 'node:worker_threads';
import { startHttpServer, type HttpServer } from '../../http/server.js';
import { startTracing, stopTracing } from '../../telemetry/tracing.js';
import { ManualClock, systemClock } from '../clock.js';
import { formatAuthError } from '../errors.js';
import { connectAuthService, type AuthService } from '../mount.js';
import type { OtpDelivery } from '../otp/delivery.js';
import { Channel, type ChannelPort } from './channel.js';
import type { PrimaryCalls, WorkerCalls, WorkerSetup } from './protocol.js';

const setup = workerData as WorkerSetup;
let service: AuthService | null = null;
let server: HttpServer | null = null;

const channel: Channel<PrimaryCalls, WorkerCalls> = new Channel(parentPort as ChannelPort, {
  reloadSigningKeys: async () => { await service?.reloadSigningKeys(); },
  settle: async () => {},
  stop: async () => {
    server?.close();
    await service?.close();
    await stopTracing();
    // The answer goes out first; closing the port then lets the thread's event loop end.
    setImmediate(() => parentPort!.close());
  },
});

const log = (line: string): void => { void channel.call('log', line).catch(() => {}); };
const relayedDelivery: OtpDelivery = { name: 'primary', send: (message) => channel.call('deliverOtp', message) };

try {
  service = await connectAuthService({
    ...setup.service,
    otpDelivery: setup.otpDelivery === 'primary' ? relayedDelivery : setup.otpDelivery,
    clock: setup.clock ? new ManualClock(setup.clock) : systemClock,
    log,
    onSigningKeysRotated: () => channel.call('signingKeysRotated'),
  });
  // Each worker serves HTTP, so each traces its own requests (docs/telemetry.md); off without an OTLP endpoint.
  await startTracing('auth-server');
  server = await startHttpServer({
    host: setup.host,
    port: setup.port,
    routes: service.routes,
    formatError: formatAuthError,
    maxBodyBytes: setup.maxBodyBytes,
    logError: (error, req) => log(`${req.method} ${req.path} failed: ${error.code} ${String(error.cause ?? error.message)}`),
  });
} catch (error) {
  // The thread ends with this error (the primary's 'error' event); nothing may keep it alive.
  await service?.close();
  parentPort!.close();
  throw error;
}
await channel.call('listening', server.port);
