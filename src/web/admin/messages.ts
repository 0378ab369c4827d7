// The login code messages of the selected app: its e-mail sender, subject and text and its SMS
// text. An empty field is the default, shown as the field's placeholder.
import { adminApi, type App, type MessageTemplates, type MessageTemplatesWithDefaults } from './api.js';
import { byId } from './dom.js';
import { notify, notifyError } from './notice.js';

let selected: App | null = null;
const FIELDS = [
  ['email_from', 'message-email-from'],
  ['email_subject', 'message-email-subject'],
  ['email_text', 'message-email-text'],
  ['sms_text', 'message-sms-text'],
] as const;

export async function selectMessagesApp(app: App): Promise<void> {
  selected = app;
  byId('messages-heading').textContent = `Login code messages of ${app.slug}`;
  byId('messages').hidden = false;
  try {
    show(await adminApi.getMessageTemplates(app.id));
  } catch (error) {
    notifyError(error);
  }
  byId('messages-heading').focus();
}

function show(templates: MessageTemplatesWithDefaults): void {
  for (const [field, id] of FIELDS) {
    const input = byId<HTMLInputElement | HTMLTextAreaElement>(id);
    input.value = templates[field] ?? '';
    if (field !== 'email_from') input.placeholder = templates.defaults[field];
  }
}

export function wireMessages(): void {
  byId<HTMLFormElement>('message-templates').addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!selected) return;
    const values = Object.fromEntries(FIELDS.map(([field, id]) => [field, byId<HTMLInputElement | HTMLTextAreaElement>(id).value.trim() || null])) as unknown as MessageTemplates;
    try {
      show(await adminApi.setMessageTemplates(selected.id, values));
      notify(`Saved the login code messages of ${selected.slug}.`);
    } catch (error) {
      notifyError(error);
    }
  });
}

export function clearMessages(): void {
  selected = null;
  byId<HTMLFormElement>('message-templates').reset();
  byId('messages').hidden = true;
}
