// The OAuth clients of the selected app: the list, one form that creates a client or edits the
// one chosen (its type stays what it was made with), a new secret shown once (on creation and on
// rotation), and deletion. A refusal of the API is shown next to the field it names.
import { adminApi, type App, type OAuthClient, type OAuthClientFields } from './api.js';
import { button, byId, el, facts, when } from './dom.js';
import { clearFormErrors, lines, showFormError, words } from './form-errors.js';
import { notify, notifyError } from './notice.js';

let selected: App | null = null;
let editing: OAuthClient | null = null;

/** API field → control id. */
const FIELDS: Record<string, string> = {
  name: 'client-name', client_type: 'client-type', token_endpoint_auth_method: 'client-type', redirect_uris: 'client-redirect-uris',
  post_logout_redirect_uris: 'client-post-logout-uris', grant_types: 'client-grants', scopes: 'client-scopes', logo_uri: 'client-logo', first_party: 'client-first-party',
};
const SECRET_METHODS = ['client_secret_basic', 'client_secret_post'];
const form = (): HTMLFormElement => byId<HTMLFormElement>('client-form');
const input = (id: string): HTMLInputElement => byId<HTMLInputElement>(id);

export async function selectClientsApp(app: App): Promise<void> {
  selected = app;
  byId('oauth-clients-heading').textContent = `OAuth clients of ${app.slug}`;
  byId('oauth-clients').hidden = false;
  hideSecret();
  stopEditing();
  try {
    await loadClients();
  } catch (error) {
    notifyError(error);
  }
  byId('oauth-clients-heading').focus();
}

async function loadClients(): Promise<void> {
  if (!selected) return;
  const clients = await adminApi.listOAuthClients(selected.id);
  byId('client-list').replaceChildren(...(clients.length ? clients.map(clientItem) : [el('li', { class: 'empty' }, 'No OAuth clients yet.')]));
}

const list = (values: string[]): string => (values.length ? values.join(', ') : 'none');

function clientItem(client: OAuthClient): HTMLLIElement {
  const byDocument = client.origin === 'metadata_document';
  return el('li', { 'data-client-id': client.client_id },
    el('div', { class: 'item-head' }, el('strong', {}, client.name), el('span', { class: 'tag' }, client.client_type),
      client.first_party ? el('span', { class: 'tag ok' }, 'first-party') : el('span', { class: 'tag' }, 'asks for consent')),
    facts([
      ['Client id', el('code', {}, client.client_id)],
      ['Made by', client.origin === 'admin' ? 'the admin' : client.origin === 'dynamic' ? 'registration' : 'its metadata document'],
      ['Authenticates', client.token_endpoint_auth_method],
      ['Redirect URIs', list(client.redirect_uris)],
      ['After logout', list(client.post_logout_redirect_uris)],
      ['Grants', list(client.grant_types)],
      ['Scopes', list(client.scopes)],
      ['Logo', client.logo_uri],
      ['Created', when(client.created_at)],
      ['Changed', when(client.updated_at)],
    ]),
    byDocument ? null : el('div', { class: 'row' },
      button('Edit', () => startEditing(client), { 'aria-label': `Edit the client ${client.name}` }),
      SECRET_METHODS.includes(client.token_endpoint_auth_method)
        ? button('Rotate secret', () => void rotate(client), { 'aria-label': `Rotate the secret of the client ${client.name}` }) : null,
      button('Delete', () => void remove(client), { class: 'danger', 'aria-label': `Delete the client ${client.name}` })));
}

function startEditing(client: OAuthClient): void {
  editing = client;
  clearFormErrors(form());
  input('client-name').value = client.name;
  byId<HTMLSelectElement>('client-type').value = client.client_type;
  byId<HTMLSelectElement>('client-type').disabled = true;
  byId<HTMLTextAreaElement>('client-redirect-uris').value = client.redirect_uris.join('\n');
  byId<HTMLTextAreaElement>('client-post-logout-uris').value = client.post_logout_redirect_uris.join('\n');
  for (const box of form().querySelectorAll<HTMLInputElement>('input[name="grant_types"]')) box.checked = client.grant_types.includes(box.value);
  input('client-scopes').value = client.scopes.join(' ');
  input('client-logo').value = client.logo_uri ?? '';
  input('client-first-party').checked = client.first_party;
  byId('client-form-heading').textContent = `Edit the client ${client.name}`;
  byId('client-submit').textContent = 'Save client';
  byId('client-cancel').hidden = false;
  input('client-name').focus();
}

function stopEditing(): void {
  editing = null;
  form().reset();
  clearFormErrors(form());
  byId<HTMLSelectElement>('client-type').disabled = false;
  byId('client-form-heading').textContent = 'New client';
  byId('client-submit').textContent = 'Create client';
  byId('client-cancel').hidden = true;
}

function fields(): OAuthClientFields {
  const logo = input('client-logo').value.trim();
  return {
    name: input('client-name').value.trim(),
    ...(logo ? { logo_uri: logo } : {}),
    redirect_uris: lines(byId<HTMLTextAreaElement>('client-redirect-uris').value),
    post_logout_redirect_uris: lines(byId<HTMLTextAreaElement>('client-post-logout-uris').value),
    grant_types: [...form().querySelectorAll<HTMLInputElement>('input[name="grant_types"]:checked')].map((box) => box.value),
    scopes: words(input('client-scopes').value),
    first_party: input('client-first-party').checked,
  };
}

function showSecret(client: OAuthClient & { client_secret?: string }, verb: string): void {
  if (!client.client_secret) return;
  byId('client-secret-name').textContent = `${client.name} (${verb})`;
  byId('client-secret-value').textContent = client.client_secret;
  byId('client-secret-box').hidden = false;
  byId('dismiss-client-secret').focus();
}

function hideSecret(): void {
  byId('client-secret-value').textContent = '';
  byId('client-secret-box').hidden = true;
}

async function save(): Promise<void> {
  if (!selected) return;
  const app = selected;
  try {
    if (editing) {
      const saved = await adminApi.updateOAuthClient(app.id, editing.client_id, fields());
      stopEditing();
      hideSecret();
      notify(`Saved the client ${saved.name}.`);
      await loadClients();
    } else {
      const type = byId<HTMLSelectElement>('client-type').value as 'confidential' | 'public';
      const created = await adminApi.createOAuthClient(app.id, { ...fields(), client_type: type });
      stopEditing();
      hideSecret();
      notify(`Created the client ${created.name} for ${app.slug}.`);
      await loadClients();
      showSecret(created, 'new');
    }
  } catch (error) {
    showFormError(form(), error, FIELDS);
  }
}

async function rotate(client: OAuthClient): Promise<void> {
  if (!selected || !confirm(`Rotate the secret of the client "${client.name}"? Its current secret stops working at once.`)) return;
  try {
    showSecret(await adminApi.rotateOAuthClientSecret(selected.id, client.client_id), 'rotated');
    notify(`New secret for the client ${client.name}; the old one no longer works.`);
    await loadClients();
  } catch (error) {
    notifyError(error);
  }
}

async function remove(client: OAuthClient): Promise<void> {
  if (!selected || !confirm(`Delete the client "${client.name}"? Its sessions end and its refresh tokens stop working.`)) return;
  try {
    await adminApi.deleteOAuthClient(selected.id, client.client_id);
    if (editing?.client_id === client.client_id) stopEditing();
    notify(`Deleted the client ${client.name}.`);
    await loadClients();
    byId('oauth-clients-heading').focus();
  } catch (error) {
    notifyError(error);
  }
}

export function wireClients(): void {
  form().addEventListener('submit', (event) => {
    event.preventDefault();
    void save();
  });
  byId('client-cancel').addEventListener('click', () => {
    stopEditing();
    input('client-name').focus();
  });
  byId('dismiss-client-secret').addEventListener('click', () => {
    hideSecret();
    input('client-name').focus();
  });
}

export function clearClients(): void {
  selected = null;
  hideSecret();
  stopEditing();
  byId('client-list').replaceChildren();
  byId('oauth-clients').hidden = true;
}
