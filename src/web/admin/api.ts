// The console's client of the admin API (same origin). The admin key lives in this module's
// memory only (never in storage or a URL) and goes out as the X-Admin-Key header.

export interface App { id: string; slug: string; name: string; created_at: string; secret_rotated_at: string | null }
export interface Tenant { id: string; app_id: string; name: string; created_at: string }
export interface User { id: string; email: string | null; phone: string | null; created_at: string; deleted_at: string | null }
export interface Session {
  id: string; app_id: string; app_slug: string; created_at: string; last_used_at: string; expires_at: string; ip: string | null; user_agent: string | null;
}
export interface SmsDefences {
  allowed_calling_codes: string[] | null; daily_cap: number | null; prefix_hourly: number | null; country_hourly: number | null;
  ratio_min_verified: number | null; ratio_min_sent?: number;
}
export interface SmsDefencesState {
  settings: (Required<SmsDefences> & { updated_at: string }) | null;
  sent_today: number;
  countries_this_hour: Array<{ calling_code: string; sent: number; verified: number; throttled_at: string | null }>;
}
export interface SigningKey { kid: string; status: 'active' | 'next' | 'retired'; created_at: string; retired_at: string | null }
export interface AuditEvent {
  id: string; occurred_at: string; type: string; actor: string; app_id: string | null; user_id: string | null;
  family_id: string | null; ip: string | null; user_agent: string | null; details: Record<string, unknown>;
}
export interface AuditQuery { app_id?: string; user_id?: string; type?: string; since?: string; until?: string; cursor?: string; limit?: number }
export interface RateLimitBlock { rule: string; subject: string; hits: number; max_hits: number; blocked_until: string }
export interface RateLimitRule { max_hits: number; window_seconds: number }
export interface MessageTemplates { email_from: string | null; email_subject: string | null; email_text: string | null; sms_text: string | null }
export type MessageTemplatesWithDefaults = MessageTemplates & { defaults: { email_subject: string; email_text: string; sms_text: string } };
export interface WebhookEndpoint { id: string; app_id: string; url: string; event_types: string[]; created_at: string }
export interface WebhookDelivery {
  id: string; message_id: string; endpoint_id: string; event_type: string; state: 'pending' | 'delivered' | 'dead'; attempts: number;
  created_at: string; next_attempt_at: string | null; last_attempt_at: string | null; last_status: number | null; last_error: string | null; delivered_at: string | null;
}

export interface ApiKeyLimits { concurrent_requests?: number | null; requests_per_minute?: number | null; tokens_per_minute?: number | null }
export interface ApiKey {
  id: string; app_id: string; tenant_id: string | null; name: string; role: string; display_prefix: string; limits: ApiKeyLimits;
  weight: number; priority_class: 'interactive' | 'batch'; created_at: string; expires_at: string | null; rotated_at: string | null;
  revoked_at: string | null; last_used_at: string | null;
}
export interface NewApiKey {
  name: string; tenant_id?: string; role?: string; limits?: ApiKeyLimits; weight?: number; priority_class?: string; expires_at?: string;
}
export interface UsageCounters {
  requests: number; prompt_tokens: number; cached_prompt_tokens: number; completion_tokens: number; queue_ms: number; compute_ms: number;
}
export interface UsageRow extends UsageCounters { app_id: string | null; app_slug: string | null; tenant: string; tenant_name: string | null; key: string; model: string; hour: string }
export interface UsageReport { from: string; to: string; rows: UsageRow[]; totals: UsageCounters; truncated: boolean }
export interface UsageQuery { app?: string; tenant?: string; key?: string; from?: string; to?: string }

export type GrantType = 'authorization_code' | 'refresh_token' | 'client_credentials';
export interface OAuthClient {
  client_id: string; app_id: string; origin: 'admin' | 'dynamic' | 'metadata_document'; first_party: boolean; name: string; logo_uri: string | null;
  client_type: 'confidential' | 'public'; token_endpoint_auth_method: string; redirect_uris: string[]; post_logout_redirect_uris: string[];
  grant_types: string[]; scopes: string[]; created_at: string; updated_at: string;
}
/** What the console's client form sends; client_type and the method only on creation. */
export interface OAuthClientFields {
  name: string; logo_uri?: string; client_type?: 'confidential' | 'public'; token_endpoint_auth_method?: string; redirect_uris: string[];
  post_logout_redirect_uris: string[]; grant_types: string[]; scopes: string[]; first_party: boolean;
}
export interface Consent { client_id: string; client_name: string; scopes: string[]; granted_at: string }
export type UpstreamKind = 'oidc' | 'google' | 'entra' | 'apple' | 'github';
export interface UpstreamProvider {
  id: string; app_id: string; kind: UpstreamKind; label: string; client_id: string; has_client_secret: boolean; discovery_url: string | null;
  scopes: string[]; redirect_uris: string[]; trusted_email_domains: string[]; tenant_id: string | null; default_role: string | null; require_sso: boolean;
  apple?: { team_id: string; key_id: string }; entra?: { tenants: string[] }; github?: { web_base_url: string; api_base_url: string };
  created_at: string; updated_at: string;
}
/** The body of a provider's create or replace; client_secret left out keeps the stored one. */
export interface UpstreamProviderFields {
  kind: UpstreamKind; label: string; client_id: string; client_secret?: string; discovery_url?: string; scopes?: string[]; redirect_uris: string[];
  trusted_email_domains?: string[]; apple?: { team_id: string; key_id: string; private_key: string }; entra?: { tenants: string[] };
  github?: { web_base_url: string; api_base_url: string };
  tenant_id?: string; default_role?: string; require_sso?: boolean;
}
export type InvitationState = 'pending' | 'accepted' | 'revoked' | 'expired';
export interface Invitation {
  id: string; tenant_id: string; email: string | null; phone: string | null; role: string; state: InvitationState; invited_by: 'admin' | 'app';
  created_at: string; expires_at: string; last_sent_at: string; send_count: number; accepted_at: string | null; accepted_user_id: string | null;
}
export type SecondFactorPolicy = 'off' | 'optional' | 'required';
export interface SecondFactorPolicies { policy: SecondFactorPolicy; tenants: Array<{ tenant_id: string; policy: SecondFactorPolicy }> }
export interface TenantDomain {
  id: string; tenant_id: string; domain: string; verified_at: string | null; verification: { type: 'TXT'; name: string; value: string }; created_at: string;
}

/** The audit event types (src/auth/audit.ts); an app's webhooks may subscribe to all but the last three. */
export const AUDIT_EVENT_TYPES = ['login.succeeded', 'login.failed', 'otp.sent', 'otp.delivery_failed', 'token.refreshed', 'token.reuse_detected', 'session.revoked', 'user.sessions_revoked', 'passkey.registered', 'passkey.used', 'passkey.removed', 'login.second_factor_required', 'second_factor.enrolled', 'second_factor.removed', 'second_factor.reset', 'invitation.created', 'invitation.accepted', 'invitation.revoked', 'invitation.expired', 'sso.domain_verified', 'identity.linked', 'identity.unlinked', 'upstream_provider.created', 'upstream_provider.updated', 'upstream_provider.deleted', 'sms.defence_tripped', 'api_key.created', 'api_key.rotated', 'api_key.revoked', 'usage.hourly', 'role.assigned', 'role.revoked', 'user.deleted', 'user.restored', 'app.secret_rotated', 'oauth_client.created', 'oauth_client.updated', 'oauth_client.secret_rotated', 'oauth_client.deleted', 'oauth.code_issued', 'oauth.code_exchanged', 'oauth.code_replayed', 'oauth.logout', 'oauth.consent_granted', 'oauth.consent_revoked', 'app.created', 'signing_key.rotated', 'admin.key_rejected'];
export const WEBHOOK_EVENT_TYPES = AUDIT_EVENT_TYPES.slice(0, -3);

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
  listSessions: (userId: string) => call<{ sessions: Session[] }>('GET', `/admin/users/${id(userId)}/sessions`).then((r) => r.sessions),
  endSession: (userId: string, sessionId: string) => call<{ success: boolean }>('DELETE', `/admin/users/${id(userId)}/sessions/${id(sessionId)}`),
  getSmsDefences: (appId: string) => call<SmsDefencesState>('GET', `/admin/apps/${id(appId)}/sms-defences`),
  setSmsDefences: (appId: string, settings: SmsDefences) => call<unknown>('PUT', `/admin/apps/${id(appId)}/sms-defences`, settings),
  listSigningKeys: () => call<{ keys: SigningKey[] }>('GET', '/admin/signing-keys').then((r) => r.keys),
  rotateSigningKey: () => call<{ kid: string; retired_kid: string }>('POST', '/admin/signing-keys/rotate'),
  listAuditEvents: (query: AuditQuery) => {
    const params = new URLSearchParams(Object.entries(query).filter(([, v]) => v !== undefined && v !== '').map(([k, v]) => [k, String(v)]));
    return call<{ events: AuditEvent[]; next_cursor: string | null }>('GET', `/admin/audit-events?${params}`);
  },
  getMessageTemplates: (appId: string) => call<MessageTemplatesWithDefaults>('GET', `/admin/apps/${id(appId)}/message-templates`),
  setMessageTemplates: (appId: string, templates: MessageTemplates) => call<MessageTemplatesWithDefaults>('PUT', `/admin/apps/${id(appId)}/message-templates`, templates),
  listRateLimits: () => call<{ rules: Record<string, RateLimitRule>; blocks: RateLimitBlock[] }>('GET', '/admin/rate-limits'),
  liftBlock: (rule: string, subject: string) => call<{ lifted: boolean }>('DELETE', `/admin/rate-limits/blocks/${id(rule)}/${id(subject)}`),
  listWebhooks: (appId: string) => call<{ webhooks: WebhookEndpoint[] }>('GET', `/admin/apps/${id(appId)}/webhooks`).then((r) => r.webhooks),
  createWebhook: (appId: string, url: string, eventTypes: string[]) =>
    call<WebhookEndpoint & { secret: string }>('POST', `/admin/apps/${id(appId)}/webhooks`, { url, event_types: eventTypes }),
  deleteWebhook: (appId: string, webhookId: string) => call<{ deleted: boolean }>('DELETE', `/admin/apps/${id(appId)}/webhooks/${id(webhookId)}`),
  listDeliveries: (appId: string, state: string) =>
    call<{ deliveries: WebhookDelivery[] }>('GET', `/admin/apps/${id(appId)}/webhook-deliveries${state ? `?state=${id(state)}` : ''}`).then((r) => r.deliveries),
  listApiKeys: (appId: string) => call<{ api_keys: ApiKey[] }>('GET', `/admin/apps/${id(appId)}/api-keys`).then((r) => r.api_keys),
  createApiKey: (appId: string, key: NewApiKey) => call<ApiKey & { key: string }>('POST', `/admin/apps/${id(appId)}/api-keys`, key),
  rotateApiKey: (appId: string, keyId: string) => call<ApiKey & { key: string }>('POST', `/admin/apps/${id(appId)}/api-keys/${id(keyId)}/rotate`),
  revokeApiKey: (appId: string, keyId: string) => call<ApiKey>('DELETE', `/admin/apps/${id(appId)}/api-keys/${id(keyId)}`),
  getUsage: (query: UsageQuery) => {
    const params = new URLSearchParams(Object.entries(query).filter(([, v]) => v !== undefined && v !== '').map(([k, v]) => [k, String(v)]));
    return call<UsageReport>('GET', `/admin/usage?${params}`);
  },
  listOAuthClients: (appId: string) => call<{ clients: OAuthClient[] }>('GET', `/admin/apps/${id(appId)}/oauth-clients`).then((r) => r.clients),
  createOAuthClient: (appId: string, fields: OAuthClientFields) => call<OAuthClient & { client_secret?: string }>('POST', `/admin/apps/${id(appId)}/oauth-clients`, fields),
  updateOAuthClient: (appId: string, clientId: string, fields: OAuthClientFields) => call<OAuthClient>('PUT', `/admin/apps/${id(appId)}/oauth-clients/${id(clientId)}`, fields),
  rotateOAuthClientSecret: (appId: string, clientId: string) => call<OAuthClient & { client_secret: string }>('POST', `/admin/apps/${id(appId)}/oauth-clients/${id(clientId)}/secret`),
  deleteOAuthClient: (appId: string, clientId: string) => call<{ deleted: boolean }>('DELETE', `/admin/apps/${id(appId)}/oauth-clients/${id(clientId)}`),
  listConsents: (userId: string) => call<{ consents: Consent[] }>('GET', `/admin/users/${id(userId)}/consents`).then((r) => r.consents),
  revokeConsent: (userId: string, clientId: string) => call<{ sessions_revoked: number }>('DELETE', `/admin/users/${id(userId)}/consents?client_id=${id(clientId)}`),
  resetSecondFactor: (userId: string) => call<{ reset: boolean }>('DELETE', `/admin/users/${id(userId)}/second-factor`),
  listUpstreamProviders: (appId: string) => call<{ providers: UpstreamProvider[] }>('GET', `/admin/apps/${id(appId)}/upstream-providers`).then((r) => r.providers),
  createUpstreamProvider: (appId: string, fields: UpstreamProviderFields) => call<UpstreamProvider>('POST', `/admin/apps/${id(appId)}/upstream-providers`, fields),
  replaceUpstreamProvider: (appId: string, providerId: string, fields: UpstreamProviderFields) =>
    call<UpstreamProvider>('PUT', `/admin/apps/${id(appId)}/upstream-providers/${id(providerId)}`, fields),
  deleteUpstreamProvider: (appId: string, providerId: string) => call<{ deleted: boolean }>('DELETE', `/admin/apps/${id(appId)}/upstream-providers/${id(providerId)}`),
  testUpstreamProvider: (appId: string, providerId: string) =>
    call<{ ok: true; issuer: string; authorization_endpoint: string | null }>('POST', `/admin/apps/${id(appId)}/upstream-providers/${id(providerId)}/test`),
  listInvitations: (appId: string, tenantId: string, state: string) =>
    call<{ invitations: Invitation[] }>('GET', `/admin/apps/${id(appId)}/tenants/${id(tenantId)}/invitations${state ? `?state=${id(state)}` : ''}`).then((r) => r.invitations),
  createInvitation: (appId: string, tenantId: string, invitation: { email?: string; phone?: string; role: string }) =>
    call<Invitation>('POST', `/admin/apps/${id(appId)}/tenants/${id(tenantId)}/invitations`, invitation),
  resendInvitation: (appId: string, tenantId: string, invitationId: string) =>
    call<Invitation>('POST', `/admin/apps/${id(appId)}/tenants/${id(tenantId)}/invitations/${id(invitationId)}/resend`),
  revokeInvitation: (appId: string, tenantId: string, invitationId: string) =>
    call<Invitation>('DELETE', `/admin/apps/${id(appId)}/tenants/${id(tenantId)}/invitations/${id(invitationId)}`),
  getSecondFactorPolicies: (appId: string) => call<SecondFactorPolicies>('GET', `/admin/apps/${id(appId)}/second-factor-policy`),
  setAppSecondFactorPolicy: (appId: string, policy: SecondFactorPolicy) => call<SecondFactorPolicies>('PUT', `/admin/apps/${id(appId)}/second-factor-policy`, { policy }),
  setTenantSecondFactorPolicy: (appId: string, tenantId: string, policy: SecondFactorPolicy | null) =>
    call<SecondFactorPolicies>('PUT', `/admin/apps/${id(appId)}/tenants/${id(tenantId)}/second-factor-policy`, { policy }),
  listDomains: (appId: string, tenantId: string) => call<{ domains: TenantDomain[] }>('GET', `/admin/apps/${id(appId)}/tenants/${id(tenantId)}/domains`).then((r) => r.domains),
  claimDomain: (appId: string, tenantId: string, domain: string) => call<TenantDomain>('POST', `/admin/apps/${id(appId)}/tenants/${id(tenantId)}/domains`, { domain }),
  verifyDomain: (appId: string, tenantId: string, domainId: string) =>
    call<TenantDomain>('POST', `/admin/apps/${id(appId)}/tenants/${id(tenantId)}/domains/${id(domainId)}/verify`),
  removeDomain: (appId: string, tenantId: string, domainId: string) =>
    call<{ deleted: boolean }>('DELETE', `/admin/apps/${id(appId)}/tenants/${id(tenantId)}/domains/${id(domainId)}`),
  redeliver: (appId: string, deliveryId: string) => call<WebhookDelivery>('POST', `/admin/apps/${id(appId)}/webhook-deliveries/${id(deliveryId)}/redeliver`),
};
