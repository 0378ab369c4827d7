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

interface Controls {
  kind: HTMLSelectElement; label: HTMLInputElement; clientId: HTMLInputElement; secret: HTMLInputElement; discovery: HTMLInputElement;
  scopes: HTMLInputElement; redirects: HTMLTextAreaElement; domains: HTMLInputElement; entraTenants: HTMLInputElement;
  appleTeam: HTMLInputElement; appleKey: HTMLInputElement; applePrivate: HTMLTextAreaElement; role: HTMLSelectElement; requireSso: HTMLInputElement;
  heading: HTMLHeadingElement; submit: HTMLButtonElement; cancel: HTMLButtonElement; apple: HTMLFieldSetElement;
}

function makeControls(id: (name: string) => string, submitLabel: string): Controls {
  const c = {
    kind: el('select', { name: 'kind' }, ...PRESETS.map((p) => el('option', { value: p.kind }, p.name))),
    label: text('label', { required: '', maxlength: '64' }),
    clientId: text('client_id', { required: '', maxlength: '256' }),
    secret: text('client_secret', { type: 'password', autocomplete: 'new-password' }),
    discovery: text('discovery_url', { inputmode: 'url' }),
    scopes: text('scopes'),
    redirects: el('textarea', { name: 'redirect_uris', rows: '2' }),
    domains: text('trusted_email_domains'),
    entraTenants: text('entra_tenants'),
    appleTeam: text('apple_team_id', { maxlength: '10' }),
    appleKey: text('apple_key_id', { maxlength: '10' }),
    applePrivate: el('textarea', { name: 'apple_private_key', rows: '3' }),
    role: el('select', { name: 'default_role' }, ...ROLES.map((r) => el('option', { value: r }, r))),
    requireSso: el('input', { type: 'checkbox', name: 'require_sso', id: id('require-sso'), 'aria-describedby': `${id('require-sso')}-error` }),
    heading: el('h3', { id: id('form-heading') }, 'New provider'),
    submit: el('button', { type: 'submit', class: 'primary', id: id('submit') }, submitLabel),
    cancel: el('button', { type: 'button', id: id('cancel'), hidden: '' }, 'Cancel editing'),
  };
  const apple = el('fieldset', { class: 'group', id: id('apple'), 'aria-describedby': `${id('apple')}-error` },
    el('legend', {}, 'Apple key (the .p8 file from Apple)'),
    field(id('apple-team'), 'Team id', c.appleTeam), field(id('apple-key-id'), 'Key id', c.appleKey),
    field(id('apple-private-key'), 'Private key (PEM)', c.applePrivate, 'Write-only: an edit that leaves it empty keeps the stored key.'));
  return { ...c, apple };
}

function layout(c: Controls, id: (name: string) => string, tenant: boolean): HTMLFormElement {
  return el('form', { class: 'stacked-form', id: id('form'), 'aria-labelledby': id('form-heading') },
    c.heading,
    field(id('kind'), 'Provider', c.kind, 'A preset fills the label, the discovery document and the scopes its kind needs.'),
    field(id('label'), 'Button label', c.label),
    field(id('client-id'), 'Client id (from the provider)', c.clientId),
    field(id('secret'), 'Client secret', c.secret, 'Write-only: it is stored encrypted and never shown; an edit that leaves it empty keeps the stored one.'),
    field(id('discovery'), 'Discovery URL (empty: the preset\'s)', c.discovery),
    field(id('scopes'), 'Scopes (separated by spaces; empty: the preset\'s)', c.scopes),
    field(id('redirect-uris'), 'Redirect URIs of your app (one per line)', c.redirects),
    tenant ? null : field(id('domains'), 'Trusted e-mail domains (separated by spaces)', c.domains, 'Addresses in these domains join an existing user only when the provider says they are verified.'),
    field(id('entra-tenants'), 'Entra tenant ids allowed (separated by spaces; empty: any)', c.entraTenants),
    c.apple,
    el('p', { class: 'field-error', id: `${id('apple')}-error`, hidden: '' }),
    tenant ? field(id('default-role'), 'Role of a person\'s first sign-in', c.role) : null,
    tenant ? el('label', { class: 'check' }, c.requireSso, 'Require SSO: code and passkey logins are refused for the tenant\'s verified domains') : null,
    tenant ? el('p', { class: 'field-error', id: `${id('require-sso')}-error`, hidden: '' }) : null,
    el('p', { class: 'form-error', role: 'alert', hidden: '' }),
    el('div', { class: 'row' }, c.submit, c.cancel));
}

/** Shows the fields the chosen kind takes. */
function showKind(form: HTMLFormElement, c: Controls, id: (name: string) => string): void {
  const k = c.kind.value as UpstreamKind;
  (form.querySelector(`#${id('discovery')}-field`) as HTMLElement).hidden = k === 'github';
  (form.querySelector(`#${id('secret')}-field`) as HTMLElement).hidden = k === 'apple';
  (form.querySelector(`#${id('entra-tenants')}-field`) as HTMLElement).hidden = k !== 'entra';
  c.apple.hidden = k !== 'apple';
  c.discovery.placeholder = k === 'oidc' ? 'https://idp.example/.well-known/openid-configuration' : '';
}

function fillControls(c: Controls, provider: UpstreamProvider): void {
  c.kind.value = provider.kind;
  c.label.value = provider.label;
  c.clientId.value = provider.client_id;
  c.secret.placeholder = provider.has_client_secret ? 'stored; type to replace it' : '';
  c.discovery.value = provider.discovery_url ?? '';
  c.scopes.value = provider.scopes.join(' ');
  c.redirects.value = provider.redirect_uris.join('\n');
  c.domains.value = provider.trusted_email_domains.join(' ');
  c.entraTenants.value = provider.entra?.tenants.join(' ') ?? '';
  c.appleTeam.value = provider.apple?.team_id ?? '';
  c.appleKey.value = provider.apple?.key_id ?? '';
  c.role.value = provider.default_role ?? 'viewer';
  c.requireSso.checked = provider.require_sso;
}

function readControls(c: Controls, tenant: boolean, current: UpstreamProvider | null): UpstreamProviderFields {
  const k = c.kind.value as UpstreamKind;
  const scopes = words(c.scopes.value);
  const trusted = words(c.domains.value);
  return {
    kind: k,
    label: c.label.value.trim(),
    client_id: c.clientId.value.trim(),
    ...(k !== 'apple' && c.secret.value !== '' ? { client_secret: c.secret.value } : {}),
    ...(k !== 'github' && c.discovery.value.trim() ? { discovery_url: c.discovery.value.trim() } : {}),
    ...(scopes.length ? { scopes } : {}),
    redirect_uris: lines(c.redirects.value),
    ...(!tenant && trusted.length ? { trusted_email_domains: trusted } : {}),
    ...(k === 'entra' ? { entra: { tenants: words(c.entraTenants.value) } } : {}),
    ...(k === 'apple' && (c.applePrivate.value.trim() || !current)
      ? { apple: { team_id: c.appleTeam.value.trim(), key_id: c.appleKey.value.trim(), private_key: c.applePrivate.value.trim() } } : {}),
    ...(k === 'github' && current?.github ? { github: current.github } : {}),
    ...(tenant ? { default_role: c.role.value, require_sso: c.requireSso.checked } : {}),
  };
}

export function providerForm(prefix: string, options: { tenant: boolean; submitLabel: string }): ProviderForm {
  const id = (name: string): string => `${prefix}-${name}`;
  const c = makeControls(id, options.submitLabel);
  const form = layout(c, id, options.tenant);
  let current: UpstreamProvider | null = null;
  c.kind.addEventListener('change', () => {
    const preset = PRESETS.find((p) => p.kind === c.kind.value)!;
    if (!current && (c.label.value === '' || PRESETS.some((p) => p.label === c.label.value))) c.label.value = preset.label;
    showKind(form, c, id);
  });
  const fill = (provider: UpstreamProvider | null): void => {
    current = provider;
    form.reset();
    clearFormErrors(form);
    c.kind.disabled = provider !== null;
    c.heading.textContent = provider ? `Edit ${provider.label}` : 'New provider';
    c.submit.textContent = provider ? 'Save provider' : options.submitLabel;
    c.cancel.hidden = provider === null;
    if (provider) fillControls(c, provider);
    else c.label.value = PRESETS[0]!.label;
    showKind(form, c, id);
  };
  const fields: Record<string, string> = {
    kind: id('kind'), label: id('label'), client_id: id('client-id'), client_secret: id('secret'), discovery_url: id('discovery'), scopes: id('scopes'),
    redirect_uris: id('redirect-uris'), entra: id('entra-tenants'), apple: id('apple'), default_role: id('default-role'), require_sso: id('require-sso'),
    ...(options.tenant ? {} : { trusted_email_domains: id('domains') }),
  };
  c.cancel.addEventListener('click', () => { fill(null); c.label.focus(); });
  fill(null);
  return { form, fields, fill, values: () => readControls(c, options.tenant, current), editing: () => current };
}
