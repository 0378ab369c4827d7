// Cross-origin access, as llama-server answers it (--cors-origins, --cors-methods,
// --cors-headers, --cors-credentials): every response carries Access-Control-Allow-Origin, and
// OPTIONS on any path is a preflight answered before routing and authentication (browsers send
// no credentials with a preflight).

export interface CorsPolicy {
  /** "*" (any origin), "localhost" (only loopback origins, reflected), or one origin. */
  origins: string;
  methods: string;
  headers: string;
  credentials: boolean;
}

/** llama-server's defaults. */
export const DEFAULT_CORS: CorsPolicy = { origins: '*', methods: 'GET, POST, DELETE, OPTIONS', headers: '*', credentials: true };

function isLocalhost(origin: string): boolean {
  try {
    const host = new URL(origin).hostname;
    return host === 'localhost' || host === '127.0.0.1' || host === '[::1]';
  } catch {
    return false;
  }
}

/**
 * Access-Control-Allow-Origin for a request sent from `origin`, or null for none. Any origin with
 * credentials cannot be "*" for a browser, so the request's own origin is echoed.
 */
export function allowedOrigin(policy: CorsPolicy, origin: string | undefined): string | null {
  if (policy.origins === '*' && policy.credentials) return origin ?? null;
  if (policy.origins === 'localhost') return origin !== undefined && isLocalhost(origin) ? origin : null;
  return policy.origins;
}

/** The headers of every response to a request from `origin`. */
export function corsHeaders(policy: CorsPolicy, origin: string | undefined): Array<[string, string]> {
  const allowed = allowedOrigin(policy, origin);
  return allowed === null ? [] : [['Access-Control-Allow-Origin', allowed]];
}

/** The answer to a preflight, besides the origin. */
export function preflightHeaders(policy: CorsPolicy): Record<string, string> {
  return {
    'Access-Control-Allow-Credentials': policy.credentials ? 'true' : 'false',
    'Access-Control-Allow-Methods': policy.methods,
    'Access-Control-Allow-Headers': policy.headers,
  };
}
