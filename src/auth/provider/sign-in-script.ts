// The hosted sign-in page's one script, served at GET /oauth/sign-in.js under the page's
// Content-Security-Policy (`script-src 'self'`: no inline script). It does what a form cannot:
// the passkey ceremony. The passkey form is hidden until the script finds WebAuthn; on submit it
// asks POST /oauth/sign-in/passkey/options (the form's request and CSRF token) for the
// ceremony, calls navigator.credentials.get, and submits the assertion with the form, which the
// server verifies through the passkey service. A refusal or a cancelled prompt is said in words in
// the page's alert region.

export const SIGN_IN_SCRIPT = `'use strict';
(() => {
  const form = document.getElementById('passkey-form');
  if (!form || !window.PublicKeyCredential || typeof PublicKeyCredential.parseRequestOptionsFromJSON !== 'function') return;
  form.hidden = false;
  const button = form.querySelector('button');
  const say = (text) => {
    const region = document.getElementById('error');
    const p = document.createElement('p');
    p.className = 'error';
    p.textContent = text;
    region.replaceChildren(p);
  };
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    button.disabled = true;
    try {
      const fields = new URLSearchParams({ request: form.elements.request.value, csrf: form.elements.csrf.value });
      const started = await fetch('/oauth/sign-in/passkey/options', { method: 'POST', body: fields, credentials: 'same-origin' });
      const answer = await started.json();
      if (!started.ok) {
        say(answer.message);
        return;
      }
      const credential = await navigator.credentials.get({ publicKey: PublicKeyCredential.parseRequestOptionsFromJSON(answer.options) });
      form.elements.ceremony.value = answer.ceremony_id;
      form.elements.response.value = JSON.stringify(credential.toJSON());
      form.submit();
    } catch (error) {
      say(error && error.name === 'NotAllowedError'
        ? 'The passkey sign-in was cancelled or timed out. Try again, or sign in with a code.'
        : 'This browser could not use a passkey here. Sign in with a code instead.');
    } finally {
      button.disabled = false;
    }
  });
})();
`;
