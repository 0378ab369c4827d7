// Queries on invitations into tenants and the apps' invitation texts (migration 0031).
import type { Queryable } from '../database/client.js';
import type { InvitationTemplateRow } from '../invitations/templates.js';
import type { RoleName } from '../roles.js';

export type InvitationState = 'pending' | 'accepted' | 'revoked' | 'expired';

export interface InvitationRow {
  id: string;
  app_id: string;
  tenant_id: string;
  channel: 'email' | 'phone';
  destination: string;
  role: RoleName;
  state: InvitationState;
  invited_by: 'admin' | 'app';
  created_at: Date;
  expires_at: Date;
  last_sent_at: Date;
  send_count: number;
  accepted_at: Date | null;
  accepted_user_id: string | null;
  ended_at: Date | null;
}

const COLUMNS = 'id, app_id, tenant_id, channel, destination, role, state, invited_by, created_at, expires_at, last_sent_at, send_count, accepted_at, accepted_user_id, ended_at';

/** Inserts a pending invitation; undefined when the address already has one pending in the tenant. */
export async function insertInvitation(sql: Queryable, invitation: {
  id: string; appId: string; tenantId: string; channel: 'email' | 'phone'; destination: string; role: RoleName; tokenHash: Buffer;
  invitedBy: 'admin' | 'app'; now: Date; expiresAt: Date;
}): Promise<InvitationRow | undefined> {
  const [row] = await sql<InvitationRow[]>`
    insert into invitations (id, app_id, tenant_id, channel, destination, role, token_hash, invited_by, created_at, expires_at, last_sent_at)
    values (
      ${invitation.id}, ${invitation.appId}, ${invitation.tenantId}, ${invitation.channel}, ${invitation.destination}, ${invitation.role},
      ${invitation.tokenHash}, ${invitation.invitedBy}, ${invitation.now}, ${invitation.expiresAt}, ${invitation.now}
    )
    on conflict (tenant_id, channel, destination) where state = 'pending' do nothing
    returning ${sql.unsafe(COLUMNS)}
  `;
  return row;
}

export async function findPendingInvitationTo(sql: Queryable, tenantId: string, channel: string, destination: string): Promise<InvitationRow | undefined> {
  const [row] = await sql<InvitationRow[]>`
    select ${sql.unsafe(COLUMNS)} from invitations
    where tenant_id = ${tenantId} and channel = ${channel} and destination = ${destination} and state = 'pending'
  `;
  return row;
}

/** The invitation of a tenant, locked `for update`. */
export async function lockInvitation(sql: Queryable, appId: string, tenantId: string, id: string): Promise<InvitationRow | undefined> {
  const [row] = await sql<InvitationRow[]>`
    select ${sql.unsafe(COLUMNS)} from invitations
    where id = ${id} and app_id = ${appId} and tenant_id = ${tenantId}
    for update
  `;
  return row;
}

/** The app's invitation whose token hashes to this, locked `for update`. */
export async function lockInvitationByToken(sql: Queryable, appId: string, tokenHash: Buffer): Promise<InvitationRow | undefined> {
  const [row] = await sql<InvitationRow[]>`
    select ${sql.unsafe(COLUMNS)} from invitations
    where token_hash = ${tokenHash} and app_id = ${appId}
    for update
  `;
  return row;
}

/** The app's live pending invitations to this address, locked (skipping none: a concurrent sign-in waits). */
export async function lockPendingInvitationsTo(sql: Queryable, appId: string, channel: string, destination: string, now: Date): Promise<InvitationRow[]> {
  return sql<InvitationRow[]>`
    select ${sql.unsafe(COLUMNS)} from invitations
    where app_id = ${appId} and channel = ${channel} and destination = ${destination} and state = 'pending' and expires_at > ${now}
    order by created_at, id
    for update
  `;
}

export async function listInvitationsOfTenant(sql: Queryable, appId: string, tenantId: string, state: InvitationState | null): Promise<InvitationRow[]> {
  return sql<InvitationRow[]>`
    select ${sql.unsafe(COLUMNS)} from invitations
    where app_id = ${appId} and tenant_id = ${tenantId} and (${state}::text is null or state = ${state})
    order by created_at desc, id
  `;
}

export async function markInvitationAccepted(sql: Queryable, id: string, userId: string, now: Date): Promise<void> {
  await sql`
    update invitations set state = 'accepted', accepted_at = ${now}, accepted_user_id = ${userId}, ended_at = ${now}
    where id = ${id}
  `;
}

export async function markInvitationRevoked(sql: Queryable, id: string, now: Date): Promise<InvitationRow> {
  const [row] = await sql<InvitationRow[]>`
    update invitations set state = 'revoked', ended_at = ${now}
    where id = ${id}
    returning ${sql.unsafe(COLUMNS)}
  `;
  return row!;
}

/** A new token and expiry for a resend; only while still pending and not sent since `lastSentAt` (a concurrent resend). */
export async function recordInvitationResent(sql: Queryable, resend: { id: string; tokenHash: Buffer; lastSentAt: Date; now: Date; expiresAt: Date }): Promise<InvitationRow | undefined> {
  const [row] = await sql<InvitationRow[]>`
    update invitations
    set token_hash = ${resend.tokenHash}, last_sent_at = ${resend.now}, expires_at = ${resend.expiresAt}, send_count = send_count + 1
    where id = ${resend.id} and state = 'pending' and last_sent_at = ${resend.lastSentAt}
    returning ${sql.unsafe(COLUMNS)}
  `;
  return row;
}

/** Marks every pending invitation past its expiry expired (of one app, or all); returns them. */
export async function expireDueInvitations(sql: Queryable, now: Date, appId: string | null): Promise<InvitationRow[]> {
  return sql<InvitationRow[]>`
    update invitations set state = 'expired', ended_at = expires_at
    where state = 'pending' and expires_at <= ${now} and (${appId}::uuid is null or app_id = ${appId})
    returning ${sql.unsafe(COLUMNS)}
  `;
}

/** The app's name and its own invitation texts (null fields when it has none). */
export async function findAppInvitationTemplate(sql: Queryable, appId: string): Promise<{ name: string } & InvitationTemplateRow> {
  const [row] = await sql<({ name: string } & InvitationTemplateRow)[]>`
    select a.name, t.email_from, t.email_subject, t.email_text, t.sms_text, t.accept_url
    from apps a
    left join app_invitation_templates t on t.app_id = a.id
    where a.id = ${appId}
  `;
  return row!;
}

export async function upsertAppInvitationTemplate(sql: Queryable, appId: string, template: InvitationTemplateRow, now: Date): Promise<void> {
  await sql`
    insert into app_invitation_templates (app_id, email_from, email_subject, email_text, sms_text, accept_url, updated_at)
    values (${appId}, ${template.email_from}, ${template.email_subject}, ${template.email_text}, ${template.sms_text}, ${template.accept_url}, ${now})
    on conflict (app_id) do update
    set email_from = excluded.email_from, email_subject = excluded.email_subject, email_text = excluded.email_text,
        sms_text = excluded.sms_text, accept_url = excluded.accept_url, updated_at = excluded.updated_at
  `;
}
