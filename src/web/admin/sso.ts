// Enterprise SSO of the selected tenant: its own identity provider (an upstream provider with
// the tenant's id: the role a person's first sign-in gives, and whether SSO is required for the
// tenant's verified domains), a test of that provider, and the tenant's e-mail domains, each with
// the DNS TXT record that proves it and a "verify" button that looks the record up now.
import { adminApi, type App, type Tenant, type TenantDomain, type UpstreamProvider } from './api.js';
import { button, byId, el, facts, when } from './dom.js';
import { clearFormErrors, showFormError } from './form-errors.js';
import { notify, notifyError } from './notice.js';
import { providerForm, type ProviderForm } from './provider-form.js';
import { kindName, providerFacts, testProvider } from './upstream.js';

let selected: { app: App; tenant: Tenant } | null = null;
let form: ProviderForm | null = null;

export async function selectSsoTenant(app: App, tenant: Tenant): Promise<void> {
  selected = { app, tenant };
  byId('sso-heading').textContent = `SSO of ${tenant.name} (${app.slug})`;
  byId('sso').hidden = false;
  byId<HTMLFormElement>('domain-form').reset();
  clearFormErrors(byId<HTMLFormElement>('domain-form'));
  try {
    await Promise.all([loadProviders(), loadDomains()]);
  } catch (error) {
    notifyError(error);
  }
  byId('sso-heading').focus();
}

async function loadProviders(): Promise<void> {
  if (!selected || !form) return;
  const tenantId = selected.tenant.id;
  const providers = (await adminApi.listUpstreamProviders(selected.app.id)).filter((p) => p.tenant_id === tenantId);
  byId('sso-provider-list').replaceChildren(...(providers.length ? providers.map(providerItem) : [el('li', { class: 'empty' }, 'The tenant has no provider of its own yet.')]));
  form.fill(providers[0] ?? null);
}

function providerItem(provider: UpstreamProvider): HTMLLIElement {
  return el('li', { 'data-provider-id': provider.id },
    el('div', { class: 'item-head' }, el('strong', {}, provider.label), el('span', { class: 'tag' }, kindName(provider)),
      provider.require_sso ? el('span', { class: 'tag ok' }, 'SSO required') : null),
    providerFacts(provider),
    el('div', { class: 'row' },
      button('Test the provider', () => void testProvider(selected!.app.id, provider), { 'aria-label': `Test the provider ${provider.label}` }),
      button('Delete', () => void removeProvider(provider), { class: 'danger', 'aria-label': `Delete the provider ${provider.label}` })));
}

async function saveProvider(): Promise<void> {
  if (!selected || !form) return;
  const editing = form.editing();
  try {
    const values = { ...form.values(), tenant_id: selected.tenant.id };
    const saved = editing
      ? await adminApi.replaceUpstreamProvider(selected.app.id, editing.id, values)
      : await adminApi.createUpstreamProvider(selected.app.id, values);
    notify(`${editing ? 'Saved' : 'Added'} the SSO provider ${saved.label} of ${selected.tenant.name}.`);
    await loadProviders();
  } catch (error) {
    showFormError(form.form, error, form.fields);
  }
}

async function removeProvider(provider: UpstreamProvider): Promise<void> {
  if (!selected || !confirm(`Delete the SSO provider ${provider.label}? The tenant's people sign in by code or passkey again.`)) return;
  try {
    await adminApi.deleteUpstreamProvider(selected.app.id, provider.id);
    notify(`Deleted the SSO provider ${provider.label}.`);
    await loadProviders();
  } catch (error) {
    notifyError(error);
  }
}

async function loadDomains(): Promise<void> {
  if (!selected) return;
  const domains = await adminApi.listDomains(selected.app.id, selected.tenant.id);
  byId('domain-list').replaceChildren(...(domains.length ? domains.map(domainItem) : [el('li', { class: 'empty' }, 'No domains yet.')]));
}

function domainItem(domain: TenantDomain): HTMLLIElement {
  const verified = domain.verified_at !== null;
  const errorId = `domain-error-${domain.id}`;
  return el('li', { 'data-domain-id': domain.id, 'data-verified': String(verified) },
    el('div', { class: 'item-head' }, el('strong', {}, domain.domain),
      el('span', { class: `tag ${verified ? 'ok' : ''}` }, verified ? `verified ${when(domain.verified_at)}` : 'not verified')),
    facts([
      ['TXT record name', el('code', { class: 'txt-name' }, domain.verification.name)],
      ['TXT record value', el('code', { class: 'txt-value' }, domain.verification.value)],
      ['Claimed', when(domain.created_at)],
    ]),
    verified ? null : el('p', { class: 'hint' }, 'Publish this TXT record in the domain\'s DNS, then verify.'),
    el('p', { class: 'field-error', id: errorId, role: 'alert', hidden: '' }),
    el('div', { class: 'row' },
      verified ? null : button('Verify', () => void verify(domain, errorId), { 'aria-label': `Verify ${domain.domain}`, 'aria-describedby': errorId }),
      button('Remove', () => void removeDomain(domain), { class: 'danger', 'aria-label': `Remove ${domain.domain}` })));
}

async function verify(domain: TenantDomain, errorId: string): Promise<void> {
  if (!selected) return;
  const line = byId(errorId);
  line.hidden = true;
  try {
    await adminApi.verifyDomain(selected.app.id, selected.tenant.id, domain.id);
    notify(`Verified ${domain.domain}: its people are sent to the tenant's provider.`);
    await loadDomains();
  } catch (error) {
    notifyError(error);
    line.textContent = (error as Error).message;
    line.hidden = false;
  }
}

async function removeDomain(domain: TenantDomain): Promise<void> {
  if (!selected || !confirm(`Remove ${domain.domain} from ${selected.tenant.name}?`)) return;
  try {
    await adminApi.removeDomain(selected.app.id, selected.tenant.id, domain.id);
    notify(`Removed ${domain.domain}.`);
    await loadDomains();
  } catch (error) {
    notifyError(error);
  }
}

export function wireSso(): void {
  form = providerForm('sso', { tenant: true, submitLabel: 'Add SSO provider' });
  byId('sso-form-slot').replaceWith(form.form);
  form.form.addEventListener('submit', (event) => {
    event.preventDefault();
    void saveProvider();
  });
  const domainForm = byId<HTMLFormElement>('domain-form');
  domainForm.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!selected) return;
    try {
      const claimed = await adminApi.claimDomain(selected.app.id, selected.tenant.id, byId<HTMLInputElement>('domain-name').value.trim());
      domainForm.reset();
      clearFormErrors(domainForm);
      notify(`Claimed ${claimed.domain}: publish its TXT record, then verify.`);
      await loadDomains();
    } catch (error) {
      showFormError(domainForm, error, { domain: 'domain-name', DOMAIN_CLAIMED: 'domain-name' });
    }
  });
}

export function clearSso(): void {
  selected = null;
  form?.fill(null);
  byId('sso-provider-list').replaceChildren();
  byId('domain-list').replaceChildren();
  byId('sso').hidden = true;
}
