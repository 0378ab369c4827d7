// Login codes by e-mail through an SMTP server, with nodemailer: TLS (STARTTLS required by
// default, or TLS from the first byte on port 465), optional AUTH, the app's sender and texts.
import fs from 'node:fs';
import nodemailer from 'nodemailer';
import { DeliveryError, type OtpDelivery } from './channel.js';
import { renderTemplate } from './templates.js';

export interface SmtpDeliveryConfig {
  kind: 'smtp';
  host: string;
  port: number;
  /** starttls: plain connect, then STARTTLS, refused if the server does not offer it; implicit: TLS at once (465); none: no TLS (a relay on localhost). */
  tls: 'starttls' | 'implicit' | 'none';
  user?: string;
  password?: string;
  /** The From when the app has none of its own: `login@example.com` or `Example <login@example.com>`. */
  from: string;
  /** PEM file of the CA that signed the server's certificate, when it is not a public one. */
  caFile?: string;
  timeoutMs?: number;
}

export function smtpOtpDelivery(config: SmtpDeliveryConfig): OtpDelivery {
  const timeout = config.timeoutMs ?? 10_000;
  const transport = nodemailer.createTransport({
    host: config.host,
    port: config.port,
    secure: config.tls === 'implicit',
    requireTLS: config.tls === 'starttls',
    ignoreTLS: config.tls === 'none',
    auth: config.user ? { user: config.user, pass: config.password ?? '' } : undefined,
    tls: config.caFile ? { ca: fs.readFileSync(config.caFile, 'utf8') } : undefined,
    connectionTimeout: timeout,
    greetingTimeout: timeout,
    socketTimeout: timeout,
    // No logger: nodemailer's debug output would contain the message, hence the code.
    logger: false,
    debug: false,
  });
  return {
    name: 'smtp',
    channels: ['email'],
    async send(message) {
      const values = { code: message.code, appName: message.template.appName };
      try {
        await transport.sendMail({
          from: message.template.emailFrom ?? config.from,
          to: message.to,
          subject: renderTemplate(message.template.emailSubject, values),
          text: renderTemplate(message.template.emailText, values),
        });
      } catch (error) {
        // An SMTP 5xx answer is permanent (a refused address or sender); 4xx, a lost connection
        // or a timeout may pass on a retry.
        const responseCode = (error as { responseCode?: number }).responseCode;
        throw new DeliveryError(`SMTP delivery failed: ${(error as Error).message}`, { permanent: responseCode !== undefined && responseCode >= 500 });
      }
    },
  };
}
