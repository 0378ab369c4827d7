// Sends the outbox's webhook deliveries. One dispatcher runs in the primary thread of each
// instance (createAuthService, unless --webhook-dispatch 0). It wakes on the NOTIFY that a commit
// enqueueing deliveries sends, and polls every pollMs for retries that came due (and for a
// NOTIFY missed while its connection was down).
//
// A batch is claimed with `for update skip locked` in a transaction that stays open while its
// messages are sent, and records each outcome before committing. So a delivery is sent by one
// dispatcher at a time across all instances, and a process that dies (kill -9) before the
// commit leaves its deliveries pending, their locks released with its connection: they are sent
// again after the restart. The guarantee is at least once: a process killed after a receiver
// answered 2xx but before the commit sends that message again, with the same webhook-id, which
// receivers use to drop duplicates (as Standard Webhooks says).
import type { Clock } from '../clock.js';
import type { Sql } from '../database/client.js';
import { claimDueDeliveries, recordDeliveryAttempt, WEBHOOK_CHANNEL, type DueDelivery } from '../queries/webhooks.js';
import { unseal } from '../tokens/sealed-box.js';
import { signedWebhookHeaders } from './signature.js';

export interface WebhookDispatcherOptions {
  sql: Sql;
  clock: Clock;
  /** Opens the sealed secrets of the endpoints. */
  secretKey: Buffer;
  /** Seconds to wait after the nth failed attempt; after the last, the delivery is dead. */
  retryDelaysSeconds: readonly number[];
  pollMs: number;
  /** Per attempt; a receiver slower than this has failed. */
  timeoutMs: number;
  log: (line: string) => void;
}

/** Deliveries claimed per transaction (sent in parallel). */
const BATCH_SIZE = 16;
/** Longest error text kept in last_error. */
const MAX_ERROR_CHARS = 500;

export class WebhookDispatcher {
  private running: Promise<void> | null = null;
  private again = false;
  private stopped = false;
  private timer: NodeJS.Timeout | null = null;
  private unlisten: (() => Promise<void>) | null = null;

  constructor(private readonly options: WebhookDispatcherOptions) {}

  async start(): Promise<void> {
    const listening = await this.options.sql.listen(WEBHOOK_CHANNEL, () => this.kick());
    this.unlisten = () => listening.unlisten();
    this.timer = setInterval(() => this.kick(), this.options.pollMs);
    this.timer.unref();
    this.kick();
  }

  /** Sends what is due now; a kick during a run makes the run go round once more. */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.drain().finally(() => { this.running = null; });
  }

  /** Stops polling and listening, and waits for the batch in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    await this.unlisten?.().catch(() => {});
    await this.running;
  }

  private async drain(): Promise<void> {
    try {
      do {
        this.again = false;
        while (!this.stopped && (await this.sendBatch()) === BATCH_SIZE) { /* a full batch: more may be due */ }
      } while (this.again && !this.stopped);
    } catch (error) {
      this.options.log(`webhooks: dispatch failed (retried at the next poll): ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /** Claims, sends and records one batch in one transaction; returns how many it claimed. */
  private sendBatch(): Promise<number> {
    return this.options.sql.begin(async (tx) => {
      const due = await claimDueDeliveries(tx, new Date(this.options.clock.now()), BATCH_SIZE);
      const outcomes = await Promise.all(due.map((delivery) => this.send(delivery)));
      const now = this.options.clock.now();
      for (const [i, delivery] of due.entries()) {
        const outcome = outcomes[i]!;
        const delay = this.options.retryDelaysSeconds[delivery.attempts];
        await recordDeliveryAttempt(tx, {
          id: delivery.id,
          now: new Date(now),
          status: outcome.status,
          error: outcome.error,
          delivered: outcome.delivered,
          retryAt: outcome.delivered || delay === undefined ? null : new Date(now + delay * 1000),
        });
        if (!outcome.delivered && delay === undefined) this.options.log(`webhooks: delivery msg_${delivery.id} is dead after ${delivery.attempts + 1} attempts: ${outcome.error}`);
      }
      return due.length;
    });
  }

  /** One POST of the message; any 2xx answer delivers it, anything else (or no answer in time) fails. */
  private async send(delivery: DueDelivery): Promise<{ delivered: boolean; status: number | null; error: string | null }> {
    try {
      const secret = unseal(this.options.secretKey, delivery.secret_ciphertext, delivery.endpoint_id).toString('utf8');
      const body = JSON.stringify(delivery.payload);
      const timestamp = Math.floor(this.options.clock.now() / 1000);
      const response = await fetch(delivery.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'auth-server-webhooks', ...signedWebhookHeaders(secret, `msg_${delivery.id}`, timestamp, body) },
        body,
        redirect: 'manual',
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
      await response.body?.cancel();
      const delivered = response.status >= 200 && response.status < 300;
      return { delivered, status: response.status, error: delivered ? null : `the endpoint answered ${response.status}` };
    } catch (error) {
      // fetch's own message is "fetch failed"; the reason (ECONNREFUSED, a TLS error) is its cause.
      const cause = error instanceof Error && error.cause instanceof Error ? ` (${(error.cause as NodeJS.ErrnoException).code ?? error.cause.message})` : '';
      const message = error instanceof Error ? `${error.name}: ${error.message}${cause}` : String(error);
      return { delivered: false, status: null, error: message.slice(0, MAX_ERROR_CHARS) };
    }
  }
}
