// The audit trail: filter by app, user, type and time; newest first, older pages on demand.
import { adminApi, AUDIT_EVENT_TYPES, type AuditEvent, type AuditQuery } from './api.js';
import { byId, el, facts, when } from './dom.js';
import { notifyError } from './notice.js';

const PAGE = 50;
let query: AuditQuery = {};
let cursor: string | null = null;

/** Shows the first page of the current filter. */
export async function loadAudit(): Promise<void> {
  cursor = null;
  byId('audit-list').replaceChildren();
  await loadMore();
}

async function loadMore(): Promise<void> {
  const page = await adminApi.listAuditEvents({ ...query, limit: PAGE, cursor: cursor ?? undefined });
  const list = byId('audit-list');
  list.append(...page.events.map(eventItem));
  if (list.childElementCount === 0) list.append(el('li', { class: 'empty' }, 'No events match.'));
  cursor = page.next_cursor;
  byId('more-audit').hidden = cursor === null;
}

function eventItem(event: AuditEvent): HTMLLIElement {
  const details = Object.keys(event.details).length ? el('code', {}, JSON.stringify(event.details)) : null;
  return el('li', { 'data-event-id': event.id, 'data-type': event.type },
    el('div', { class: 'item-head' }, el('strong', {}, event.type), el('span', { class: `tag ${event.type.endsWith('failed') || event.type.includes('reuse') || event.type.includes('rejected') ? 'danger' : ''}` }, event.actor), el('span', {}, when(event.occurred_at, true))),
    facts([
      ['App', event.app_id && el('code', {}, event.app_id)],
      ['User', event.user_id && el('code', {}, event.user_id)],
      ['Session', event.family_id && el('code', {}, event.family_id)],
      ['IP', event.ip],
      ['User agent', event.user_agent],
      ['Details', details],
    ].filter(([, value]) => value) as Array<[string, Node | string]>));
}

export function wireAudit(): void {
  byId('audit-type').append(...AUDIT_EVENT_TYPES.map((type) => el('option', { value: type }, type)));
  byId<HTMLFormElement>('audit-filter').addEventListener('submit', async (event) => {
    event.preventDefault();
    const data = new FormData(event.currentTarget as HTMLFormElement);
    const text = (name: string) => String(data.get(name) ?? '').trim() || undefined;
    // The server checks every field (400 VALIDATION_ERROR names the wrong one).
    query = { app_id: text('app_id'), user_id: text('user_id'), type: text('type'), since: text('since'), until: text('until') };
    try {
      await loadAudit();
    } catch (error) {
      notifyError(error);
    }
  });
  byId('more-audit').addEventListener('click', () => { loadMore().catch(notifyError); });
}

export function clearAudit(): void {
  query = {};
  cursor = null;
  byId<HTMLFormElement>('audit-filter').reset();
  byId('audit-list').replaceChildren();
  byId('more-audit').hidden = true;
}
