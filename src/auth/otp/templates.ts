// The texts that carry a login code: an app's own sender, subject and bodies (admin API,
// table app_message_templates), or these defaults. Placeholders: {{code}}, {{app_name}},
// {{minutes}} (the code's lifetime). Templates are plain text, so nothing is escaped.
import { OTP_TTL_MS } from '../limits.js';

export interface OtpTemplate {
  appName: string;
  /** The From of e-mails; null: the delivery's configured sender. */
  emailFrom: string | null;
  emailSubject: string;
  emailText: string;
  smsText: string;
}

export const DEFAULT_TEMPLATE = {
  emailSubject: 'Your {{app_name}} login code',
  emailText: 'Your {{app_name}} login code is {{code}}.\n\nIt expires in {{minutes}} minutes. If you did not ask for it, ignore this e-mail.\n',
  smsText: '{{code}} is your {{app_name}} login code. It expires in {{minutes}} minutes.',
} as const;

/** The template of an app: its own fields where set, the defaults elsewhere. */
export function templateOf(appName: string, own: { email_from: string | null; email_subject: string | null; email_text: string | null; sms_text: string | null } | undefined): OtpTemplate {
  return {
    appName,
    emailFrom: own?.email_from ?? null,
    emailSubject: own?.email_subject ?? DEFAULT_TEMPLATE.emailSubject,
    emailText: own?.email_text ?? DEFAULT_TEMPLATE.emailText,
    smsText: own?.sms_text ?? DEFAULT_TEMPLATE.smsText,
  };
}

/** Fills the placeholders; unknown ones are left as written. */
export function renderTemplate(text: string, values: { code: string; appName: string }): string {
  return text.replace(/\{\{(code|app_name|minutes)\}\}/g, (_, name: string) =>
    name === 'code' ? values.code : name === 'app_name' ? values.appName : String(OTP_TTL_MS / 60_000));
}
