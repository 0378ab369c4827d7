// The form of an upstream identity provider, built for two places: an app's sign-in providers
// (upstream.ts) and a tenant's own SSO provider (sso.ts), each with its own id prefix. A preset
// (Google, Microsoft Entra ID, Apple, GitHub, or any OpenID Connect issuer) fills the button label
// and shows the fields its kind takes. The client secret is write-only: the API never shows it,
// and an edit that leaves it empty keeps the stored one.
import type { UpstreamKind, UpstreamProvider, UpstreamProviderFields } from './api.js';
import { el } from './dom.js';
import { clearFormErrors, lines, words } from './form-errors.js';

export const PRESETS: Array<{ kind: UpstreamKind; name: string; label: string }> = [
  { kind: 'google', name: 'Google', label: 'Sign in with Google' },
  { kind: 'entra', name: 'Microsoft Entra ID', label: 'Sign in with Microsoft' },
  { kind: 'apple', name: 'Apple', label: 'Sign in with Apple' },
  { kind: 'github', name: 'GitHub', label: 'Sign in with GitHub' },
  { kind: 'oidc', name: 'Any OpenID Connect issuer', label: 'Sign in with SSO' },
];
const ROLES = ['viewer', 'staff', 'admin', 'owner'];

export interface ProviderForm {
  form: HTMLFormElement;
  /** API field → control id, for showFormError. */
  fields: Record<string, string>;
  /** Empties the form for a new provider, or fills it with `provider` for an edit. */
  fill(provider: UpstreamProvider | null): void;
  values(): UpstreamProviderFields;
  editing(): UpstreamProvider | null;
}

function field(id: string, label: string, control: HTMLElement, hint?: string): HTMLDivElement {
  const described = [hint ? `${id}-hint` : '', `${id}-error`].filter(Boolean).join(' ');
  control.id = id;
  control.setAttribute('aria-describedby', described);
  return el('div', { class: 'field', id: `${id}-field` },
    el('label', { for: id }, label), control,
    hint ? el('p', { class: 'hint', id: `${id}-hint` }, hint) : null,
    el('p', { class: 'field-error', id: `${id}-error`, hidden: '' }));
}

const text = (name: string, attrs: Record<string, string> = {}): HTMLInputElement => el('input', { name, autocomplete: 'off', ...attrs });

export function providerForm(prefix: string, options: { tenant: boolean; submitLabel: string }): ProviderForm {
  const id = (name: string): string => `${prefix}-${name}`;
  let current: UpstreamProvider | null = null;
  const kind = el('select', { name: 'kind' }, ...PRESETS.map((p) => el('option', { value: p.kind }, p.name)));
  const label = text('label', { required: '', maxlength: '64' });
  const clientId = text('client_id', { required: '', maxlength: '256' });
  const secret = text('client_secret', { type: 'password', autocomplete: 'new-password' });
  const discovery = text('discovery_url', { inputmode: 'url' });
  const scopes = text('scopes');
  const redirects = el('textarea', { name: 'redirect_uris', rows: '2' });
  const domains = text('trusted_email_domains');
  const entraTenants = text('entra_tenants');
  const appleTeam = text('apple_team_id', { maxlength: '10' });
  const appleKey = text('apple_key_id', { maxlength: '10' });
  const applePrivate = el('textarea', { name: 'apple_private_key', rows: '3' });
  const role = el('select', { name: 'default_role' }, ...ROLES.map((r) => el('option', { value: r }, r)));
  const requireSso = el('input', { type: 'checkbox', name: 'require_sso', id: id('require-sso'), 'aria-describedby': `${id('require-sso')}-error` });
  const formHeading = el('h3', { id: id('form-heading') }, 'New provider');
  const submit = el('button', { type: 'submit', class: 'primary', id: id('submit') }, options.submitLabel);
  const cancel = el('button', { type: 'button', id: id('cancel'), hidden: '' }, 'Cancel editing');
  const apple = el('fieldset', { class: 'group', id: id('apple'), 'aria-describedby': `${id('apple')}-error` },
    el('legend', {}, 'Apple key (the .p8 file from Apple)'),
    field(id('apple-team'), 'Team id', appleTeam), field(id('apple-key-id'), 'Key id', appleKey),
    field(id('apple-private-key'), 'Private key (PEM)', applePrivate, 'Write-only: an edit that leaves it empty keeps the stored key.'));
  const form = el('form', { class: 'stacked-form', id: id('form'), 'aria-labelledby': id('form-heading') },
    formHeading,
    field(id('kind'), 'Provider', kind, 'A preset fills the label, the discovery document and the scopes its kind needs.'),
    field(id('label'), 'Button label', label),
    field(id('client-id'), 'Client id (from the provider)', clientId),
    field(id('secret'), 'Client secret', secret, 'Write-only: it is stored encrypted and never shown; an edit that leaves it empty keeps the stored one.'),
    field(id('discovery'), 'Discovery URL (empty: the preset\'s)', discovery),
    field(id('scopes'), 'Scopes (separated by spaces; empty: the preset\'s)', scopes),
    field(id('redirect-uris'), 'Redirect URIs of your app (one per line)', redirects),
    options.tenant ? null : field(id('domains'), 'Trusted e-mail domains (separated by spaces)', domains, 'Addresses in these domains join an existing user only when the provider says they are verified.'),
    field(id('entra-tenants'), 'Entra tenant ids allowed (separated by spaces; empty: any)', entraTenants),
    apple,
    el('p', { class: 'field-error', id: `${id('apple')}-error`, hidden: '' }),
    options.tenant ? field(id('default-role'), 'Role of a person\'s first sign-in', role) : null,
    options.tenant ? el('label', { class: 'check' }, requireSso, 'Require SSO: code and passkey logins are refused for the tenant\'s verified domains') : null,
    options.tenant ? el('p', { class: 'field-error', id: `${id('require-sso')}-error`, hidden: '' }) : null,
    el('p', { class: 'form-error', role: 'alert', hidden: '' }),
    el('div', { class: 'row' }, submit, cancel));

  const show = (): void => {
    const k = kind.value as UpstreamKind;
    (form.querySelector(`#${id('discovery')}-field`) as HTMLElement).hidden = k === 'github';
    (form.querySelector(`#${id('secret')}-field`) as HTMLElement).hidden = k === 'apple';
    (form.querySelector(`#${id('entra-tenants')}-field`) as HTMLElement).hidden = k !== 'entra';
    apple.hidden = k !== 'apple';
    discovery.placeholder = k === 'oidc' ? 'https://idp.example/.well-known/openid-configuration' : '';
  };
  kind.addEventListener('change', () => {
    const preset = PRESETS.find((p) => p.kind === kind.value)!;
    if (!current && (label.value === '' || PRESETS.some((p) => p.label === label.value))) label.value = preset.label;
    show();
  });

  const fill = (provider: UpstreamProvider | null): void => {
    current = provider;
    form.reset();
    clearFormErrors(form);
    kind.disabled = provider !== null;
    formHeading.textContent = provider ? `Edit ${provider.label}` : 'New provider';
    submit.textContent = provider ? 'Save provider' : options.submitLabel;
    cancel.hidden = provider === null;
    if (!provider) {
      label.value = PRESETS[0]!.label;
      show();
      return;
    }
    kind.value = provider.kind;
    label.value = provider.label;
    clientId.value = provider.client_id;
    secret.placeholder = provider.has_client_secret ? 'stored; type to replace it' : '';
    discovery.value = provider.discovery_url ?? '';
    scopes.value = provider.scopes.join(' ');
    redirects.value = provider.redirect_uris.join('\n');
    domains.value = provider.trusted_email_domains.join(' ');
    entraTenants.value = provider.entra?.tenants.join(' ') ?? '';
    appleTeam.value = provider.apple?.team_id ?? '';
    appleKey.value = provider.apple?.key_id ?? '';
    role.value = provider.default_role ?? 'viewer';
    requireSso.checked = provider.require_sso;
    show();
  };

  const values = (): UpstreamProviderFields => {
    const k = kind.value as UpstreamKind;
    const list = words(scopes.value);
    const trusted = words(domains.value);
    return {
      kind: k,
      label: label.value.trim(),
      client_id: clientId.value.trim(),
      ...(k !== 'apple' && secret.value !== '' ? { client_secret: secret.value } : {}),
      ...(k !== 'github' && discovery.value.trim() ? { discovery_url: discovery.value.trim() } : {}),
      ...(list.length ? { scopes: list } : {}),
      redirect_uris: lines(redirects.value),
      ...(!options.tenant && trusted.length ? { trusted_email_domains: trusted } : {}),
      ...(k === 'entra' ? { entra: { tenants: words(entraTenants.value) } } : {}),
      ...(k === 'apple' && (applePrivate.value.trim() || !current)
        ? { apple: { team_id: appleTeam.value.trim(), key_id: appleKey.value.trim(), private_key: applePrivate.value.trim() } } : {}),
      ...(k === 'github' && current?.github ? { github: current.github } : {}),
      ...(options.tenant ? { default_role: role.value, require_sso: requireSso.checked } : {}),
    } as UpstreamProviderFields;
  };

  const fields: Record<string, string> = {
    kind: id('kind'), label: id('label'), client_id: id('client-id'), client_secret: id('secret'), discovery_url: id('discovery'), scopes: id('scopes'),
    redirect_uris: id('redirect-uris'), entra: id('entra-tenants'), apple: id('apple'), default_role: id('default-role'), require_sso: id('require-sso'),
    ...(options.tenant ? {} : { trusted_email_domains: id('domains') }),
  };
  cancel.addEventListener('click', () => { fill(null); label.focus(); });
  fill(null);
  return { form, fields, fill, values, editing: () => current };
}
