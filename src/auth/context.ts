// Everything a handler or service function needs, built once by createAuthService.
import type { HttpError } from '../http/errors.js';
import type { Clock } from './clock.js';
import type { OAuthOpenClientsConfig } from './config.js';
import type { Sql } from './database/client.js';
import type { OtpLimits } from './limits.js';
import type { OtpDelivery } from './otp/delivery.js';
import type { RateLimits } from './rate-limit-rules.js';
import type { ApiKeyChanges } from './tokens/api-key-changes.js';
import type { AccessTokenClaims } from './tokens/access-token.js';
import type { DomainProofLookup } from './sso/domain-proof.js';
import type { UpstreamClients } from './upstream/client.js';
import type { SigningKeyRing } from './tokens/signing-key-ring.js';
import type { VerifiedTokenCache } from './tokens/verified-token-cache.js';

export interface AuthContext {
  readonly sql: Sql;
  readonly clock: Clock;
  /** The `iss` of access tokens: this service's public base URL, no trailing slash. */
  readonly issuer: string;
  /** SHA-256 of the admin key, compared in constant time with the SHA-256 of X-Admin-Key. */
  readonly adminKeyHash: Buffer;
  readonly keys: SigningKeyRing;
  /** Access tokens this worker has verified for GET /auth/me (issuer: this service, any app). */
  readonly verifiedTokens: VerifiedTokenCache<AccessTokenClaims>;
  readonly otp: {
    readonly delivery: OtpDelivery;
    /** HMAC key of stored code hashes (derived from the master key). */
    readonly hashKey: Buffer;
    readonly limits: OtpLimits;
  };
  /** Seals and opens webhook endpoints' signing secrets (derived from the master key). */
  readonly webhookSecretKey: Buffer;
  /** Looks up the DNS TXT records that prove tenants' e-mail domains. */
  readonly domainProof: DomainProofLookup;
  /** TOTP keys are sealed with secretKey; recovery codes stored as HMAC under codeHashKey. */
  readonly secondFactor: {
    readonly secretKey: Buffer;
    readonly codeHashKey: Buffer;
  };
  /** Upstream identity providers: their clients (cached discovery) and the key sealing their secrets. */
  readonly upstream: {
    readonly clients: UpstreamClients;
    readonly secretKey: Buffer;
  };
  /** The limits of every rate-limit rule (counters in PostgreSQL, shared by all instances). */
  readonly rateLimits: RateLimits;
  /** Tells this service's in-process API key verifiers which key was rotated or revoked. */
  readonly apiKeyChanges: ApiKeyChanges;
  /** When this process last wrote each API key's last_used_at (clock ms); see markApiKeyUsed. */
  readonly apiKeyTouches: Map<string, number>;
  /** Believe X-Forwarded-For for the client's address (audit trail, per-IP limits); see requestOrigin. */
  readonly trustProxy: boolean;
  /** Dynamic registration and Client ID Metadata Documents (config.ts OAuthOpenClientsConfig); null: neither. */
  readonly oauthOpenClients: OAuthOpenClientsConfig | null;
  /** Receives 5xx errors with their causes; never shown to clients. */
  readonly logError: (error: HttpError, request: { method: string; path: string }) => void;
}
