// Time source of the service. Every expiry decision (access tokens, refresh tokens, sessions,
// one-time codes, send windows) reads this clock and passes the instant to SQL explicitly, so
// tests can move time forward without waiting. SQL never calls now() for such decisions.

export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
