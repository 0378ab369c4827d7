// The scopes and grant types of the provider. Standard scopes are OpenID Connect's; an app may
// add its own (any RFC 6749 scope token) on its clients.
export const STANDARD_SCOPES = ['openid', 'profile', 'email', 'phone', 'offline_access'] as const;

export const GRANT_TYPES = ['authorization_code', 'refresh_token', 'client_credentials'] as const;
export type GrantType = (typeof GRANT_TYPES)[number];

/** RFC 6749 section 3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ). */
const SCOPE_TOKEN = /^[\x21\x23-\x5B\x5D-\x7E]{1,100}$/;

export function isScopeToken(value: string): boolean {
  return SCOPE_TOKEN.test(value);
}

/** The scope tokens of a `scope` parameter, in order, without repeats; null when one is malformed. */
export function parseScope(scope: string): string[] | null {
  const tokens = scope.split(' ').filter((token) => token !== '');
  if (!tokens.every(isScopeToken)) return null;
  return [...new Set(tokens)];
}
