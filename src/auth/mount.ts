// The auth service as a library: createAuthService builds the routes for a host server
// (auth-server, or inference-server with --auth), createAccessTokenGuard protects another
// server's routes with this service's access tokens (inference-server --auth-app SLUG).
//
// Error format when mounted: every auth route catches its own errors and answers
// `{"error": {"code", "message"}}` with the catalog's status (respond.ts), whatever the host's
// ErrorFormatter. Only what the HTTP layer answers before a handler runs goes through the
// host's formatter: an unknown path (404), a wrong method (405), and a body over the host's
// maxBodyBytes (413). auth-server uses formatAuthError for those; a host that wants auth-format
// bodies there too can call formatAuthError for paths under /auth/, /admin/ and /.well-known/.
import path from 'node:path';
import type { JWTVerifyGetKey } from 'jose';
import type { HttpError } from '../http/errors.js';
import type { Route } from '../http/router.js';
import { systemClock, type Clock } from './clock.js';
import type { AuthServiceConfig } from './config.js';
import type { AuthContext } from './context.js';
import { createDatabaseClient, type Sql } from './database/client.js';
import type { EmbeddedPostgres } from './database/embedded-postgres.js';
import {
  AUDIT_PURGE_INTERVAL_MS, AUDIT_RETENTION_DAYS, OTP_DEFAULT_LIMITS, RATE_LIMIT_PURGE_INTERVAL_MS, INVITATION_EXPIRY_SWEEP_MS, UPSTREAM_TIMEOUT_MS, USAGE_EMIT_INTERVAL_MS, VERIFIED_TOKEN_CACHE_ENTRIES,
  WEBHOOK_POLL_MS, WEBHOOK_RETRY_DELAYS_SECONDS, WEBHOOK_TIMEOUT_MS,
} from './limits.js';
import { purgeEndedRateLimitWindows } from './queries/rate-limit-counters.js';
import { rateLimitsWith } from './rate-limit-rules.js';
import { startPeriodic } from './periodic.js';
import { purgeExpiredAuditEvents } from './service/audit.js';
import { adminConsoleRoutes } from './admin-console.js';
import { findApiKeyIdentity, markApiKeyUsed } from './service/api-keys.js';
import { ApiKeyChanges } from './tokens/api-key-changes.js';
import { expireInvitations } from './service/invitations.js';
import { emitClosedUsageHours, recordUsage, type UsageHourRow } from './service/usage.js';
import type { ApiKeyIdentity } from './tokens/api-key.js';
import { remoteApiKeySource, verifierOn, type ApiKeyVerifier, type ApiKeyVerifierOptions } from './tokens/api-key-verifier.js';
import { applyMigrations } from './database/migrate.js';
import { createOtpDelivery, type OtpDelivery } from './otp/delivery.js';
import { authRoutes } from './routes.js';
import { hashAdminKey } from './service/credentials.js';
import { loadMasterKey } from './tokens/master-key.js';
import { SigningKeyRing } from './tokens/signing-key-ring.js';
import { dnsProofLookup } from './sso/domain-proof.js';
import { UpstreamClients } from './upstream/client.js';
import { VerifiedTokenCache } from './tokens/verified-token-cache.js';
import { WebhookDispatcher } from './webhooks/dispatcher.js';

export { readAuthServiceConfig, type AuthServiceConfig } from './config.js';
export { formatAuthError } from './errors.js';
export { MAX_BODY_BYTES as AUTH_MAX_BODY_BYTES } from './limits.js';
export { isRoleName, ROLE_NAMES, type RoleName } from './roles.js';
export { createAccessTokenGuard, type AccessTokenGuard, type AccessTokenGuardOptions, type AccessTokenKeys } from './tokens/access-token-guard.js';
export type { AccessTokenClaims } from './tokens/access-token.js';
export { AUTH_API_KEY_PREFIX, type ApiKeyIdentity } from './tokens/api-key.js';
export type { ApiKeyVerifier, ApiKeyVerifierOptions } from './tokens/api-key-verifier.js';
export type { UsageHourRow } from './service/usage.js';

export interface AuthService {
  /** Mount these on the host's startHttpServer (they need maxBodyBytes >= AUTH_MAX_BODY_BYTES). */
  readonly routes: Route[];
  /** The iss claim of the tokens this service signs. */
  readonly issuer: string;
  /** In-process key resolver: `createAccessTokenGuard({ ..., keys: service.accessTokenKeys })`. */
  readonly accessTokenKeys: { getKey: JWTVerifyGetKey };
  /** The database pool (for tests and tools). */
  readonly sql: Sql;
  /** The PostgreSQL URL of the pool: the embedded database's when this service started one. */
  readonly databaseUrl: string;
  /** API keys as this process's verifiers see them: what `createApiKeyVerifier({ service })` uses. */
  readonly apiKeys: {
    /** The live key's identity or null (one query, no write). */
    find(key: string): Promise<ApiKeyIdentity | null>;
    /** Records a use: last_used_at is written at most once a minute per key. */
    markUsed(keyId: string): void;
    /**
     * Calls `listener` with the id of each key rotated or revoked: through this service at its
     * commit, through another thread or instance on the database when its NOTIFY arrives.
     */
    onChange(listener: (keyId: string) => void): () => void;
    /** Resolves once the notifications of other threads and instances are heard (after the first onChange). */
    listening(): Promise<void>;
    readonly clock: Clock;
  };
  /** Metered usage of the inference server. */
  readonly usage: {
    /** Adds a batch of hourly rows in one statement; concurrent batches sum exactly. An unknown appSlug is stored as a null app. */
    record(rows: readonly UsageHourRow[]): Promise<void>;
    /** Writes the usage.hourly events of the closed hours that have none yet (the primary does it every minute); returns how many. */
    emitClosedHours(): Promise<number>;
  };
  /** Re-reads the signing keys now (another thread of this process rotated them). */
  reloadSigningKeys(): Promise<void>;
  /** Stops key reloading, closes the pool, stops the embedded PostgreSQL if one was started. */
  close(): Promise<void>;
}

/**
 * Connects to PostgreSQL (starting the embedded one when config.databaseUrl is absent), applies
 * migrations, loads or creates the signing key, and returns the routes. Throws when the
 * configuration is unusable (short admin key, `log` delivery in production, ...).
 */
export async function createAuthService(config: AuthServiceConfig): Promise<AuthService> {
  checkConfig(config);
  const log = config.log ?? defaultLog;
  let embedded: EmbeddedPostgres | null = null;
  let sql: Sql | null = null;
  try {
    if (!config.databaseUrl) {
      // Loaded only here: a service given DATABASE_URL never reads the embedded cluster's code.
      const { startEmbeddedPostgres } = await import('./database/embedded-postgres.js');
      embedded = await startEmbeddedPostgres({
        dir: path.join(config.dataDir, 'postgres'),
        port: config.embeddedDatabasePort,
        disposable: config.disposableDatabase,
        log,
      });
    }
    const databaseUrl = config.databaseUrl ?? embedded!.url;
    sql = createDatabaseClient(databaseUrl, { max: config.databasePoolSize, applicationName: config.databaseApplicationName });
    const applied = await applyMigrations(sql);
    if (applied.length > 0) log(`applied migrations: ${applied.join(', ')}`);
    return await serviceOn(sql, databaseUrl, config, embedded, { primary: true });
  } catch (error) {
    await sql?.end({ timeout: 0 });
    await embedded?.stop();
    throw error;
  }
}

/**
 * The service on a database that is ready: migrations applied and signing keys created by a
 * createAuthService that is still running (an auth-server worker thread; its primary thread did
 * the start-up). Opens its own pool and key ring; applies no migration, starts no database.
 */
export async function connectAuthService(config: AuthServiceConfig & { databaseUrl: string }): Promise<AuthService> {
  checkConfig(config);
  const sql = createDatabaseClient(config.databaseUrl, { max: config.databasePoolSize, applicationName: config.databaseApplicationName });
  try {
    return await serviceOn(sql, config.databaseUrl, config, null, { primary: false });
  } catch (error) {
    await sql.end({ timeout: 0 });
    throw error;
  }
}

const defaultLog = (line: string): void => { process.stderr.write(`[auth-server] ${line}\n`); };

/** Refuses an unusable configuration before anything starts. */
function checkConfig(config: AuthServiceConfig): void {
  if (config.adminKey.length < 16) throw new Error('the admin key must be at least 16 characters');
  new URL(config.issuer);
  if (!('send' in config.otpDelivery)) createOtpDelivery(config.otpDelivery);
  const cacheSize = config.verifiedTokenCacheSize;
  if (cacheSize !== undefined && !(Number.isInteger(cacheSize) && cacheSize >= 0)) throw new Error(`verifiedTokenCacheSize must be an integer >= 0, got ${cacheSize}`);
}

/**
 * The background work one thread per instance does (`primary`: createAuthService's service): the
 * webhook dispatcher, the audit retention purge, the deletion of ended rate-limit windows and the
 * usage.hourly events. A dispatcher that fails to start stops the signing keys' reloading too.
 */
async function startBackgroundWork(ctx: AuthContext, config: AuthServiceConfig, primary: boolean, log: (line: string) => void): Promise<{ stop(): Promise<void> }> {
  const { sql, clock } = ctx;
  const dispatcher = primary && config.webhookDispatch !== false
    ? new WebhookDispatcher({
      sql, clock, secretKey: ctx.webhookSecretKey, log,
      retryDelaysSeconds: config.webhookRetryDelaysSeconds ?? WEBHOOK_RETRY_DELAYS_SECONDS,
      pollMs: config.webhookPollMs ?? WEBHOOK_POLL_MS,
      timeoutMs: config.webhookTimeoutMs ?? WEBHOOK_TIMEOUT_MS,
    })
    : null;
  try {
    await dispatcher?.start();
  } catch (error) {
    ctx.keys.stop();
    throw error;
  }
  const retentionDays = config.auditRetentionDays ?? AUDIT_RETENTION_DAYS;
  const purge = primary && retentionDays > 0
    ? startPeriodic(AUDIT_PURGE_INTERVAL_MS, async () => {
      const deleted = await purgeExpiredAuditEvents(sql, clock.now(), retentionDays * 24 * 3600 * 1000);
      if (deleted > 0) log(`audit trail: deleted ${deleted} events older than ${retentionDays} days`);
    }, (error) => log(`audit trail: the retention purge failed (retried in an hour): ${String(error)}`))
    : null;
  const rateLimitPurge = primary
    ? startPeriodic(RATE_LIMIT_PURGE_INTERVAL_MS, async () => { await purgeEndedRateLimitWindows(sql, new Date(clock.now())); },
      (error) => log(`rate limits: deleting ended windows failed (retried later): ${String(error)}`))
    : null;
  const invitationExpiry = primary
    ? startPeriodic(INVITATION_EXPIRY_SWEEP_MS, async () => { await expireInvitations(ctx); },
      (error) => log(`invitations: marking expired ones failed (retried in a minute): ${String(error)}`))
    : null;
  const usageEventsIntervalMs = config.usageEventsIntervalMs ?? USAGE_EMIT_INTERVAL_MS;
  const usageEvents = primary && usageEventsIntervalMs > 0
    ? startPeriodic(usageEventsIntervalMs, async () => { await emitClosedUsageHours(ctx); },
      (error) => log(`usage: writing usage.hourly events failed (retried in a minute): ${String(error)}`))
    : null;
  return {
    async stop() {
      await dispatcher?.stop();
      await purge?.stop();
      await rateLimitPurge?.stop();
      await usageEvents?.stop();
      await invitationExpiry?.stop();
    },
  };
}

/**
 * Loads the keys (creating missing signing keys) and builds the routes on an open pool. The
 * `primary` service of a process (createAuthService's) also runs the background work that one
 * thread per instance does: the webhook dispatcher, the audit retention purge and the deletion
 * of ended rate-limit windows.
 */
async function serviceOn(sql: Sql, databaseUrl: string, config: AuthServiceConfig, embedded: EmbeddedPostgres | null, role: { primary: boolean }): Promise<AuthService> {
  const issuer = new URL(config.issuer).toString().replace(/\/+$/, '');
  const log = config.log ?? defaultLog;
  const delivery: OtpDelivery = 'send' in config.otpDelivery ? config.otpDelivery : createOtpDelivery(config.otpDelivery);
  const clock = config.clock ?? systemClock;
  const masterKey = await loadMasterKey(config.keyDir);
  const keys = new SigningKeyRing(sql, clock, masterKey.derive('signing-key-encryption'), { log, onRotated: config.onSigningKeysRotated });
  await keys.start();

  const ctx: AuthContext = {
    sql,
    clock,
    issuer,
    adminKeyHash: hashAdminKey(config.adminKey),
    keys,
    verifiedTokens: new VerifiedTokenCache(config.verifiedTokenCacheSize ?? VERIFIED_TOKEN_CACHE_ENTRIES),
    otp: { delivery, hashKey: masterKey.derive('otp-code-hash'), limits: { ...OTP_DEFAULT_LIMITS, ...config.otpLimits } },
    rateLimits: rateLimitsWith(config.rateLimits),
    apiKeyChanges: new ApiKeyChanges(sql, log),
    apiKeyTouches: new Map(),
    webhookSecretKey: masterKey.derive('webhook-secret-encryption'),
    domainProof: dnsProofLookup(config.dnsServers),
    secondFactor: { secretKey: masterKey.derive('totp-secret-encryption'), codeHashKey: masterKey.derive('recovery-code-hash') },
    upstream: { clients: new UpstreamClients(config.upstreamTimeoutMs ?? UPSTREAM_TIMEOUT_MS), secretKey: masterKey.derive('upstream-secret-encryption') },
    trustProxy: config.trustProxy ?? false,
    oauthOpenClients: config.oauthOpenClients ?? null,
    logError: (error: HttpError, request) => log(`${request.method} ${request.path} failed: ${describe(error)}`),
  };
  const background = await startBackgroundWork(ctx, config, role.primary, log);
  let closing: Promise<void> | null = null;
  return {
    routes: [...authRoutes(ctx), ...(config.adminConsole ? adminConsoleRoutes() : [])],
    issuer,
    accessTokenKeys: { getKey: keys.resolveKey },
    sql,
    databaseUrl,
    apiKeys: {
      find: (key) => findApiKeyIdentity(ctx, key),
      markUsed: (keyId) => markApiKeyUsed(ctx, keyId),
      onChange: (listener) => ctx.apiKeyChanges.subscribe(listener),
      listening: () => ctx.apiKeyChanges.ready(),
      clock,
    },
    usage: {
      record: (rows) => recordUsage(ctx, rows),
      emitClosedHours: () => emitClosedUsageHours(ctx),
    },
    reloadSigningKeys: () => keys.reload(),
    close() {
      closing ??= (async () => {
        keys.stop();
        await background.stop();
        await ctx.apiKeyChanges.stop();
        await sql.end({ timeout: 5 });
        await embedded?.stop();
      })();
      return closing;
    },
  };
}

/**
 * Verifies this service's API keys for another server (inference-server): `{ service }` in the
 * service's own process (a rotation or revocation through that service ends the key at once,
 * one through another thread or instance on the database when its NOTIFY arrives),
 * `{ issuer }` through the auth-server's POST /api-keys/introspect. Answers are cached (found
 * keys 30 s, refused ones 5 s, by default): a key revoked elsewhere stops working within ttlMs.
 * The full contract: tokens/api-key-verifier.ts.
 */
export function createApiKeyVerifier(
  source: { service: AuthService } | { issuer: string },
  options: ApiKeyVerifierOptions & { clock?: Clock } = {},
): ApiKeyVerifier {
  if ('issuer' in source) return verifierOn(remoteApiKeySource(source.issuer, options.clock ?? systemClock), options);
  const { apiKeys } = source.service;
  return verifierOn({
    clock: options.clock ?? apiKeys.clock,
    lookup: (key) => apiKeys.find(key),
    used: (keyId) => apiKeys.markUsed(keyId),
    subscribe: (listener) => apiKeys.onChange(listener),
  }, options);
}

function describe(error: HttpError): string {
  const cause = error.cause;
  return cause instanceof Error ? `${error.code}: ${cause.stack ?? cause.message}` : `${error.code}: ${error.message}`;
}
