// Lifetimes and limits of the service in one place: access token 30 minutes, refresh token 30
// days, session 1 year, one-time code 10 minutes; the rest are documented in docs/auth-service.md.

/** Access token lifetime: exp = iat + 30 minutes. */
export const ACCESS_TOKEN_TTL_SECONDS = 30 * 60;
/** Refresh token lifetime: expires_at = issued_at + 30 days, capped at the session's end. */
export const REFRESH_TOKEN_TTL_MS = 30 * 24 * 3600 * 1000;
/** Absolute session (refresh family) lifetime: created_at + 365 days; rotation never extends it. */
export const SESSION_LIFETIME_MS = 365 * 24 * 3600 * 1000;

/** A one-time code is valid for 10 minutes. */
export const OTP_TTL_MS = 10 * 60 * 1000;
/** Verification attempts per code, right or wrong; after 5 the code is burned. */
export const OTP_MAX_ATTEMPTS = 5;
/** Default send throttles; see OtpLimits. */
export const OTP_DEFAULT_LIMITS = {
  /** Minimum time between two codes to the same destination of one app. */
  resendIntervalMs: 60 * 1000,
  /** Codes per app per fixed hour window (all destinations). Codes per address: the rate-limit rule otp_request_address. */
  appHourly: 1000,
} as const;
export type OtpLimits = { resendIntervalMs: number; appHourly: number };
export const OTP_WINDOW_MS = 3600 * 1000;

/** A passkey ceremony (registration or login) must be verified within 5 minutes of its options. */
export const PASSKEY_CEREMONY_TTL_MS = 5 * 60 * 1000;

/** Waits before the second and third try of a code delivery that failed in a way that may pass. */
export const OTP_DELIVERY_RETRY_DELAYS_MS = [250, 1000];

/** Each request to an upstream identity provider (discovery, token, JWKS, GitHub's API). */
export const UPSTREAM_TIMEOUT_MS = 10_000;
/** An upstream authorization request must come back within this (the user is at the provider's login page). */
export const UPSTREAM_FLOW_TTL_MS = 10 * 60 * 1000;

/** An invitation into a tenant expires this long after it was (last) sent. */
export const INVITATION_TTL_MS = 7 * 24 * 3600 * 1000;
/** A resend waits this long after the last send of the invitation. */
export const INVITATION_RESEND_INTERVAL_MS = 60 * 1000;
/** An invitation is sent at most this many times (the first send included). */
export const INVITATION_MAX_SENDS = 5;
/** How often the primary marks due invitations expired (and records invitation.expired). */
export const INVITATION_EXPIRY_SWEEP_MS = 60 * 1000;

/** Largest accepted request body of an auth route. */
export const MAX_BODY_BYTES = 16 * 1024;
/** Longest accepted secret, token or code string (anything longer is a validation error). */
export const MAX_TOKEN_CHARS = 4096;

/**
 * Access tokens whose verification each worker remembers (VerifiedTokenCache), default. An entry
 * holds the token string and its claims, about 1.5 KB: 10,000 entries are about 15 MB per worker.
 */
export const VERIFIED_TOKEN_CACHE_ENTRIES = 10_000;

/** Audit events are kept this many days by default (AUTH_AUDIT_RETENTION_DAYS; 0: forever). */
export const AUDIT_RETENTION_DAYS = 90;
/** How often the primary deletes audit events past their retention. */
export const AUDIT_PURGE_INTERVAL_MS = 3600 * 1000;

/** How often the primary deletes rate-limit counters whose window has ended. */
export const RATE_LIMIT_PURGE_INTERVAL_MS = 10 * 60 * 1000;

/**
 * Seconds between webhook attempts: after the first fails, 5 s, then 5 min, 30 min, 2 h, 5 h,
 * 10 h and 10 h (the schedule Standard Webhooks' reference service, Svix, uses): 8 attempts
 * over about 27 hours, then the delivery is dead.
 */
export const WEBHOOK_RETRY_DELAYS_SECONDS = [5, 300, 1800, 7200, 18000, 36000, 36000];
export const WEBHOOK_POLL_MS = 1000;
export const WEBHOOK_TIMEOUT_MS = 15_000;

/** How often a process re-reads the signing keys (to see a rotation done by another instance). */
export const KEY_RING_RELOAD_MS = 30 * 1000;
/**
 * A retired signing key stays in the JWKS for this long after retirement: the last token it
 * signed (by this or a slower instance) expires within ACCESS_TOKEN_TTL + reload interval; one
 * more minute covers clock skew between instances.
 */
export const RETIRED_KEY_PUBLISH_MS = ACCESS_TOKEN_TTL_SECONDS * 1000 + KEY_RING_RELOAD_MS + 60 * 1000;

/** How often the primary looks for closed hours of usage to send as usage.hourly events. */
export const USAGE_EMIT_INTERVAL_MS = 60 * 1000;
/**
 * An hour's usage.hourly event is written once the hour has been over this long: the inference
 * servers flush their meters every few seconds, so rows of the hour still arriving after it are
 * rare. Rows that arrive later are stored and counted by GET /admin/usage, but not sent again.
 */
export const USAGE_EMIT_GRACE_MS = 5 * 60 * 1000;
/** Hours older than this are not looked at for their event (a service down for longer skips them). */
export const USAGE_EMIT_LOOKBACK_MS = 7 * 24 * 3600 * 1000;
/** Longest range GET /admin/usage answers for. */
export const USAGE_QUERY_MAX_DAYS = 93;
/** Rows GET /admin/usage lists at most (the totals count every row). */
export const USAGE_QUERY_MAX_ROWS = 5000;
/**
 * How long a usage batch's id sent to POST /fleet/usage is remembered (a batch sent again within
 * it adds nothing): a replica retries a batch every minute until it is answered, so a day is far
 * past any retry of a replica that is still running.
 */
export const USAGE_BATCH_KEEP_MS = 24 * 3600 * 1000;
/**
 * Rows one POST /fleet/usage body carries at most: a bound of its own where a host mounts the
 * routes with a body limit above MAX_BODY_BYTES (replicas split their batches below 16 KiB).
 */
export const USAGE_BATCH_MAX_ROWS = 500;
