// Admin routes (X-Admin-Key): apps, tenants, users, signing keys.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { isAuditEventType, requestOrigin } from '../audit.js';
import { compileBody } from '../../http/validation.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import type { AppRow } from '../queries/apps.js';
import type { AuditEventRow } from '../queries/audit-events.js';
import type { SigningKeySummary } from '../queries/signing-keys.js';
import type { TenantRow } from '../queries/tenants.js';
import type { UserRow } from '../queries/users.js';
import { CreateAppBody, CreateTenantBody, MessageTemplatesBody } from '../schemas.js';
import { DEFAULT_TEMPLATE } from '../otp/templates.js';
import * as admin from '../service/admin.js';
import { listAuditEvents } from '../service/audit.js';
import { liftBlock, listBlocks } from '../service/rate-limit-enforcement.js';
import { isRateLimitRule } from '../rate-limit-rules.js';
import { queryInstant, queryInteger, queryUuid } from './query-params.js';

const createAppBody = compileBody(CreateAppBody);
const createTenantBody = compileBody(CreateTenantBody);
const messageTemplatesBody = compileBody(MessageTemplatesBody);
type NoInput = Record<string, never>;

/** POST /admin/apps → 201 `{id, slug, name, created_at, app_secret}`; the only time the secret is shown. */
export async function handleCreateApp(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const { app, secret } = await admin.createApp(ctx, createAppBody.parse(req), requestOrigin(ctx, req));
  return { status: 201, body: { ...appJson(app), app_secret: secret } };
}

/** GET /admin/apps → 200 `{apps: [...]}` (no secrets). */
export async function handleListApps(ctx: AuthContext): Promise<HttpResult> {
  return { body: { apps: (await admin.listApps(ctx)).map(appJson) } };
}

/** GET /admin/apps/:app_id → 200 app. */
export async function handleGetApp(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return { body: appJson(await admin.getApp(ctx, req.params.app_id!)) };
}

/** POST /admin/apps/:app_id/secret → 200 `{..app, app_secret}`; the previous secret stops working. */
export async function handleRotateAppSecret(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const { app, secret } = await admin.rotateAppSecret(ctx, req.params.app_id!, requestOrigin(ctx, req));
  return { body: { ...appJson(app), app_secret: secret } };
}

/** GET /admin/apps/:app_id/message-templates → 200 `{email_from, email_subject, email_text, sms_text, defaults}` (null: the default). */
export async function handleGetMessageTemplates(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return { body: { ...(await admin.getMessageTemplates(ctx, req.params.app_id!)), defaults: templateDefaultsJson() } };
}

/** PUT /admin/apps/:app_id/message-templates `{email_from?, email_subject?, email_text?, sms_text?}` → 200 the same shape; missing or null fields use the default. */
export async function handlePutMessageTemplates(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await admin.getApp(ctx, req.params.app_id!); // 404 for a missing app before a 400 for its body
  const body = messageTemplatesBody.parse(req);
  const saved = await admin.setMessageTemplates(ctx, app.id, {
    email_from: body.email_from ?? null, email_subject: body.email_subject ?? null, email_text: body.email_text ?? null, sms_text: body.sms_text ?? null,
  });
  return { body: { ...saved, defaults: templateDefaultsJson() } };
}

function templateDefaultsJson(): Record<string, string> {
  return { email_subject: DEFAULT_TEMPLATE.emailSubject, email_text: DEFAULT_TEMPLATE.emailText, sms_text: DEFAULT_TEMPLATE.smsText };
}

/** POST /admin/apps/:app_id/tenants → 201 tenant (a tenant belongs to one app; docs/auth-service.md). */
export async function handleCreateTenant(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await admin.getApp(ctx, req.params.app_id!); // 404 for a missing app before a 400 for its body
  const { name } = createTenantBody.parse(req);
  return { status: 201, body: tenantJson(await admin.createTenant(ctx, app, name)) };
}

/** GET /admin/apps/:app_id/tenants?limit=100&offset=0 → 200 `{tenants: [...]}`, oldest first. */
export async function handleListTenants(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const limit = queryInteger(req, 'limit', 100, 1, 1000);
  const offset = queryInteger(req, 'offset', 0, 0, 1_000_000_000);
  const tenants = await admin.listTenants(ctx, req.params.app_id!, { limit, offset });
  return { body: { tenants: tenants.map(tenantJson) } };
}

/** GET /admin/apps/:app_id/tenants/:tenant_id → 200 tenant. */
export async function handleGetTenant(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return { body: tenantJson(await admin.getTenant(ctx, req.params.app_id!, req.params.tenant_id!)) };
}

/** GET /admin/users/:user_id → 200 user. */
export async function handleGetUser(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return { body: userJson(await admin.getUser(ctx, req.params.user_id!)) };
}

/** GET /admin/users?email=... or ?phone=... → 200 `{users: [...]}` (none or one); exactly one of the two. */
export async function handleFindUsers(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const email = req.query.get('email') ?? undefined;
  const phone = req.query.get('phone') ?? undefined;
  return { body: { users: (await admin.findUsers(ctx, { email, phone })).map(userJson) } };
}

/** POST /admin/users/:user_id/revoke-sessions → 200 `{user_id, sessions_revoked}`; the user stays active. */
export async function handleRevokeUserSessions(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const userId = req.params.user_id!;
  return { body: { user_id: userId, sessions_revoked: await admin.revokeUserSessions(ctx, userId, requestOrigin(ctx, req)) } };
}

/** DELETE /admin/users/:user_id → 200 `{..user, sessions_revoked}`: soft delete. */
export async function handleDeleteUser(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const { user, sessionsRevoked } = await admin.softDeleteUser(ctx, req.params.user_id!, requestOrigin(ctx, req));
  return { body: { ...userJson(user), sessions_revoked: sessionsRevoked } };
}

/** POST /admin/users/:user_id/restore → 200 user. */
export async function handleRestoreUser(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  return { body: userJson(await admin.restoreUser(ctx, req.params.user_id!, requestOrigin(ctx, req))) };
}

/** POST /admin/signing-keys/rotate → 200 `{kid, retired_kid}`. */
export async function handleRotateSigningKey(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const { kid, retiredKid } = await admin.rotateSigningKeys(ctx, requestOrigin(ctx, req));
  return { body: { kid, retired_kid: retiredKid } };
}

/** GET /admin/signing-keys → 200 `{keys: [{kid, status, created_at, retired_at}]}` (no key material). */
export async function handleListSigningKeys(ctx: AuthContext): Promise<HttpResult> {
  return { body: { keys: (await admin.listSigningKeys(ctx)).map(signingKeyJson) } };
}

/**
 * GET /admin/audit-events?app_id=&user_id=&type=&since=&until=&limit=100&cursor= → 200
 * `{events: [...], next_cursor}`, newest first; `since` and `until` are ISO 8601 instants
 * (since inclusive, until exclusive).
 */
export async function handleListAuditEvents(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const type = req.query.get('type') ?? undefined;
  if (type !== undefined && !isAuditEventType(type)) throw authError('VALIDATION_ERROR', `Invalid query parameter "type": unknown event type`);
  const page = await listAuditEvents(ctx, {
    appId: queryUuid(req, 'app_id'),
    userId: queryUuid(req, 'user_id'),
    type,
    since: queryInstant(req, 'since'),
    until: queryInstant(req, 'until'),
    limit: queryInteger(req, 'limit', 100, 1, 1000),
    cursor: req.query.get('cursor') ?? undefined,
  });
  return { body: { events: page.events.map(auditEventJson), next_cursor: page.nextCursor } };
}

/**
 * GET /admin/rate-limits → 200 `{rules: {<rule>: {max_hits, window_seconds}}, blocks: [{rule,
 * subject, hits, max_hits, blocked_until}]}`: the limits in force and every subject that is at
 * its limit now (up to 1000, the longest block first).
 */
export async function handleListRateLimits(ctx: AuthContext): Promise<HttpResult> {
  const rules = Object.fromEntries(Object.entries(ctx.rateLimits).map(([rule, limit]) => [rule, { max_hits: limit.maxHits, window_seconds: limit.windowSeconds }]));
  const blocks = (await listBlocks(ctx)).map((block) => ({
    rule: block.rule, subject: block.subject, hits: block.hits, max_hits: block.max_hits, blocked_until: block.window_ends_at.toISOString(),
  }));
  return { body: { rules, blocks } };
}

/** DELETE /admin/rate-limits/blocks/:rule/:subject → 200 `{rule, subject, lifted}`: the subject's counter starts over. */
export async function handleLiftRateLimitBlock(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const { rule, subject } = req.params as { rule: string; subject: string };
  if (!isRateLimitRule(rule)) throw authError('VALIDATION_ERROR', `Unknown rate-limit rule "${rule}"`);
  // A subject is an IP address, or an app id with an e-mail address or phone number: never long, never a control character.
  if (subject.length > 512 || /[\x00-\x1f\x7f]/.test(subject)) throw authError('VALIDATION_ERROR', 'Invalid rate-limit subject: expected at most 512 characters without control characters');
  return { body: { rule, subject, lifted: await liftBlock(ctx, rule, subject) } };
}

function auditEventJson(event: AuditEventRow): Record<string, unknown> {
  return {
    id: event.id,
    occurred_at: event.occurred_at.toISOString(),
    type: event.type,
    actor: event.actor,
    app_id: event.app_id,
    user_id: event.user_id,
    family_id: event.family_id,
    ip: event.ip,
    user_agent: event.user_agent,
    details: event.details,
  };
}

function signingKeyJson(key: SigningKeySummary): Record<string, unknown> {
  return { kid: key.kid, status: key.status, created_at: key.created_at.toISOString(), retired_at: key.retired_at?.toISOString() ?? null };
}

function appJson(app: AppRow): Record<string, unknown> {
  return {
    id: app.id,
    slug: app.slug,
    name: app.name,
    created_at: app.created_at.toISOString(),
    secret_rotated_at: app.secret_rotated_at?.toISOString() ?? null,
  };
}

/** The Tenant resource (id, app_id, name, created_at); created_at is ISO 8601 UTC with milliseconds. */
function tenantJson(tenant: TenantRow): Record<string, unknown> {
  return { id: tenant.id, app_id: tenant.app_id, name: tenant.name, created_at: tenant.created_at.toISOString() };
}

function userJson(user: UserRow): Record<string, unknown> {
  return {
    id: user.id,
    email: user.email,
    phone: user.phone,
    created_at: user.created_at.toISOString(),
    deleted_at: user.deleted_at?.toISOString() ?? null,
  };
}
