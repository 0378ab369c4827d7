// The provider's hosted sign-in page in headless Chromium: an authorization request to a code
// in the browser (e-mail, code, consent for a third-party client), the keyboard alone, every
// field labelled, an error in words announced in an alert region, no console errors or CSP
// violations, and no horizontal scrolling at 360 px.
import { createHash } from 'node:crypto';
import type { HTTPRequest, Page } from 'puppeteer-core';
import t, { type Test } from 'tap';
import { startAuthHarness } from '../auth/fixtures/harness.js';
import { collectProblems, launchBrowser, overflowsHorizontally, screenshot, unlabelledControls } from '../helpers/browser.js';

const h = await startAuthHarness();
t.teardown(() => h.close());
const browser = await launchBrowser();
t.teardown(() => browser.close());

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
