-- An app's own sender and texts for the messages that carry login codes (otp-templates.ts has
-- the defaults used where a column is null, and the placeholders).
create table app_message_templates (
  app_id uuid primary key references apps (id) on delete cascade,
  email_from text,
  email_subject text,
  email_text text,
  sms_text text,
  updated_at timestamptz not null,
  constraint app_message_templates_email_text_code check (email_text is null or position('{{code}}' in email_text) > 0),
  constraint app_message_templates_sms_text_code check (sms_text is null or position('{{code}}' in sms_text) > 0)
);
