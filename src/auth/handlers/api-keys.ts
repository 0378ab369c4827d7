// Admin routes of an app's API keys (create, list, rotate, revoke) and the introspection route
// the inference server's remote verifier calls.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import type { ApiKeyRow } from '../queries/api-keys.js';
import { CreateApiKeyBody } from '../schemas.js';
import { getApp } from '../service/admin.js';
import * as apiKeys from '../service/api-keys.js';
import { apiKeyIdentityJson } from '../tokens/api-key.js';

const createApiKeyBody = compileBody(CreateApiKeyBody);
type NoInput = Record<string, never>;

/**
 * POST /admin/apps/:app_id/api-keys `{name, tenant_id?, role?, limits?, weight?, priority_class?,
 * expires_at?}` → 201 the key's resource with `key`, the only time the key is shown.
 */
export async function handleCreateApiKey(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  await getApp(ctx, req.params.app_id!); // 404 for a missing app before a 400 for its body
  const body = createApiKeyBody.parse(req);
  const { key, secret } = await apiKeys.createApiKey(ctx, req.params.app_id!, {
    name: body.name,
    tenantId: body.tenant_id?.toLowerCase() ?? null,
    role: body.role ?? 'viewer',
    limits: {
      concurrentRequests: body.limits?.concurrent_requests,
      requestsPerMinute: body.limits?.requests_per_minute,
      tokensPerMinute: body.limits?.tokens_per_minute,
    },
    weight: body.weight ?? 1,
    priorityClass: body.priority_class ?? 'interactive',
    expiresAt: body.expires_at ? new Date(body.expires_at) : null,
  }, requestOrigin(ctx, req));
  return { status: 201, body: { ...apiKeyJson(key), key: secret } };
}

/** GET /admin/apps/:app_id/api-keys → 200 `{api_keys: [...]}`, oldest first, revoked ones included (no secrets). */
export async function handleListApiKeys(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return { body: { api_keys: (await apiKeys.listApiKeys(ctx, req.params.app_id!)).map(apiKeyJson) } };
}

/** POST /admin/apps/:app_id/api-keys/:key_id/rotate → 200 the key with its new `key`; the previous one stops working. */
export async function handleRotateApiKey(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const { key, secret } = await apiKeys.rotateApiKey(ctx, req.params.app_id!, req.params.key_id!, requestOrigin(ctx, req));
  return { body: { ...apiKeyJson(key), key: secret } };
}

/** DELETE /admin/apps/:app_id/api-keys/:key_id → 200 the key, revoked (idempotent). */
export async function handleRevokeApiKey(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return { body: apiKeyJson(await apiKeys.revokeApiKey(ctx, req.params.app_id!, req.params.key_id!, requestOrigin(ctx, req))) };
}

/**
 * POST /api-keys/introspect with `Authorization: Bearer <key>` → 200 the key's identity
 * (tokens/api-key.ts apiKeyIdentityJson), or 401 API_KEY_INVALID for a missing, unknown,
 * revoked or expired key. An answered key counts as used (last_used_at).
 */
export async function handleIntrospectApiKey(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const match = /^Bearer +(\S+) *$/i.exec(req.headers.authorization ?? '');
  return { body: apiKeyIdentityJson(await apiKeys.introspectApiKey(ctx, match ? match[1]! : null)) };
}

/** The ApiKey resource: settings and dates, the display prefix, never the key or its hash. */
function apiKeyJson(key: ApiKeyRow): Record<string, unknown> {
  return {
    id: key.id,
    app_id: key.app_id,
    tenant_id: key.tenant_id,
    name: key.name,
    role: key.role,
    display_prefix: key.display_prefix,
    limits: {
      concurrent_requests: key.concurrent_requests,
      requests_per_minute: key.requests_per_minute,
      tokens_per_minute: key.tokens_per_minute,
    },
    weight: key.weight,
    priority_class: key.priority_class,
    created_at: key.created_at.toISOString(),
    expires_at: key.expires_at?.toISOString() ?? null,
    rotated_at: key.rotated_at?.toISOString() ?? null,
    revoked_at: key.revoked_at?.toISOString() ?? null,
    last_used_at: key.last_used_at?.toISOString() ?? null,
  };
}
