// The authentication service inside inference-server: `--auth` mounts its routes on the same
// port, and `--auth-app SLUG [--auth-role ROLE]` admits the service's access tokens (audience and
// app_id equal to SLUG, at least ROLE in their tenant) and its API keys (AUTH_API_KEY_PREFIX, of
// that app, at least ROLE) wherever an API key is accepted, each as its tenant (docs/tenants.md).
// With --auth, the service's usage table takes the hourly usage (tenants/usage-flush.ts), and its
// database holds tenants' limits for every replica that shares it (tenants/fleet-limits.ts); with
// --auth-issuer, the remote auth-server holds them, and takes the usage rows (POST /fleet/usage),
// when AUTH_APP_ID and AUTH_APP_SECRET are given.
// With --auth-app the server is also an OAuth protected resource (RFC 9728): it publishes
// /.well-known/oauth-protected-resource naming the issuer, a 401 carries
// `WWW-Authenticate: Bearer resource_metadata="..."`, and access tokens whose audience is its
// resource identifier (AUTH_RESOURCE, default this server's URL; RFC 8707) are admitted as the
// app's own are, so an MCP or OAuth-capable client finds its way to a token by itself.
import { bearerToken } from '../../http/bearer.js';
import { HttpError } from '../../http/errors.js';
import type { Route } from '../../http/router.js';
// The auth service (postgres.js, jose, its schema) is imported only when a flag asks for it: a
// server without --auth/--auth-app starts without loading it (router mode starts one per model).
import type { ApiKeyIdentity, ApiKeyVerifier, AuthService, AuthServiceConfig } from '../../auth/mount.js';
import { ROLE_RANK, type RoleName } from '../../auth/roles.js';
import { ErrorType, inferenceError } from '../errors.js';
import { UsageBatchRefused, type UsageRecorder } from '../tenants/usage-flush.js';
import type { UsageHourRow } from '../tenants/usage-meter.js';
import { remoteUsageRecorder } from '../tenants/remote-usage-recorder.js';
import { checkTenantSettings, type TenantSettings } from '../tenants/tenant.js';
import { appFleetStore, postgresFleetStore, type FleetStore } from '../tenants/fleet-store.js';
import { remoteFleetStore, type AppCredentials } from '../tenants/remote-fleet-store.js';

export interface InferenceAuthOptions {
  /** Mount the auth routes (configured from the AUTH_* environment, as auth-server). */
  mount: boolean;
  /** Accept access tokens of this app. */
  appSlug?: string;
  role?: RoleName;
  /** Where the tokens come from when the routes are not mounted here (its JWKS is fetched). */
  issuer?: string;
  /** The JWKS to verify with, when not `<issuer>/.well-known/jwks.json`. */
  jwksUrl?: string;
  /** This server's own address, the default issuer of a mounted service. */
  selfUrl: string;
  env: Record<string, string | undefined>;
  /** A complete service configuration, used instead of the environment (tests, embedding). */
  config?: AuthServiceConfig;
}

/** What an auth-server API key carries of its tenant's settings (ApiKeyIdentity's limits, weight, class). */
export type IssuedKeySettings = Partial<TenantSettings>;

/** Whom an accepted bearer credential names (its tenant: tenants/tenant-table.ts). */
export type BearerIdentity =
  /** An access token: its tenant_id claim (null: none) and its subject. */
  | { kind: 'access-token'; appSlug: string; tenantId: string | null; subject: string }
  /** An API key issued by auth-server (AUTH_API_KEY_PREFIX): its id, tenant and settings. */
  | { kind: 'api-key'; appSlug: string; keyId: string; tenantId: string | null; settings: IssuedKeySettings };

/**
 * For startInferenceServer's acceptBearer: the identity admits the request; null leaves the
 * credential to the API-key check; failures throw 401/403. `challenge` is the WWW-Authenticate
 * value of this server's 401s (RFC 9728 section 5.1).
 */
export type AcceptBearer = ((authorization: string | undefined) => Promise<BearerIdentity | null>) & { challenge?: string };

export interface InferenceAuth {
  routes: Route[];
  acceptBearer?: AcceptBearer;
  /**
   * Where hourly usage rows go: the auth service mounted in this process (--auth), or a remote
   * auth-server's POST /fleet/usage (--auth-issuer with AUTH_APP_ID and AUTH_APP_SECRET).
   */
  usage?: UsageRecorder;
  /**
   * Where replicas hold tenants' limits together (tenants/fleet-limits.ts): the mounted service's
   * database, or a remote auth-server's POST /fleet/exchange (--auth-issuer with AUTH_APP_ID and
   * AUTH_APP_SECRET).
   */
  fleetStore?: FleetStore;
  close(): Promise<void>;
}

export type { UsageRecorder };

/**
 * A batch written to the mounted service; a row it refuses as malformed (RangeError) would be
 * refused every time, so the batch is refused for good (logged and dropped) rather than kept and
 * retried ahead of every later batch.
 */
export async function mountedUsageRecord(service: Pick<AuthService, 'usage'>, rows: UsageHourRow[]): Promise<void> {
  try {
    await service.usage.record(rows);
  } catch (err) {
    if (err instanceof RangeError) throw new UsageBatchRefused(err.message);
    throw err;
  }
}

/** A key's settings, checked as every tenant's are (an identity out of bounds is the auth service's fault: a 500). */
function issuedSettings(identity: ApiKeyIdentity): IssuedKeySettings {
  try {
    return checkTenantSettings({ weight: identity.weight, priorityClass: identity.priorityClass, limits: identity.limits }, `API key ${identity.keyId}`);
  } catch (err) {
    throw inferenceError(ErrorType.SERVER, `the auth service gave ${(err as Error).message}`);
  }
}

export async function createInferenceAuth(options: InferenceAuthOptions): Promise<InferenceAuth> {
  if (!options.mount && !options.appSlug) return { routes: [], close: async () => {} };
  const mod = await import('../../auth/mount.js');
  const { createAccessTokenGuard, createAuthService, readAuthServiceConfig } = mod;
  let apiKeys: ApiKeyVerifier | null = null;
  let service: AuthService | null = null;
  if (options.mount) service = await createAuthService(options.config ?? readAuthServiceConfig(options.env, { issuer: options.selfUrl }));
  let acceptBearer: InferenceAuth['acceptBearer'];
  let resource: string | null = null;
  let issuerUrl: string | null = null;
  if (options.appSlug) {
    const issuer = service?.issuer ?? options.issuer;
    if (!issuer) {
      await service?.close();
      throw new Error('--auth-app needs --auth (the service in this process) or --auth-issuer URL (a running auth-server)');
    }
    issuerUrl = issuer;
    // As a URL's href (an origin gets its slash): the form clients send back as `resource`.
    resource = new URL(options.env.AUTH_RESOURCE || options.selfUrl).href;
    const guard = createAccessTokenGuard({
      appSlug: options.appSlug,
      role: options.role,
      resource,
      issuer,
      keys: service ? service.accessTokenKeys : { jwksUrl: options.jwksUrl ?? `${issuer.replace(/\/+$/, '')}/.well-known/jwks.json` },
    });
    const verifier = mod.createApiKeyVerifier(service ? { service } : { issuer }, { appSlug: options.appSlug });
    apiKeys = verifier;
    acceptBearer = bearerCheck(mod, verifier, guard, options.appSlug, options.role);
  }
  let remote: AppCredentials | null;
  try {
    remote = service ? null : remoteAppCredentials(issuerUrl, options.env);
  } catch (err) {
    apiKeys?.close();
    throw err;
  }
  // The mounted service writes each batch in one statement (the batch id is for writes over HTTP,
  // whose answer can be lost after the service applied them).
  const usage: UsageRecorder | undefined = service
    ? { record: (rows) => mountedUsageRecord(service!, rows) }
    : remote && issuerUrl !== null ? remoteUsageRecorder(issuerUrl, remote) : undefined;
  // A replica on the database that serves an app counts in that app's fleet, with its replicas
  // through HTTP (POST /fleet/exchange stores those the same way).
  const fleetStore: FleetStore | undefined = service
    ? (options.appSlug ? appFleetStore(service.sql, options.appSlug) : postgresFleetStore(service.sql))
    : remote && issuerUrl !== null ? remoteFleetStore(issuerUrl, remote) : undefined;
  const metadata = resource !== null && issuerUrl !== null ? protectedResourceMetadata(resource, issuerUrl) : null;
  if (metadata && acceptBearer) acceptBearer.challenge = `Bearer resource_metadata="${metadata.url}"`;
  return {
    routes: [...(service?.routes ?? []), ...(metadata ? [metadata.route] : [])],
    ...(acceptBearer ? { acceptBearer } : {}),
    ...(usage ? { usage } : {}),
    ...(fleetStore ? { fleetStore } : {}),
    close: async () => {
      apiKeys?.close();
      await service?.close();
    },
  };
}


type AuthMount = typeof import('../../auth/mount.js');

/**
 * --auth-app's check of a bearer credential: an auth-server API key of the app (verified by the
 * service: unknown, revoked, expired or of another app is a 401; a service that cannot answer a
 * 503), or an access token of the app (a compact JWS, checked by `guard`); anything else is left
 * to the API-key check (null). Below `role`, 403.
 */
function bearerCheck(mod: AuthMount, verifier: ApiKeyVerifier, guard: ReturnType<AuthMount['createAccessTokenGuard']>, appSlug: string, role: RoleName | undefined): NonNullable<InferenceAuth['acceptBearer']> {
  const required = role === undefined ? 0 : ROLE_RANK[role];
  return async (authorization) => {
    const token = bearerToken(authorization);
    if (token === null) return null;
    if (token.startsWith(mod.AUTH_API_KEY_PREFIX)) {
      let identity: ApiKeyIdentity | null;
      try {
        identity = await verifier.verify(token);
      } catch {
        throw inferenceError(ErrorType.UNAVAILABLE, 'API keys cannot be verified now; try again later');
      }
      if (!identity) throw inferenceError(ErrorType.AUTHENTICATION, 'Invalid API Key');
      if (ROLE_RANK[identity.role] < required) throw inferenceError(ErrorType.PERMISSION, `This route requires the role "${role}" or higher`);
      return { kind: 'api-key', appSlug: identity.appSlug, keyId: identity.keyId, tenantId: identity.tenantId, settings: issuedSettings(identity) };
    }
    if (token.split('.').length !== 3) return null;
    try {
      const claims = await guard(authorization);
      return { kind: 'access-token', appSlug, tenantId: claims.tenant_id, subject: claims.sub };
    } catch (err) {
      if (err instanceof HttpError && err.status === 403) throw inferenceError(ErrorType.PERMISSION, err.message);
      if (err instanceof HttpError) throw inferenceError(ErrorType.AUTHENTICATION, err.message);
      throw err;
    }
  };
}

/**
 * The app's credentials for a remote auth-server (--auth-issuer), AUTH_APP_ID and
 * AUTH_APP_SECRET: with them the fleet's counts of tenants' limits and the usage rows go to it;
 * without (null), each replica holds its tenants' limits alone and writes no usage rows.
 */
function remoteAppCredentials(issuer: string | null, env: Record<string, string | undefined>): AppCredentials | null {
  if (issuer === null) return null;
  const appId = env.AUTH_APP_ID || undefined;
  const appSecret = env.AUTH_APP_SECRET || undefined;
  if ((appId === undefined) !== (appSecret === undefined)) {
    throw new Error('AUTH_APP_ID and AUTH_APP_SECRET go together: set both (the app\'s id and secret, for tenants\' limits held across replicas and usage rows through --auth-issuer) or neither');
  }
  return appId !== undefined && appSecret !== undefined ? { appId, appSecret } : null;
}

/**
 * RFC 9728: the metadata of the protected resource `resource`, served at
 * `/.well-known/oauth-protected-resource` followed by the resource's path (none for a bare
 * origin), and that URL.
 */
function protectedResourceMetadata(resource: string, issuer: string): { url: string; route: Route } {
  const parsed = new URL(resource);
  const suffix = parsed.pathname === '/' ? '' : parsed.pathname.replace(/\/+$/, '');
  const path = `/.well-known/oauth-protected-resource${suffix}`;
  const body = {
    resource,
    authorization_servers: [issuer],
    bearer_methods_supported: ['header'],
    resource_name: 'inference-server',
  };
  return {
    url: `${parsed.origin}${path}`,
    route: { method: 'GET', path, handler: () => ({ headers: { 'Cache-Control': 'public, max-age=300' }, body }) },
  };
}
