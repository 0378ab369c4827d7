// How one-time codes reach users. Pluggable: `log` prints the code (development only),
// `webhook` POSTs it to an SMS / e-mail bridge, and tests pass their own OtpDelivery.
export interface OtpMessage {
  channel: 'email' | 'phone';
  /** Normalised destination: lower-case e-mail address or E.164 phone number. */
  to: string;
  /** Six digits, leading zeros kept. */
  code: string;
  /** The app UUID (the app_id of request bodies). */
  appId: string;
}

export interface OtpDelivery {
  readonly name: string;
  /** Resolves once the code is handed over; rejects when it could not be (the caller answers 502). */
  send(message: OtpMessage): Promise<void>;
}

export type OtpDeliveryConfig =
  | { kind: 'log' }
  | { kind: 'webhook'; url: string; /** Sent as `Authorization: Bearer <secret>` when set. */ secret?: string; timeoutMs?: number };

/** Builds a configured delivery. `log` is refused when NODE_ENV is production. */
export function createOtpDelivery(config: OtpDeliveryConfig, env: NodeJS.ProcessEnv = process.env): OtpDelivery {
  if (config.kind === 'log') {
    if (env.NODE_ENV === 'production') {
      throw new Error('OTP delivery "log" prints codes and is refused when NODE_ENV=production; use --otp-delivery webhook');
    }
    return logOtpDelivery();
  }
  return webhookOtpDelivery(config);
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
        body: JSON.stringify({ channel: message.channel, to: message.to, code: message.code, app_id: message.appId }),
        signal: AbortSignal.timeout(options.timeoutMs ?? 5000),
      });
      await response.body?.cancel();
      if (!response.ok) throw new Error(`OTP webhook answered ${response.status}`);
    },
  };
}
