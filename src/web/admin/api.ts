// The console's client of the admin API (same origin). The admin key lives in this module's
// memory only (never in storage or a URL) and goes out as the X-Admin-Key header.

export interface App { id: string; slug: string; name: string; created_at: string; secret_rotated_at: string | null }
export interface Tenant { id: string; app_id: string; name: string; created_at: string }
export interface User { id: string; email: string | null; phone: string | null; created_at: string; deleted_at: string | null }
export interface SigningKey { kid: string; status: 'active' | 'next' | 'retired'; created_at: string; retired_at: string | null }

/** An error answer of the admin API, with its catalog code. */
export class AdminError extends Error {
  constructor(readonly status: number, readonly code: string, message: string) {
    super(message);
  }
}

let adminKey: string | null = null;

export function setAdminKey(key: string | null): void {
  adminKey = key;
}

async function call<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { 'X-Admin-Key': adminKey ?? '' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: 'no-store' });
  const parsed = await response.json().catch(() => null) as { error?: { code?: string; message?: string } } | null;
  if (!response.ok) {
    throw new AdminError(response.status, parsed?.error?.code ?? `HTTP_${response.status}`, parsed?.error?.message ?? response.statusText);
  }
  return parsed as T;
}

const id = encodeURIComponent;

export const adminApi = {
  listApps: () => call<{ apps: App[] }>('GET', '/admin/apps').then((r) => r.apps),
  createApp: (slug: string, name: string) => call<App & { app_secret: string }>('POST', '/admin/apps', { slug, name }),
  rotateAppSecret: (appId: string) => call<App & { app_secret: string }>('POST', `/admin/apps/${id(appId)}/secret`),
  listTenants: (appId: string, offset: number, limit: number) =>
    call<{ tenants: Tenant[] }>('GET', `/admin/apps/${id(appId)}/tenants?limit=${limit}&offset=${offset}`).then((r) => r.tenants),
  createTenant: (appId: string, name: string) => call<Tenant>('POST', `/admin/apps/${id(appId)}/tenants`, { name }),
  getUser: (userId: string) => call<User>('GET', `/admin/users/${id(userId)}`),
  findUsers: (by: 'email' | 'phone', value: string) => call<{ users: User[] }>('GET', `/admin/users?${by}=${id(value)}`).then((r) => r.users),
  deleteUser: (userId: string) => call<User & { sessions_revoked: number }>('DELETE', `/admin/users/${id(userId)}`),
  restoreUser: (userId: string) => call<User>('POST', `/admin/users/${id(userId)}/restore`),
  revokeSessions: (userId: string) => call<{ user_id: string; sessions_revoked: number }>('POST', `/admin/users/${id(userId)}/revoke-sessions`),
  listSigningKeys: () => call<{ keys: SigningKey[] }>('GET', '/admin/signing-keys').then((r) => r.keys),
  rotateSigningKey: () => call<{ kid: string; retired_kid: string }>('POST', '/admin/signing-keys/rotate'),
};
