// GET/POST /cors-proxy, as llama-server mounts them: with --ui-mcp-proxy they forward to `?url=`
// (src/http/cors-proxy.ts); without it they answer 403 `feature_disabled`. Both behind the API key.
import { proxyRequest, relayResponse } from '../http/cors-proxy.js';
import type { HttpResult } from '../http/request.js';
import type { Route } from '../http/router.js';
import type { Mount } from './guards.js';

export interface CorsProxyOptions {
  enabled: boolean;
  apiPrefix: string;
  /** Connect and idle limit on the target, in seconds (llama-server's proxy: 600, whatever -to says). */
  timeoutSeconds: number;
}

/** llama-server's answer when the flag is off (no `code` field, as there). */
const FEATURE_DISABLED: HttpResult = { status: 403, body: { error: { message: 'this feature is disabled', type: 'feature_disabled' } } };

export function corsProxyRoutes(mount: Mount, options: CorsProxyOptions): Route[] {
  const path = `${options.apiPrefix}/cors-proxy`;
  const timeoutMs = options.timeoutSeconds * 1000;
  const proxy = (method: 'GET' | 'POST') => async (req: Parameters<typeof relayResponse>[0]): Promise<HttpResult | void> => {
    if (!options.enabled) return FEATURE_DISABLED;
    await relayResponse(req, await proxyRequest(method, req, timeoutMs));
  };
  return [mount('GET', path, proxy('GET')), mount('POST', path, proxy('POST'))];
}
