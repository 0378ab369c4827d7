// The relying-party side of an upstream sign-in, on openid-client (v6): panva's OpenID-certified
// client, built on his oauth4webapi, maintained for years, with no dependency beyond jose. It
// does every check an authorization-code flow needs (RFC 9207 `iss` of the response, `state`,
// PKCE, the id_token's signature against the issuer's JWKS, `iss`, `aud`, `azp`, `exp`, `iat`,
// `nonce`), knows Entra ID's multi-tenant issuer template, and lets us bound every request by a
// timeout. Writing those checks ourselves is how the mistakes this feature must avoid get made.
//
// Every flow uses PKCE (S256) and `state`; every OpenID Connect flow also a `nonce` (GitHub is
// OAuth 2.0 only: it has no id_token to carry one). The verifier and nonce stay on the server.
//
// Failures are sorted here, once: the upstream could not be reached, timed out or answered
// something that is not OAuth (502 UPSTREAM_UNAVAILABLE), or it refused or its answer failed a
// check (401 UPSTREAM_CALLBACK_INVALID). Nothing is written before the exchange succeeds.
import * as oidc from 'openid-client';
import { importPKCS8, SignJWT } from 'jose';
import { HttpError } from '../../http/errors.js';
import { authError } from '../errors.js';
import { assertedEmail, GITHUB_API_BASE_URL, GITHUB_WEB_BASE_URL, type AssertedEmail, type UpstreamKind } from './presets.js';

/** A provider as the client needs it: secrets already unsealed. */
export interface UpstreamClientConfig {
  id: string;
  kind: UpstreamKind;
  clientId: string;
  clientSecret: string | null;
  discoveryUrl: string | null;
  scopes: readonly string[];
  settings: UpstreamSettings;
  /** Cached configurations are keyed by id and this, so an edit takes effect at once. */
  updatedAt: Date;
}

export interface UpstreamSettings {
  /** apple: the Apple developer team id and the id of the key that signs the client secret. */
  team_id?: string;
  key_id?: string;
  /** apple: the key's PKCS #8 PEM (held sealed at rest, unsealed here). */
  private_key?: string;
  /** entra: the tenant ids (`tid`) allowed to sign in; empty or absent: any. */
  tenants?: string[];
  /** github: web and API base URLs (GitHub Enterprise Server: https://HOST and https://HOST/api/v3). */
  web_base_url?: string;
  api_base_url?: string;
}

/** Who the upstream says signed in. */
export interface UpstreamProfile {
  issuer: string;
  subject: string;
  email: AssertedEmail;
  /** The id_token's claims (or GitHub's user object): for the trust rules (Google's `hd`). */
  claims: Record<string, unknown>;
}

/** The secrets of one authorization request, stored until its callback. */
export interface FlowSecrets {
  state: string;
  nonce: string;
  codeVerifier: string;
}

const CONFIGURATION_TTL_MS = 10 * 60 * 1000;

/**
 * Builds and caches each provider's openid-client Configuration (its discovery document and the
 * JWKS openid-client fetches lazily) for ten minutes. One per service; safe to share.
 */
export class UpstreamClients {
  private readonly cache = new Map<string, { configuration: Promise<oidc.Configuration>; expiresAtMs: number }>();

  /** `timeoutMs`: bound of each request to an upstream (discovery, token, JWKS, user API). */
  constructor(private readonly timeoutMs: number) {}

  /** The URL to send the browser to, and the secrets to keep for the callback. */
  async authorizationUrl(provider: UpstreamClientConfig, redirectUri: string): Promise<{ url: string; secrets: FlowSecrets }> {
    let configuration: oidc.Configuration;
    try {
      configuration = await this.configurationOf(provider);
    } catch (error) {
      // Before any callback, whatever went wrong is the provider's discovery: 502.
      throw authError('UPSTREAM_UNAVAILABLE', `The provider's configuration could not be loaded: ${(error as HttpError).message}`, { cause: error });
    }
    const secrets: FlowSecrets = { state: oidc.randomState(), nonce: oidc.randomNonce(), codeVerifier: oidc.randomPKCECodeVerifier() };
    const parameters: Record<string, string> = {
      redirect_uri: redirectUri,
      scope: provider.scopes.join(' '),
      state: secrets.state,
      code_challenge: await oidc.calculatePKCECodeChallenge(secrets.codeVerifier),
      code_challenge_method: 'S256',
    };
    if (provider.kind !== 'github') parameters.nonce = secrets.nonce;
    // Apple posts the response to the redirect URI when e-mail or name are asked for.
    if (provider.kind === 'apple') parameters.response_mode = 'form_post';
    return { url: oidc.buildAuthorizationUrl(configuration, parameters).href, secrets };
  }

  /**
   * Exchanges the code of a callback (`params`: what the redirect URI received, query or form)
   * and returns who signed in. Throws 401 UPSTREAM_CALLBACK_INVALID or 502 UPSTREAM_UNAVAILABLE.
   */
  async exchange(provider: UpstreamClientConfig, redirectUri: string, params: Record<string, string>, secrets: FlowSecrets): Promise<UpstreamProfile> {
    try {
      const configuration = await this.configurationOf(provider);
      const callbackUrl = new URL(redirectUri);
      for (const [name, value] of Object.entries(params)) callbackUrl.searchParams.append(name, value);
      if (provider.kind === 'github') {
        const tokens = await oidc.authorizationCodeGrant(configuration, callbackUrl, { pkceCodeVerifier: secrets.codeVerifier, expectedState: secrets.state });
        return await githubProfile(configuration, provider, tokens.access_token);
      }
      const tokens = await oidc.authorizationCodeGrant(configuration, callbackUrl, {
        pkceCodeVerifier: secrets.codeVerifier, expectedState: secrets.state, expectedNonce: secrets.nonce, idTokenExpected: true,
      });
      const claims = tokens.claims()! as Record<string, unknown>;
      if (provider.kind === 'entra') checkEntraTenant(provider, claims);
      return { issuer: String(claims.iss), subject: String(claims.sub), email: assertedEmail(provider.kind, claims), claims };
    } catch (error) {
      this.forget(provider);
      throw upstreamFailure(error);
    }
  }

  /** Fetches the discovery document now (the admin's "test the provider"); throws like exchange. */
  async check(provider: UpstreamClientConfig): Promise<{ issuer: string; authorization_endpoint: string | null }> {
    try {
      this.forget(provider);
      const metadata = (await this.configurationOf(provider)).serverMetadata();
      return { issuer: metadata.issuer, authorization_endpoint: metadata.authorization_endpoint ?? null };
    } catch (error) {
      this.forget(provider);
      throw upstreamFailure(error, 'UPSTREAM_UNAVAILABLE');
    }
  }

  private forget(provider: UpstreamClientConfig): void {
    this.cache.delete(cacheKey(provider));
  }

  private async configurationOf(provider: UpstreamClientConfig): Promise<oidc.Configuration> {
    const key = cacheKey(provider);
    const nowMs = Date.now();
    const cached = this.cache.get(key);
    if (cached && cached.expiresAtMs > nowMs) return cached.configuration;
    const configuration = this.build(provider);
    this.cache.set(key, { configuration, expiresAtMs: nowMs + CONFIGURATION_TTL_MS });
    try {
      return await configuration;
    } catch (error) {
      this.cache.delete(key);
      throw upstreamFailure(error, 'UPSTREAM_UNAVAILABLE');
    }
  }

  private async build(provider: UpstreamClientConfig): Promise<oidc.Configuration> {
    const timeout = Math.max(1, Math.ceil(this.timeoutMs / 1000));
    if (provider.kind === 'github') {
      const web = provider.settings.web_base_url ?? GITHUB_WEB_BASE_URL;
      const configuration = new oidc.Configuration(
        { issuer: web, authorization_endpoint: `${web}/login/oauth/authorize`, token_endpoint: `${web}/login/oauth/access_token` },
        provider.clientId,
        provider.clientSecret ?? undefined,
      );
      configuration.timeout = timeout;
      if (isLoopback(web)) oidc.allowInsecureRequests(configuration);
      return configuration;
    }
    const discoveryUrl = new URL(provider.discoveryUrl!);
    const execute = isLoopback(discoveryUrl.href) ? [oidc.allowInsecureRequests] : [];
    if (provider.kind === 'apple') {
      // Apple's token endpoint takes a JWT we sign as the client secret; its audience is Apple's issuer.
      const discovered = await oidc.discovery(discoveryUrl, provider.clientId, undefined, undefined, { execute, timeout });
      const secret = await appleClientSecret(provider, discovered.serverMetadata().issuer);
      return oidc.discovery(discoveryUrl, provider.clientId, { client_secret: secret }, oidc.ClientSecretPost(secret), { execute, timeout });
    }
    return oidc.discovery(discoveryUrl, provider.clientId, provider.clientSecret ?? undefined, undefined, { execute, timeout });
  }
}

function cacheKey(provider: UpstreamClientConfig): string {
  return `${provider.id}@${provider.updatedAt.getTime()}`;
}

/**
 * Plain http is allowed only to this machine (development, tests): a provider elsewhere must
 * be https, as openid-client requires by default.
 */
function isLoopback(url: string): boolean {
  const host = new URL(url).hostname;
  return host === '127.0.0.1' || host === 'localhost' || host === '[::1]';
}

/** Apple's client secret: an ES256 JWT by the team's key, valid one hour (Apple allows six months). */
export async function appleClientSecret(provider: Pick<UpstreamClientConfig, 'clientId' | 'settings'>, audience: string, nowMs = Date.now()): Promise<string> {
  const { team_id: teamId, key_id: keyId, private_key: pem } = provider.settings;
  const key = await importPKCS8(pem!, 'ES256');
  const iat = Math.floor(nowMs / 1000);
  return new SignJWT({})
    .setProtectedHeader({ alg: 'ES256', kid: keyId! })
    .setIssuer(teamId!)
    .setSubject(provider.clientId)
    .setAudience(audience)
    .setIssuedAt(iat)
    .setExpirationTime(iat + 3600)
    .sign(key);
}

function checkEntraTenant(provider: UpstreamClientConfig, claims: Record<string, unknown>): void {
  const allowed = provider.settings.tenants ?? [];
  if (allowed.length > 0 && !allowed.includes(String(claims.tid).toLowerCase())) {
    throw authError('UPSTREAM_CALLBACK_INVALID', 'The Entra ID tenant of this account is not allowed to sign in to this app');
  }
}

/** GitHub's user (GET /user) and its verified primary address (GET /user/emails). */
async function githubProfile(configuration: oidc.Configuration, provider: UpstreamClientConfig, accessToken: string): Promise<UpstreamProfile> {
  const api = provider.settings.api_base_url ?? GITHUB_API_BASE_URL;
  const user = await githubGet(configuration, accessToken, `${api}/user`) as { id?: unknown };
  if (typeof user?.id !== 'number' && typeof user?.id !== 'string') throw authError('UPSTREAM_UNAVAILABLE', 'GitHub answered a user without an id');
  const emails = await githubGet(configuration, accessToken, `${api}/user/emails`);
  const primary = Array.isArray(emails) ? emails.find((e) => e && e.primary === true) : undefined;
  const email = assertedEmail('oidc', { email: primary?.email, email_verified: primary?.verified === true });
  return { issuer: provider.settings.web_base_url ?? GITHUB_WEB_BASE_URL, subject: String(user.id), email, claims: user as Record<string, unknown> };
}

async function githubGet(configuration: oidc.Configuration, accessToken: string, url: string): Promise<unknown> {
  const headers = new Headers({ accept: 'application/vnd.github+json', 'user-agent': 'auth-server', 'x-github-api-version': '2022-11-28' });
  const response = await oidc.fetchProtectedResource(configuration, accessToken, new URL(url), 'GET', undefined, headers);
  if (response.status !== 200) throw authError('UPSTREAM_UNAVAILABLE', `GitHub answered ${response.status} to ${new URL(url).pathname}`);
  try {
    return await response.json();
  } catch (error) {
    throw authError('UPSTREAM_UNAVAILABLE', `GitHub answered ${new URL(url).pathname} with something that is not JSON`, { cause: error });
  }
}

/** The openid-client codes of an upstream that answered with something other than OAuth. */
const UNAVAILABLE_CODES = new Set([
  'OAUTH_TIMEOUT', 'OAUTH_ABORT', 'OAUTH_RESPONSE_IS_NOT_CONFORM', 'OAUTH_RESPONSE_IS_NOT_JSON', 'OAUTH_PARSE_ERROR',
  'OAUTH_HTTP_REQUEST_FORBIDDEN', 'OAUTH_REQUEST_PROTOCOL_FORBIDDEN', 'OAUTH_MISSING_SERVER_METADATA', 'OAUTH_INVALID_SERVER_METADATA',
]);

/**
 * The catalog error of a failed upstream step. 502 when the upstream is down, slow or broken
 * (a network error, a timeout, a 5xx, a body that is not JSON); 401 when it refused the code
 * (invalid_grant: another client's code, a replayed or expired one, a PKCE mismatch) or its
 * answer failed a check (state, iss, aud, nonce, exp, signature).
 */
export function upstreamFailure(error: unknown, checkFailure: 'UPSTREAM_CALLBACK_INVALID' | 'UPSTREAM_UNAVAILABLE' = 'UPSTREAM_CALLBACK_INVALID'): HttpError {
  if (error instanceof HttpError) return error;
  if (error instanceof oidc.ResponseBodyError) {
    return error.status >= 500
      ? authError('UPSTREAM_UNAVAILABLE', `The provider answered ${error.status}`, { cause: error })
      : authError('UPSTREAM_CALLBACK_INVALID', `The provider refused the code: ${error.error}`, { cause: error });
  }
  if (error instanceof oidc.AuthorizationResponseError) {
    return authError('UPSTREAM_CALLBACK_INVALID', `The provider answered the authorization request with ${error.error}`, { cause: error });
  }
  const code = (error as { code?: unknown })?.code;
  if (error instanceof oidc.ClientError && typeof code === 'string' && !UNAVAILABLE_CODES.has(code)) {
    return authError(checkFailure, `The provider's answer failed a check: ${error.message}`, { cause: error });
  }
  return authError('UPSTREAM_UNAVAILABLE', undefined, { cause: error });
}

