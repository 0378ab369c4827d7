// The upstream identity providers of the selected app (the "Sign in with ..." buttons): the list,
// one form that adds a provider from a preset or edits the one chosen (the secret write-only),
// a test of the provider's discovery document, and deletion. A tenant's own SSO provider is on
// the tenant's SSO screen (sso.ts), not here.
import { adminApi, type App, type UpstreamProvider } from './api.js';
import { button, byId, el, facts, when } from './dom.js';
import { showFormError } from './form-errors.js';
import { notify, notifyError } from './notice.js';
import { PRESETS, providerForm, type ProviderForm } from './provider-form.js';

let selected: App | null = null;
let form: ProviderForm | null = null;

export async function selectUpstreamApp(app: App): Promise<void> {
  selected = app;
  byId('upstream-heading').textContent = `Sign-in providers of ${app.slug}`;
  byId('upstream').hidden = false;
  form!.fill(null);
  try {
    await loadProviders();
  } catch (error) {
    notifyError(error);
  }
  byId('upstream-heading').focus();
}

async function loadProviders(): Promise<void> {
  if (!selected) return;
  const providers = (await adminApi.listUpstreamProviders(selected.id)).filter((p) => p.tenant_id === null);
  byId('upstream-list').replaceChildren(...(providers.length ? providers.map(providerItem) : [el('li', { class: 'empty' }, 'No sign-in providers yet.')]));
}

export const kindName = (provider: UpstreamProvider): string => PRESETS.find((p) => p.kind === provider.kind)?.name ?? provider.kind;

/** The facts of a provider, shared with the SSO screen. */
export function providerFacts(provider: UpstreamProvider): HTMLDListElement {
  return facts([
    ['Id', el('code', {}, provider.id)],
    ['Client id', el('code', {}, provider.client_id)],
    ['Secret', provider.kind === 'apple' ? 'a JWT signed with the Apple key' : provider.has_client_secret ? 'stored (never shown)' : 'none'],
    ['Discovery', provider.discovery_url ? el('code', {}, provider.discovery_url) : null],
    ['Scopes', provider.scopes.join(' ')],
    ['Redirect URIs', provider.redirect_uris.join(', ')],
    ...(provider.tenant_id === null ? [['Trusted domains', provider.trusted_email_domains.length ? provider.trusted_email_domains.join(', ') : 'none'] as [string, string]] : []),
    ...(provider.entra ? [['Entra tenants', provider.entra.tenants.length ? provider.entra.tenants.join(', ') : 'any'] as [string, string]] : []),
    ...(provider.tenant_id !== null ? [['First sign-in role', provider.default_role ?? 'viewer'], ['Require SSO', provider.require_sso ? 'yes' : 'no']] as Array<[string, string]> : []),
    ['Changed', when(provider.updated_at)],
  ]);
}

/** Asks the API to fetch the provider's discovery document; says what came back, in words. */
export async function testProvider(appId: string, provider: UpstreamProvider): Promise<void> {
  try {
    const result = await adminApi.testUpstreamProvider(appId, provider.id);
    notify(`${provider.label} works: issuer ${result.issuer}${result.authorization_endpoint ? `, sign-in at ${result.authorization_endpoint}` : ''}.`);
  } catch (error) {
    notifyError(error);
  }
}

function providerItem(provider: UpstreamProvider): HTMLLIElement {
  return el('li', { 'data-provider-id': provider.id },
    el('div', { class: 'item-head' }, el('strong', {}, provider.label), el('span', { class: 'tag' }, kindName(provider))),
    providerFacts(provider),
    el('div', { class: 'row' },
      button('Edit', () => { form!.fill(provider); byId('upstream-label').focus(); }, { 'aria-label': `Edit the provider ${provider.label}` }),
      button('Test', () => void testProvider(selected!.id, provider), { 'aria-label': `Test the provider ${provider.label}` }),
      button('Delete', () => void remove(provider), { class: 'danger', 'aria-label': `Delete the provider ${provider.label}` })));
}

async function save(): Promise<void> {
  if (!selected || !form) return;
  const editing = form.editing();
  try {
    const saved = editing
      ? await adminApi.replaceUpstreamProvider(selected.id, editing.id, form.values())
      : await adminApi.createUpstreamProvider(selected.id, form.values());
    form.fill(null);
    notify(`${editing ? 'Saved' : 'Added'} the provider ${saved.label}.`);
    await loadProviders();
  } catch (error) {
    showFormError(form.form, error, form.fields);
  }
}

async function remove(provider: UpstreamProvider): Promise<void> {
  if (!selected || !confirm(`Delete the provider ${provider.label}? Its button disappears; identities linked through it stay with their users.`)) return;
  try {
    await adminApi.deleteUpstreamProvider(selected.id, provider.id);
    if (form?.editing()?.id === provider.id) form.fill(null);
    notify(`Deleted the provider ${provider.label}.`);
    await loadProviders();
    byId('upstream-heading').focus();
  } catch (error) {
    notifyError(error);
  }
}

export function wireUpstream(): void {
  form = providerForm('upstream', { tenant: false, submitLabel: 'Add provider' });
  byId('upstream-form-slot').replaceWith(form.form);
  form.form.addEventListener('submit', (event) => {
    event.preventDefault();
    void save();
  });
}

export function clearUpstream(): void {
  selected = null;
  form?.fill(null);
  byId('upstream-list').replaceChildren();
  byId('upstream').hidden = true;
}
