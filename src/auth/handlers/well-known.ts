// GET /.well-known/jwks.json and GET /.well-known/openid-configuration: how a backend obtains
// the public keys, published so that any backend verifies tokens without calling us. Cacheable for 5 minutes; a verifier that meets an
// unknown kid refetches (jose's createRemoteJWKSet does), so a rotation is picked up at once.
import type { HttpResult } from '../../http/request.js';
import type { AuthContext } from '../context.js';
import { providerMetadata } from '../provider/handlers.js';

const CACHEABLE = { 'Cache-Control': 'public, max-age=300' };
const CLIENT_AUTH_METHODS = ['client_secret_basic', 'client_secret_post'];

export async function handleJwks(ctx: AuthContext): Promise<HttpResult> {
  return { headers: CACHEABLE, body: { keys: ctx.keys.publishedJwks() } };
}

export async function handleDiscovery(ctx: AuthContext): Promise<HttpResult> {
  return {
    headers: CACHEABLE,
    body: {
      issuer: ctx.issuer,
      jwks_uri: `${ctx.issuer}/.well-known/jwks.json`,
      id_token_signing_alg_values_supported: ['RS256'],
      // RFC 8414 names: where the RFC 7009 and RFC 7662 endpoints are and how an app authenticates there.
      revocation_endpoint: `${ctx.issuer}/oauth/revoke`,
      revocation_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
      introspection_endpoint: `${ctx.issuer}/oauth/introspect`,
      introspection_endpoint_auth_methods_supported: CLIENT_AUTH_METHODS,
      ...providerMetadata(ctx),
    },
  };
}

/** GET /.well-known/oauth-authorization-server (RFC 8414): the same document, for OAuth-only clients (MCP). */
export function handleAuthorizationServerMetadata(ctx: AuthContext): Promise<HttpResult> {
  return handleDiscovery(ctx);
}
