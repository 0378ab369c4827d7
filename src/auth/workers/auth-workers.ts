// auth-server on every core: one primary thread and N worker threads in one process.
//
// The primary does the start-up that must happen once (createAuthService: the embedded
// PostgreSQL when there is no DATABASE_URL, the migrations, the signing keys when the table
// lacks them) and serves no HTTP. Each worker thread then opens its own pool and key ring on
// that database (connectAuthService) and runs its own uWS app on the same port: uWS listens
// with SO_REUSEPORT on Linux, so the kernel spreads incoming connections over the workers.
// Refresh and /auth/me keep no state outside PostgreSQL, so any worker answers any request;
// everything that must be exact across workers already is, by row locks and advisory locks in
// the database (one winner of a refresh race, one key rotation at a time).
//
// What the primary still does while running: it writes the workers' log lines, hands their
// one-time codes to an OtpDelivery object it was given (a configured log/webhook delivery is
// built in each worker instead), and on a signing-key rotation by one worker has every other
// key ring of the process reload before the rotation is answered. A ManualClock is shared with
// the workers through its SharedArrayBuffer.
//
// Worker threads rather than processes (node:cluster): uWS.js supports one app per thread on a
// shared port, threads start in a fraction of a process's time and memory, the primary can
// share memory with them (the clock) and talk to them without serialising through pipes, and
// the whole server remains one process for signals and supervisors. A crash in native code
// would take every worker down, as it would take the single-threaded server down today.
import { reservePort } from './port-reservation.js';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ManualClock, systemClock, type Clock } from '../clock.js';
import type { AuthServiceConfig } from '../config.js';
import { MAX_BODY_BYTES } from '../limits.js';
import { createAuthService, type AuthService } from '../mount.js';
import type { OtpDelivery } from '../otp/delivery.js';
import { Channel } from './channel.js';
import type { PrimaryCalls, WorkerCalls, WorkerSetup } from './protocol.js';

/** Connections of the primary's own pool: start-up work, key reloads, tools. It serves no request. */
export const PRIMARY_POOL_SIZE = 2;
/** How long a worker may take to stop (its pool waits up to 5 s for running queries) before it is terminated. */
const WORKER_STOP_TIMEOUT_MS = 10_000;

const WORKER_ENTRY = new URL(`./worker-thread${path.extname(fileURLToPath(import.meta.url))}`, import.meta.url);

export interface AuthWorkersOptions {
  host: string;
  /**
   * 0: a free port is reserved before start-up (so that the embedded PostgreSQL cannot take it)
   * and released just before the workers listen on it. (uWS sets SO_REUSEPORT only on a port
   * given explicitly, so the workers cannot join a port that one of them picked.)
   */
  port: number;
  /** With port 0: the issuer for the port picked (auth-server's default issuer names its port). */
  issuerForPort?: (port: number) => string;
  /** Worker threads serving HTTP, at least 1. */
  workers: number;
  /** The service's settings; databasePoolSize is the pool of each worker. clock: the system clock or a ManualClock. */
  service: AuthServiceConfig;
  /**
   * Called once when a worker thread ends without being stopped (an error escaped it): the
   * server goes on with fewer workers. auth-server then shuts down, for its supervisor to restart it.
   */
  onWorkerLost?: (error: Error) => void;
}

export interface AuthWorkers {
  readonly port: number;
  readonly workers: number;
  /** The primary's service: its pool of PRIMARY_POOL_SIZE, issuer and key resolver. Its routes are not served. */
  readonly service: AuthService;
  /** Resolves once every message the workers posted before the call (log lines, codes) has been handled. */
  settle(): Promise<void>;
  /** Stops the workers (HTTP server, pool, key ring each), then the primary's pool and the embedded PostgreSQL. */
  close(): Promise<void>;
}

interface WorkerThread {
  readonly index: number;
  readonly channel: Channel<WorkerCalls, PrimaryCalls>;
  /** Resolves once the worker listens; rejects when it fails to start. */
  readonly listening: Promise<void>;
  readonly exited: Promise<void>;
  terminate(): Promise<number>;
}

export async function startAuthWorkers(options: AuthWorkersOptions): Promise<AuthWorkers> {
  if (!Number.isInteger(options.workers) || options.workers < 1) throw new Error(`the worker count must be an integer >= 1, got ${options.workers}`);
  const clock = sharedClock(options.service.clock);
  const { service, port } = await startPrimary(options);
  const threads = new WorkerThreads(options, service, port, clock);
  try {
    await threads.start(options.workers);
  } catch (error) {
    await threads.stop();
    await service.close();
    throw error;
  }
  let closing: Promise<void> | null = null;
  return {
    port,
    workers: options.workers,
    service,
    settle: () => threads.settle(),
    close() {
      closing ??= threads.stop().then(() => service.close());
      return closing;
    },
  };
}

/** The primary's service (the once-only start-up), on the port the workers will listen on. */
async function startPrimary(options: AuthWorkersOptions): Promise<{ service: AuthService; port: number }> {
  const reservation = options.port === 0 ? await reservePort(options.host) : null;
  const port = reservation ? (reservation.address() as net.AddressInfo).port : options.port;
  const issuer = reservation && options.issuerForPort ? options.issuerForPort(port) : options.service.issuer;
  try {
    const service = await createAuthService({ ...options.service, issuer, databasePoolSize: PRIMARY_POOL_SIZE, databaseApplicationName: 'auth-server primary' });
    return { service, port };
  } finally {
    await new Promise((resolve) => (reservation ? reservation.close(resolve) : resolve(undefined)));
  }
}

/** The worker threads of one server, and the primary's answers to their calls. */
class WorkerThreads {
  private readonly threads: WorkerThread[] = [];
  private readonly log: (line: string) => void;
  /** The primary's delivery object, or null when each worker builds the configured delivery. */
  private readonly delivery: OtpDelivery | null;
  /** All listen: from then on, a worker that ends unasked is reported to onWorkerLost. */
  private started = false;
  private stopping = false;
  private lost = false;

  constructor(
    private readonly options: AuthWorkersOptions,
    private readonly service: AuthService,
    private readonly port: number,
    private readonly clock: SharedArrayBuffer | null,
  ) {
    this.log = options.service.log ?? ((line: string) => { process.stderr.write(`[auth-server] ${line}\n`); });
    this.delivery = 'send' in options.service.otpDelivery ? options.service.otpDelivery : null;
  }

  /** Starts `count` workers; resolves once all listen, rejects when one fails to start. */
  async start(count: number): Promise<void> {
    for (let i = 0; i < count; i++) this.threads.push(this.spawn(i));
    await Promise.all(this.threads.map((thread) => thread.listening));
    this.started = true;
  }

  async settle(): Promise<void> {
    await Promise.all(this.threads.map((thread) => thread.channel.call('settle').catch(() => {})));
  }

  /** Asks every worker to stop and waits for its thread to end (terminating it after WORKER_STOP_TIMEOUT_MS). */
  async stop(): Promise<void> {
    this.stopping = true;
    await Promise.all(this.threads.map(async (thread) => {
      await thread.channel.call('stop').catch(() => {});
      const timer = setTimeout(() => { void thread.terminate(); }, WORKER_STOP_TIMEOUT_MS);
      await thread.exited;
      clearTimeout(timer);
    }));
  }

  private spawn(index: number): WorkerThread {
    const { service: config } = this.options;
    const setup: WorkerSetup = {
      index,
      host: this.options.host,
      port: this.port,
      service: {
        ...config, otpDelivery: undefined, clock: undefined, log: undefined, onSigningKeysRotated: undefined,
        issuer: this.service.issuer, databaseUrl: this.service.databaseUrl, databaseApplicationName: `auth-server worker ${index}`,
      } as WorkerSetup['service'],
      otpDelivery: this.delivery ? 'primary' : config.otpDelivery as Exclude<WorkerSetup['otpDelivery'], 'primary'>,
      clock: this.clock,
      maxBodyBytes: MAX_BODY_BYTES,
    };
    const worker = new Worker(WORKER_ENTRY, { workerData: setup });
    let listened: () => void = () => {};
    let failedToStart: (error: Error) => void = () => {};
    const listening = new Promise<void>((resolve, reject) => { listened = resolve; failedToStart = reject; });
    const channel = new Channel<WorkerCalls, PrimaryCalls>(worker, {
      listening: async () => { listened(); },
      log: async (line) => { this.log(line); },
      deliverOtp: async (message) => {
        if (!this.delivery) throw new Error('no OTP delivery object in the primary');
        await this.delivery.send(message);
      },
      signingKeysRotated: () => this.reloadAfterRotation(index),
    });
    let error: Error | null = null;
    worker.on('error', (thrown) => { error = thrown instanceof Error ? thrown : new Error(String(thrown)); });
    const exited = new Promise<void>((resolve) => worker.on('exit', (code) => {
      const reason = error ?? new Error(`auth worker ${index} exited with code ${code}`);
      channel.close(reason);
      failedToStart(reason);
      this.onExit(index, reason);
      resolve();
    }));
    return { index, channel, listening, exited, terminate: () => worker.terminate() };
  }

  private onExit(index: number, reason: Error): void {
    if (!this.started || this.stopping || this.lost) return;
    this.lost = true;
    this.log(`auth worker ${index} ended unexpectedly: ${reason.message}`);
    this.options.onWorkerLost?.(reason);
  }

  /** After a rotation by worker `index`: the primary's ring and every other worker's reload. A failed reload is logged. */
  private async reloadAfterRotation(index: number): Promise<void> {
    const others = this.threads.filter((thread) => thread.index !== index);
    const reloads = [this.service.reloadSigningKeys(), ...others.map((thread) => thread.channel.call('reloadSigningKeys'))];
    await Promise.all(reloads.map((reload) => reload.catch((error: unknown) => {
      this.log(`signing keys: a reload after a rotation failed (the periodic reload will retry): ${error instanceof Error ? error.message : String(error)}`);
    })));
  }
}

/** The shared memory of a ManualClock, null for the system clock; other clocks cannot reach a worker. */
function sharedClock(clock: Clock | undefined): SharedArrayBuffer | null {
  if (clock === undefined || clock === systemClock) return null;
  if (clock instanceof ManualClock) return clock.shared;
  throw new Error('worker threads can share only the system clock or a ManualClock');
}
