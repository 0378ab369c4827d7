// Configuration of the auth service. Every setting is an environment variable; auth-server's
// command-line flags are aliases of them (a flag wins over the variable). inference-server
// mounting the routes reads the same variables with readAuthServiceConfig(process.env).
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { parseFlags, type FlagSpec } from '../cli/flags.js';
import path from 'node:path';
import type { Clock } from './clock.js';
import { AUDIT_RETENTION_DAYS, VERIFIED_TOKEN_CACHE_ENTRIES, type OtpLimits } from './limits.js';
import type { OtpDelivery, OtpDeliveryConfig } from './otp/delivery.js';
import { parseRateLimits, type RateLimit, type RateLimitRule } from './rate-limit-rules.js';

export interface AuthServiceConfig {
  /** PostgreSQL >= 15. When absent, an embedded PostgreSQL runs with its data in `<dataDir>/postgres`. */
  databaseUrl?: string;
  /** Home of the embedded database and the default key directory. */
  dataDir: string;
  /** Holds master.key (created at first start). Instances sharing a database must share it. */
  keyDir: string;
  /** The `iss` claim and base of jwks_uri: this service's public URL, no trailing slash. */
  issuer: string;
  /** Value of X-Admin-Key for the admin routes; at least 16 characters. */
  adminKey: string;
  /** A configured delivery, or any OtpDelivery (tests pass one that records codes). */
  otpDelivery: OtpDeliveryConfig | OtpDeliveryConfig[] | OtpDelivery;
  otpLimits?: Partial<OtpLimits>;
  /** Port of the embedded PostgreSQL on 127.0.0.1; 0 or absent picks a free one. */
  embeddedDatabasePort?: number;
  /** Embedded database without fsync, for tests and benchmarks. */
  disposableDatabase?: boolean;
  /** Serve the admin console page at GET /admin/ (AUTH_ADMIN_CONSOLE=1; default off). */
  adminConsole?: boolean;
  /** Connections in the pool (default 10); in auth-server, the pool of each worker thread (see workerPoolSize). */
  databasePoolSize?: number;
  /** application_name of the pool's connections (default auth-server), as pg_stat_activity shows it. */
  databaseApplicationName?: string;
  clock?: Clock;
  /** Start-up and error lines (default: stderr). */
  log?: (line: string) => void;
  /** Access tokens whose verification each worker remembers (default VERIFIED_TOKEN_CACHE_ENTRIES; 0: none). */
  verifiedTokenCacheSize?: number;
  /** Rate-limit rules that differ from RATE_LIMIT_RULES' defaults (AUTH_RATE_LIMITS). */
  rateLimits?: Partial<Record<RateLimitRule, RateLimit>>;
  /** Believe X-Forwarded-For for the client's IP address (audit trail, per-IP limits). Default false: the peer's address. */
  trustProxy?: boolean;
  /** Whether this instance sends webhook deliveries (default true; false: another instance on the database does). */
  webhookDispatch?: boolean;
  /** Seconds to wait after each failed webhook attempt; after the last, the delivery is dead (default WEBHOOK_RETRY_DELAYS_SECONDS). */
  webhookRetryDelaysSeconds?: number[];
  /** How often the dispatcher looks for retries that came due (default 1000 ms). */
  webhookPollMs?: number;
  /** Per webhook attempt (default 15000 ms). */
  webhookTimeoutMs?: number;
  /** How often the primary writes the usage.hourly events of closed hours (default USAGE_EMIT_INTERVAL_MS; 0: never, for a test that calls emitClosedHours itself). */
  usageEventsIntervalMs?: number;
  /** Audit events older than this many days are deleted (hourly, by the instance's primary); 0 keeps them forever. Default 90. */
  auditRetentionDays?: number;
  /** DNS servers (`host` or `host:port`) for the TXT records that prove tenants' domains; absent: the system's. */
  dnsServers?: string[];
  /** Bound of each request to an upstream identity provider (default UPSTREAM_TIMEOUT_MS); past it the sign-in is 502 UPSTREAM_UNAVAILABLE. */
  upstreamTimeoutMs?: number;
  /**
   * Clients that no admin made (provider/registration.ts, provider/metadata-document-clients.ts): RFC 7591 dynamic registration and
   * Client ID Metadata Documents, both off unless set; such clients join the app `appSlug`.
   */
  oauthOpenClients?: OAuthOpenClientsConfig;
  /** See SigningKeyRingOptions.onRotated (set by auth-server's worker threads). */
  onSigningKeysRotated?: () => Promise<void>;
}

export interface OAuthOpenClientsConfig {
  /** The app that registered and metadata-document clients belong to (AUTH_OAUTH_OPEN_APP). */
  appSlug: string;
  /** POST /oauth/register is served (AUTH_OAUTH_REGISTRATION=1). */
  registration: boolean;
  /** When set, registration needs `Authorization: Bearer <this>` (RFC 7591's initial access token; AUTH_OAUTH_REGISTRATION_TOKEN). */
  initialAccessToken?: string;
  /** An https URL is taken as a client_id and its metadata document fetched (AUTH_OAUTH_CLIENT_METADATA=1). */
  metadataDocuments: boolean;
  /** For development only: metadata documents on loopback and private addresses, over http too (AUTH_OAUTH_CLIENT_METADATA_PRIVATE=1). */
  allowPrivateMetadataHosts?: boolean;
  /** Bound of one metadata document fetch (default 5000 ms). */
  metadataTimeoutMs?: number;
  /** PEM of a CA that metadata document hosts' certificates may chain to, besides the public ones (AUTH_OAUTH_CLIENT_METADATA_CA_FILE). */
  metadataCaPem?: string;
}

export interface AuthServerOptions {
  host: string;
  port: number;
  /** Worker threads serving HTTP (default: the number of cores). */
  workers: number;
  service: AuthServiceConfig;
  /** True when the issuer was derived from host and port rather than configured. */
  issuerIsDefault: boolean;
}

/** Flag → environment variable, with its help text. */
const SETTINGS: ReadonlyArray<{ flag: string; env: string; help: string }> = [
  { flag: '--host', env: 'AUTH_HOST', help: 'address to listen on (default 127.0.0.1)' },
  { flag: '--port', env: 'AUTH_PORT', help: 'port to listen on (default 8081)' },
  { flag: '--database-url', env: 'DATABASE_URL', help: 'PostgreSQL URL; without it an embedded PostgreSQL is started' },
  { flag: '--data-dir', env: 'AUTH_DATA_DIR', help: 'embedded database and default key directory (default ./.auth-data)' },
  { flag: '--key-dir', env: 'AUTH_KEY_DIR', help: 'directory of master.key (default <data-dir>/keys)' },
  { flag: '--issuer', env: 'AUTH_ISSUER', help: 'public base URL, the iss claim (default http://<host>:<port>)' },
  { flag: '--admin-key', env: 'AUTH_ADMIN_KEY', help: 'X-Admin-Key for the admin routes, >= 16 characters (required)' },
  { flag: '--otp-delivery', env: 'AUTH_OTP_DELIVERY', help: 'log | webhook | smtp | sms, or several (smtp,sms): each channel uses the first that serves it (default log; log is refused when NODE_ENV=production)' },
  { flag: '--otp-webhook-url', env: 'AUTH_OTP_WEBHOOK_URL', help: 'URL receiving POST {channel, to, code, app_id}' },
  { flag: '--otp-webhook-secret', env: 'AUTH_OTP_WEBHOOK_SECRET', help: 'sent to the webhook as "Authorization: Bearer <secret>"' },
  { flag: '--smtp-host', env: 'AUTH_SMTP_HOST', help: 'SMTP server for e-mailed codes' },
  { flag: '--smtp-port', env: 'AUTH_SMTP_PORT', help: 'SMTP port (default 587)' },
  { flag: '--smtp-tls', env: 'AUTH_SMTP_TLS', help: 'starttls (required; default) | implicit (default on port 465) | none' },
  { flag: '--smtp-user', env: 'AUTH_SMTP_USER', help: 'SMTP AUTH user (none: no AUTH)' },
  { flag: '--smtp-password', env: 'AUTH_SMTP_PASSWORD', help: 'SMTP AUTH password' },
  { flag: '--smtp-from', env: 'AUTH_SMTP_FROM', help: 'sender of apps without their own, e.g. "Example <login@example.com>"' },
  { flag: '--smtp-ca-file', env: 'AUTH_SMTP_CA_FILE', help: 'PEM CA of the SMTP server\'s certificate, when not a public one' },
  { flag: '--sms-base-url', env: 'AUTH_SMS_BASE_URL', help: 'Twilio-compatible API base URL (default https://api.twilio.com)' },
  { flag: '--sms-account-sid', env: 'AUTH_SMS_ACCOUNT_SID', help: 'SMS API account SID (Basic auth user)' },
  { flag: '--sms-auth-token', env: 'AUTH_SMS_AUTH_TOKEN', help: 'SMS API auth token (Basic auth password)' },
  { flag: '--sms-from', env: 'AUTH_SMS_FROM', help: 'sending phone number (E.164)' },
  { flag: '--sms-messaging-service-sid', env: 'AUTH_SMS_MESSAGING_SERVICE_SID', help: 'messaging service instead of --sms-from' },
  { flag: '--otp-app-hourly-limit', env: 'AUTH_OTP_APP_HOURLY_LIMIT', help: 'codes per app per hour (default 1000)' },
  { flag: '--embedded-db-port', env: 'AUTH_EMBEDDED_DB_PORT', help: 'port of the embedded PostgreSQL (default: a free one)' },
  { flag: '--oauth-open-app', env: 'AUTH_OAUTH_OPEN_APP', help: 'slug of the app that dynamically registered and metadata-document OAuth clients join' },
  { flag: '--oauth-registration', env: 'AUTH_OAUTH_REGISTRATION', help: '1: serve RFC 7591 registration at /oauth/register (needs --oauth-open-app; default 0)' },
  { flag: '--oauth-registration-token', env: 'AUTH_OAUTH_REGISTRATION_TOKEN', help: 'initial access token registration requires as a Bearer token' },
  { flag: '--oauth-client-metadata', env: 'AUTH_OAUTH_CLIENT_METADATA', help: '1: accept https URLs as client_id (Client ID Metadata Documents; needs --oauth-open-app; default 0)' },
  { flag: '--oauth-client-metadata-private', env: 'AUTH_OAUTH_CLIENT_METADATA_PRIVATE', help: '1, development only: fetch metadata documents from loopback and private addresses, over http too' },
  { flag: '--oauth-client-metadata-ca-file', env: 'AUTH_OAUTH_CLIENT_METADATA_CA_FILE', help: 'PEM CA that metadata document hosts\' certificates may chain to, when not a public one' },
  { flag: '--workers', env: 'AUTH_WORKERS', help: 'worker threads serving HTTP on the port (default: the number of cores)' },
  { flag: '--db-pool-size', env: 'AUTH_DB_POOL_SIZE', help: 'database connections per worker (default 80 / workers, from 2 to 10)' },
  { flag: '--token-cache-size', env: 'AUTH_TOKEN_CACHE_SIZE', help: 'access tokens whose verification each worker remembers (default 10000; 0: none)' },
  { flag: '--admin-console', env: 'AUTH_ADMIN_CONSOLE', help: '1 serves the admin console page at /admin/ (default 0: off)' },
  { flag: '--dns-servers', env: 'AUTH_DNS_SERVERS', help: 'comma-separated DNS servers (host or host:port) for the TXT records proving tenants\' domains (default: the system\'s)' },
  { flag: '--trust-proxy', env: 'AUTH_TRUST_PROXY', help: '1 takes the client IP from X-Forwarded-For (default 0: the peer address)' },
  { flag: '--rate-limits', env: 'AUTH_RATE_LIMITS', help: 'rule=hits/seconds,... replacing default rate limits (see docs)' },
  { flag: '--webhook-dispatch', env: 'AUTH_WEBHOOK_DISPATCH', help: '0 leaves sending webhooks to other instances (default 1)' },
  { flag: '--webhook-retry-delays', env: 'AUTH_WEBHOOK_RETRY_DELAYS', help: 'seconds between webhook attempts, comma-separated (default 5,300,1800,7200,18000,36000,36000)' },
  { flag: '--audit-retention-days', env: 'AUTH_AUDIT_RETENTION_DAYS', help: 'days audit events are kept (default 90; 0: forever)' },
];

export const AUTH_SERVER_USAGE = [
  'usage: auth-server [options]',
  '',
  'Every option can also be given as the environment variable shown.',
  '',
  ...SETTINGS.map((s) => `  ${`${s.flag} VALUE`.padEnd(28)} ${s.env.padEnd(26)} ${s.help}`),
  `  ${'-h, --help'.padEnd(28)} ${''.padEnd(26)} show this help`,
].join('\n');

/** auth-server's flags for the shared parser: each sets its environment variable's value. */
const FLAGS: FlagSpec[] = [
  ...SETTINGS.map((s) => ({ names: [s.flag], kind: 'string' as const, key: s.env, help: s.help })),
  { names: ['-h', '--help'], kind: 'bool', key: 'help', help: 'show this help' },
];

/** Parses auth-server's argv (without node and script); throws an Error with a usage hint on bad input. */
export function parseAuthServerArgs(argv: string[], env: NodeJS.ProcessEnv): AuthServerOptions | 'help' {
  const flags = parseFlags(argv, FLAGS, {});
  if (flags.help) return 'help';
  const vars: Record<string, string | undefined> = { ...env };
  for (const s of SETTINGS) {
    const value = flags[s.env];
    if (typeof value === 'string') vars[s.env] = value;
  }
  const host = vars.AUTH_HOST || '127.0.0.1';
  const port = integer(vars, 'AUTH_PORT', 8081, 0, 65535);
  const workers = integer(vars, 'AUTH_WORKERS', os.availableParallelism(), 1, 1024);
  const service = readAuthServiceConfig(vars, { issuer: defaultIssuer(host, port), databasePoolSize: workerPoolSize(workers) });
  return { host, port, workers, service, issuerIsDefault: !vars.AUTH_ISSUER };
}

/**
 * The default pool of each auth-server worker: 80 connections shared out, at least 2 and at
 * most 10 per worker, so that the workers' pools plus the primary's 2 stay below PostgreSQL's
 * default max_connections (100) up to 40 workers.
 */
export function workerPoolSize(workers: number): number {
  return Math.min(10, Math.max(2, Math.floor(80 / workers)));
}

/** `http://<host>:<port>`, with a wildcard listen address replaced by 127.0.0.1. */
export function defaultIssuer(host: string, port: number): string {
  const issuerHost = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host;
  return `http://${issuerHost.includes(':') ? `[${issuerHost}]` : issuerHost}:${port}`;
}

/** The service's settings from environment variables (see SETTINGS); throws on missing or invalid values. */
export function readAuthServiceConfig(vars: Record<string, string | undefined>, defaults: { issuer: string; databasePoolSize?: number }): AuthServiceConfig {
  const adminKey = vars.AUTH_ADMIN_KEY;
  if (!adminKey) throw new Error('an admin key is required: set AUTH_ADMIN_KEY or --admin-key');
  const dataDir = path.resolve(vars.AUTH_DATA_DIR || '.auth-data');
  const kinds = (vars.AUTH_OTP_DELIVERY || 'log').split(',').map((kind) => kind.trim());
  const deliveries = kinds.map((kind) => otpDeliveryConfig(kind, vars));
  const otpDelivery = deliveries.length === 1 ? deliveries[0]! : deliveries;
  return {
    databaseUrl: vars.DATABASE_URL || undefined,
    dataDir,
    keyDir: path.resolve(vars.AUTH_KEY_DIR || path.join(dataDir, 'keys')),
    issuer: vars.AUTH_ISSUER || defaults.issuer,
    adminKey,
    otpDelivery,
    otpLimits: vars.AUTH_OTP_APP_HOURLY_LIMIT ? { appHourly: integer(vars, 'AUTH_OTP_APP_HOURLY_LIMIT', 1000, 1, 1e9) } : undefined,
    embeddedDatabasePort: integer(vars, 'AUTH_EMBEDDED_DB_PORT', 0, 0, 65535),
    databasePoolSize: integer(vars, 'AUTH_DB_POOL_SIZE', defaults.databasePoolSize ?? 10, 1, 1000),
    verifiedTokenCacheSize: integer(vars, 'AUTH_TOKEN_CACHE_SIZE', VERIFIED_TOKEN_CACHE_ENTRIES, 0, 10_000_000),
    ...(integer(vars, 'AUTH_ADMIN_CONSOLE', 0, 0, 1) === 1 ? { adminConsole: true } : {}),
    ...(integer(vars, 'AUTH_TRUST_PROXY', 0, 0, 1) === 1 ? { trustProxy: true } : {}),
    ...(vars.AUTH_DNS_SERVERS ? { dnsServers: vars.AUTH_DNS_SERVERS.split(',').map((s) => s.trim()).filter((s) => s.length > 0) } : {}),
    ...(vars.AUTH_RATE_LIMITS ? { rateLimits: parseRateLimits(vars.AUTH_RATE_LIMITS) } : {}),
    ...(integer(vars, 'AUTH_WEBHOOK_DISPATCH', 1, 0, 1) === 0 ? { webhookDispatch: false } : {}),
    ...(vars.AUTH_WEBHOOK_RETRY_DELAYS ? { webhookRetryDelaysSeconds: retryDelays(vars.AUTH_WEBHOOK_RETRY_DELAYS) } : {}),
    ...(oauthOpenClients(vars) ?? {}),
    ...(vars.AUTH_AUDIT_RETENTION_DAYS ? { auditRetentionDays: integer(vars, 'AUTH_AUDIT_RETENTION_DAYS', AUDIT_RETENTION_DAYS, 0, 100_000) } : {}),
  };
}

/** One kind of --otp-delivery with its settings; throws when one it needs is missing. */
function otpDeliveryConfig(kind: string, vars: Record<string, string | undefined>): OtpDeliveryConfig {
  const required = (name: string, flag: string): string => {
    const value = vars[name];
    if (!value) throw new Error(`--otp-delivery ${kind} needs ${flag} (${name})`);
    return value;
  };
  switch (kind) {
    case 'log':
      return { kind: 'log' };
    case 'webhook':
      return { kind: 'webhook', url: required('AUTH_OTP_WEBHOOK_URL', '--otp-webhook-url'), secret: vars.AUTH_OTP_WEBHOOK_SECRET || undefined };
    case 'smtp': {
      const port = integer(vars, 'AUTH_SMTP_PORT', 587, 1, 65535);
      const tls = vars.AUTH_SMTP_TLS || (port === 465 ? 'implicit' : 'starttls');
      if (tls !== 'starttls' && tls !== 'implicit' && tls !== 'none') throw new Error(`AUTH_SMTP_TLS must be starttls, implicit or none, got "${tls}"`);
      return {
        kind: 'smtp', host: required('AUTH_SMTP_HOST', '--smtp-host'), port, tls,
        ...(vars.AUTH_SMTP_USER ? { user: vars.AUTH_SMTP_USER, password: vars.AUTH_SMTP_PASSWORD ?? '' } : {}),
        from: required('AUTH_SMTP_FROM', '--smtp-from'),
        ...(vars.AUTH_SMTP_CA_FILE ? { caFile: vars.AUTH_SMTP_CA_FILE } : {}),
      };
    }
    case 'sms':
      if (!vars.AUTH_SMS_FROM === !vars.AUTH_SMS_MESSAGING_SERVICE_SID) throw new Error('--otp-delivery sms needs exactly one of --sms-from (AUTH_SMS_FROM) and --sms-messaging-service-sid (AUTH_SMS_MESSAGING_SERVICE_SID)');
      return {
        kind: 'sms',
        ...(vars.AUTH_SMS_BASE_URL ? { baseUrl: vars.AUTH_SMS_BASE_URL } : {}),
        accountSid: required('AUTH_SMS_ACCOUNT_SID', '--sms-account-sid'),
        authToken: required('AUTH_SMS_AUTH_TOKEN', '--sms-auth-token'),
        ...(vars.AUTH_SMS_FROM ? { from: vars.AUTH_SMS_FROM } : { messagingServiceSid: vars.AUTH_SMS_MESSAGING_SERVICE_SID! }),
      };
    default:
      throw new Error(`unknown OTP delivery "${kind}": expected log, webhook, smtp or sms (several separated by commas)`);
  }
}

/** AUTH_OAUTH_*: registration and metadata documents, each off unless set to 1, both needing the app. */
function oauthOpenClients(vars: Record<string, string | undefined>): { oauthOpenClients: OAuthOpenClientsConfig } | null {
  const registration = integer(vars, 'AUTH_OAUTH_REGISTRATION', 0, 0, 1) === 1;
  const metadataDocuments = integer(vars, 'AUTH_OAUTH_CLIENT_METADATA', 0, 0, 1) === 1;
  if (!registration && !metadataDocuments) return null;
  const appSlug = vars.AUTH_OAUTH_OPEN_APP;
  if (!appSlug) throw new Error('--oauth-registration and --oauth-client-metadata need --oauth-open-app (AUTH_OAUTH_OPEN_APP): the app such clients join');
  return {
    oauthOpenClients: {
      appSlug, registration, metadataDocuments,
      ...(vars.AUTH_OAUTH_REGISTRATION_TOKEN ? { initialAccessToken: vars.AUTH_OAUTH_REGISTRATION_TOKEN } : {}),
      ...(integer(vars, 'AUTH_OAUTH_CLIENT_METADATA_PRIVATE', 0, 0, 1) === 1 ? { allowPrivateMetadataHosts: true } : {}),
      ...(vars.AUTH_OAUTH_CLIENT_METADATA_CA_FILE ? { metadataCaPem: readFileSync(vars.AUTH_OAUTH_CLIENT_METADATA_CA_FILE, 'utf8') } : {}),
    },
  };
}

function retryDelays(text: string): number[] {
  const delays = text.split(',').map((item) => item.trim());
  if (delays.length > 20 || !delays.every((item) => /^\d{1,6}$/.test(item))) {
    throw new Error(`AUTH_WEBHOOK_RETRY_DELAYS must be up to 20 comma-separated whole seconds, got "${text}"`);
  }
  return delays.map(Number);
}

function integer(vars: Record<string, string | undefined>, name: string, fallback: number, min: number, max: number): number {
  const raw = vars[name];
  if (raw === undefined || raw === '') return fallback;
  const value = /^\d+$/.test(raw) ? Number(raw) : NaN;
  if (!(value >= min && value <= max)) throw new Error(`${name} must be an integer from ${min} to ${max}, got "${raw}"`);
  return value;
}
