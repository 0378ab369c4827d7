// The kinds of upstream provider and what each one's assertions are worth.
//
// An upstream identity joins an existing user by e-mail address only when the provider says
// the address is verified AND the provider is trusted for the address's domain (it is the
// authority for that domain, or the app's admin said so). Anything less would let whoever
// controls an account at the provider take over the user who owns the address here: the
// "nOAuth" mistake, where Microsoft Entra ID's `email` claim is a free-text profile field that
// any tenant admin can set to anyone's address, and carries no `email_verified` at all.
//
//   oidc    any OpenID Connect issuer by its discovery URL; email_verified must be `true`; trusted
//           only for the domains the admin lists.
//   google  Google's discovery document; trusted for gmail.com and googlemail.com (Google is
//           their authority), for the Workspace domain named by the token's `hd` claim, and the
//           listed domains.
//   entra   Microsoft Entra ID, usually the multi-tenant "common" or "organizations" issuer
//           whose discovery document names `https://login.microsoftonline.com/{tenantid}/v2.0`:
//           the id_token's issuer is checked against that template with the token's own `tid`
//           (by openid-client), and `tid` must be one of settings.tenants when the admin set
//           any. Its e-mail is never treated as verified, whatever the token says.
//   apple   Sign in with Apple: response_mode form_post, the client secret an ES256 JWT signed
//           with the app's key (team_id, key_id, private_key); `email_verified` may be the
//           string "true"; trusted for privaterelay.appleid.com and the listed domains.
//   github  GitHub's OAuth 2.0 (no OpenID Connect): the identity is the numeric user id, the
//           e-mail the primary address of GET /user/emails when GitHub marks it verified,
//           trusted only for the listed domains. Base URLs overridable for GitHub Enterprise.

export const UPSTREAM_KINDS = ['oidc', 'google', 'entra', 'apple', 'github'] as const;
export type UpstreamKind = typeof UPSTREAM_KINDS[number];

export const GOOGLE_DISCOVERY_URL = 'https://accounts.google.com/.well-known/openid-configuration';
export const ENTRA_COMMON_DISCOVERY_URL = 'https://login.microsoftonline.com/common/v2.0/.well-known/openid-configuration';
export const APPLE_DISCOVERY_URL = 'https://appleid.apple.com/.well-known/openid-configuration';
export const GITHUB_WEB_BASE_URL = 'https://github.com';
export const GITHUB_API_BASE_URL = 'https://api.github.com';

/** The discovery URL a kind uses when the admin gives none (null: the admin must give one; GitHub has none). */
export function defaultDiscoveryUrl(kind: UpstreamKind): string | null {
  switch (kind) {
    case 'google': return GOOGLE_DISCOVERY_URL;
    case 'entra': return ENTRA_COMMON_DISCOVERY_URL;
    case 'apple': return APPLE_DISCOVERY_URL;
    case 'oidc': case 'github': return null;
  }
}

/** Scopes requested when the admin gives none. */
export function defaultScopes(kind: UpstreamKind): string[] {
  switch (kind) {
    case 'github': return ['read:user', 'user:email'];
    case 'apple': return ['openid', 'email', 'name'];
    default: return ['openid', 'email', 'profile'];
  }
}

/** What the provider said about the person's e-mail address. */
export interface AssertedEmail {
  address: string | null;
  verified: boolean;
}

/**
 * The e-mail address an OpenID Connect provider of this kind asserts in its claims, and whether
 * it counts as verified (see the table above).
 */
export function assertedEmail(kind: UpstreamKind, claims: Record<string, unknown>): AssertedEmail {
  const raw = typeof claims.email === 'string' ? claims.email.trim().toLowerCase() : '';
  const address = raw.length > 0 && raw.length <= 254 && /^[^\s@\x00-\x1f\x7f]+@[^\s@\x00-\x1f\x7f]+\.[^\s@\x00-\x1f\x7f]+$/.test(raw) ? raw : null;
  if (!address) return { address: null, verified: false };
  if (kind === 'entra') return { address, verified: false };
  const flag = claims.email_verified;
  const verified = flag === true || (kind === 'apple' && flag === 'true');
  return { address, verified };
}

/** Whether the provider is an authority for this address's domain (see the table above). */
export function trustedForDomain(kind: UpstreamKind, trustedDomains: readonly string[], address: string, claims: Record<string, unknown>): boolean {
  const domain = address.slice(address.lastIndexOf('@') + 1);
  if (trustedDomains.includes(domain)) return true;
  switch (kind) {
    case 'google':
      return domain === 'gmail.com' || domain === 'googlemail.com' || (typeof claims.hd === 'string' && claims.hd.toLowerCase() === domain);
    case 'apple':
      return domain === 'privaterelay.appleid.com';
    default:
      return false;
  }
}
