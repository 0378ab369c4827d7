// The second-factor policy of the selected app (off, optional or required) and of each of its
// tenants (its own, or the app's). Required: a code login must also give a TOTP code (or enroll
// one) before tokens are issued; optional: only users who enrolled one are asked.
import { adminApi, type App, type SecondFactorPolicies, type SecondFactorPolicy, type Tenant } from './api.js';
import { button, byId, el } from './dom.js';
import { notify, notifyError } from './notice.js';

let selected: App | null = null;
const POLICIES: SecondFactorPolicy[] = ['off', 'optional', 'required'];
const WORDS: Record<SecondFactorPolicy, string> = {
  off: 'off: codes and passkeys alone sign in',
  optional: 'optional: asked of users who enrolled a key',
  required: 'required: every code login needs the second factor',
};

export async function selectSecondFactorApp(app: App): Promise<void> {
  selected = app;
  byId('second-factor-heading').textContent = `Second factor of ${app.slug}`;
  byId('second-factor').hidden = false;
  try {
    const [policies, tenants] = await Promise.all([adminApi.getSecondFactorPolicies(app.id), adminApi.listTenants(app.id, 0, 100)]);
    show(policies, tenants);
  } catch (error) {
    notifyError(error);
  }
  byId('second-factor-heading').focus();
}

function show(policies: SecondFactorPolicies, tenants: Tenant[]): void {
  byId<HTMLSelectElement>('second-factor-app').value = policies.policy;
  const own = new Map(policies.tenants.map((t) => [t.tenant_id, t.policy]));
  byId('second-factor-tenants').replaceChildren(...(tenants.length ? tenants.map((tenant) => {
    const selectId = `second-factor-tenant-${tenant.id}`;
    const select = el('select', { id: selectId, 'data-tenant-id': tenant.id },
      el('option', { value: '' }, `the app's (${policies.policy})`), ...POLICIES.map((p) => el('option', { value: p }, WORDS[p])));
    select.value = own.get(tenant.id) ?? '';
    return el('li', { 'data-tenant-id': tenant.id },
      el('div', { class: 'field' }, el('label', { for: selectId }, `Tenant ${tenant.name}`), select),
      el('div', { class: 'row' }, button('Save', () => void saveTenant(tenant, select.value), { 'aria-label': `Save the second factor of tenant ${tenant.name}` })));
  }) : [el('li', { class: 'empty' }, 'No tenants yet.')]));
}

async function refresh(): Promise<void> {
  if (!selected) return;
  const [policies, tenants] = await Promise.all([adminApi.getSecondFactorPolicies(selected.id), adminApi.listTenants(selected.id, 0, 100)]);
  show(policies, tenants);
}

async function saveTenant(tenant: Tenant, value: string): Promise<void> {
  if (!selected) return;
  try {
    await adminApi.setTenantSecondFactorPolicy(selected.id, tenant.id, value === '' ? null : value as SecondFactorPolicy);
    notify(value === '' ? `Tenant ${tenant.name} follows the app's second-factor policy.` : `The second factor is ${value} in tenant ${tenant.name}.`);
    await refresh();
  } catch (error) {
    notifyError(error);
  }
}

export function wireSecondFactor(): void {
  byId('second-factor-app').append(...POLICIES.map((p) => el('option', { value: p }, WORDS[p])));
  byId<HTMLFormElement>('second-factor-form').addEventListener('submit', async (event) => {
    event.preventDefault();
    if (!selected) return;
    const policy = byId<HTMLSelectElement>('second-factor-app').value as SecondFactorPolicy;
    try {
      await adminApi.setAppSecondFactorPolicy(selected.id, policy);
      notify(`The second factor is ${policy} in ${selected.slug}.`);
      await refresh();
    } catch (error) {
      notifyError(error);
    }
  });
}

export function clearSecondFactor(): void {
  selected = null;
  byId('second-factor-tenants').replaceChildren();
  byId('second-factor').hidden = true;
}
