// Apps (create, show the new secret once, rotate it) and the tenants of the selected app.
import { adminApi, type App, type Tenant } from './api.js';
import { button, byId, el, facts, when } from './dom.js';
import { notify, notifyError } from './notice.js';
import { selectApiKeysApp } from './api-keys.js';
import { selectMessagesApp } from './messages.js';
import { selectClientsApp } from './oauth-clients.js';
import { selectInvitationsTenant } from './invitations.js';
import { selectSecondFactorApp } from './second-factor.js';
import { selectSsoTenant } from './sso.js';
import { selectUpstreamApp } from './upstream.js';
import { selectSmsApp } from './sms.js';
import { selectWebhookApp } from './webhooks.js';

const TENANT_PAGE = 100;
let selected: App | null = null;
let tenantCount = 0;

export async function loadApps(): Promise<void> {
  const apps = await adminApi.listApps();
  byId('app-list').replaceChildren(...(apps.length ? apps.map(appItem) : [el('li', { class: 'empty' }, 'No apps yet.')]));
}

function appItem(app: App): HTMLLIElement {
  return el('li', { 'data-app-id': app.id },
    el('div', { class: 'item-head' }, el('strong', {}, app.name), el('span', { class: 'tag' }, app.slug)),
    facts([['Id', el('code', {}, app.id)], ['Created', when(app.created_at)], ['Secret rotated', when(app.secret_rotated_at)]]),
    el('div', { class: 'row' },
      button('Tenants', () => void selectApp(app), { 'aria-label': `Tenants of ${app.slug}` }),
      button('API keys', () => void selectApiKeysApp(app), { 'aria-label': `API keys of ${app.slug}` }),
      button('Webhooks', () => void selectWebhookApp(app), { 'aria-label': `Webhooks of ${app.slug}` }),
      button('OAuth clients', () => void selectClientsApp(app), { 'aria-label': `OAuth clients of ${app.slug}` }),
      button('Sign-in providers', () => void selectUpstreamApp(app), { 'aria-label': `Sign-in providers of ${app.slug}` }),
      button('Second factor', () => void selectSecondFactorApp(app), { 'aria-label': `Second factor of ${app.slug}` }),
      button('Messages', () => void selectMessagesApp(app), { 'aria-label': `Login code messages of ${app.slug}` }),
      button('SMS', () => void selectSmsApp(app), { 'aria-label': `SMS defences of ${app.slug}` }),
      button('Rotate secret', () => void rotateSecret(app), { 'aria-label': `Rotate the secret of ${app.slug}` })));
}

function showSecret(app: App & { app_secret: string }): void {
  byId('secret-app').textContent = app.slug;
  byId('secret-value').textContent = app.app_secret;
  byId('copy-secret').textContent = 'Copy secret';
  byId('secret-box').hidden = false;
  byId('copy-secret').focus();
}

async function rotateSecret(app: App): Promise<void> {
  if (!confirm(`Rotate the secret of "${app.slug}"? Its current secret stops working at once.`)) return;
  try {
    showSecret(await adminApi.rotateAppSecret(app.id));
    notify(`New secret for ${app.slug}; the old one no longer works.`);
    await loadApps();
  } catch (error) {
    notifyError(error);
  }
}

async function selectApp(app: App): Promise<void> {
  selected = app;
  byId('tenants-heading').textContent = `Tenants of ${app.slug}`;
  byId('tenants').hidden = false;
  byId('tenant-list').replaceChildren();
  tenantCount = 0;
  await loadTenants();
  byId('tenants-heading').focus();
}

async function loadTenants(): Promise<void> {
  if (!selected) return;
  try {
    const tenants = await adminApi.listTenants(selected.id, tenantCount, TENANT_PAGE);
    tenantCount += tenants.length;
    const list = byId('tenant-list');
    list.append(...tenants.map(tenantItem));
    if (tenantCount === 0) list.replaceChildren(el('li', { class: 'empty' }, 'No tenants yet.'));
    byId('more-tenants').hidden = tenants.length < TENANT_PAGE;
  } catch (error) {
    notifyError(error);
  }
}

function tenantItem(tenant: Tenant): HTMLLIElement {
  const app = selected!;
  return el('li', { 'data-tenant-id': tenant.id },
    el('div', { class: 'item-head' }, el('strong', {}, tenant.name)),
    facts([['Id', el('code', {}, tenant.id)], ['Created', when(tenant.created_at)]]),
    el('div', { class: 'row' },
      button('Invitations', () => void selectInvitationsTenant(app, tenant), { 'aria-label': `Invitations to ${tenant.name}` }),
      button('SSO', () => void selectSsoTenant(app, tenant), { 'aria-label': `SSO of ${tenant.name}` })));
}

export function wireApps(): void {
  byId<HTMLFormElement>('create-app').addEventListener('submit', async (event) => {
    event.preventDefault();
    const form = event.currentTarget as HTMLFormElement;
    const data = new FormData(form);
    try {
      const app = await adminApi.createApp(String(data.get('slug')).trim(), String(data.get('name')).trim());
      form.reset();
      notify(`Created app ${app.slug}.`);
      await loadApps();
      showSecret(app);
    } catch (error) {
      notifyError(error);
    }
  });
  byId('copy-secret').addEventListener('click', () => {
    void navigator.clipboard?.writeText(byId('secret-value').textContent ?? '').then(
      () => { byId('copy-secret').textContent = 'Copied'; },
      () => { byId('copy-secret').textContent = 'Copy failed: select the text'; });
  });
  byId('dismiss-secret').addEventListener('click', () => {
    byId('secret-value').textContent = '';
    byId('secret-box').hidden = true;
    byId('app-slug').focus();
  });
  byId<HTMLFormElement>('create-tenant').addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!selected) return;
    const form = event.currentTarget as HTMLFormElement;
    try {
      const tenant = await adminApi.createTenant(selected.id, String(new FormData(form).get('name')).trim());
      form.reset();
      notify(`Created tenant ${tenant.name} in ${selected.slug}.`);
      byId('tenant-list').replaceChildren();
      tenantCount = 0;
      await loadTenants();
    } catch (error) {
      notifyError(error);
    }
  });
  byId('more-tenants').addEventListener('click', () => void loadTenants());
}

/** Forgets the selected app and any secret on screen (sign-out). */
export function clearApps(): void {
  selected = null;
  byId('app-list').replaceChildren();
  byId('tenant-list').replaceChildren();
  byId('tenants').hidden = true;
  byId('secret-value').textContent = '';
  byId('secret-box').hidden = true;
}
