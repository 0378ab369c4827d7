// How one-time codes reach users. Pluggable: `log` prints the code (development only),
// `webhook` POSTs it to an SMS / e-mail bridge, `smtp` e-mails it (smtp.ts), `sms` sends it
// through a Twilio-shaped HTTP API (sms.ts), and tests pass their own OtpDelivery. Several
// can be configured at once: each channel (email, phone) uses the first one that serves it.
//
// Every configured delivery is wrapped twice: failures that may pass are retried with backoff
// (OTP_DELIVERY_RETRY_DELAYS_MS, within the request), and the error that finally reaches the
// log has the code cut out of its text, so that a provider echoing the message cannot put a
// code in the log. Only the `log` delivery prints codes, and it is refused in production.
import { setTimeout as sleep } from 'node:timers/promises';
import { OTP_DELIVERY_RETRY_DELAYS_MS } from '../limits.js';
import { smsOtpDelivery, type SmsDeliveryConfig } from './sms.js';
import { smtpOtpDelivery, type SmtpDeliveryConfig } from './smtp.js';
import { DeliveryError, type OtpDelivery, type OtpMessage } from './channel.js';

export { DeliveryError, type OtpDelivery, type OtpMessage } from './channel.js';

export type WebhookDeliveryConfig = { kind: 'webhook'; url: string; /** Sent as `Authorization: Bearer <secret>` when set. */ secret?: string; timeoutMs?: number };
export type OtpDeliveryConfig = { kind: 'log' } | WebhookDeliveryConfig | SmtpDeliveryConfig | SmsDeliveryConfig;

/**
 * Builds the configured delivery (one, or several serving the channels in turn). `log` is
 * refused when NODE_ENV is production. Throws on an unusable configuration.
 */
export function createOtpDelivery(config: OtpDeliveryConfig | OtpDeliveryConfig[], env: NodeJS.ProcessEnv = process.env): OtpDelivery {
  const configs = Array.isArray(config) ? config : [config];
  if (configs.length === 0) throw new Error('at least one OTP delivery must be configured');
  const deliveries = configs.map((one) => {
    if (one.kind === 'log') {
      if (env.NODE_ENV === 'production') {
        throw new Error('OTP delivery "log" prints codes and is refused when NODE_ENV=production; use --otp-delivery webhook, smtp or sms');
      }
      return logOtpDelivery();
    }
    const network = one.kind === 'webhook' ? webhookOtpDelivery(one) : one.kind === 'smtp' ? smtpOtpDelivery(one) : smsOtpDelivery(one);
    return withCodeRedacted(withRetries(network, OTP_DELIVERY_RETRY_DELAYS_MS));
  });
  return deliveries.length === 1 ? deliveries[0]! : byChannel(deliveries);
}

/** Prints each code on stderr. */
export function logOtpDelivery(write: (line: string) => void = (line) => process.stderr.write(`${line}\n`)): OtpDelivery {
  return {
    name: 'log',
    async send(message) {
      write(`[auth-server] one-time code for ${message.channel} ${message.to} (app ${message.appId}): ${message.code}`);
    },
  };
}

/** POSTs `{channel, to, code, app_id}` as JSON; any non-2xx answer or a timeout is a failure. */
export function webhookOtpDelivery(options: { url: string; secret?: string; timeoutMs?: number }): OtpDelivery {
  const url = new URL(options.url);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error(`OTP webhook URL must be http(s): ${options.url}`);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (options.secret) headers.authorization = `Bearer ${options.secret}`;
  return {
    name: 'webhook',
    async send(message) {
      const response = await fetch(url, {
        method: 'POST',
        headers,
        body: JSON.stringify(message.purpose === 'invitation'
          ? { purpose: 'invitation', channel: message.channel, to: message.to, link: message.code, app_id: message.appId }
          : { purpose: 'sign_in', channel: message.channel, to: message.to, code: message.code, app_id: message.appId }),
        signal: AbortSignal.timeout(options.timeoutMs ?? 5000),
      });
      await response.body?.cancel();
      if (!response.ok) throw new DeliveryError(`OTP webhook answered ${response.status}`, { permanent: response.status < 500 && response.status !== 429 });
    },
  };
}

/** Each message goes to the first delivery that serves its channel; a channel none serves fails. */
function byChannel(deliveries: OtpDelivery[]): OtpDelivery {
  const serving = (channel: OtpMessage['channel']) => deliveries.find((d) => d.channels === undefined || d.channels.includes(channel));
  return {
    name: deliveries.map((d) => d.name).join('+'),
    async send(message) {
      const delivery = serving(message.channel);
      if (!delivery) throw new DeliveryError(`no OTP delivery is configured for ${message.channel === 'email' ? 'e-mail addresses' : 'phone numbers'}`, { permanent: true });
      await delivery.send(message);
    },
  };
}

/**
 * Sends again after each delay while the failure may pass (not a permanent DeliveryError); the
 * last failure is thrown.
 */
export function withRetries(delivery: OtpDelivery, delaysMs: readonly number[]): OtpDelivery {
  return {
    name: delivery.name,
    channels: delivery.channels,
    async send(message) {
      for (let attempt = 0; ; attempt++) {
        try {
          await delivery.send(message);
          return;
        } catch (error) {
          const permanent = error instanceof DeliveryError && error.permanent;
          if (permanent || attempt >= delaysMs.length) throw error;
          await sleep(delaysMs[attempt]!);
        }
      }
    },
  };
}

/** Rethrows a failure as an Error whose message and stack no longer hold the code (and no cause chain). */
function withCodeRedacted(delivery: OtpDelivery): OtpDelivery {
  return {
    name: delivery.name,
    channels: delivery.channels,
    async send(message) {
      try {
        await delivery.send(message);
      } catch (error) {
        const redact = (text: string) => text.replaceAll(message.code, '[code]');
        const original = error instanceof Error ? error : new Error(String(error));
        const clean = new Error(redact(original.message));
        clean.name = original.name;
        clean.stack = redact(original.stack ?? clean.message);
        throw clean;
      }
    },
  };
}
