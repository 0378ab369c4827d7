// Login codes by SMS through an HTTP API shaped as Twilio's Messages resource:
// POST {baseUrl}/2010-04-01/Accounts/{AccountSid}/Messages.json, form fields To, From (or
// MessagingServiceSid) and Body, HTTP Basic with the account SID and auth token. Providers that
// copy this shape (and test doubles) work by changing baseUrl.
import { DeliveryError, type OtpDelivery } from './channel.js';
import { renderTemplate } from './templates.js';

export interface SmsDeliveryConfig {
  kind: 'sms';
  /** Default https://api.twilio.com. */
  baseUrl?: string;
  accountSid: string;
  authToken: string;
  /** The sending number (E.164) ... */
  from?: string;
  /** ... or a messaging service that picks it. */
  messagingServiceSid?: string;
  timeoutMs?: number;
}

export function smsOtpDelivery(config: SmsDeliveryConfig): OtpDelivery {
  if (!config.from === !config.messagingServiceSid) throw new Error('SMS delivery needs exactly one of a sender number (from) and a messaging service SID');
  const base = new URL(config.baseUrl ?? 'https://api.twilio.com');
  if (base.protocol !== 'https:' && base.protocol !== 'http:') throw new Error(`SMS base URL must be http(s): ${config.baseUrl}`);
  const url = new URL(`2010-04-01/Accounts/${encodeURIComponent(config.accountSid)}/Messages.json`, base.href.endsWith('/') ? base : `${base.href}/`);
  const authorization = `Basic ${Buffer.from(`${config.accountSid}:${config.authToken}`).toString('base64')}`;
  return {
    name: 'sms',
    channels: ['phone'],
    async send(message) {
      const form = new URLSearchParams({ To: message.to, Body: renderTemplate(message.template.smsText, { code: message.code, appName: message.template.appName }) });
      if (config.from) form.set('From', config.from);
      else form.set('MessagingServiceSid', config.messagingServiceSid!);
      let response: Response;
      try {
        response = await fetch(url, {
          method: 'POST',
          headers: { authorization, 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
          body: form.toString(),
          signal: AbortSignal.timeout(config.timeoutMs ?? 10_000),
        });
      } catch (error) {
        throw new DeliveryError(`SMS delivery failed: ${(error as Error).message}`, { permanent: false });
      }
      // The answer's body is not read into the error: a provider may echo the message, hence the code.
      await response.body?.cancel();
      if (!response.ok) {
        throw new DeliveryError(`SMS provider answered ${response.status}`, { permanent: response.status < 500 && response.status !== 429 });
      }
    },
  };
}
