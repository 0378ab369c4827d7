// What a code delivery is, apart from the deliveries themselves: the message, the OtpDelivery
// interface each channel implements (delivery.ts: log, webhook; smtp.ts; sms.ts),
// and DeliveryError. Its own file so that the channels import it without importing
// delivery.ts, which imports them (no cycle).
import type { OtpTemplate } from './templates.js';

export interface OtpMessage {
  channel: 'email' | 'phone';
  /** Normalised destination: lower-case e-mail address or E.164 phone number. */
  to: string;
  /**
   * What the message carries: a one-time sign-in code (absent: this), or an invitation into a
   * tenant, whose `code` is then the link that accepts it. A webhook bridge is told which
   * (`purpose`, and `link` instead of `code` for an invitation); e-mail and SMS render the
   * template they were given either way.
   */
  purpose?: 'sign_in' | 'invitation';
  /** Six digits, leading zeros kept; an invitation's accept link when `purpose` is 'invitation'. */
  code: string;
  /** The app UUID (the app_id of request bodies). */
  appId: string;
  /** The app's sender and texts (templates.ts). */
  template: OtpTemplate;
}

export interface OtpDelivery {
  readonly name: string;
  /** The channels it can send to; absent: both. */
  readonly channels?: ReadonlyArray<OtpMessage['channel']>;
  /** Resolves once the code is handed over; rejects when it could not be (the caller answers 502). */
  send(message: OtpMessage): Promise<void>;
}

/** A failed hand-over; `permanent` ones (a refused address, a 4xx answer) are not retried. */
export class DeliveryError extends Error {
  readonly permanent: boolean;
  constructor(message: string, options: { permanent: boolean }) {
    super(message);
    this.name = 'DeliveryError';
    this.permanent = options.permanent;
  }
}
