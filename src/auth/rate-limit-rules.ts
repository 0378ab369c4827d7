// The rate limits of the service: which rules exist, their defaults, and how a configuration
// string sets them. Counters live in PostgreSQL (queries/rate-limit-counters.ts), so every instance and
// every worker thread on one database shares them.

/** Each rule counts hits of one kind of request per subject in fixed windows. */
export const RATE_LIMIT_RULES = {
  /** Code requests per app and address (e-mail or phone), every attempt counted, refused ones too. */
  otp_request_address: { maxHits: 10, windowSeconds: 3600 },
  /** Code requests per client IP, all apps and addresses. */
  otp_request_ip: { maxHits: 100, windowSeconds: 3600 },
  /** Code verifications per app and address (on top of 5 attempts per code). */
  otp_verify_address: { maxHits: 30, windowSeconds: 3600 },
  /** Code verifications per client IP. */
  otp_verify_ip: { maxHits: 300, windowSeconds: 3600 },
  /** Refreshes per app (counted only with the right app secret). */
  refresh_app: { maxHits: 200_000, windowSeconds: 60 },
  /** Refreshes per session (refresh family): an honest client refreshes about every 30 minutes. */
  refresh_family: { maxHits: 30, windowSeconds: 60 },
  /** Passkey ceremony requests (options and verifications, registration and login) per client IP. */
  passkey_ceremony_ip: { maxHits: 100, windowSeconds: 600 },
  /** API key introspections per client IP (inference servers cache answers for 30 s, refusals for 5 s). */
  api_key_introspect_ip: { maxHits: 3000, windowSeconds: 60 },
  /** Authorization requests (/oauth/authorize) per client IP. */
  oauth_authorize_ip: { maxHits: 600, windowSeconds: 600 },
  /** Dynamic client registrations (/oauth/register) per client IP, refused ones too. */
  oauth_register_ip: { maxHits: 20, windowSeconds: 3600 },
  /** Token requests (/oauth/token, every grant) per client IP. */
  oauth_token_ip: { maxHits: 6000, windowSeconds: 60 },
  /** Wrong or missing X-Admin-Key per client IP; once reached, the IP gets 429 on every admin route until the window ends. */
  admin_key_failure_ip: { maxHits: 10, windowSeconds: 900 },
} as const satisfies Record<string, RateLimit>;

export type RateLimitRule = keyof typeof RATE_LIMIT_RULES;
export interface RateLimit { maxHits: number; windowSeconds: number }
export type RateLimits = Readonly<Record<RateLimitRule, RateLimit>>;

export function isRateLimitRule(name: string): name is RateLimitRule {
  return Object.hasOwn(RATE_LIMIT_RULES, name);
}

/** The defaults with the configured rules replaced. */
export function rateLimitsWith(overrides: Partial<Record<RateLimitRule, RateLimit>> = {}): RateLimits {
  return { ...RATE_LIMIT_RULES, ...overrides };
}

/**
 * Parses `rule=hits/seconds` items separated by commas (AUTH_RATE_LIMITS), e.g.
 * `otp_request_ip=20/600,refresh_family=10/60`. Throws on an unknown rule or a bad number.
 */
export function parseRateLimits(text: string): Partial<Record<RateLimitRule, RateLimit>> {
  const limits: Partial<Record<RateLimitRule, RateLimit>> = {};
  for (const item of text.split(',').map((part) => part.trim()).filter(Boolean)) {
    const match = /^([a-z_]+)=(\d{1,9})\/(\d{1,9})$/.exec(item);
    if (!match) throw new Error(`AUTH_RATE_LIMITS: "${item}" is not rule=hits/seconds`);
    const [, rule, hits, seconds] = match;
    if (!isRateLimitRule(rule!)) throw new Error(`AUTH_RATE_LIMITS: unknown rule "${rule}" (rules: ${Object.keys(RATE_LIMIT_RULES).join(', ')})`);
    if (Number(hits) < 1 || Number(seconds) < 1) throw new Error(`AUTH_RATE_LIMITS: "${item}" needs at least 1 hit per 1 second`);
    limits[rule] = { maxHits: Number(hits), windowSeconds: Number(seconds) };
  }
  return limits;
}
