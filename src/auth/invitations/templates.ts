// The texts of invitation messages: an app's own (admin API, table app_invitation_templates) or
// these defaults. Placeholders: {{app_name}}, {{tenant_name}}, {{role}}, {{link}} (the app's
// accept_url with the invitation token in place of {{token}}, or the bare token when the app set
// no URL) and {{days}} (until it expires). Plain text: nothing is escaped.
//
// Invitations go out through the code delivery (SMTP, SMS, webhook, log: ../otp/), whose
// messages carry one secret in `code`: here the link. The other placeholders are filled in
// first and {{link}} becomes the delivery's {{code}}, so every channel's own rendering, and the
// log delivery's redaction of the secret, apply unchanged.
import type { OtpTemplate } from '../otp/templates.js';

export interface InvitationTemplateRow {
  email_from: string | null;
  email_subject: string | null;
  email_text: string | null;
  sms_text: string | null;
  accept_url: string | null;
}

export const DEFAULT_INVITATION_TEMPLATE = {
  emailSubject: 'You are invited to {{tenant_name}} on {{app_name}}',
  emailText: 'You have been invited to join {{tenant_name}} on {{app_name}} as {{role}}.\n\nAccept: {{link}}\n\nSign in with this address to accept. The invitation expires in {{days}} days.\n',
  smsText: 'You are invited to {{tenant_name}} on {{app_name}} as {{role}}: {{link}} (expires in {{days}} days)',
} as const;

/** The accept link of a token: the app's URL with the token in it, or the token itself. */
export function invitationLink(acceptUrl: string | null, token: string): string {
  return acceptUrl ? acceptUrl.replaceAll('{{token}}', encodeURIComponent(token)) : token;
}

/** The delivery template of one invitation: everything filled in but {{link}}, which is the delivery's {{code}}. */
export function invitationMessageTemplate(own: InvitationTemplateRow | undefined, values: { appName: string; tenantName: string; role: string; days: number }): OtpTemplate {
  const fill = (text: string) => text
    .replace(/\{\{(tenant_name|role|days)\}\}/g, (_, name: string) => (name === 'tenant_name' ? values.tenantName : name === 'role' ? values.role : String(values.days)))
    .replaceAll('{{link}}', '{{code}}');
  return {
    appName: values.appName,
    emailFrom: own?.email_from ?? null,
    emailSubject: fill(own?.email_subject ?? DEFAULT_INVITATION_TEMPLATE.emailSubject),
    emailText: fill(own?.email_text ?? DEFAULT_INVITATION_TEMPLATE.emailText),
    smsText: fill(own?.sms_text ?? DEFAULT_INVITATION_TEMPLATE.smsText),
  };
}
