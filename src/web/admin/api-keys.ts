// The API keys of the selected app: the list (display prefix, settings, dates), a new key's form
// (its key shown once), rotation (the new key shown once) and revocation.
import { adminApi, type ApiKey, type App, type NewApiKey } from './api.js';
import { button, byId, el, facts, when } from './dom.js';
import { notify, notifyError } from './notice.js';

let selected: App | null = null;

export async function selectApiKeysApp(app: App): Promise<void> {
  selected = app;
  byId('api-keys-heading').textContent = `API keys of ${app.slug}`;
  byId('api-keys').hidden = false;
  hideKey();
  try {
    await loadApiKeys();
  } catch (error) {
    notifyError(error);
  }
  byId('api-keys-heading').focus();
}

async function loadApiKeys(): Promise<void> {
  if (!selected) return;
  const keys = await adminApi.listApiKeys(selected.id);
  byId('api-key-list').replaceChildren(...(keys.length ? keys.map(keyItem) : [el('li', { class: 'empty' }, 'No API keys yet.')]));
}

function limitsText(key: ApiKey): string {
  const parts = [
    key.limits.concurrent_requests ? `${key.limits.concurrent_requests} at once` : '',
    key.limits.requests_per_minute ? `${key.limits.requests_per_minute} requests/min` : '',
    key.limits.tokens_per_minute ? `${key.limits.tokens_per_minute} tokens/min` : '',
  ].filter(Boolean);
  return parts.length ? parts.join(', ') : 'none';
}

function keyItem(key: ApiKey): HTMLLIElement {
  const expired = key.expires_at !== null && Date.parse(key.expires_at) <= Date.now();
  const state = key.revoked_at ? 'revoked' : expired ? 'expired' : 'active';
  return el('li', { 'data-api-key-id': key.id, 'data-state': state },
    el('div', { class: 'item-head' }, el('strong', {}, key.name), el('code', {}, `${key.display_prefix}…`),
      el('span', { class: `tag ${state === 'active' ? 'ok' : 'danger'}` }, state)),
    facts([
      ['Id', el('code', {}, key.id)],
      ['Tenant', key.tenant_id ? el('code', {}, key.tenant_id) : 'the whole app'],
      ['Role', key.role],
      ['Limits', limitsText(key)],
      ['Weight', String(key.weight)],
      ['Priority', key.priority_class],
      ['Created', when(key.created_at)],
      ['Expires', key.expires_at ? when(key.expires_at) : 'never'],
      ['Last used', when(key.last_used_at)],
      ['Rotated', when(key.rotated_at)],
      ['Revoked', when(key.revoked_at)],
    ]),
    key.revoked_at ? null : el('div', { class: 'row' },
      button('Rotate', () => void rotate(key), { 'aria-label': `Rotate the API key ${key.name}` }),
      button('Revoke', () => void revoke(key), { class: 'danger', 'aria-label': `Revoke the API key ${key.name}` })));
}

function showKey(key: ApiKey & { key: string }, verb: string): void {
  byId('api-key-secret-name').textContent = `${key.name} (${verb})`;
  byId('api-key-secret-value').textContent = key.key;
  byId('api-key-secret-box').hidden = false;
  byId('dismiss-api-key-secret').focus();
}

function hideKey(): void {
  byId('api-key-secret-value').textContent = '';
  byId('api-key-secret-box').hidden = true;
}

async function rotate(key: ApiKey): Promise<void> {
  if (!selected || !confirm(`Rotate the API key "${key.name}"? Its current key stops working at once.`)) return;
  try {
    showKey(await adminApi.rotateApiKey(selected.id, key.id), 'rotated');
    notify(`New key for ${key.name}; the old one no longer works.`);
    await loadApiKeys();
  } catch (error) {
    notifyError(error);
  }
}

async function revoke(key: ApiKey): Promise<void> {
  if (!selected || !confirm(`Revoke the API key "${key.name}"? It stops working within 30 seconds everywhere.`)) return;
  try {
    await adminApi.revokeApiKey(selected.id, key.id);
    notify(`Revoked the API key ${key.name}.`);
    await loadApiKeys();
  } catch (error) {
    notifyError(error);
  }
}

/** The form's values: empty fields are left out (the server's defaults); numbers as typed (the server checks them). */
function newKey(form: HTMLFormElement): NewApiKey {
  const data = new FormData(form);
  const text = (name: string): string => String(data.get(name) ?? '').trim();
  const number = (name: string): number | undefined => (text(name) === '' ? undefined : Number(text(name)));
  const limits = { concurrent_requests: number('concurrent_requests'), requests_per_minute: number('requests_per_minute'), tokens_per_minute: number('tokens_per_minute') };
  const expires = text('expires_at');
  return {
    name: text('name'),
    ...(text('tenant_id') ? { tenant_id: text('tenant_id') } : {}),
    role: text('role'),
    ...(Object.values(limits).some((v) => v !== undefined) ? { limits } : {}),
    ...(number('weight') !== undefined ? { weight: number('weight') } : {}),
    priority_class: text('priority_class'),
    // A date and time typed in the page is taken as UTC, as every time in the console.
    ...(expires ? { expires_at: /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$/.test(expires) ? `${expires}Z` : expires } : {}),
  };
}

export function wireApiKeys(): void {
  byId<HTMLFormElement>('create-api-key').addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!selected) return;
    const form = event.currentTarget as HTMLFormElement;
    try {
      const key = await adminApi.createApiKey(selected.id, newKey(form));
      form.reset();
      notify(`Created the API key ${key.name} for ${selected.slug}.`);
      await loadApiKeys();
      showKey(key, 'new');
    } catch (error) {
      notifyError(error);
    }
  });
  byId('dismiss-api-key-secret').addEventListener('click', () => {
    hideKey();
    byId('api-key-name').focus();
  });
}

export function clearApiKeys(): void {
  selected = null;
  hideKey();
  byId<HTMLFormElement>('create-api-key').reset();
  byId('api-key-list').replaceChildren();
  byId('api-keys').hidden = true;
}
