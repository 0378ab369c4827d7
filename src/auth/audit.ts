// The audit trail: which security events are recorded, and where a request came from. Each
// service function that changes something records its event with insertAuditEvent in the same
// transaction as the change (rotate_refresh_token records its own, migration 0012); failures
// that roll back (a wrong code, a rejected admin key) are recorded in a statement of their own.
import type { HttpRequest } from '../http/request.js';

/** Every type of event the trail holds (docs/auth-service.md lists what each carries). */
export const AUDIT_EVENT_TYPES = [
  'login.succeeded',
  'login.failed',
  'otp.sent',
  'otp.delivery_failed',
  'token.refreshed',
  'token.reuse_detected',
  'session.revoked',
  'passkey.registered',
  'passkey.used',
  'passkey.removed',
  'login.second_factor_required',
  'second_factor.enrolled',
  'second_factor.removed',
  'second_factor.reset',
  'invitation.created',
  'invitation.accepted',
  'invitation.revoked',
  'invitation.expired',
  'sso.domain_verified',
  'identity.linked',
  'identity.unlinked',
  'upstream_provider.created',
  'upstream_provider.updated',
  'upstream_provider.deleted',
  'sms.defence_tripped',
  'api_key.created',
  'api_key.rotated',
  'api_key.revoked',
  'usage.hourly',
  'user.sessions_revoked',
  'role.assigned',
  'role.revoked',
  'user.deleted',
  'user.restored',
  'app.created',
  'app.secret_rotated',
  'signing_key.rotated',
  'admin.key_rejected',
  'oauth_client.created',
  'oauth_client.updated',
  'oauth_client.secret_rotated',
  'oauth_client.deleted',
  'oauth.code_issued',
  'oauth.code_exchanged',
  'oauth.code_replayed',
  'oauth.logout',
  'oauth.consent_granted',
  'oauth.consent_revoked',
] as const;
export type AuditEventType = (typeof AUDIT_EVENT_TYPES)[number];

export function isAuditEventType(value: string): value is AuditEventType {
  return (AUDIT_EVENT_TYPES as readonly string[]).includes(value);
}

/** Where a request came from, as the trail and the rate limits see it. */
export interface RequestOrigin {
  /** The client's IP address: the peer, or with trustProxy the first address of X-Forwarded-For. */
  ip: string;
  /** The User-Agent header, cut to 512 characters; null when absent. */
  userAgent: string | null;
}

const MAX_USER_AGENT_CHARS = 512;

/**
 * The origin of a request. X-Forwarded-For is believed only with `ctx.trustProxy` (the service runs
 * behind a reverse proxy or is called by app backends that forward their user's address);
 * otherwise any client could pick its own address and escape its per-IP limits.
 */
export function requestOrigin(ctx: { readonly trustProxy: boolean }, req: HttpRequest): RequestOrigin {
  const forwarded = ctx.trustProxy ? req.headers['x-forwarded-for']?.split(',')[0]?.trim() : undefined;
  const agent = req.headers['user-agent'];
  return {
    ip: forwarded || req.remoteAddress,
    userAgent: agent ? agent.slice(0, MAX_USER_AGENT_CHARS) : null,
  };
}
