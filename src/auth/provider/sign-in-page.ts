// The hosted sign-in page, rendered on the server: plain HTML forms that work without
// JavaScript (the passkey button alone needs its script, sign-in-script.ts), one column that fits 360 px, labels on every field, errors in words in a live
// region that screen readers announce. Every value written into the page goes through `escape`.
//
// The ways to sign in are listed in one place, SIGN_IN_METHODS: a new way (a passkey button, an
// upstream identity provider) is one more entry there.
import type { HttpResult } from '../../http/request.js';

export interface SignInView {
  /** The app's display name and the client asking (its own name). */
  appName: string;
  /** The app's colour (#rrggbb) for the buttons, or null. */
  color: string | null;
  clientName: string;
  /** The sign-in in progress and its CSRF token, carried by every form. */
  requestId: string;
  csrf: string;
  /**
   * `address`: ask for an e-mail address; `code`: ask for the code sent to it; `second-factor`:
   * ask for the code of the user's authenticator app (or a recovery code); `enroll`: the policy
   * requires a second factor the user lacks: show the new key and ask for its first code;
   * `sso`: the address is in a tenant's verified domain: offer (or, required, only offer) the
   * tenant's identity provider.
   */
  step: 'address' | 'code' | 'second-factor' | 'enroll' | 'sso';
  /** Pre-filled address (login_hint, or the address or number the code went to). */
  email: string;
  /** Where the code went (the code step): an e-mail address or a phone number. */
  channel?: 'email' | 'phone';
  /** The app's identity providers (not a tenant's), one button each on the address step; the label is the button's text. */
  providers?: { id: string; label: string }[];
  /** The sso step: the provider of the address's tenant, and whether the tenant requires it. */
  sso?: { providerId: string; label: string; required: boolean };
  /** The app has a relying party for passkeys: the address step offers a passkey. */
  passkeys?: boolean;
  /** The key to add to an authenticator app (the enroll step). */
  totp?: { secret: string; uri: string };
  /** An error to show, in words. */
  error: string | null;
}

/** One way to sign in: its part of the page for the view's step, or '' when it has nothing to show. */
type SignInMethod = (view: SignInView) => string;

const emailCode: SignInMethod = (view) => view.step !== 'address' && view.step !== 'code' ? '' : view.step === 'address'
  ? `<form method="post" action="/oauth/sign-in/email">
  ${hiddenFields(view)}
  <label for="email">E-mail address</label>
  <input id="email" name="email" type="email" autocomplete="email" required value="${escape(view.email)}"${view.error ? ' aria-describedby="error"' : ''}>
  <button type="submit">Send me a code</button>
</form>`
  : `<form method="post" action="/oauth/sign-in/code">
  ${hiddenFields(view)}
  <p>We sent a code to <strong>${escape(view.email)}</strong>.</p>
  <label for="code">Code</label>
  <input id="code" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required${view.error ? ' aria-describedby="error"' : ''}>
  <button type="submit">Sign in</button>
</form>
<form method="post" action="/oauth/sign-in/email">
  ${hiddenFields(view)}
  <input type="hidden" name="${view.channel === 'phone' ? 'phone' : 'email'}" value="${escape(view.email)}">
  <input type="hidden" name="code_anyway" value="1">
  <button type="submit" class="secondary">Send a new code</button>
</form>`;

/** A code by SMS: on the address step only (the code step is emailCode's, whatever the channel). */
const phoneCode: SignInMethod = (view) => view.step !== 'address' ? '' : `<form method="post" action="/oauth/sign-in/email">
  ${hiddenFields(view)}
  <label for="phone">Or a mobile number</label>
  <input id="phone" name="phone" type="tel" autocomplete="tel" inputmode="tel" placeholder="+44 7700 900123" required>
  <button type="submit" class="secondary">Text me a code</button>
</form>`;

/**
 * A passkey (the app's relying party set): a form the page's script shows when the browser has
 * WebAuthn, and fills with the assertion (sign-in-script.ts). A passkey with user verification is
 * both factors: no second step follows.
 */
const passkey: SignInMethod = (view) => view.step !== 'address' || !view.passkeys ? '' : `<form id="passkey-form" method="post" action="/oauth/sign-in/passkey" hidden>
  ${hiddenFields(view)}
  <input type="hidden" name="ceremony" value="">
  <input type="hidden" name="response" value="">
  <button type="submit" id="passkey">Sign in with a passkey</button>
</form>
<script src="/oauth/sign-in.js" defer></script>`;

/** The app's upstream identity providers: a button each, which sends the browser to the provider. */
const upstreamProviders: SignInMethod = (view) => view.step !== 'address' || !view.providers?.length ? '' : view.providers.map((provider) => `<form method="post" action="/oauth/sign-in/upstream">
  ${hiddenFields(view)}
  <input type="hidden" name="provider" value="${escape(provider.id)}">
  <button type="submit" class="provider">${escape(provider.label)}</button>
</form>`).join('\n');

/**
 * Home-realm discovery: the address is in a domain a tenant of the app proved; its identity
 * provider is offered. A tenant that requires it gets no code sent to its addresses, and says so.
 */
const ssoRedirect: SignInMethod = (view) => view.step !== 'sso' || !view.sso ? '' : `<form method="post" action="/oauth/sign-in/upstream">
  ${hiddenFields(view)}
  <p><strong>${escape(view.email)}</strong> signs in with your organisation's identity provider.${view.sso.required
    ? ' Your organisation requires it: we do not send sign-in codes to its addresses.' : ''}</p>
  <input type="hidden" name="provider" value="${escape(view.sso.providerId)}">
  <button type="submit" id="sso">${escape(view.sso.label)}</button>
</form>${view.sso.required ? '' : `
<form method="post" action="/oauth/sign-in/email">
  ${hiddenFields(view)}
  <input type="hidden" name="email" value="${escape(view.email)}">
  <input type="hidden" name="code_anyway" value="1">
  <button type="submit" class="secondary">Send me a code instead</button>
</form>`}`;

/** The second step of a code sign-in: the authenticator app's code, or one of the recovery codes. */
const secondFactor: SignInMethod = (view) => view.step !== 'second-factor' ? '' : `<form method="post" action="/oauth/sign-in/second-factor">
  ${hiddenFields(view)}
  <p>Your account has a second factor. Open your authenticator app and enter the code it shows for ${escape(view.appName)}.</p>
  <label for="totp">Authenticator code</label>
  <input id="totp" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required${view.error ? ' aria-describedby="error"' : ''}>
  <button type="submit">Verify</button>
</form>
<form method="post" action="/oauth/sign-in/second-factor">
  ${hiddenFields(view)}
  <label for="recovery">Or a recovery code</label>
  <input id="recovery" name="recovery_code" autocomplete="off" spellcheck="false" placeholder="xxxxx-xxxxx" required>
  <button type="submit" class="secondary">Use a recovery code</button>
</form>`;

/**
 * A code sign-in under a policy that requires a second factor the user has not set up: the key
 * to add to an authenticator app (as text, and as an otpauth: link that opens one on this
 * device), then its first code, as the JSON API's enrolment during a login does.
 */
const totpEnrollment: SignInMethod = (view) => view.step !== 'enroll' || !view.totp ? '' : `<form method="post" action="/oauth/sign-in/second-factor/enroll">
  ${hiddenFields(view)}
  <h2>Set up a second factor</h2>
  <p>${escape(view.appName)} asks for a code from an authenticator app each time you sign in, and your account has none yet.
  Add this key to an authenticator app, then enter the 6-digit code it shows.</p>
  <p>Key: <code id="totp-key">${escape(view.totp.secret.replace(/(.{4})/g, '$1 ').trim())}</code></p>
  <p><a href="${escape(view.totp.uri)}">Open in an authenticator app on this device</a></p>
  <label for="totp">Authenticator code</label>
  <input id="totp" name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9]{6}" maxlength="6" required${view.error ? ' aria-describedby="error"' : ''}>
  <button type="submit">Turn on and sign in</button>
</form>`;

/** The ways to sign in, in the order the page shows them. */
export const SIGN_IN_METHODS: readonly SignInMethod[] = [emailCode, phoneCode, passkey, upstreamProviders, ssoRedirect, secondFactor, totpEnrollment];

export function renderSignInPage(view: SignInView, status = 200): HttpResult {
  const methods = SIGN_IN_METHODS.map((method) => method(view)).filter((part) => part !== '').join('\n');
  return page(status, `Sign in to ${view.appName}`, `${brandStyle(view.color)}<h1>Sign in to ${escape(view.appName)}</h1>
<p>to continue to <strong>${escape(view.clientName)}</strong></p>
${errorBlock(view.error)}
${methods}`);
}

export interface RecoveryCodesView {
  appName: string;
  color: string | null;
  recoveryCodes: string[];
  requestId: string;
  csrf: string;
}

/** After an enrolment on the page: the ten recovery codes, shown once, then Continue. */
export function renderRecoveryCodes(view: RecoveryCodesView): HttpResult {
  const items = view.recoveryCodes.map((code) => `<li><code>${escape(code)}</code></li>`).join('\n');
  return page(200, 'Save your recovery codes', `${brandStyle(view.color)}<h1>Save your recovery codes</h1>
${errorBlock(null)}
<p>Your second factor is on. If you lose your authenticator app, each of these codes signs you in once instead of its code.
Keep them somewhere safe: they are not shown again.</p>
<ul id="recovery-codes">
${items}
</ul>
<form method="post" action="/oauth/sign-in/continue">
  <input type="hidden" name="request" value="${escape(view.requestId)}">
  <input type="hidden" name="csrf" value="${escape(view.csrf)}">
  <button type="submit">I saved them, continue</button>
</form>`);
}

/**
 * A provider's form_post answer handed back to the browser as a form of this site (so its post
 * carries the browser's cookie): one button, Continue.
 */
export function renderUpstreamContinue(fields: [string, string][]): HttpResult {
  const hidden = fields.map(([name, value]) => `<input type="hidden" name="${escape(name)}" value="${escape(value)}">`).join('\n  ');
  return page(200, 'Finish signing in', `<h1>Finish signing in</h1>
${errorBlock(null)}
<p>The identity provider has answered. Continue to finish signing in.</p>
<form method="post" action="/oauth/upstream/callback/continue">
  ${hidden}
  <button type="submit" id="continue">Continue</button>
</form>`);
}

export interface ConsentView {
  appName: string;
  color: string | null;
  clientName: string;
  scopes: string[];
  requestId: string;
  csrf: string;
}

/** What each scope lets the client do, in words; an app's own scopes are shown by name. */
const SCOPE_WORDS: Record<string, string> = {
  openid: 'Know who you are',
  profile: 'See your profile',
  email: 'See your e-mail address',
  phone: 'See your phone number',
  offline_access: 'Stay signed in when you are away',
};

/** The consent page of a third-party client: what it asks for, Allow and Deny. */
export function renderConsentPage(view: ConsentView): HttpResult {
  const items = view.scopes.map((scope) => `<li>${escape(SCOPE_WORDS[scope] ?? scope)}</li>`).join('\n');
  return page(200, `Allow ${view.clientName}?`, `${brandStyle(view.color)}<h1>Allow ${escape(view.clientName)} to use your ${escape(view.appName)} account?</h1>
${errorBlock(null)}
<p><strong>${escape(view.clientName)}</strong> is not made by ${escape(view.appName)}. It asks to:</p>
<ul>
${items || '<li>Know that you signed in</li>'}
</ul>
<form method="post" action="/oauth/consent">
  <input type="hidden" name="request" value="${escape(view.requestId)}">
  <input type="hidden" name="csrf" value="${escape(view.csrf)}">
  <button type="submit" name="decision" value="allow">Allow</button>
  <button type="submit" name="decision" value="deny" class="secondary">Deny</button>
</form>`);
}

export interface TenantPickerView {
  appName: string;
  color: string | null;
  tenants: { id: string; name: string }[];
  requestId: string;
  csrf: string;
}

/** The tenant picker: a user with roles in several tenants chooses the one to sign in to. */
export function renderTenantPicker(view: TenantPickerView): HttpResult {
  const options = view.tenants.map((tenant, i) => `<div class="choice">
  <input type="radio" id="tenant-${i}" name="tenant" value="${escape(tenant.id)}"${i === 0 ? ' checked' : ''}>
  <label for="tenant-${i}">${escape(tenant.name)}</label>
</div>`).join('\n');
  return page(200, `Choose an organisation`, `${brandStyle(view.color)}<h1>Which ${escape(view.appName)} organisation?</h1>
${errorBlock(null)}
<form method="post" action="/oauth/tenant">
  <input type="hidden" name="request" value="${escape(view.requestId)}">
  <input type="hidden" name="csrf" value="${escape(view.csrf)}">
  <fieldset>
  <legend>Sign in to</legend>
  ${options}
  </fieldset>
  <button type="submit">Continue</button>
</form>`);
}

/** A page that only says something went wrong (a request that cannot be sent back to its client). */
export function renderErrorPage(status: number, title: string, message: string): HttpResult {
  return page(status, title, `<h1>${escape(title)}</h1>\n${errorBlock(message)}`);
}

/** The page of an RP-initiated logout without a registered place to go back to. */
export function renderSignedOutPage(): HttpResult {
  return page(200, 'Signed out', '<h1>You are signed out</h1>\n<p>You can close this window.</p>');
}

/**
 * The app's colour on the buttons, with white or near-black text, whichever contrasts more
 * (WCAG relative luminance), so a light brand colour stays readable. Only #rrggbb reaches here
 * (the column's check), so the value needs no escaping.
 */
export function brandStyle(color: string | null): string {
  if (color === null || !/^#[0-9a-f]{6}$/.test(color)) return '';
  const channel = (i: number) => {
    const c = parseInt(color.slice(1 + 2 * i, 3 + 2 * i), 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  };
  const luminance = 0.2126 * channel(0) + 0.7152 * channel(1) + 0.0722 * channel(2);
  const text = 1.05 / (luminance + 0.05) >= (luminance + 0.05) / 0.05 ? '#ffffff' : '#111111';
  return `<style>button:not(.secondary){background:${color};color:${text}}button.secondary{color:${color}}</style>\n`;
}

function hiddenFields(view: SignInView): string {
  return `<input type="hidden" name="request" value="${escape(view.requestId)}">
  <input type="hidden" name="csrf" value="${escape(view.csrf)}">`;
}

function errorBlock(error: string | null): string {
  // The region is always there, so a screen reader announces the error when it appears.
  return `<div id="error" role="alert" aria-live="assertive">${error ? `<p class="error">${escape(error)}</p>` : ''}</div>`;
}

const STYLE = `body{font-family:system-ui,sans-serif;margin:0;padding:1rem;background:#f6f7f9;color:#1b1f24}
main{max-width:26rem;margin:2rem auto;background:#fff;padding:1.5rem;border-radius:.5rem;box-shadow:0 1px 3px #0002}
h1{font-size:1.4rem;margin-top:0}label{display:block;font-weight:600;margin:.75rem 0 .25rem}
input{box-sizing:border-box;width:100%;padding:.6rem;font-size:1rem;border:1px solid #8a939e;border-radius:.3rem}
button{margin-top:1rem;width:100%;padding:.7rem;font-size:1rem;border:0;border-radius:.3rem;background:#1f5fbf;color:#fff;cursor:pointer}
fieldset{border:0;padding:0;margin:0}.choice{display:flex;align-items:center;gap:.5rem;margin:.5rem 0}
.choice input{width:auto}.choice label{margin:0;font-weight:400}
button.secondary{background:none;color:#1f5fbf;text-decoration:underline}
:focus-visible{outline:3px solid #f0a500;outline-offset:2px}.error{color:#a4161a;font-weight:600}
h2{font-size:1.1rem}code{font-size:1.05rem;overflow-wrap:anywhere}`;

function page(status: number, title: string, body: string): HttpResult {
  return {
    status,
    contentType: 'text/html; charset=utf-8',
    headers: {
      // The page is never framed (clickjacking) and loads nothing from elsewhere; its one script
      // is a file of its own origin (no inline script), which may call only its own origin.
      'Content-Security-Policy': "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
      'X-Frame-Options': 'DENY',
      'Referrer-Policy': 'no-referrer',
    },
    text: `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escape(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`,
  };
}

export function escape(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]!));
}
