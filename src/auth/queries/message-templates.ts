// Queries on apps' message templates (migration 0016).
import type { Queryable } from '../database/client.js';

export interface MessageTemplateRow {
  email_from: string | null;
  email_subject: string | null;
  email_text: string | null;
  sms_text: string | null;
}

/** The app's name and its own template fields (all null when it has none). */
export async function findAppMessageTemplate(sql: Queryable, appId: string): Promise<{ name: string } & MessageTemplateRow> {
  const [row] = await sql<({ name: string } & MessageTemplateRow)[]>`
    select a.name, t.email_from, t.email_subject, t.email_text, t.sms_text
    from apps a
    left join app_message_templates t on t.app_id = a.id
    where a.id = ${appId}
  `;
  return row!;
}

/** Replaces the app's template fields (null: the default). */
export async function upsertAppMessageTemplate(sql: Queryable, appId: string, template: MessageTemplateRow, now: Date): Promise<void> {
  await sql`
    insert into app_message_templates (app_id, email_from, email_subject, email_text, sms_text, updated_at)
    values (${appId}, ${template.email_from}, ${template.email_subject}, ${template.email_text}, ${template.sms_text}, ${now})
    on conflict (app_id) do update
    set email_from = excluded.email_from, email_subject = excluded.email_subject,
        email_text = excluded.email_text, sms_text = excluded.sms_text, updated_at = excluded.updated_at
  `;
}
