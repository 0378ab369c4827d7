// What auth-server's primary thread and its worker threads tell each other (see auth-workers.ts).
import type { AuthServiceConfig } from '../config.js';
import type { OtpDeliveryConfig, OtpMessage } from '../otp/delivery.js';

/** The calls a worker makes on the primary. */
export interface PrimaryCalls {
  /** The worker's HTTP server listens on `port`: it serves requests from now on. */
  listening(port: number): Promise<void>;
  /** A line for the service's log. */
  log(line: string): Promise<void>;
  /** Hands a one-time code to the delivery object the primary was given (tests, embedders). */
  deliverOtp(message: OtpMessage): Promise<void>;
  /** This worker rotated the signing keys: resolves once every other key ring of the process has reloaded. */
  signingKeysRotated(): Promise<void>;
}

/** The calls the primary makes on a worker. */
export interface WorkerCalls {
  reloadSigningKeys(): Promise<void>;
  /** Resolves once every message this worker posted before has been posted: the answer comes after them. */
  settle(): Promise<void>;
  /** Closes the worker's HTTP server, then its pool and key ring; the thread exits after answering. */
  stop(): Promise<void>;
}

/** The service settings that can cross into a worker (no functions, no objects with methods). */
export type WorkerServiceConfig = Omit<AuthServiceConfig, 'otpDelivery' | 'clock' | 'log' | 'onSigningKeysRotated' | 'databaseUrl'> & { databaseUrl: string };

/** A worker's workerData. */
export interface WorkerSetup {
  index: number;
  host: string;
  /** The port every worker listens on (SO_REUSEPORT); 0 only for the first worker, which picks it. */
  port: number;
  service: WorkerServiceConfig;
  /** A configured delivery the worker builds itself, or 'primary' to relay each code to the primary. */
  otpDelivery: OtpDeliveryConfig | OtpDeliveryConfig[] | 'primary';
  /** The shared memory of a ManualClock, or null for the system clock. */
  clock: SharedArrayBuffer | null;
  maxBodyBytes: number;
}
