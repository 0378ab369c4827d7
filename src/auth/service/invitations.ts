// Invitations into a tenant with a role. The admin (X-Admin-Key) or the app's backend (its
// credentials) invites an e-mail address or phone number; the message goes out through the code
// delivery with the app's invitation texts. The invitation is accepted, and its role assigned,
// when someone signs in as that address by any method (code, passkey, upstream provider: the
// sign-in's own transaction calls acceptInvitationsOnSignIn), or presents the message's token
// while signed in as it (POST /auth/invitations/accept).
//
// Rules: one pending invitation per address and tenant (409 INVITATION_PENDING); it expires
// after INVITATION_TTL_MS (the primary marks it `expired` within a minute, any read of the
// tenant's list at once); it is used once (accepted, revoked and expired ones are final); a
// resend sends a new token (the old link stops working) and a new expiry, at most
// INVITATION_MAX_SENDS times and not within INVITATION_RESEND_INTERVAL_MS of the last send
// (429 RATE_LIMITED with Retry-After). Nothing is stored for an invitation whose message
// could not be delivered (502 INVITATION_DELIVERY_FAILED). Audit events, hence webhooks:
// invitation.created, .accepted, .revoked, .expired.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { RequestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import type { TransactionSql } from '../database/client.js';
import { authError } from '../errors.js';
import { invitationLink, invitationMessageTemplate, type InvitationTemplateRow } from '../invitations/templates.js';
import { INVITATION_MAX_SENDS, INVITATION_RESEND_INTERVAL_MS, INVITATION_TTL_MS } from '../limits.js';
import { insertAuditEvent } from '../queries/audit-events.js';
import {
  expireDueInvitations, findAppInvitationTemplate, findPendingInvitationTo, insertInvitation, listInvitationsOfTenant, lockInvitation,
  lockInvitationByToken, lockPendingInvitationsTo, markInvitationAccepted, markInvitationRevoked, recordInvitationResent, upsertAppInvitationTemplate,
  type InvitationRow, type InvitationState,
} from '../queries/invitations.js';
import { upsertRole } from '../queries/roles.js';
import { findTenant, type TenantRow } from '../queries/tenants.js';
import { lockUser, type Identifier, type UserRow } from '../queries/users.js';
import type { RoleName } from '../roles.js';
import { SENDER } from './admin.js';
import { isUuid, type AuthenticatedApp } from './credentials.js';
import { presentedSession } from './user-sessions.js';

export type Inviter = { actor: 'admin' | 'app'; origin: RequestOrigin };

export interface InvitationJson {
  id: string;
  tenant_id: string;
  email: string | null;
  phone: string | null;
  role: RoleName;
  state: InvitationState;
  invited_by: 'admin' | 'app';
  created_at: string;
  expires_at: string;
  last_sent_at: string;
  send_count: number;
  accepted_at: string | null;
  accepted_user_id: string | null;
}

/** Creates and sends an invitation: 201. 404 TENANT_NOT_FOUND, 409 INVITATION_PENDING, 502 INVITATION_DELIVERY_FAILED. */
export async function createInvitation(ctx: AuthContext, appId: string, input: { tenantId: string; identifier: Identifier; role: RoleName }, by: Inviter): Promise<InvitationJson> {
  const tenant = await tenantOf(ctx, appId, input.tenantId);
  const { identifier } = input;
  if (await findPendingInvitationTo(ctx.sql, tenant.id, identifier.channel, identifier.value)) throw authError('INVITATION_PENDING');
  const token = newToken();
  const nowMs = ctx.clock.now();
  await sendInvitation(ctx, appId, tenant, { channel: identifier.channel, destination: identifier.value, role: input.role }, token);
  const now = new Date(nowMs);
  return ctx.sql.begin(async (tx) => {
    const row = await insertInvitation(tx, {
      id: randomUUID(), appId, tenantId: tenant.id, channel: identifier.channel, destination: identifier.value, role: input.role,
      tokenHash: hashToken(token), invitedBy: by.actor, now, expiresAt: new Date(nowMs + INVITATION_TTL_MS),
    });
    // Another invitation to the address was created meanwhile; its message is the one that counts.
    if (!row) throw authError('INVITATION_PENDING');
    await insertAuditEvent(tx, { ...eventOf(row, by, now), type: 'invitation.created' });
    return invitationJson(row);
  });
}

/** The tenant's invitations, newest first (expired ones marked first). */
export async function listInvitations(ctx: AuthContext, appId: string, tenantId: string, state: InvitationState | null): Promise<InvitationJson[]> {
  const tenant = await tenantOf(ctx, appId, tenantId);
  await expireInvitations(ctx, appId);
  return (await listInvitationsOfTenant(ctx.sql, appId, tenant.id, state)).map(invitationJson);
}

/** Revokes a pending invitation: 404 INVITATION_NOT_FOUND, 409 INVITATION_NOT_PENDING. */
export async function revokeInvitation(ctx: AuthContext, appId: string, tenantId: string, invitationId: string, by: Inviter): Promise<InvitationJson> {
  const tenant = await tenantOf(ctx, appId, tenantId);
  await expireInvitations(ctx, appId);
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    const row = isUuid(invitationId) ? await lockInvitation(tx, appId, tenant.id, invitationId.toLowerCase()) : undefined;
    if (!row) throw authError('INVITATION_NOT_FOUND');
    if (row.state !== 'pending') throw authError('INVITATION_NOT_PENDING', `The invitation is ${row.state}`);
    const revoked = await markInvitationRevoked(tx, row.id, now);
    await insertAuditEvent(tx, { ...eventOf(revoked, by, now), type: 'invitation.revoked' });
    return invitationJson(revoked);
  });
}

/** Sends a pending invitation again with a new token and expiry: 429 RATE_LIMITED too soon or too often. */
export async function resendInvitation(ctx: AuthContext, appId: string, tenantId: string, invitationId: string): Promise<InvitationJson> {
  const tenant = await tenantOf(ctx, appId, tenantId);
  await expireInvitations(ctx, appId);
  const row = isUuid(invitationId) ? await lockInvitation(ctx.sql, appId, tenant.id, invitationId.toLowerCase()) : undefined;
  if (!row) throw authError('INVITATION_NOT_FOUND');
  if (row.state !== 'pending') throw authError('INVITATION_NOT_PENDING', `The invitation is ${row.state}`);
  const nowMs = ctx.clock.now();
  if (row.send_count >= INVITATION_MAX_SENDS) {
    throw authError('RATE_LIMITED', `The invitation was sent ${row.send_count} times; revoke it and invite again`, { details: { retryAfterSeconds: Math.ceil(INVITATION_TTL_MS / 1000) } });
  }
  const waitMs = row.last_sent_at.getTime() + INVITATION_RESEND_INTERVAL_MS - nowMs;
  if (waitMs > 0) throw authError('RATE_LIMITED', 'The invitation was sent too recently; retry later', { details: { retryAfterSeconds: Math.ceil(waitMs / 1000) } });
  const token = newToken();
  await sendInvitation(ctx, appId, tenant, row, token);
  const resent = await recordInvitationResent(ctx.sql, {
    id: row.id, tokenHash: hashToken(token), lastSentAt: row.last_sent_at, now: new Date(nowMs), expiresAt: new Date(nowMs + INVITATION_TTL_MS),
  });
  if (!resent) throw authError('RATE_LIMITED', 'The invitation was sent or ended meanwhile; retry later', { details: { retryAfterSeconds: 1 } });
  return invitationJson(resent);
}

/**
 * POST /auth/invitations/accept: the signed-in user takes the invitation of the token. 404
 * INVITATION_NOT_FOUND (unknown token, or another app's), 409 INVITATION_NOT_PENDING (used or
 * revoked), 410 INVITATION_EXPIRED, 403 INVITATION_FOR_ANOTHER_ADDRESS (the session's user does
 * not have the invited address). Returns the tenant and the role now held.
 */
export async function acceptInvitationByToken(ctx: AuthContext, app: AuthenticatedApp, refreshToken: string, token: string, origin: RequestOrigin): Promise<{ tenant_id: string; role: RoleName; invitation_id: string }> {
  const { userId } = await presentedSession(ctx, app, refreshToken);
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    const user = (await lockUser(tx, userId))!;
    const row = await lockInvitationByToken(tx, app.id, hashToken(token));
    if (!row) throw authError('INVITATION_NOT_FOUND');
    if (row.state === 'expired' || (row.state === 'pending' && row.expires_at <= now)) throw authError('INVITATION_EXPIRED');
    if (row.state !== 'pending') throw authError('INVITATION_NOT_PENDING', `The invitation is ${row.state}`);
    if ((row.channel === 'email' ? user.email : user.phone) !== row.destination) throw authError('INVITATION_FOR_ANOTHER_ADDRESS');
    await accept(tx, row, user, { actor: 'app', origin }, now);
    return { tenant_id: row.tenant_id, role: row.role, invitation_id: row.id };
  });
}

/**
 * Inside a sign-in's transaction, before the tenant is chosen: accepts every live pending
 * invitation of the app to the user's e-mail address and phone number and assigns their roles.
 * The user proved the address by this sign-in or the one that recorded it.
 */
export async function acceptInvitationsOnSignIn(tx: TransactionSql, appId: string, user: UserRow, origin: RequestOrigin, now: Date): Promise<void> {
  const addresses: [string, string | null][] = [['email', user.email], ['phone', user.phone]];
  for (const [channel, destination] of addresses) {
    if (!destination) continue;
    for (const row of await lockPendingInvitationsTo(tx, appId, channel, destination, now)) {
      await accept(tx, row, user, { actor: 'app', origin }, now);
    }
  }
}

async function accept(tx: TransactionSql, row: InvitationRow, user: UserRow, by: Inviter, now: Date): Promise<void> {
  await upsertRole(tx, { appId: row.app_id, userId: user.id, tenantId: row.tenant_id, role: row.role, now });
  await markInvitationAccepted(tx, row.id, user.id, now);
  await insertAuditEvent(tx, { ...eventOf(row, by, now), type: 'invitation.accepted', userId: user.id });
  await insertAuditEvent(tx, {
    type: 'role.assigned', actor: by.actor, appId: row.app_id, userId: user.id, ip: by.origin.ip, userAgent: by.origin.userAgent, now,
    details: { tenant_id: row.tenant_id, role: row.role, invitation_id: row.id },
  });
}

/** Marks due invitations expired and records invitation.expired for each (an app's, or every app's: the primary's sweep). */
export async function expireInvitations(ctx: AuthContext, appId: string | null = null): Promise<number> {
  const now = new Date(ctx.clock.now());
  return ctx.sql.begin(async (tx) => {
    const expired = await expireDueInvitations(tx, now, appId);
    for (const row of expired) {
      await insertAuditEvent(tx, { ...eventOf(row, { actor: 'service', origin: { ip: null, userAgent: null } }, now), type: 'invitation.expired' });
    }
    return expired.length;
  });
}

export async function getInvitationTemplate(ctx: AuthContext, appId: string): Promise<InvitationTemplateRow> {
  const { name: _, ...own } = await findAppInvitationTemplate(ctx.sql, appId);
  return own;
}

/** PUT /admin/apps/:app_id/invitation-templates. 400 for a sender that is not an address, a text without {{link}}, an accept_url that is not https or lacks {{token}}. */
export async function setInvitationTemplate(ctx: AuthContext, appId: string, template: InvitationTemplateRow): Promise<InvitationTemplateRow> {
  if (template.email_from !== null && !SENDER.test(template.email_from)) {
    throw authError('VALIDATION_ERROR', 'Invalid field "email_from": expected invite@example.com or Example <invite@example.com>', { details: { field: 'email_from' } });
  }
  for (const field of ['email_text', 'sms_text'] as const) {
    if (template[field] !== null && !template[field]!.includes('{{link}}')) {
      throw authError('VALIDATION_ERROR', `Invalid field "${field}": the text must hold {{link}}`, { details: { field } });
    }
  }
  if (template.accept_url !== null) {
    let parsed: URL | null = null;
    try { parsed = new URL(template.accept_url.replaceAll('{{token}}', 'token')); } catch { /* reported below */ }
    const loopback = parsed !== null && ['localhost', '127.0.0.1'].includes(parsed.hostname);
    if (!parsed || !template.accept_url.includes('{{token}}') || !(parsed.protocol === 'https:' || (parsed.protocol === 'http:' && loopback))) {
      throw authError('VALIDATION_ERROR', 'Invalid field "accept_url": an https URL holding {{token}}', { details: { field: 'accept_url' } });
    }
  }
  await upsertAppInvitationTemplate(ctx.sql, appId, template, new Date(ctx.clock.now()));
  return template;
}

async function sendInvitation(ctx: AuthContext, appId: string, tenant: TenantRow, to: { channel: 'email' | 'phone'; destination: string; role: RoleName }, token: string): Promise<void> {
  const own = await findAppInvitationTemplate(ctx.sql, appId);
  const template = invitationMessageTemplate(own, { appName: own.name, tenantName: tenant.name, role: to.role, days: Math.round(INVITATION_TTL_MS / 86_400_000) });
  try {
    await ctx.otp.delivery.send({ purpose: 'invitation', channel: to.channel, to: to.destination, code: invitationLink(own.accept_url, token), appId, template });
  } catch (error) {
    throw authError('INVITATION_DELIVERY_FAILED', undefined, { cause: error });
  }
}

async function tenantOf(ctx: AuthContext, appId: string, tenantId: string): Promise<TenantRow> {
  const tenant = isUuid(tenantId) ? await findTenant(ctx.sql, appId, tenantId.toLowerCase()) : undefined;
  if (!tenant) throw authError('TENANT_NOT_FOUND');
  return tenant;
}

/** `inv_` and 32 random bytes; stored as SHA-256 only. */
function newToken(): string {
  return `inv_${randomBytes(32).toString('base64url')}`;
}

function hashToken(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

function eventOf(row: InvitationRow, by: { actor: 'admin' | 'app' | 'service'; origin: { ip: string | null; userAgent: string | null } }, now: Date) {
  return {
    actor: by.actor, appId: row.app_id, ip: by.origin.ip, userAgent: by.origin.userAgent, now,
    details: { invitation_id: row.id, tenant_id: row.tenant_id, channel: row.channel, destination: row.destination, role: row.role },
  };
}

export function invitationJson(row: InvitationRow): InvitationJson {
  return {
    id: row.id,
    tenant_id: row.tenant_id,
    email: row.channel === 'email' ? row.destination : null,
    phone: row.channel === 'phone' ? row.destination : null,
    role: row.role,
    state: row.state,
    invited_by: row.invited_by,
    created_at: row.created_at.toISOString(),
    expires_at: row.expires_at.toISOString(),
    last_sent_at: row.last_sent_at.toISOString(),
    send_count: row.send_count,
    accepted_at: row.accepted_at?.toISOString() ?? null,
    accepted_user_id: row.accepted_user_id,
  };
}

