// The authentication service inside inference-server: `--auth` mounts its routes on the same
// port, and `--auth-app SLUG [--auth-role ROLE]` admits the service's access tokens (audience and
// app_id equal to SLUG, at least ROLE in their tenant) wherever an API key is accepted.
import { bearerToken } from '../../http/bearer.js';
import { HttpError } from '../../http/errors.js';
import type { Route } from '../../http/router.js';
// The auth service (postgres.js, jose, its schema) is imported only when a flag asks for it: a
// server without --auth/--auth-app starts without loading it (router mode starts one per model).
import type { AuthService, AuthServiceConfig, RoleName } from '../../auth/mount.js';
import { ErrorType, inferenceError } from '../errors.js';
import type { UsageHourRow } from '../tenants/usage-meter.js';

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
export interface IssuedKeySettings {
  weight?: number;
  priorityClass?: 'interactive' | 'batch';
  limits?: { concurrentRequests?: number; requestsPerMinute?: number; tokensPerMinute?: number };
}

/** Whom an accepted bearer credential names (its tenant: tenants/tenant-table.ts). */
export type BearerIdentity =
  /** An access token: its tenant_id claim (null: none) and its subject. */
  | { kind: 'access-token'; appSlug: string; tenantId: string | null; subject: string }
  /** An API key issued by auth-server (AUTH_API_KEY_PREFIX): its id, tenant and settings. */
  | { kind: 'api-key'; appSlug: string; keyId: string; tenantId: string | null; settings: IssuedKeySettings };

/**
 * For startInferenceServer's acceptBearer: the identity admits the request; null leaves the
 * credential to the API-key check; failures throw 401/403.
 */
export type AcceptBearer = (authorization: string | undefined) => Promise<BearerIdentity | null>;

export interface InferenceAuth {
  routes: Route[];
  acceptBearer?: AcceptBearer;
  /** The auth service mounted in this process (--auth): its usage table takes hourly usage rows. */
  usage?: UsageRecorder;
  close(): Promise<void>;
}

/** The auth service's usage table (service.usage.record), as tenants/usage-flush.ts writes to it. */
export interface UsageRecorder {
  record(rows: UsageHourRow[]): Promise<void>;
}

/**
 * The part of src/auth/mount.ts that verifies auth-server API keys, as that module is to export it
 * (createApiKeyVerifier, AUTH_API_KEY_PREFIX); looked up at run time, so that a service without it
 * leaves such keys to the API-key check.
 */
interface ApiKeyIdentity {
  keyId: string;
  appId: string;
  appSlug: string;
  name: string;
  tenantId: string | null;
  role: RoleName;
  limits: { concurrentRequests?: number; requestsPerMinute?: number; tokensPerMinute?: number };
  weight: number;
  priorityClass: 'interactive' | 'batch';
  expiresAt: string | Date | null;
}
interface ApiKeyVerifier {
  verify(key: string): Promise<ApiKeyIdentity | null>;
  close(): void | Promise<void>;
}
interface ApiKeyModule {
  createApiKeyVerifier?: (source: { service: AuthService } | { issuer: string }, options: { ttlMs?: number; appSlug?: string }) => ApiKeyVerifier;
  AUTH_API_KEY_PREFIX?: string;
}

/** Roles by rank (the auth service's ROLE_RANK, without importing it: see server-config.ts's AUTH_ROLES). */
const ROLE_RANK: Record<RoleName, number> = { viewer: 1, staff: 2, admin: 3, owner: 4 };

export async function createInferenceAuth(options: InferenceAuthOptions): Promise<InferenceAuth> {
  if (!options.mount && !options.appSlug) return { routes: [], close: async () => {} };
  const mod = await import('../../auth/mount.js');
  const { createAccessTokenGuard, createAuthService, readAuthServiceConfig } = mod;
  let verifier: ApiKeyVerifier | null = null;
  let service: AuthService | null = null;
  if (options.mount) service = await createAuthService(options.config ?? readAuthServiceConfig(options.env, { issuer: options.selfUrl }));
  let acceptBearer: InferenceAuth['acceptBearer'];
  if (options.appSlug) {
    const issuer = service?.issuer ?? options.issuer;
    if (!issuer) {
      await service?.close();
      throw new Error('--auth-app needs --auth (the service in this process) or --auth-issuer URL (a running auth-server)');
    }
    const guard = createAccessTokenGuard({
      appSlug: options.appSlug,
      role: options.role,
      issuer,
      keys: service ? service.accessTokenKeys : { jwksUrl: options.jwksUrl ?? `${issuer.replace(/\/+$/, '')}/.well-known/jwks.json` },
    });
    const keys = apiKeyVerifier(mod as ApiKeyModule, service, issuer, options.appSlug);
    verifier = keys?.verifier ?? null;
    const appSlug = options.appSlug;
    const required = options.role === undefined ? 0 : ROLE_RANK[options.role];
    acceptBearer = async (authorization) => {
      const token = bearerToken(authorization);
      if (token === null) return null;
      // An auth-server API key (its prefix): verified by the service; an unknown key is a 401.
      if (keys && token.startsWith(keys.prefix)) {
        const identity = await keys.verifier.verify(token);
        if (!identity) throw inferenceError(ErrorType.AUTHENTICATION, 'Invalid API Key');
        if ((ROLE_RANK[identity.role] ?? 0) < required) throw inferenceError(ErrorType.PERMISSION, `This route requires the role "${options.role}" or higher`);
        return {
          kind: 'api-key', appSlug: identity.appSlug, keyId: identity.keyId, tenantId: identity.tenantId,
          settings: { weight: identity.weight, priorityClass: identity.priorityClass, limits: identity.limits },
        };
      }
      // Only a compact JWS (three dot-separated parts) is taken for an access token; anything
      // else is left to the API-key check.
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
  const usage = service ? usageRecorder(service) : undefined;
  return {
    routes: service?.routes ?? [],
    ...(acceptBearer ? { acceptBearer } : {}),
    ...(usage ? { usage } : {}),
    close: async () => {
      await verifier?.close();
      await service?.close();
    },
  };
}

/** The service's API-key verifier and the keys' prefix, when the auth module has them (see ApiKeyModule). */
function apiKeyVerifier(mod: ApiKeyModule, service: AuthService | null, issuer: string, appSlug: string): { verifier: ApiKeyVerifier; prefix: string } | null {
  if (typeof mod.createApiKeyVerifier !== 'function' || typeof mod.AUTH_API_KEY_PREFIX !== 'string') return null;
  return { verifier: mod.createApiKeyVerifier(service ? { service } : { issuer }, { appSlug }), prefix: mod.AUTH_API_KEY_PREFIX };
}

/** The service's usage table (service.usage.record), when the service has one. */
function usageRecorder(service: AuthService): UsageRecorder | undefined {
  const usage = (service as unknown as { usage?: { record?: (rows: UsageHourRow[]) => Promise<unknown> } }).usage;
  if (typeof usage?.record !== 'function') return undefined;
  const record = usage.record.bind(usage);
  return { record: async (rows) => { await record(rows); } };
}
