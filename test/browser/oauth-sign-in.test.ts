// The provider's hosted sign-in page in headless Chromium: an authorization request to a code
// in the browser (e-mail, code, consent for a third-party client; the tenant picker; the second factor; a passkey with Chromium's
// virtual authenticator; the app's upstream provider and a tenant's, oidc-provider as "Google"
// and "Okta", with the issuer's host http://auth.test mapped to the harness), the keyboard alone, every field labelled, an error in words announced
// in an alert region, no console errors or CSP violations, and no horizontal scrolling at 360 px.
import { createHash } from 'node:crypto';
import * as oidc from 'openid-client';
import type { HTTPRequest, Page } from 'puppeteer-core';
import t, { type Test } from 'tap';
import { startAuthHarness } from '../auth/fixtures/harness.js';
import { harnessFetch } from '../auth/fixtures/oauth-browser.js';
import { enrolTotp, totpCode } from '../auth/fixtures/totp.js';
import { startCertifiedProvider } from '../auth/fixtures/upstream-providers.js';
import { collectProblems, launchBrowser, overflowsHorizontally, screenshot, unlabelledControls } from '../helpers/browser.js';

const h = await startAuthHarness();
t.teardown(() => h.close());
// The issuer's URLs (http://auth.test/...) reach the harness, as an upstream provider's redirect back must.
const browser = await launchBrowser([`--host-resolver-rules=MAP auth.test ${new URL(h.base).host}`]);
t.teardown(() => browser.close());
const PAGE_CALLBACK = 'http://auth.test/oauth/upstream/callback';
const google = await startCertifiedProvider([{ client_id: 'notes-google', client_secret: 'google-secret', redirect_uris: [PAGE_CALLBACK] }]);
t.teardown(() => google.close());
const okta = await startCertifiedProvider([{ client_id: 'acme-okta', client_secret: 'okta-secret', redirect_uris: [PAGE_CALLBACK] }]);
t.teardown(() => okta.close());

const REDIRECT = 'https://notes.example/callback';
const challenge = createHash('sha256').update('v'.repeat(43)).digest('base64url');

/** A fresh browser context 360 px wide; requests to the client's site are answered here and recorded. */
async function openPage(): Promise<{ page: Page; problems: string[]; callbacks: string[] }> {
  const context = await browser.createBrowserContext();
  t.teardown(() => context.close());
  const page = await context.newPage();
  const problems = collectProblems(page);
  const callbacks: string[] = [];
  await page.setRequestInterception(true);
  page.on('request', (request: HTTPRequest) => {
    if (request.url().startsWith('https://notes.example/')) {
      callbacks.push(request.url());
      void request.respond({ status: 200, contentType: 'text/html', body: '<!doctype html><title>Notes</title><p>back</p>' });
    } else {
      void request.continue();
    }
  });
  await page.setViewport({ width: 360, height: 740 });
  return { page, problems, callbacks };
}

async function checkPage(t: Test, page: Page, name: string): Promise<void> {
  // The forms' hidden request and CSRF fields are no controls a person uses.
  const unlabelled = (await unlabelledControls(page)).filter((control) => !control.includes('type="hidden"'));
  t.same(unlabelled, [], `${name}: every control has a label`);
  t.equal(await overflowsHorizontally(page), false, `${name}: no horizontal scrolling at 360 px`);
  await screenshot(page, `oauth-${name}`);
}

t.test('sign in with an e-mail code and allow a third-party client, by keyboard, at 360 px', async (t) => {
  const { app } = await h.startFresh();
  const client = (await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Notes', redirect_uris: [REDIRECT], first_party: false })).body;
  const { page, problems, callbacks } = await openPage();
  await page.goto(`${h.base}/oauth/authorize?${new URLSearchParams({
    client_id: client.client_id, redirect_uri: REDIRECT, response_type: 'code', scope: 'openid email', state: 'st', code_challenge: challenge, code_challenge_method: 'S256',
  })}`);
  t.equal(await page.$eval('h1', (e) => e.textContent), 'Sign in to App app-a');
  await checkPage(t, page, 'address');

  // Focus goes to the address field by Tab, the form is sent by Enter.
  await page.keyboard.press('Tab');
  t.equal(await page.evaluate(() => document.activeElement?.id), 'email');
  await page.keyboard.type('not-an-address');
  await page.keyboard.press('Enter');
  // The browser's own check refuses a malformed address before sending (type="email").
  t.equal(await page.$eval('#email', (e) => (e as HTMLInputElement).validity.valid), false);
  t.equal(h.outbox.messages.length, 0);

  await page.$eval('#email', (e) => { (e as HTMLInputElement).value = ''; });
  await page.focus('#email');
  await page.keyboard.type('ann@example.com');
  await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
  t.match(await page.$eval('main', (e) => e.textContent), /We sent a code to ann@example\.com/);
  await checkPage(t, page, 'code');

  await page.focus('#code');
  await page.keyboard.type(h.outbox.codeFor('ann@example.com') === '000000' ? '111111' : '000000');
  await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
  t.match(await page.$eval('[role="alert"]', (e) => e.textContent), /That code is wrong or has expired/, 'the error in words, in the alert region');

  await page.focus('#code');
  await page.keyboard.type(h.outbox.codeFor('ann@example.com'));
  await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
  t.equal(await page.$eval('h1', (e) => e.textContent), 'Allow Notes to use your App app-a account?');
  await checkPage(t, page, 'consent');
  await Promise.all([page.waitForNavigation(), page.click('button[value="allow"]')]);
  t.equal(callbacks.length, 1, 'the browser went back to the client');
  const back = new URL(callbacks[0]!);
  t.equal(back.searchParams.get('state'), 'st');
  t.equal(back.searchParams.get('iss'), 'http://auth.test');
  t.match(back.searchParams.get('code'), /^[A-Za-z0-9_-]{43}$/);
  t.same(problems, [], 'no console errors or CSP violations');
});

t.test('a user in two tenants picks one on the page by keyboard (arrow keys between the choices); the token is for that tenant', async (t) => {
  const { app } = await h.startFresh();
  const client = (await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Notes', redirect_uris: [REDIRECT] })).body;
  const { globex } = await h.userInTwoTenants(app);
  const { page, problems, callbacks } = await openPage();
  await page.goto(`${h.base}/oauth/authorize?${new URLSearchParams({
    client_id: client.client_id, redirect_uri: REDIRECT, response_type: 'code', scope: 'openid', state: 'st', code_challenge: challenge, code_challenge_method: 'S256',
  })}`);
  await page.focus('#email');
  await page.keyboard.type('ann@example.com');
  await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
  await page.focus('#code');
  await page.keyboard.type(h.outbox.codeFor('ann@example.com'));
  await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
  t.equal(await page.$eval('h1', (e) => e.textContent), 'Which App app-a organisation?');
  await checkPage(t, page, 'tenant');
  await page.focus('#tenant-0');
  await page.keyboard.press('ArrowDown');
  t.equal(await page.evaluate(() => document.activeElement?.id), 'tenant-1', 'the arrow key moves to the second choice');
  t.equal(await page.$eval('#tenant-1', (e) => (e as HTMLInputElement).checked), true, 'and chooses it');
  await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
  t.equal(callbacks.length, 1, 'Enter sent the choice, and the browser went back to the client');
  const code = new URL(callbacks[0]!).searchParams.get('code')!;
  const tokens = await h.request('POST', '/oauth/token', {
    raw: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT, code_verifier: 'v'.repeat(43), client_id: client.client_id, client_secret: client.client_secret }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
  t.equal(tokens.status, 200);
  t.match(JSON.parse(Buffer.from(tokens.body.access_token.split('.')[1], 'base64url').toString()), { tenant_id: globex, roles: ['admin'] });
  t.same(problems, [], 'no console errors or CSP violations');
});

t.test('sign in with a passkey by keyboard: the page\'s script runs the ceremony, a refusal is said in words, and openid-client exchanges the code (amr hwk, mfa)', async (t) => {
  const { app } = await h.startFresh();
  // WebAuthn needs a secure context and a domain as RP ID: the page is opened as http://localhost:<port>.
  const origin = h.base.replace('127.0.0.1', 'localhost');
  const settings = await h.admin('PUT', `/admin/apps/${app.id}/passkeys`, { rp_id: 'localhost', rp_name: 'App A', origins: [origin] });
  t.equal(settings.status, 200);
  const client = (await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Notes', redirect_uris: [REDIRECT] })).body;
  const config = await oidc.discovery(new URL(h.issuer), client.client_id, client.client_secret, undefined, {
    execute: [oidc.allowInsecureRequests], [oidc.customFetch]: harnessFetch(h),
  });
  config[oidc.customFetch] = harnessFetch(h);

  const { page, problems, callbacks } = await openPage();
  const cdp = await page.createCDPSession();
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
  });
  const verifier = oidc.randomPKCECodeVerifier();
  const state = oidc.randomState();
  const nonce = oidc.randomNonce();
  const url = oidc.buildAuthorizationUrl(config, {
    redirect_uri: REDIRECT, scope: 'openid email', state, nonce, code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
  });
  await page.goto(url.href.replace(h.issuer, origin));
  // Ann registers a passkey through the JSON API (her app's backend relays the ceremony), in this browser, on the sign-in page's origin.
  const ann = await h.login(app, 'ann@example.com');
  const started = await h.post('/auth/passkeys/register/options', { ...h.credentials(app), refresh_token: ann.refresh_token });
  t.equal(started.status, 200);
  const attestation = await page.evaluate(async (options) => {
    const credential = await navigator.credentials.create({ publicKey: PublicKeyCredential.parseCreationOptionsFromJSON(options) }) as PublicKeyCredential;
    return credential.toJSON();
  }, started.body.options);
  const registered = await h.post('/auth/passkeys/register/verify', { ...h.credentials(app), refresh_token: ann.refresh_token, ceremony_id: started.body.ceremony_id, response: attestation, name: 'Laptop' });
  t.equal(registered.status, 201);

  await page.waitForSelector('#passkey-form:not([hidden])');
  t.equal(await page.$eval('#passkey', (e) => e.textContent), 'Sign in with a passkey');
  await checkPage(t, page, 'passkey');
  /** Tab from the top of the page to the passkey button. */
  const tabToPasskey = async () => {
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    for (let i = 0; i < 10 && await page.evaluate(() => document.activeElement?.id) !== 'passkey'; i += 1) await page.keyboard.press('Tab');
    t.equal(await page.evaluate(() => document.activeElement?.id), 'passkey', 'the passkey button is reached by Tab');
  };

  // The authenticator cannot verify the user: the browser refuses, the page says so.
  await cdp.send('WebAuthn.setUserVerified', { authenticatorId, isUserVerified: false });
  await tabToPasskey();
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.getElementById('error')?.textContent?.includes('cancelled'));
  t.match(await page.$eval('[role="alert"]', (e) => e.textContent), /The passkey sign-in was cancelled or timed out\. Try again, or sign in with a code\./);
  t.equal(callbacks.length, 0);

  await cdp.send('WebAuthn.setUserVerified', { authenticatorId, isUserVerified: true });
  await tabToPasskey();
  await Promise.all([page.waitForRequest((request) => request.url().startsWith(REDIRECT)), page.keyboard.press('Enter')]);
  t.equal(callbacks.length, 1, 'the browser went back to the client');
  const tokens = await oidc.authorizationCodeGrant(config, new URL(callbacks[0]!), { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce, idTokenExpected: true });
  const claims = tokens.claims()!;
  t.equal(claims.sub, ann.user_id);
  t.same(claims.amr, ['hwk', 'mfa'], 'a passkey with user verification is both factors');
  t.equal(h.outbox.messages.length, 1, 'no code was sent by the page (only the JSON login\'s)');
  t.same(problems, [], 'no console errors or CSP violations');
});

t.test('sign in through the app\'s identity provider, and by home-realm discovery through a tenant\'s that requires it, by keyboard, back to the client', async (t) => {
  const { app } = await h.startFresh();
  const client = (await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Notes', redirect_uris: [REDIRECT] })).body;
  const config = await oidc.discovery(new URL(h.issuer), client.client_id, client.client_secret, undefined, {
    execute: [oidc.allowInsecureRequests], [oidc.customFetch]: harnessFetch(h),
  });
  config[oidc.customFetch] = harnessFetch(h);
  // The page's callback is the issuer's own; the providers list only their app backends' callbacks.
  const added = await h.admin('POST', `/admin/apps/${app.id}/upstream-providers`, {
    kind: 'google', label: 'Sign in with Google', client_id: 'notes-google', client_secret: 'google-secret', discovery_url: google.discoveryUrl,
    redirect_uris: ['http://localhost:5173/auth/callback'],
  });
  t.equal(added.status, 201);
  const acme = await h.createTenant(app, 'Acme');
  const claimed = await h.admin('POST', `/admin/apps/${app.id}/tenants/${acme}/domains`, { domain: 'acme.example' });
  t.equal(claimed.status, 201);
  // The DNS proof has its own tests (tenant-sso.test.ts); here the domain is marked proven.
  await h.sql`update tenant_domains set verified_at = now() where id = ${claimed.body.id}`;
  const sso = await h.admin('POST', `/admin/apps/${app.id}/upstream-providers`, {
    kind: 'oidc', label: 'Continue with Acme SSO', client_id: 'acme-okta', client_secret: 'okta-secret', discovery_url: okta.discoveryUrl,
    redirect_uris: ['http://localhost:5173/sso/callback'], tenant_id: acme, default_role: 'staff', require_sso: true,
  });
  t.equal(sso.status, 201);

  /** An authorization request of the client, opened at the issuer's URL; returns what openid-client needs after. */
  const open = async (page: Page) => {
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    await page.goto(oidc.buildAuthorizationUrl(config, {
      redirect_uri: REDIRECT, scope: 'openid email', state, nonce, code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
    }).href);
    return { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce, idTokenExpected: true };
  };
  /** Tabs from the top of the page until `selector` has focus. */
  const tabTo = async (page: Page, selector: string) => {
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    for (let i = 0; i < 12 && !(await page.$eval(selector, (e) => e === document.activeElement)); i += 1) await page.keyboard.press('Tab');
    t.equal(await page.$eval(selector, (e) => e === document.activeElement), true, `${selector} is reached by Tab`);
  };

  google.signInAs = { sub: 'g-100', email: 'gina@gmail.com', email_verified: true };
  const first = await openPage();
  const firstChecks = await open(first.page);
  t.equal(await first.page.$eval('button.provider', (e) => e.textContent), 'Sign in with Google');
  t.equal(await first.page.$$eval('button.provider', (list) => list.length), 1, 'a tenant\'s provider is no button for everyone');
  await checkPage(t, first.page, 'providers');
  await tabTo(first.page, 'button.provider');
  await Promise.all([first.page.waitForRequest((request) => request.url().startsWith(REDIRECT)), first.page.keyboard.press('Enter')]);
  t.equal(first.callbacks.length, 1, 'Google, then the page\'s callback, then the client');
  const viaGoogle = await oidc.authorizationCodeGrant(config, new URL(first.callbacks[0]!), firstChecks);
  t.same(viaGoogle.claims()!.amr, ['fed']);
  t.equal(viaGoogle.claims()!.email, 'gina@gmail.com');
  t.same(first.problems, [], 'no console errors');

  okta.signInAs = { sub: 'okta-bob', email: 'bob@acme.example', email_verified: true };
  const second = await openPage();
  const secondChecks = await open(second.page);
  await tabTo(second.page, '#email');
  await second.page.keyboard.type('bob@acme.example');
  await Promise.all([second.page.waitForNavigation(), second.page.keyboard.press('Enter')]);
  t.match(await second.page.$eval('main', (e) => e.textContent),
    /bob@acme\.example signs in with your organisation's identity provider\. Your organisation requires it: we do not send sign-in codes to its addresses\./);
  t.equal(await second.page.$('button.secondary'), null, 'no way to ask for a code instead');
  t.equal(h.outbox.messages.length, 0, 'no code was sent');
  await checkPage(t, second.page, 'sso');
  await tabTo(second.page, '#sso');
  t.equal(await second.page.$eval('#sso', (e) => e.textContent), 'Continue with Acme SSO');
  await Promise.all([second.page.waitForRequest((request) => request.url().startsWith(REDIRECT)), second.page.keyboard.press('Enter')]);
  t.equal(second.callbacks.length, 1);
  const back = new URL(second.callbacks[0]!);
  t.equal(back.searchParams.get('iss'), 'http://auth.test');
  const viaOkta = await oidc.authorizationCodeGrant(config, back, secondChecks);
  t.same(viaOkta.claims()!.amr, ['fed']);
  const access = JSON.parse(Buffer.from(viaOkta.access_token.split('.')[1]!, 'base64url').toString());
  t.match(access, { tenant_id: acme, roles: ['staff'] }, 'the first sign-in through the tenant\'s provider gives its default role, and the token is for the tenant');
  t.same(second.problems, [], 'no console errors');
});

t.test('the second step by keyboard: the authenticator code after the e-mail code, a wrong one in words; the enrolment page fits and is labelled', async (t) => {
  const { app } = await h.startFresh();
  const client = (await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Notes', redirect_uris: [REDIRECT] })).body;
  const { secret } = await enrolTotp(h, app, 'ann@example.com');
  t.equal((await h.admin('PUT', `/admin/apps/${app.id}/second-factor-policy`, { policy: 'required' })).status, 200);
  const authorizeUrl = `${h.base}/oauth/authorize?${new URLSearchParams({
    client_id: client.client_id, redirect_uri: REDIRECT, response_type: 'code', scope: 'openid', state: 'st', code_challenge: challenge, code_challenge_method: 'S256',
  })}`;
  /** The page, an address typed and sent, its code typed and sent, by keyboard. */
  const throughCode = async (page: Page, email: string) => {
    await page.goto(authorizeUrl);
    await page.keyboard.press('Tab');
    await page.keyboard.type(email);
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
    await page.keyboard.press('Tab');
    await page.keyboard.type(h.outbox.codeFor(email));
    await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
  };

  const { page, problems, callbacks } = await openPage();
  await throughCode(page, 'ann@example.com');
  t.equal(await page.$eval('label[for="totp"]', (e) => e.textContent), 'Authenticator code');
  await checkPage(t, page, 'second-factor');
  await page.keyboard.press('Tab');
  t.equal(await page.evaluate(() => document.activeElement?.id), 'totp', 'the first field is the authenticator code');
  await page.keyboard.type(totpCode(h, secret, 5));
  await Promise.all([page.waitForNavigation(), page.keyboard.press('Enter')]);
  t.match(await page.$eval('[role="alert"]', (e) => e.textContent), /That authenticator code is wrong or was already used/);
  await page.keyboard.press('Tab');
  await page.keyboard.type(totpCode(h, secret));
  await Promise.all([page.waitForRequest((request) => request.url().startsWith(REDIRECT)), page.keyboard.press('Enter')]);
  t.equal(callbacks.length, 1, 'the browser went back to the client');
  t.equal(new URL(callbacks[0]!).searchParams.get('state'), 'st');

  h.clock.advance(61_000);
  const enrol = await openPage();
  await throughCode(enrol.page, 'bob@example.com');
  t.equal(await enrol.page.$eval('h2', (e) => e.textContent), 'Set up a second factor');
  await checkPage(t, enrol.page, 'enroll');
  t.same([...problems, ...enrol.problems], [], 'no console errors or CSP violations');
});
