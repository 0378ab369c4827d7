// Invitation routes: the admin's (X-Admin-Key, under the tenant's path), the app backend's (its
// credentials in the body), the signed-in user's acceptance by token, and the app's texts.
import type { HttpRequest, HttpResult } from '../../http/request.js';
import { compileBody } from '../../http/validation.js';
import { requestOrigin } from '../audit.js';
import type { AuthContext } from '../context.js';
import { authError } from '../errors.js';
import { isRoleName, ROLE_NAMES, type RoleName } from '../roles.js';
import {
  InvitationCreateAdminBody, InvitationTemplateBody, type InvitationAcceptBody, type InvitationActionBody, type InvitationCreateBody, type InvitationListBody,
} from '../schemas.js';
import { getApp } from '../service/admin.js';
import type { AuthenticatedApp } from '../service/credentials.js';
import { identifierOf } from '../service/identity.js';
import * as invitations from '../service/invitations.js';
import type { InvitationState } from '../queries/invitations.js';

type AppInput<B> = { app: AuthenticatedApp; body: B };
type NoInput = Record<string, never>;
const createAdminBody = compileBody(InvitationCreateAdminBody);
const templateBody = compileBody(InvitationTemplateBody);
const STATES = ['pending', 'accepted', 'revoked', 'expired'];

/** POST /admin/apps/:app_id/tenants/:tenant_id/invitations `{email | phone, role}` → 201 the invitation. */
export async function handleAdminCreateInvitation(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  const body = createAdminBody.parse(req);
  const invitation = await invitations.createInvitation(ctx, app.id, { tenantId: req.params.tenant_id!, identifier: identifierOf(body), role: roleOf(body.role) }, { actor: 'admin', origin: requestOrigin(ctx, req) });
  return { status: 201, body: invitation };
}

/** GET /admin/apps/:app_id/tenants/:tenant_id/invitations?state=pending → 200 `{invitations: [...]}`, newest first. */
export async function handleAdminListInvitations(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  const state = req.query.get('state');
  if (state !== null && !STATES.includes(state)) {
    throw authError('VALIDATION_ERROR', `Invalid query parameter "state": one of ${STATES.join(', ')}`, { details: { field: 'state' } });
  }
  return { body: { invitations: await invitations.listInvitations(ctx, app.id, req.params.tenant_id!, state as InvitationState | null) } };
}

/** POST /admin/apps/:app_id/tenants/:tenant_id/invitations/:invitation_id/resend → 200 the invitation. */
export async function handleAdminResendInvitation(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  return { body: await invitations.resendInvitation(ctx, app.id, req.params.tenant_id!, req.params.invitation_id!) };
}

/** DELETE /admin/apps/:app_id/tenants/:tenant_id/invitations/:invitation_id → 200 the invitation, revoked. */
export async function handleAdminRevokeInvitation(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  return { body: await invitations.revokeInvitation(ctx, app.id, req.params.tenant_id!, req.params.invitation_id!, { actor: 'admin', origin: requestOrigin(ctx, req) }) };
}

/** GET /admin/apps/:app_id/invitation-templates → 200 the app's own fields (null: the default). */
export async function handleGetInvitationTemplate(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  return { body: await invitations.getInvitationTemplate(ctx, app.id) };
}

/** PUT /admin/apps/:app_id/invitation-templates → 200 the fields as stored. */
export async function handlePutInvitationTemplate(ctx: AuthContext, _: NoInput, req: HttpRequest): Promise<HttpResult> {
  const app = await getApp(ctx, req.params.app_id!);
  const body = templateBody.parse(req);
  return {
    body: await invitations.setInvitationTemplate(ctx, app.id, {
      email_from: body.email_from ?? null, email_subject: body.email_subject ?? null, email_text: body.email_text ?? null,
      sms_text: body.sms_text ?? null, accept_url: body.accept_url ?? null,
    }),
  };
}

/** POST /auth/invitations → 201 the invitation. */
export async function handleCreateInvitation(ctx: AuthContext, { app, body }: AppInput<InvitationCreateBody>, req: HttpRequest): Promise<HttpResult> {
  const invitation = await invitations.createInvitation(ctx, app.id, { tenantId: body.tenant_id, identifier: identifierOf(body), role: roleOf(body.role) }, { actor: 'app', origin: requestOrigin(ctx, req) });
  return { status: 201, body: invitation };
}

/** POST /auth/invitations/list → 200 `{invitations: [...]}`. */
export async function handleListInvitations(ctx: AuthContext, { app, body }: AppInput<InvitationListBody>): Promise<HttpResult> {
  return { body: { invitations: await invitations.listInvitations(ctx, app.id, body.tenant_id, body.state ?? null) } };
}

/** POST /auth/invitations/resend → 200 the invitation. */
export async function handleResendInvitation(ctx: AuthContext, { app, body }: AppInput<InvitationActionBody>): Promise<HttpResult> {
  return { body: await invitations.resendInvitation(ctx, app.id, body.tenant_id, body.invitation_id) };
}

/** POST /auth/invitations/revoke → 200 the invitation, revoked. */
export async function handleRevokeInvitation(ctx: AuthContext, { app, body }: AppInput<InvitationActionBody>, req: HttpRequest): Promise<HttpResult> {
  return { body: await invitations.revokeInvitation(ctx, app.id, body.tenant_id, body.invitation_id, { actor: 'app', origin: requestOrigin(ctx, req) }) };
}

/** POST /auth/invitations/accept → 200 `{invitation_id, tenant_id, role}`; the next refresh's token carries the role. */
export async function handleAcceptInvitation(ctx: AuthContext, { app, body }: AppInput<InvitationAcceptBody>, req: HttpRequest): Promise<HttpResult> {
  return { body: await invitations.acceptInvitationByToken(ctx, app, body.refresh_token, body.token, requestOrigin(ctx, req)) };
}

function roleOf(role: string): RoleName {
  if (!isRoleName(role)) throw authError('VALIDATION_ERROR', `Invalid field "role": one of ${ROLE_NAMES.join(', ')}`, { details: { field: 'role' } });
  return role;
}
