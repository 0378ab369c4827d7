// Standard Webhooks signatures (https://www.standardwebhooks.com): the secret is "whsec_" and
// base64 of random bytes; each message carries webhook-id, webhook-timestamp (Unix seconds) and
// webhook-signature "v1,<base64 of HMAC-SHA256(secret bytes, `${id}.${timestamp}.${body}`)>".
import { createHmac, randomBytes } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';

/** A new signing secret: "whsec_" and 32 random bytes in base64. */
export function generateWebhookSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

/** The headers of one message: its id, its timestamp and the signature over both and the body. */
export function signedWebhookHeaders(secret: string, messageId: string, timestampSeconds: number, body: string): Record<string, string> {
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
  const signature = createHmac('sha256', key).update(`${messageId}.${timestampSeconds}.${body}`).digest('base64');
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': `v1,${signature}`,
  };
}
