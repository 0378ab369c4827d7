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

export interface InferenceAuth {
  routes: Route[];
  /** For startInferenceServer's acceptBearer: true admits the request; failures throw 401/403. */
  acceptBearer?: (authorization: string | undefined) => Promise<boolean>;
  close(): Promise<void>;
}

export async function createInferenceAuth(options: InferenceAuthOptions): Promise<InferenceAuth> {
  if (!options.mount && !options.appSlug) return { routes: [], close: async () => {} };
  const { createAccessTokenGuard, createAuthService, readAuthServiceConfig } = await import('../../auth/mount.js');
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
    acceptBearer = async (authorization) => {
      // Only a compact JWS (three dot-separated parts) is taken for an access token; anything
      // else is left to the API-key check.
      const token = bearerToken(authorization);
      if (token === null || token.split('.').length !== 3) return false;
      try {
        await guard(authorization);
        return true;
      } catch (err) {
        if (err instanceof HttpError && err.status === 403) throw inferenceError(ErrorType.PERMISSION, err.message);
        if (err instanceof HttpError) throw inferenceError(ErrorType.AUTHENTICATION, err.message);
        throw err;
      }
    };
  }
  return {
    routes: service?.routes ?? [],
    ...(acceptBearer ? { acceptBearer } : {}),
    close: async () => {
      await service?.close();
    },
  };
}
