// The admin console of auth-server in headless Chromium, on a real PostgreSQL: off unless
// enabled, strict CSP, sign-in with the admin key (kept in memory only), apps with the secret
// shown once and rotated, tenants, user lookup, soft-delete, restore and session revocation,
// signing keys, the audit trail, webhooks (dead letters and redelivery) and rate-limit blocks,
// OAuth clients and a user's consents, sign-in providers, the second-factor policy and an
// admin's TOTP reset, a tenant's invitations and its SSO (provider, domains proven by DNS TXT
// records from a local DNS server, oidc-provider as the tenant's "Okta"); each action checked
// through the admin API, an API refusal shown in words next to its field. Keyboard pass (and
// keyboard-only use), 375 and 360 px.
import { createHash } from 'node:crypto';
import type { Dialog, Page } from 'puppeteer-core';
import t from 'tap';
import { startDnsServer } from '../auth/fixtures/dns-server.js';
import { OAuthBrowser } from '../auth/fixtures/oauth-browser.js';
import { enrolTotp } from '../auth/fixtures/totp.js';
import { authorize, startCertifiedProvider } from '../auth/fixtures/upstream-providers.js';
import { ADMIN_KEY, startAuthHarness } from '../auth/fixtures/harness.js';
import { hasValidSignature, startWebhookReceiver, until } from '../auth/fixtures/webhook-receiver.js';
import { OTP_DEFAULT_LIMITS } from '../../src/auth/limits.js';
import { assertPageBuilt, collectProblems, elementsPastViewport, launchBrowser, overflowsHorizontally, screenshot, tabOrder, unlabelledControls } from '../helpers/browser.js';

assertPageBuilt('admin');
// No webhook retries: a failed delivery is dead at once, for the dead-letter test.
const dns = await startDnsServer();
t.teardown(() => dns.close());
const REDIRECT = 'http://localhost:5173/sso/callback';
const okta = await startCertifiedProvider([{ client_id: 'okta-shop', client_secret: 'okta-secret', redirect_uris: [REDIRECT] }]);
t.teardown(() => okta.close());
const h = await startAuthHarness({ adminConsole: true, webhookPollMs: 20, webhookRetryDelaysSeconds: [], dnsServers: [dns.address] });
t.teardown(() => h.close());
const browser = await launchBrowser();
t.teardown(() => browser.close());

const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

t.beforeEach(async () => {
  await h.reset();
});

/** A fresh browser context at /admin/; confirm() dialogs are accepted and recorded. */
async function openConsole(width = 1200): Promise<{ page: Page; problems: string[]; confirms: string[]; urls: string[] }> {
  const context = await browser.createBrowserContext();
  t.teardown(() => context.close());
  const page = await context.newPage();
  const problems = collectProblems(page);
  const confirms: string[] = [];
  const urls: string[] = [];
  page.on('dialog', (dialog: Dialog) => { confirms.push(dialog.message()); void dialog.accept(); });
  page.on('request', (request) => { urls.push(request.url()); });
  await page.setViewport({ width, height: 900 });
  await page.goto(`${h.base}/admin/`);
  return { page, problems, confirms, urls };
}

async function signIn(page: Page, key = ADMIN_KEY): Promise<void> {
  await page.type('#admin-key', key);
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => !document.getElementById('console')!.hidden);
}

async function notice(page: Page, pattern: string): Promise<string> {
  await page.waitForFunction((p) => new RegExp(p).test(document.getElementById('notice')?.textContent ?? ''), {}, pattern);
  return page.$eval('#notice', (e) => e.textContent ?? '');
}

t.test('the console is off unless enabled: GET /admin/ is 404 without adminConsole', async (t) => {
  const plain = await startAuthHarness();
  t.teardown(() => plain.close());
  const reply = await plain.get('/admin/');
  t.equal(reply.status, 404);
  t.same(reply.body, { error: { code: 'NOT_FOUND', message: 'No route for GET /admin/' } });
});

t.test('GET /admin/ has a strict CSP, no inline script and no framing; /admin redirects to it', async (t) => {
  const page = await fetch(`${h.base}/admin/`);
  t.equal(page.status, 200);
  t.equal(page.headers.get('content-type'), 'text/html; charset=utf-8');
  t.equal(page.headers.get('content-security-policy'), CSP);
  t.equal(page.headers.get('x-frame-options'), 'DENY');
  t.equal(page.headers.get('referrer-policy'), 'no-referrer');
  const html = await page.text();
  t.notMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'no inline script');
  t.notMatch(html, /\son[a-z]+=/i, 'no inline event handler');
  t.notMatch(html, /\sstyle=/i, 'no inline style');
  t.notMatch(html, /https?:\/\//, 'nothing from another origin');
  const script = await fetch(`${h.base}/admin/console/main.js`);
  t.equal(script.status, 200);
  t.equal(script.headers.get('content-security-policy'), CSP);
  const redirect = await fetch(`${h.base}/admin`, { redirect: 'manual' });
  t.equal(redirect.status, 308);
  t.equal(redirect.headers.get('location'), '/admin/');
});

t.test('sign-in refuses a wrong key, keeps the right one in memory only, and a reload forgets it', async (t) => {
  const { page, problems, urls } = await openConsole();
  await screenshot(page, 'admin-sign-in');
  await page.type('#admin-key', 'not-the-admin-key-at-all');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.getElementById('sign-in-error')?.textContent === 'The server refused this admin key.');
  t.equal(await page.$eval('#console', (e) => (e as HTMLElement).hidden), true);
  await page.click('#admin-key', { count: 3 });
  await signIn(page);
  const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie);
  t.notOk(stored.includes(ADMIN_KEY), 'the key is in no storage and no cookie');
  t.notOk(urls.some((u) => u.includes(ADMIN_KEY)), 'the key is in no URL');
  await page.reload();
  await page.waitForSelector('#admin-key');
  t.equal(await page.$eval('#console', (e) => (e as HTMLElement).hidden), true, 'after a reload the console asks again');
  t.same(problems.filter((p) => !/status of 401/.test(p)), []);
});

t.test('creating an app shows its secret once; the secret works; rotating replaces it', async (t) => {
  const { page, problems, confirms } = await openConsole();
  await signIn(page);
  await page.type('#app-slug', 'shop');
  await page.type('#app-name', 'Shop');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#secret-box:not([hidden])');
  const secret = await page.$eval('#secret-value', (e) => e.textContent ?? '');
  t.match(secret, /^as_[A-Za-z0-9_-]{43}$/);
  t.match(await notice(page, 'Created app'), 'Created app shop.');
  await screenshot(page, 'admin-app-secret');
  const apps = await h.admin('GET', '/admin/apps');
  t.same(apps.body.apps.map((a: { slug: string; name: string }) => [a.slug, a.name]), [['shop', 'Shop']], 'the API lists the app');
  const app = { id: apps.body.apps[0].id as string, slug: 'shop', secret };
  t.equal((await h.post('/auth/otp/request', { ...h.credentials(app), email: 'ann@example.com' })).status, 200, 'the shown secret is the real one');
  t.equal(await page.$$eval('#app-list li[data-app-id]', (items) => items.length), 1);
  await page.click('#dismiss-secret');
  t.equal(await page.$eval('#secret-value', (e) => e.textContent), '', 'dismissed: the secret leaves the page');

  await page.click(`#app-list li[data-app-id="${app.id}"] button[aria-label="Rotate the secret of shop"]`);
  await page.waitForSelector('#secret-box:not([hidden])');
  const rotated = await page.$eval('#secret-value', (e) => e.textContent ?? '');
  t.match(confirms, [/Rotate the secret of "shop"/]);
  t.not(rotated, secret);
  const old = await h.post('/auth/otp/request', { ...h.credentials(app), email: 'bob@example.com' });
  t.equal(old.status, 401, 'the old secret stopped working');
  t.equal(old.body.error.code, 'TOKEN_INVALID');
  t.equal((await h.post('/auth/otp/request', { ...h.credentials({ ...app, secret: rotated }), email: 'bob@example.com' })).status, 200, 'the new one works');
  t.same(problems, []);
});

t.test('tenants of an app: create one and see it listed, as the API lists it', async (t) => {
  const { page, problems } = await openConsole();
  const app = await h.createApp('crm');
  await signIn(page);
  await page.click('button[aria-label="Tenants of crm"]');
  await page.waitForFunction(() => document.getElementById('tenants-heading')?.textContent === 'Tenants of crm');
  // The heading shows at once; the list fills when the API has answered.
  await page.waitForFunction(() => (document.getElementById('tenant-list')?.textContent ?? '') !== '');
  t.equal(await page.$eval('#tenant-list', (e) => e.textContent), 'No tenants yet.');
  await page.type('#tenant-name', 'Acme');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#tenant-list li[data-tenant-id]');
  const shown = await page.$$eval('#tenant-list li[data-tenant-id]', (items) => items.map((li) => [li.getAttribute('data-tenant-id'), li.querySelector('strong')?.textContent]));
  const listed = await h.admin('GET', `/admin/apps/${app.id}/tenants`);
  t.same(listed.body.tenants.map((x: { id: string; name: string }) => [x.id, x.name]), shown);
  t.same(shown.map((s) => s[1]), ['Acme']);
  t.match(await notice(page, 'Created tenant'), 'Created tenant Acme in crm.');
  await screenshot(page, 'admin-tenants');
  t.same(problems, []);
});

t.test('users: find by e-mail, soft-delete, restore and revoke sessions, each visible through the API', async (t) => {
  const { page, problems, confirms } = await openConsole();
  const app = await h.createApp('shop');
  const tokens = await h.login(app, 'ann@example.com');
  await signIn(page);
  await page.type('#user-query', 'ANN@example.com');
  await page.keyboard.press('Enter');
  await page.waitForSelector(`article.user[data-user-id="${tokens.user_id}"]`);
  t.equal(await page.$eval('article.user .tag', (e) => e.textContent), 'active');

  await page.click('article.user button.danger');
  await page.waitForFunction(() => document.querySelector('article.user .tag')?.textContent === 'deleted');
  t.match(await notice(page, 'Deleted'), 'Deleted ann@example.com; 1 session(s) revoked.');
  t.match(confirms, [/Soft-delete ann@example.com\?/]);
  const deleted = await h.admin('GET', `/admin/users/${tokens.user_id}`);
  t.match(deleted.body, { id: tokens.user_id, deleted_at: /Z$/ }, 'the API shows the user deleted');
  const refused = await h.refresh(app, tokens.refresh_token);
  t.equal(refused.status, 403, 'the deleted user cannot refresh');
  t.equal(refused.body.error.code, 'USER_DELETED');
  await screenshot(page, 'admin-user-deleted');

  await page.click('article.user button ::-p-text(Restore)');
  await page.waitForFunction(() => document.querySelector('article.user .tag')?.textContent === 'active');
  t.equal((await h.admin('GET', `/admin/users/${tokens.user_id}`)).body.deleted_at, null, 'the API shows the user restored');

  h.clock.advance(OTP_DEFAULT_LIMITS.resendIntervalMs);
  const again = await h.login(app, 'ann@example.com');
  await page.click('article.user button ::-p-text(Revoke sessions)');
  t.match(await notice(page, 'Revoked'), 'Revoked 1 session(s) of ann@example.com.');
  const refreshed = await h.refresh(app, again.refresh_token);
  t.equal(refreshed.status, 401);
  t.equal(refreshed.body.error.code, 'TOKEN_REVOKED', 'the API refuses the revoked session');

  await page.click('#user-query', { count: 3 });
  await page.type('#user-query', tokens.user_id);
  await page.keyboard.press('Enter');
  await page.waitForFunction((id) => document.querySelector('article.user')?.getAttribute('data-user-id') === id, {}, tokens.user_id);
  await page.click('#user-query', { count: 3 });
  await page.type('#user-query', 'nobody@example.com');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.querySelector('#user-result p.empty')?.textContent === 'No user matches “nobody@example.com”.');
  t.same(problems, []);
});

t.test('signing keys: listed with their status; rotation makes the next key active', async (t) => {
  const { page, problems } = await openConsole();
  await signIn(page);
  await page.waitForSelector('#key-list li[data-status="active"]');
  const before = await h.admin('GET', '/admin/signing-keys');
  const shown = await page.$$eval('#key-list li', (items) => items.map((li) => [li.getAttribute('data-kid'), li.getAttribute('data-status')]));
  t.same(shown, before.body.keys.map((k: { kid: string; status: string }) => [k.kid, k.status]));
  const next = before.body.keys.find((k: { status: string }) => k.status === 'next').kid;
  await page.click('#rotate-key');
  await page.waitForFunction((kid) => document.querySelector('#key-list li[data-status="active"]')?.getAttribute('data-kid') === kid, {}, next);
  const after = await h.admin('GET', '/admin/signing-keys');
  t.equal(after.body.keys[0].kid, next, 'the API shows the former next key active');
  t.equal(after.body.keys[0].status, 'active');
  await screenshot(page, 'admin-keys');
  t.same(problems, []);
});

t.test('keyboard: Tab reaches every control in page order; every control has a label', async (t) => {
  const { page } = await openConsole();
  const app = await h.createApp('shop');
  await h.createTenant(app, 'Acme');
  t.same(await unlabelledControls(page), [], 'sign-in form');
  await signIn(page);
  await page.click('button[aria-label="Tenants of shop"]');
  // Selecting an app ends by moving focus to the tenants heading once the list has loaded; typing
  // before that loses the rest of the keystrokes to the heading.
  await page.waitForFunction(() => document.activeElement?.id === 'tenants-heading');
  await page.click('button[aria-label="OAuth clients of shop"]');
  await page.waitForFunction(() => document.activeElement?.id === 'oauth-clients-heading');
  for (const [button, heading] of [['Sign-in providers of shop', 'upstream-heading'], ['Second factor of shop', 'second-factor-heading'], ['Invitations to Acme', 'invitations-heading'], ['SSO of Acme', 'sso-heading']]) {
    await page.click(`button[aria-label="${button}"]`);
    await page.waitForFunction((id) => document.activeElement?.id === id, {}, heading);
  }
  await page.type('#user-query', 'nobody@example.com');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#user-result p.empty');
  const expected = await page.evaluate(() => [...document.querySelectorAll<HTMLElement>('a[href], button, input, textarea, select, [tabindex]')]
    .filter((e) => !(e as HTMLButtonElement).disabled && e.tabIndex >= 0 && e.getClientRects().length > 0)
    .map((e) => e.id ? `#${e.id}` : `${e.tagName.toLowerCase()}[${e.getAttribute('aria-label') ?? e.textContent?.trim() ?? ''}]`));
  const order = await tabOrder(page, expected[0]!);
  t.same(order, expected);
  for (const id of ['a[Apps]', 'a[Users]', 'a[Signing keys]', '#sign-out', '#app-slug', '#app-name', 'button[Tenants of shop]', 'button[Rotate the secret of shop]', '#tenant-name', 'button[OAuth clients of shop]', '#client-name', '#client-type', '#client-redirect-uris', '#client-post-logout-uris', '#client-scopes', '#client-logo', '#client-first-party', '#client-submit',
    'button[Sign-in providers of shop]', 'button[Second factor of shop]', 'button[Invitations to Acme]', 'button[SSO of Acme]', '#upstream-kind', '#upstream-label', '#upstream-secret',
    '#upstream-submit', '#second-factor-app', '#invite-to', '#invite-role', '#invitation-state', '#sso-kind', '#sso-discovery', '#sso-require-sso', '#domain-name', '#user-query', '#rotate-key']) {
    t.ok(order.includes(id), `Tab reaches ${id}`);
  }
  t.same(await unlabelledControls(page), [], 'console');
});

t.test('at 375 px wide nothing overflows sideways', async (t) => {
  const { page, problems } = await openConsole(375);
  const app = await h.createApp('a-long-application-slug-for-narrow-screens');
  await h.createTenant({ id: app.id, slug: app.slug, secret: app.secret }, 'Tenant with a rather long name');
  const tokens = await h.login(app, 'someone.with.a.long.address@example.com');
  t.equal(await overflowsHorizontally(page), false, 'sign-in');
  await signIn(page);
  await page.type('#app-slug', 'mobile');
  await page.type('#app-name', 'Mobile');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#secret-box:not([hidden])');
  await page.click(`button[aria-label="Tenants of ${app.slug}"]`);
  await page.waitForSelector('#tenant-list li[data-tenant-id]');
  await page.type('#user-query', tokens.user_id);
  await page.keyboard.press('Enter');
  await page.waitForSelector('article.user');
  t.same(await elementsPastViewport(page), [], 'no element sticks out');
  t.equal(await overflowsHorizontally(page), false, 'console with apps, secret, tenants, user and keys');
  await page.evaluate(() => window.scrollTo(0, 0));
  await screenshot(page, 'admin-375-top');
  await page.evaluate(() => document.getElementById('users-heading')!.scrollIntoView());
  await screenshot(page, 'admin-375-users');
  t.same(problems, []);
});

t.test('audit trail: newest first as the API answers, filtered by type, older pages on demand', async (t) => {
  const { page, problems } = await openConsole();
  const app = await h.createApp('shop');
  const tokens = await h.login(app, 'ann@example.com');
  let refreshToken = tokens.refresh_token;
  for (let i = 0; i < 55; i++) {
    h.clock.advance(3000);
    refreshToken = (await h.refresh(app, refreshToken)).body.refresh_token;
  }
  await signIn(page);
  await page.waitForSelector('#audit-list li[data-event-id]');
  const newest = await h.admin('GET', '/admin/audit-events?limit=50');
  const ids = () => page.$$eval('#audit-list li[data-event-id]', (items) => items.map((li) => li.getAttribute('data-event-id')));
  t.same(await ids(), newest.body.events.map((e: { id: string }) => e.id), 'the first page is the API\'s newest 50');
  t.equal(await page.$eval('#more-audit', (e) => (e as HTMLElement).hidden), false);

  await page.select('#audit-type', 'token.refreshed');
  await page.type('#audit-user', tokens.user_id);
  await page.click('#audit-filter button[type="submit"]');
  // The list empties, then fills with the filtered page.
  await page.waitForFunction(() => {
    const items = [...document.querySelectorAll('#audit-list li')];
    return items.length === 50 && items.every((li) => li.getAttribute('data-type') === 'token.refreshed');
  });
  await page.click('#more-audit');
  await page.waitForFunction(() => document.querySelectorAll('#audit-list li[data-event-id]').length === 55);
  const refreshed = await h.admin('GET', `/admin/audit-events?type=token.refreshed&user_id=${tokens.user_id}&limit=1000`);
  t.same(await ids(), refreshed.body.events.map((e: { id: string }) => e.id), 'both pages together: every refresh once, newest first');
  t.equal(await page.$eval('#more-audit', (e) => (e as HTMLElement).hidden), true, 'no older page');
  t.match(await page.$eval('#audit-list li', (li) => li.textContent), /token\.refreshed.*IP127\.0\.0\.1/s);
  await screenshot(page, 'admin-audit');

  await page.type('#audit-since', 'yesterday');
  await page.click('#audit-filter button[type="submit"]');
  t.match(await notice(page, 'VALIDATION_ERROR'), 'VALIDATION_ERROR: Invalid query parameter "since"');
  t.same(problems.filter((p) => !/status of 400/.test(p)), []);
});

t.test('webhooks: an endpoint added in the console, its failed delivery shown as a dead letter, redelivered', async (t) => {
  const receiver = await startWebhookReceiver();
  t.teardown(() => receiver.close());
  receiver.status = 500;
  const { page, problems } = await openConsole();
  const app = await h.createApp('shop');
  const tokens = await h.login(app, 'ann@example.com');
  await signIn(page);
  await page.click('button[aria-label="Webhooks of shop"]');
  await page.waitForFunction(() => document.activeElement?.id === 'webhooks-heading');
  await page.type('#webhook-url', receiver.url);
  await page.click('#webhook-events input[value="session.revoked"]');
  await page.click('#create-webhook button[type="submit"]');
  await page.waitForSelector('#webhook-secret-box:not([hidden])');
  const secret = await page.$eval('#webhook-secret-value', (e) => e.textContent ?? '');
  t.match(secret, /^whsec_/);
  const endpoints = await h.admin('GET', `/admin/apps/${app.id}/webhooks`);
  t.same(endpoints.body.webhooks.map((w: { url: string; event_types: string[] }) => [w.url, w.event_types]), [[receiver.url, ['session.revoked']]]);
  await page.waitForSelector(`#webhook-list li[data-webhook-id="${endpoints.body.webhooks[0].id}"]`);

  await h.post('/auth/revoke', { ...h.credentials(app), refresh_token: tokens.refresh_token });
  t.ok(await until(async () => (await h.admin('GET', `/admin/apps/${app.id}/webhook-deliveries?state=dead`)).body.deliveries.length === 1), 'the API shows it dead');
  await page.select('#delivery-state', 'dead');
  await page.waitForSelector('#delivery-list li[data-state="dead"]');
  const dead = await page.$eval('#delivery-list li[data-state="dead"]', (li) => ({ id: li.getAttribute('data-delivery-id'), text: li.textContent }));
  t.match(dead.text, /session\.revoked.*dead.*Attempts1.*Last answer500/s);
  await screenshot(page, 'admin-webhook-dead');

  receiver.status = 204;
  await page.click(`#delivery-list li[data-delivery-id="${dead.id}"] button`);
  t.match(await notice(page, 'Redelivering'), `Redelivering msg_${dead.id}.`);
  t.ok(await until(async () => (await h.admin('GET', `/admin/apps/${app.id}/webhook-deliveries?state=delivered`)).body.deliveries.length === 1), 'the API shows it delivered');
  t.equal(receiver.received.length, 2);
  t.same(receiver.received.map((m) => m.headers['webhook-id']), [`msg_${dead.id}`, `msg_${dead.id}`], 'the same message id both times');
  t.ok(hasValidSignature(secret, receiver.received[1]!), 'signed with the secret the console showed');
  await page.select('#delivery-state', 'delivered');
  await page.waitForSelector(`#delivery-list li[data-delivery-id="${dead.id}"][data-state="delivered"]`);
  t.same(problems, []);
});

t.test('rate limits: a blocked address is listed with its rule and can be lifted', async (t) => {
  const { page, problems, confirms } = await openConsole();
  const app = await h.createApp('shop');
  for (let i = 0; i < 10; i++) await h.post('/auth/otp/request', { ...h.credentials(app), email: 'ann@example.com' });
  const subject = `${app.id}:email:ann@example.com`;
  await signIn(page);
  await page.waitForSelector('#block-list li[data-rule="otp_request_address"]');
  t.equal(await page.$eval('#block-list li', (li) => li.getAttribute('data-subject')), subject);
  t.match(await page.$eval('#limit-rules', (e) => e.textContent), /otp_request_address10 per 3600 s/);
  await page.click('#block-list li button');
  t.match(await notice(page, 'Lifted'), `Lifted the otp_request_address block of ${subject}.`);
  t.match(confirms, [/Lift the otp_request_address block/]);
  t.same((await h.admin('GET', '/admin/rate-limits')).body.blocks, [], 'the API shows no block');
  await page.waitForFunction(() => document.querySelector('#block-list li')?.textContent === 'Nothing is blocked.');
  h.clock.advance(60_000);
  t.equal((await h.post('/auth/otp/request', { ...h.credentials(app), email: 'ann@example.com' })).status, 200, 'the address may ask again');
  t.same(problems, []);
});

t.test('login code messages: an app\'s texts saved in the console are the ones the next code goes out with', async (t) => {
  const { page, problems } = await openConsole();
  const app = await h.createApp('shop');
  await signIn(page);
  await page.click('button[aria-label="Login code messages of shop"]');
  await page.waitForFunction(() => document.activeElement?.id === 'messages-heading');
  t.equal(await page.$eval('#message-email-subject', (e) => (e as HTMLInputElement).placeholder), 'Your {{app_name}} login code', 'the default is shown');
  await page.type('#message-sms-text', 'no placeholder');
  await page.click('#message-templates button[type="submit"]');
  t.match(await notice(page, 'VALIDATION_ERROR'), 'VALIDATION_ERROR: Invalid field "sms_text": the text must contain {{code}}');

  await page.click('#message-sms-text', { count: 3 });
  await page.type('#message-sms-text', 'Shop: {{code}}');
  await page.type('#message-email-from', 'Shop <no-reply@shop.test>');
  await page.type('#message-email-subject', '{{app_name}} code');
  await page.click('#message-templates button[type="submit"]');
  t.match(await notice(page, 'Saved'), 'Saved the login code messages of shop.');
  const { defaults: _defaults, ...saved } = (await h.admin('GET', `/admin/apps/${app.id}/message-templates`)).body;
  t.same(saved, { email_from: 'Shop <no-reply@shop.test>', email_subject: '{{app_name}} code', email_text: null, sms_text: 'Shop: {{code}}' }, 'the API has them; the empty field stays the default');
  await h.post('/auth/otp/request', { ...h.credentials(app), email: 'ann@example.com' });
  t.match(h.outbox.messages.at(-1)!.template, { appName: 'App shop', emailFrom: 'Shop <no-reply@shop.test>', emailSubject: '{{app_name}} code', smsText: 'Shop: {{code}}' });
  t.same(problems.filter((p) => !/status of 400/.test(p)), []);
});

t.test('usage: a chart names its tenant by name, with a token scale and an axis of UTC hours', async (t) => {
  const { app } = await h.startFresh();
  const acme = await h.admin('POST', `/admin/apps/${app.id}/tenants`, { name: 'Acme Corp' });
  t.equal(acme.status, 201);
  const HOUR = 3600 * 1000;
  const hour = (offset: number): string => new Date((Math.floor(h.clock.now() / HOUR) + offset) * HOUR).toISOString();
  const row = (fields: Record<string, unknown>) => ({
    appSlug: 'app-a', tenant: acme.body.id, key: 'k1', model: 'tiny', hour: hour(0),
    requests: 1, promptTokens: 1000, cachedPromptTokens: 0, completionTokens: 200, queueMs: 1, computeMs: 10, ...fields,
  });
  await h.service.usage.record([row({}), row({ hour: hour(-3), promptTokens: 200, completionTokens: 100 })]);
  const { page, problems } = await openConsole(375);
  await signIn(page);
  const item = `#usage-charts li[data-tenant="${acme.body.id}"]`;
  await page.waitForSelector(item);

  t.same(await page.$eval(`${item} .tag`, (e) => [e.textContent, e.getAttribute('title')]), ['Acme Corp', `Tenant ${acme.body.id}`], 'the tenant\'s name, its id on hover');
  t.equal(await page.$eval(`${item} svg`, (e) => e.getAttribute('aria-label')), 'Tokens per hour of app-a / Acme Corp: 1,500 in all, at most 1,200 in an hour');

  // The scale's top is the round number at or above the busiest hour (1,200 tokens): 2,000, and its half.
  t.same(await page.$$eval(`${item} .usage-scale span`, (spans) => spans.map((s) => [s.getAttribute('data-tokens'), s.textContent])), [['2000', '2,000 tokens'], ['1000', '1,000']]);
  t.same(await page.$$eval(`${item} rect.bar`, (bars) => bars.map((b) => [b.getAttribute('data-hour'), Number(b.getAttribute('height'))])),
    [[hour(-3), 17.4], [hour(0), 69.6]], 'bars are drawn to that scale: 300 and 1,200 of 2,000 on a 116-unit plot');
  const [top, half] = await page.$$eval(`${item} .usage-scale span`, (spans) => spans.map((s) => s.getBoundingClientRect().top));
  const chartBox = await page.$eval(`${item} svg`, (e) => { const r = e.getBoundingClientRect(); return { top: r.top, bottom: r.bottom }; });
  t.ok(top! >= chartBox.top && top! < half! && half! < chartBox.bottom, 'the labels sit on the chart, the top one above the half');

  // The axis: the default range is the last 24 hours; a label every 6 UTC hours, a date at midnight.
  const first = Math.floor((h.clock.now() - 24 * HOUR) / HOUR);
  const hours = Math.ceil(h.clock.now() / HOUR) - first;
  const expected: Array<[string, string, number]> = [];
  for (let index = 0; index < hours; index++) {
    if ((first + index) % 6 !== 0) continue;
    const iso = new Date((first + index) * HOUR).toISOString();
    expected.push([iso, iso.slice(11, 13) === '00' ? iso.slice(5, 10) : `${iso.slice(11, 13)}:00`, Number(((index / hours) * 100).toFixed(3))]);
  }
  t.ok(expected.length >= 4 && expected.length <= 5, `${expected.length} labels`);
  t.same(await page.$$eval(`${item} .usage-hours span`, (spans) => spans.map((s) => [s.getAttribute('data-hour'), s.textContent, Number.parseFloat((s as HTMLElement).style.left)])), expected);
  const positions = await page.$$eval(`${item} .usage-hours span`, (spans) => spans.map((s) => s.getBoundingClientRect().left));
  t.same([...positions].sort((a, b) => a - b), positions, 'left to right in time order');
  t.same(await elementsPastViewport(page), [], 'nothing sticks out at 375 px');
  t.same(problems, []);
});

/** Presses Tab until the focused element matches `selector` (keyboard only); fails after `limit` presses. */
async function tabTo(page: Page, selector: string, limit = 150): Promise<void> {
  for (let i = 0; i < limit; i++) {
    if (await page.evaluate((s) => document.activeElement?.matches(s) ?? false, selector)) return;
    await page.keyboard.press('Tab');
  }
  throw new Error(`Tab never reached ${selector}`);
}

/** A token request with the client's Basic credentials: 401 invalid_client for a wrong secret. */
async function clientToken(clientId: string, secret: string, form: Record<string, string>) {
  return h.request('POST', '/oauth/token', {
    raw: new URLSearchParams(form).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64')}` },
  });
}

async function fieldError(page: Page, id: string): Promise<{ text: string; invalid: string | null; focused: boolean }> {
  await page.waitForSelector(`#${id}-error:not([hidden])`);
  return page.evaluate((id) => ({
    text: document.getElementById(`${id}-error`)!.textContent ?? '',
    invalid: document.getElementById(id)!.getAttribute('aria-invalid'),
    focused: document.activeElement === document.getElementById(id) || document.getElementById(id)!.contains(document.activeElement),
  }), id);
}

t.test('OAuth clients: a refusal shown next to its field; create (secret once), edit, rotate and delete, each as the API then has it', async (t) => {
  const { page, problems, confirms } = await openConsole();
  const app = await h.createApp('shop');
  const clientsUrl = `/admin/apps/${app.id}/oauth-clients`;
  await signIn(page);
  await page.click('button[aria-label="OAuth clients of shop"]');
  await page.waitForFunction(() => document.activeElement?.id === 'oauth-clients-heading');
  t.equal(await page.$eval('#client-list', (e) => e.textContent), 'No OAuth clients yet.');

  await page.type('#client-name', 'Web');
  await page.type('#client-redirect-uris', 'http://shop.example/cb');
  await page.click('#client-submit');
  const refused = await fieldError(page, 'client-redirect-uris');
  t.same(refused, { text: 'Invalid field "redirect_uris": "http://shop.example/cb" must be https, http on a loopback address, or a private-use scheme such as com.example.app:/callback', invalid: 'true', focused: true },
    'the API\'s words under the redirect URIs, which are marked invalid and focused');
  t.match(await notice(page, 'INVALID_REDIRECT_URI'), /^INVALID_REDIRECT_URI: Invalid field "redirect_uris"/);
  t.same((await h.admin('GET', clientsUrl)).body.clients, [], 'nothing was made');

  await page.click('#client-redirect-uris', { count: 3 });
  await page.keyboard.press('Backspace');
  await page.type('#client-redirect-uris', 'https://shop.example/cb');
  await page.type('#client-post-logout-uris', 'https://shop.example/');
  await page.type('#client-logo', 'https://shop.example/logo.png');
  await page.click('#client-first-party');
  await page.click('#client-submit');
  await page.waitForSelector('#client-secret-box:not([hidden])');
  t.equal(await page.$eval('#client-redirect-uris-error', (e) => (e as HTMLElement).hidden), true, 'the error line is gone');
  const secret = await page.$eval('#client-secret-value', (e) => e.textContent ?? '');
  t.match(secret, /^cs_[A-Za-z0-9_-]{43}$/);
  t.match(await notice(page, 'Created the client'), 'Created the client Web for shop.');
  let [client] = (await h.admin('GET', clientsUrl)).body.clients;
  t.match(client, {
    name: 'Web', client_type: 'confidential', token_endpoint_auth_method: 'client_secret_basic', first_party: false, logo_uri: 'https://shop.example/logo.png',
    redirect_uris: ['https://shop.example/cb'], post_logout_redirect_uris: ['https://shop.example/'], grant_types: ['authorization_code', 'refresh_token'],
    scopes: ['openid', 'profile', 'email', 'phone', 'offline_access'],
  }, 'the API has the client as the form said');
  await page.waitForSelector(`#client-list li[data-client-id="${client.client_id}"]`);
  const bogus = { grant_type: 'refresh_token', refresh_token: 'not-a-token' };
  t.equal((await clientToken(client.client_id, secret, bogus)).body.error, 'invalid_grant', 'the shown secret authenticates the client');
  await page.click('#dismiss-client-secret');
  t.equal(await page.$eval('#client-secret-value', (e) => e.textContent), '', 'dismissed: the secret leaves the page');

  await page.click('button[aria-label="Edit the client Web"]');
  t.equal(await page.$eval('#client-form-heading', (e) => e.textContent), 'Edit the client Web');
  t.same(await page.$eval('#client-type', (e) => [(e as HTMLSelectElement).value, (e as HTMLSelectElement).disabled]), ['confidential', true], 'the type stays');
  t.equal(await page.$eval('#client-logo', (e) => (e as HTMLInputElement).value), 'https://shop.example/logo.png', 'the form holds the client');
  await page.type('#client-name', ' app');
  await page.type('#client-redirect-uris', '\nhttps://shop.example/cb2');
  await page.click('#client-grants input[value="client_credentials"]');
  await page.click('#client-submit');
  t.match(await notice(page, 'Saved the client'), 'Saved the client Web app.');
  client = (await h.admin('GET', `${clientsUrl}/${client.client_id}`)).body;
  t.match(client, { name: 'Web app', redirect_uris: ['https://shop.example/cb', 'https://shop.example/cb2'], grant_types: ['authorization_code', 'refresh_token', 'client_credentials'], first_party: false });
  await page.waitForFunction(() => document.querySelector('#client-list li strong')?.textContent === 'Web app');
  t.equal(await page.$eval('#client-form-heading', (e) => e.textContent), 'New client', 'the form is back to a new client');

  await page.click('button[aria-label="Rotate the secret of the client Web app"]');
  await page.waitForSelector('#client-secret-box:not([hidden])');
  const rotated = await page.$eval('#client-secret-value', (e) => e.textContent ?? '');
  t.not(rotated, secret);
  t.match(confirms, [/Rotate the secret of the client "Web app"/]);
  t.equal((await clientToken(client.client_id, secret, { grant_type: 'client_credentials' })).status, 401, 'the old secret stopped working');
  const token = await clientToken(client.client_id, rotated, { grant_type: 'client_credentials' });
  t.equal(token.status, 200, 'the new secret gets a token');
  t.equal(token.body.token_type, 'Bearer');

  await page.select('#client-type', 'public');
  await page.type('#client-name', 'SPA');
  await page.type('#client-redirect-uris', 'https://spa.example/cb');
  await page.click('#client-grants input[value="client_credentials"]');
  await page.click('#client-submit');
  t.equal((await fieldError(page, 'client-grants')).text, 'Invalid field "grant_types": a public client cannot use client_credentials');
  await page.click('#client-grants input[value="client_credentials"]');
  await page.click('#client-submit');
  await page.waitForFunction(() => document.querySelectorAll('#client-list li[data-client-id]').length === 2);
  t.equal(await page.$eval('#client-secret-value', (e) => e.textContent), '', 'a public client has no secret to show');

  await page.click('button[aria-label="Delete the client Web app"]');
  await page.waitForFunction(() => document.querySelectorAll('#client-list li[data-client-id]').length === 1);
  t.match(confirms.at(-1), /Delete the client "Web app"\?/);
  t.same((await h.admin('GET', clientsUrl)).body.clients.map((c: { name: string; client_type: string }) => [c.name, c.client_type]), [['SPA', 'public']], 'the API has only the public client');
  t.same(problems.filter((p) => !/status of 400/.test(p)), []);
});

t.test('OAuth clients by keyboard only: open the screen, fill the form, create', async (t) => {
  const { page, problems } = await openConsole();
  const app = await h.createApp('shop');
  await signIn(page);
  await tabTo(page, 'button[aria-label="OAuth clients of shop"]');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.activeElement?.id === 'oauth-clients-heading');
  await tabTo(page, '#client-name');
  await page.keyboard.type('Native');
  await page.keyboard.press('Tab');
  t.equal(await page.evaluate(() => document.activeElement?.id), 'client-type');
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('Tab');
  await page.keyboard.type('com.example.app:/callback');
  await tabTo(page, '#client-first-party');
  await page.keyboard.press('Space');
  await tabTo(page, '#client-submit');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#client-list li[data-client-id]');
  t.match((await h.admin('GET', `/admin/apps/${app.id}/oauth-clients`)).body.clients, [{ name: 'Native', client_type: 'public', token_endpoint_auth_method: 'none', redirect_uris: ['com.example.app:/callback'], first_party: false }]);
  t.same(problems, []);
});

t.test('a user\'s OAuth consents are listed under the user and revoked there, ending that client\'s session', async (t) => {
  const app = await h.createApp('shop');
  const redirect = 'https://third.example/cb';
  const third = (await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, { name: 'Third Party Notes', redirect_uris: [redirect], first_party: false })).body;
  const verifier = 'v'.repeat(43);
  const oauth = new OAuthBrowser(h);
  const signInPage = await oauth.get(`${h.issuer}/oauth/authorize?${new URLSearchParams({
    client_id: third.client_id, redirect_uri: redirect, response_type: 'code', scope: 'openid email offline_access', state: 'st',
    code_challenge: createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256',
  })}`);
  const allowed = await oauth.decide((await oauth.signInWithCode(signInPage.html, 'ann@example.com')).html, 'allow');
  const tokens = await clientToken(third.client_id, third.client_secret, {
    grant_type: 'authorization_code', code: new URL(allowed.location!).searchParams.get('code')!, redirect_uri: redirect, code_verifier: verifier,
  });
  t.equal(tokens.status, 200, 'the client has a session of ann');
  const userId = (await h.admin('GET', '/admin/users?email=ann@example.com')).body.users[0].id;

  const { page, problems, confirms } = await openConsole();
  await signIn(page);
  await page.type('#user-query', 'ann@example.com');
  await page.keyboard.press('Enter');
  const item = `article.user .consents li[data-consent-client-id="${third.client_id}"]`;
  await page.waitForSelector(item);
  t.match(await page.$eval(item, (e) => e.textContent), /ClientThird Party Notes.*Scopesopenid email offline_access/s);
  await page.click(`${item} button[aria-label="Revoke the consent to Third Party Notes"]`);
  t.match(await notice(page, 'Revoked the consent'), 'Revoked the consent to Third Party Notes; 1 session(s) ended.');
  t.match(confirms, [/Revoke the consent to Third Party Notes\?/]);
  await page.waitForFunction(() => document.querySelector('article.user .consents h3')?.textContent === 'OAuth consents (0)');
  await page.waitForFunction(() => document.querySelector('article.user .sessions h3')?.textContent === 'Live sessions (0)');
  t.same(await page.$$eval('article.user section', (sections) => sections.map((s) => s.className)), ['sessions', 'consents'], 'the sessions, then the consents');
  t.same((await h.admin('GET', `/admin/users/${userId}/consents`)).body.consents, [], 'the API has no consent left');
  const refreshed = await clientToken(third.client_id, third.client_secret, { grant_type: 'refresh_token', refresh_token: tokens.body.refresh_token });
  t.equal(refreshed.body.error, 'invalid_grant', 'the client\'s refresh token stopped working');
  t.same(problems, []);
});

t.test('at 360 px wide the new screens do not overflow sideways, with long values in them', async (t) => {
  const { page, problems } = await openConsole(360);
  const app = await h.createApp('a-long-application-slug-for-narrow-screens');
  await h.admin('POST', `/admin/apps/${app.id}/oauth-clients`, {
    name: 'A client with a rather long name for a narrow screen', redirect_uris: [`https://a-very-long-host-name.example/${'callback/'.repeat(8)}`],
    logo_uri: `https://cdn.example/${'logo'.repeat(20)}.png`,
  });
  await signIn(page);
  await page.click(`button[aria-label="OAuth clients of ${app.slug}"]`);
  await page.waitForSelector('#client-list li[data-client-id]');
  await page.click('#client-list button[aria-label^="Rotate the secret"]');
  await page.waitForSelector('#client-secret-box:not([hidden])');
  await page.type('#client-name', 'x');
  await page.type('#client-redirect-uris', `http://${'refused'.repeat(12)}.example/cb`);
  await page.click('#client-submit');
  await page.waitForSelector('#client-redirect-uris-error:not([hidden])');
  t.same(await elementsPastViewport(page), [], 'no element sticks out');
  t.equal(await overflowsHorizontally(page), false);
  await page.evaluate(() => document.getElementById('oauth-clients-heading')!.scrollIntoView());
  await screenshot(page, 'admin-360-oauth-clients');

  const tenant = await h.createTenant(app, 'A tenant with a rather long name as well');
  await h.admin('POST', `/admin/apps/${app.id}/upstream-providers`, {
    kind: 'oidc', label: 'A long label for a button', client_id: `client-${'x'.repeat(60)}`, client_secret: 's', discovery_url: `${okta.discoveryUrl}`,
    redirect_uris: [`https://a-very-long-host-name.example/${'callback/'.repeat(8)}`], trusted_email_domains: ['a-very-long-domain-name-for-testing.example'],
  });
  t.equal((await h.admin('POST', `/admin/apps/${app.id}/tenants/${tenant}/invitations`, { phone: '+14155550123', role: 'admin' })).status, 201);
  await h.admin('POST', `/admin/apps/${app.id}/tenants/${tenant}/domains`, { domain: 'a-very-long-subdomain.of-a-long-domain-name.example' });
  await page.click(`button[aria-label="Sign-in providers of ${app.slug}"]`);
  await page.waitForSelector('#upstream-list li[data-provider-id]');
  await page.click(`button[aria-label="Second factor of ${app.slug}"]`);
  await page.waitForSelector(`#second-factor-tenant-${tenant}`);
  await page.click(`button[aria-label="Tenants of ${app.slug}"]`);
  await (await page.waitForSelector('button[aria-label="Invitations to A tenant with a rather long name as well"]'))!.click();
  await page.waitForSelector('#invitation-list li[data-invitation-id]');
  await page.click('button[aria-label="SSO of A tenant with a rather long name as well"]');
  await page.waitForSelector('#domain-list li[data-domain-id]');
  t.same(await elementsPastViewport(page), [], 'no element sticks out with every screen open');
  t.equal(await overflowsHorizontally(page), false);
  await page.evaluate(() => document.getElementById('sso-heading')!.scrollIntoView());
  await screenshot(page, 'admin-360-sso');
  t.same(problems.filter((p) => !/status of 400/.test(p)), []);
});

t.test('sign-in providers: a refusal next to its field; added from a preset, tested, edited with the secret kept, deleted', async (t) => {
  const { page, problems, confirms } = await openConsole();
  const app = await h.createApp('shop');
  const providersUrl = `/admin/apps/${app.id}/upstream-providers`;
  await signIn(page);
  await page.click('button[aria-label="Sign-in providers of shop"]');
  await page.waitForFunction(() => document.activeElement?.id === 'upstream-heading');
  t.equal(await page.$eval('#upstream-label', (e) => (e as HTMLInputElement).value), 'Sign in with Google', 'the first preset fills the label');
  await page.select('#upstream-kind', 'oidc');
  t.equal(await page.$eval('#upstream-label', (e) => (e as HTMLInputElement).value), 'Sign in with SSO', 'another preset, another label');
  await page.type('#upstream-client-id', 'okta-shop');
  await page.type('#upstream-secret', 'okta-secret');
  await page.type('#upstream-redirect-uris', REDIRECT);
  await page.type('#upstream-domains', 'shop.example');
  await page.click('#upstream-submit');
  t.same(await fieldError(page, 'upstream-discovery'), { text: 'Invalid field "discovery_url": required for an "oidc" provider', invalid: 'true', focused: true });
  t.same((await h.admin('GET', providersUrl)).body.providers, [], 'nothing was made');

  await page.type('#upstream-discovery', okta.discoveryUrl);
  await page.click('#upstream-submit');
  t.match(await notice(page, 'Added the provider'), 'Added the provider Sign in with SSO.');
  const listed = await h.admin('GET', providersUrl);
  t.match(listed.body.providers, [{ kind: 'oidc', label: 'Sign in with SSO', client_id: 'okta-shop', has_client_secret: true, discovery_url: okta.discoveryUrl, redirect_uris: [REDIRECT], trusted_email_domains: ['shop.example'], tenant_id: null }]);
  const provider = listed.body.providers[0];
  await page.waitForSelector(`#upstream-list li[data-provider-id="${provider.id}"]`);
  t.notOk(JSON.stringify(listed.body).includes('okta-secret'), 'the API never answers the secret');
  t.notOk((await page.content()).includes('okta-secret'), 'nor does the page hold it');

  await page.click('button[aria-label="Test the provider Sign in with SSO"]');
  t.match(await notice(page, 'works'), `Sign in with SSO works: issuer ${okta.issuer}, sign-in at ${okta.issuer}/`);

  await page.click('button[aria-label="Edit the provider Sign in with SSO"]');
  t.same(await page.$eval('#upstream-secret', (e) => [(e as HTMLInputElement).value, (e as HTMLInputElement).placeholder]), ['', 'stored; type to replace it'], 'the secret is write-only');
  t.equal(await page.$eval('#upstream-kind', (e) => (e as HTMLSelectElement).disabled), true, 'the kind stays');
  await page.click('#upstream-label', { count: 3 });
  await page.type('#upstream-label', 'Shop staff login');
  await page.click('#upstream-submit');
  t.match(await notice(page, 'Saved the provider'), 'Saved the provider Shop staff login.');
  t.match((await h.admin('GET', `${providersUrl}/${provider.id}`)).body, { label: 'Shop staff login', has_client_secret: true, discovery_url: okta.discoveryUrl });
  okta.signInAs = { sub: 'okta-ann', email: 'ann@shop.example', email_verified: true };
  const started = await h.post('/auth/upstream/start', { ...h.credentials(app), provider_id: provider.id, redirect_uri: REDIRECT });
  const signedIn = await h.post('/auth/upstream/callback', { ...h.credentials(app), params: await authorize(started.body.authorization_url, REDIRECT) });
  t.equal(signedIn.status, 200, 'the stored secret still signs in (the edit kept it)');

  await page.click('button[aria-label="Delete the provider Shop staff login"]');
  await page.waitForFunction(() => document.querySelector('#upstream-list li')?.textContent === 'No sign-in providers yet.');
  t.match(confirms, [/Delete the provider Shop staff login\?/]);
  t.same((await h.admin('GET', providersUrl)).body.providers, [], 'the API has none');
  t.same(problems.filter((p) => !/status of 400/.test(p)), []);
});

t.test('second factor: the app\'s and a tenant\'s policies as the API then has them; an admin reset of a user\'s TOTP, audited', async (t) => {
  const app = await h.createApp('shop');
  const acme = await h.createTenant(app, 'Acme');
  const ann = await enrolTotp(h, app, 'ann@example.com');
  t.equal(ann.recoveryCodes.length > 0, true);
  const policyUrl = `/admin/apps/${app.id}/second-factor-policy`;
  const { page, problems, confirms } = await openConsole();
  await signIn(page);
  await page.click('button[aria-label="Second factor of shop"]');
  await page.waitForFunction(() => document.activeElement?.id === 'second-factor-heading');
  await page.waitForSelector(`#second-factor-tenant-${acme}`);
  t.equal(await page.$eval('#second-factor-app', (e) => (e as HTMLSelectElement).value), 'off');
  await page.select('#second-factor-app', 'required');
  await page.click('#second-factor-form button[type="submit"]');
  t.match(await notice(page, 'The second factor is required'), 'The second factor is required in shop.');
  t.same((await h.admin('GET', policyUrl)).body, { policy: 'required', tenants: [] });
  await page.select(`#second-factor-tenant-${acme}`, 'off');
  await page.click('button[aria-label="Save the second factor of tenant Acme"]');
  t.match(await notice(page, 'in tenant Acme'), 'The second factor is off in tenant Acme.');
  t.same((await h.admin('GET', policyUrl)).body, { policy: 'required', tenants: [{ tenant_id: acme, policy: 'off' }] });
  await page.waitForFunction((id) => (document.getElementById(`second-factor-tenant-${id}`) as HTMLSelectElement | null)?.options[0]?.textContent === 'the app\'s (required)', {}, acme);
  await page.select(`#second-factor-tenant-${acme}`, '');
  await page.click('button[aria-label="Save the second factor of tenant Acme"]');
  t.match(await notice(page, 'follows'), 'Tenant Acme follows the app\'s second-factor policy.');
  t.same((await h.admin('GET', policyUrl)).body, { policy: 'required', tenants: [] });

  await page.type('#user-query', 'ann@example.com');
  await page.keyboard.press('Enter');
  await page.waitForSelector('article.user');
  await page.click('button[aria-label="Reset the second factor of ann@example.com"]');
  t.match(await notice(page, 'Reset the second factor'), 'Reset the second factor of ann@example.com.');
  t.match(confirms, [/Reset the second factor of ann@example.com\?.*recorded in the audit trail/s]);
  const userId = (await h.admin('GET', '/admin/users?email=ann@example.com')).body.users[0].id;
  const events = await h.admin('GET', `/admin/audit-events?type=second_factor.reset&user_id=${userId}`);
  t.match(events.body.events, [{ type: 'second_factor.reset', actor: 'admin', user_id: userId }], 'the reset is in the audit trail');
  await page.click('button[aria-label="Reset the second factor of ann@example.com"]');
  t.match(await notice(page, 'had no second factor'), 'ann@example.com had no second factor to reset.', 'the API has no key left to reset');
  t.same(problems, []);
});

t.test('invitations of a tenant: invite with a role, listed with its state, resent, revoked; a second pending one refused in words', async (t) => {
  const app = await h.createApp('shop');
  const acme = await h.createTenant(app, 'Acme');
  const invitationsUrl = `/admin/apps/${app.id}/tenants/${acme}/invitations`;
  const { page, problems, confirms } = await openConsole();
  await signIn(page);
  await page.click('button[aria-label="Tenants of shop"]');
  await (await page.waitForSelector('button[aria-label="Invitations to Acme"]'))!.click();
  await page.waitForFunction(() => document.activeElement?.id === 'invitations-heading');
  t.equal(await page.$eval('#invitations-heading', (e) => e.textContent), 'Invitations to Acme (shop)');
  t.equal(await page.$eval('#invitation-list', (e) => e.textContent), 'No invitations.');
  await page.type('#invite-to', '+1 415 555 0199');
  await page.select('#invite-role', 'staff');
  await page.click('#invite-form button[type="submit"]');
  t.match(await notice(page, 'Invited'), 'Invited +14155550199 into Acme as staff.');
  t.equal(h.outbox.messages.at(-1)?.to, '+14155550199', 'the invitation went out by SMS');
  let [invitation] = (await h.admin('GET', invitationsUrl)).body.invitations;
  t.match(invitation, { phone: '+14155550199', role: 'staff', state: 'pending', send_count: 1, invited_by: 'admin' });
  await page.waitForSelector(`#invitation-list li[data-invitation-id="${invitation.id}"][data-state="pending"]`);

  await page.type('#invite-to', '+14155550199');
  await page.click('#invite-form button[type="submit"]');
  t.same(await fieldError(page, 'invite-to'), { text: 'This address already has a pending invitation to the tenant', invalid: 'true', focused: true });

  h.clock.advance(60_000);
  await page.click('button[aria-label="Resend the invitation to +14155550199"]');
  t.match(await notice(page, 'again'), 'Sent the invitation to +14155550199 again (2 times in all).');
  t.equal((await h.admin('GET', invitationsUrl)).body.invitations[0].send_count, 2);
  await page.click('button[aria-label="Revoke the invitation to +14155550199"]');
  await page.waitForSelector(`#invitation-list li[data-invitation-id="${invitation.id}"][data-state="revoked"]`);
  t.match(confirms, [/Revoke the invitation to \+14155550199\?/]);
  [invitation] = (await h.admin('GET', invitationsUrl)).body.invitations;
  t.equal(invitation.state, 'revoked', 'the API has it revoked');
  await page.select('#invitation-state', 'pending');
  await page.waitForFunction(() => document.getElementById('invitation-list')?.textContent === 'No invitations.');
  t.same(problems.filter((p) => !/status of 409/.test(p)), []);
});

t.test('SSO of a tenant: its provider added and tested; a domain claimed with its TXT record, refused until published, then verified', async (t) => {
  const app = await h.createApp('shop');
  const acme = await h.createTenant(app, 'Acme');
  dns.txt.clear();
  const { page, problems } = await openConsole();
  await signIn(page);
  await page.click('button[aria-label="Tenants of shop"]');
  await (await page.waitForSelector('button[aria-label="SSO of Acme"]'))!.click();
  await page.waitForFunction(() => document.activeElement?.id === 'sso-heading');
  t.equal(await page.$eval('#sso-provider-list', (e) => e.textContent), 'The tenant has no provider of its own yet.');
  await page.select('#sso-kind', 'oidc');
  await page.click('#sso-label', { count: 3 });
  await page.type('#sso-label', 'Acme SSO');
  await page.type('#sso-client-id', 'okta-shop');
  await page.type('#sso-secret', 'okta-secret');
  await page.type('#sso-discovery', okta.discoveryUrl);
  await page.type('#sso-redirect-uris', REDIRECT);
  await page.select('#sso-default-role', 'staff');
  await page.click('#sso-require-sso');
  await page.click('#sso-submit');
  t.match(await notice(page, 'Added the SSO provider'), 'Added the SSO provider Acme SSO of Acme.');
  const [provider] = (await h.admin('GET', `/admin/apps/${app.id}/upstream-providers`)).body.providers;
  t.match(provider, { tenant_id: acme, label: 'Acme SSO', default_role: 'staff', require_sso: true, has_client_secret: true });
  await page.waitForSelector(`#sso-provider-list li[data-provider-id="${provider.id}"]`);
  t.equal(await page.$eval('#sso-form-heading', (e) => e.textContent), 'Edit Acme SSO', 'the form now edits the tenant\'s provider');
  await page.click('button[aria-label="Test the provider Acme SSO"]');
  t.match(await notice(page, 'works'), `Acme SSO works: issuer ${okta.issuer}`);

  await page.type('#domain-name', 'Acme.Example');
  await page.click('#domain-form button[type="submit"]');
  await page.waitForSelector('#domain-list li[data-domain-id]');
  const [claim] = (await h.admin('GET', `/admin/apps/${app.id}/tenants/${acme}/domains`)).body.domains;
  t.match(claim, { domain: 'acme.example', verified_at: null });
  const item = `#domain-list li[data-domain-id="${claim.id}"]`;
  t.same(await page.$eval(item, (li) => [li.querySelector('.txt-name')?.textContent, li.querySelector('.txt-value')?.textContent]),
    [claim.verification.name, claim.verification.value], 'the TXT record to publish, as the API has it');
  await page.click(`${item} button[aria-label="Verify acme.example"]`);
  await page.waitForSelector(`${item} .field-error:not([hidden])`);
  t.equal(await page.$eval(`${item} .field-error`, (e) => e.textContent), 'The DNS TXT record that proves the domain was not found; add it and retry', 'the refusal in words, by the domain');
  t.match(await notice(page, 'DOMAIN_NOT_VERIFIED'), /^DOMAIN_NOT_VERIFIED: /);

  dns.txt.set(claim.verification.name, [claim.verification.value]);
  await page.click(`${item} button[aria-label="Verify acme.example"]`);
  await page.waitForSelector(`#domain-list li[data-domain-id="${claim.id}"][data-verified="true"]`);
  t.match(await notice(page, 'Verified'), 'Verified acme.example: its people are sent to the tenant\'s provider.');
  t.match((await h.admin('GET', `/admin/apps/${app.id}/tenants/${acme}/domains`)).body.domains, [{ id: claim.id, verified_at: /Z$/ }], 'the API has it verified');
  const discovered = await h.post('/auth/sso/discover', { ...h.credentials(app), email: 'bob@acme.example' });
  t.match(discovered.body, { sso: true, provider_id: provider.id, tenant_id: acme, required: true }, 'home-realm discovery sends the domain to the provider, SSO required');
  t.same(problems.filter((p) => !/status of 409/.test(p)), []);
});

t.test('keyboard only: invite into a tenant, set the app\'s second factor, claim and verify a domain of the tenant', async (t) => {
  const app = await h.createApp('shop');
  const acme = await h.createTenant(app, 'Acme');
  dns.txt.clear();
  const { page, problems } = await openConsole();
  await signIn(page);
  await tabTo(page, 'button[aria-label="Tenants of shop"]');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.activeElement?.id === 'tenants-heading');
  await tabTo(page, 'button[aria-label="Invitations to Acme"]');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.activeElement?.id === 'invitations-heading');
  await tabTo(page, '#invite-to');
  await page.keyboard.type('+14155550100');
  await page.keyboard.press('Tab');
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#invitation-list li[data-invitation-id]');
  t.match((await h.admin('GET', `/admin/apps/${app.id}/tenants/${acme}/invitations`)).body.invitations, [{ phone: '+14155550100', role: 'staff', state: 'pending' }]);

  await tabTo(page, 'button[aria-label="Second factor of shop"]', 400);
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.activeElement?.id === 'second-factor-heading');
  await tabTo(page, '#second-factor-app');
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('Tab');
  await page.keyboard.press('Enter');
  await notice(page, 'The second factor is required');
  t.equal((await h.admin('GET', `/admin/apps/${app.id}/second-factor-policy`)).body.policy, 'required');

  await tabTo(page, 'button[aria-label="SSO of Acme"]', 400);
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.activeElement?.id === 'sso-heading');
  await tabTo(page, '#domain-name');
  await page.keyboard.type('acme.example');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#domain-list li[data-domain-id]');
  const [claim] = (await h.admin('GET', `/admin/apps/${app.id}/tenants/${acme}/domains`)).body.domains;
  dns.txt.set(claim.verification.name, [claim.verification.value]);
  await tabTo(page, 'button[aria-label="Verify acme.example"]');
  await page.keyboard.press('Enter');
  await page.waitForSelector('#domain-list li[data-verified="true"]');
  t.match((await h.admin('GET', `/admin/apps/${app.id}/tenants/${acme}/domains`)).body.domains, [{ domain: 'acme.example', verified_at: /Z$/ }]);
  t.same(problems, []);
});
