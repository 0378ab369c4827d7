// The admin console's API keys of an app and its usage page, in headless Chromium: a key
// created from the form is shown once and works, rotation shows the new key and ends the old
// one, revocation ends it; usage is drawn as one SVG chart per app and tenant, bars per hour,
// and the filters narrow it. Each action is checked through the API.
import type { Dialog, Page } from 'puppeteer-core';
import t, { type Test } from 'tap';
import { assertPageBuilt, collectProblems, elementsPastViewport, launchBrowser, unlabelledControls } from '../helpers/browser.js';
import { ADMIN_KEY, startAuthHarness } from './fixtures/harness.js';

assertPageBuilt('admin');
const h = await startAuthHarness({ adminConsole: true });
t.teardown(() => h.close());
const browser = await launchBrowser();
t.teardown(() => browser.close());

async function openConsole(t: Test, width = 1200): Promise<{ page: Page; problems: string[]; confirms: string[] }> {
  const context = await browser.createBrowserContext();
  t.teardown(() => context.close());
  const page = await context.newPage();
  const problems = collectProblems(page);
  const confirms: string[] = [];
  page.on('dialog', (dialog: Dialog) => { confirms.push(dialog.message()); void dialog.accept(); });
  await page.setViewport({ width, height: 900 });
  await page.goto(`${h.base}/admin/`);
  await page.type('#admin-key', ADMIN_KEY);
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => !document.getElementById('console')!.hidden);
  return { page, problems, confirms };
}

const introspect = async (key: string) => (await h.post('/api-keys/introspect', undefined, { authorization: `Bearer ${key}` })).status;

async function notice(page: Page, pattern: string): Promise<string> {
  await page.waitForFunction((p) => new RegExp(p).test(document.getElementById('notice')?.textContent ?? ''), {}, pattern);
  return page.$eval('#notice', (e) => e.textContent ?? '');
}

t.test('the "API keys" button of an app lists its keys, creates one shown once, rotates and revokes it', async (t) => {
  const { app, tenant } = await h.startFresh({ session: true, tenant: true });
  const { page, problems, confirms } = await openConsole(t);
  await page.click('button[aria-label="API keys of app-a"]');
  await page.waitForFunction(() => document.activeElement?.id === 'api-keys-heading');
  t.equal(await page.$eval('#api-keys-heading', (e) => e.textContent), 'API keys of app-a');
  t.equal(await page.$eval('#api-key-list', (e) => e.textContent), 'No API keys yet.');

  await page.type('#api-key-name', 'batch jobs');
  await page.type('#api-key-tenant', tenant);
  await page.select('#api-key-role', 'staff');
  await page.select('#api-key-priority', 'batch');
  await page.type('#api-key-weight', '2.5');
  await page.type('#api-key-tpm', '1000');
  await page.type('#api-key-expires', '2099-01-01T00:00');
  await page.click('#create-api-key button[type="submit"]');
  await notice(page, 'Created the API key batch jobs for app-a');
  await page.waitForFunction(() => !document.getElementById('api-key-secret-box')!.hidden);
  const key = await page.$eval('#api-key-secret-value', (e) => e.textContent ?? '');
  t.match(key, /^lak_[A-Za-z0-9_-]{43}$/);
  t.equal(await introspect(key), 200, 'the key shown works');
  const [listed] = (await h.admin('GET', `/admin/apps/${app.id}/api-keys`)).body.api_keys;
  t.match(listed, {
    name: 'batch jobs', tenant_id: tenant, role: 'staff', priority_class: 'batch', weight: 2.5, expires_at: '2099-01-01T00:00:00.000Z',
    limits: { concurrent_requests: null, requests_per_minute: null, tokens_per_minute: 1000 },
  });
  const item = `#api-key-list li[data-api-key-id="${listed.id}"]`;
  t.match(await page.$eval(item, (e) => e.textContent), new RegExp(`batch jobs${key.slice(0, 12)}…active.*Rolestaff.*Limits1000 tokens/min.*Weight2\\.5.*Prioritybatch.*Expires2099-01-01 00:00 UTC`));
  t.notMatch(await page.$eval('#api-key-list', (e) => e.textContent), new RegExp(key.slice(12)), 'the list shows the prefix only');
  await page.click('#dismiss-api-key-secret');
  t.equal(await page.$eval('#api-key-secret-value', (e) => e.textContent), '', 'dismissing forgets the key');
  t.equal(await page.$eval('#api-key-secret-box', (e) => (e as HTMLElement).hidden), true);

  await page.click('button[aria-label="Rotate the API key batch jobs"]');
  await notice(page, 'New key for batch jobs; the old one no longer works');
  t.same(confirms, ['Rotate the API key "batch jobs"? Its current key stops working at once.']);
  const rotated = await page.$eval('#api-key-secret-value', (e) => e.textContent ?? '');
  t.match(rotated, /^lak_/);
  t.not(rotated, key);
  t.same([await introspect(key), await introspect(rotated)], [401, 200]);

  await page.click('button[aria-label="Revoke the API key batch jobs"]');
  await notice(page, 'Revoked the API key batch jobs');
  await page.waitForSelector(`${item}[data-state="revoked"]`);
  t.equal(await page.$(`${item} button`), null, 'a revoked key has no actions');
  t.equal(await introspect(rotated), 401);

  await page.type('#api-key-name', 'bad');
  await page.type('#api-key-weight', '0');
  await page.click('#create-api-key button[type="submit"]');
  t.equal(await notice(page, 'VALIDATION_ERROR'), 'VALIDATION_ERROR: Invalid field "weight": Expected number to be greater than 0');
  t.same(await unlabelledControls(page), []);
  t.same(problems, ['console: Failed to load resource: the server responded with a status of 400 (Bad Request)'], 'only the refused key');
});

t.test('the usage page draws a chart of tokens per hour for each app and tenant, and filters', async (t) => {
  await h.startFresh();
  await h.createApp('app-b');
  const HOUR = 3600 * 1000;
  const hour = (offset: number) => new Date((Math.floor(h.clock.now() / HOUR) + offset) * HOUR).toISOString();
  const row = (fields: Record<string, unknown>) => ({
    appSlug: 'app-a', tenant: 't1', key: 'k1', model: 'tiny', hour: hour(0),
    requests: 1, promptTokens: 100, cachedPromptTokens: 0, completionTokens: 50, queueMs: 1, computeMs: 10, ...fields,
  });
  await h.service.usage.record([
    row({}), row({ hour: hour(-2), requests: 3, promptTokens: 300 }), row({ tenant: 't2', hour: hour(-1) }),
    row({ appSlug: 'app-b', tenant: '' }), row({ appSlug: null, tenant: '', key: 'plain' }),
  ]);
  const { page, problems } = await openConsole(t, 375);
  await page.waitForSelector('#usage-charts li[data-app="app-a"][data-tenant="t1"]');
  t.same(await page.$$eval('#usage-charts li', (items) => items.map((e) => [e.getAttribute('data-app'), e.getAttribute('data-tenant')])), [
    ['app-a', 't1'], ['app-a', 't2'], ['(no app)', '(no tenant)'], ['app-b', '(no tenant)'],
  ]);
  const t1 = '#usage-charts li[data-app="app-a"][data-tenant="t1"]';
  t.equal(await page.$eval(`${t1} .usage-sum`, (e) => e.textContent), '500 tokens, 4 requests');
  t.equal(await page.$eval(`${t1} svg`, (e) => e.getAttribute('aria-label')), 'Tokens per hour of app-a / t1: 500 in all, at most 350 in an hour');
  t.same(await page.$$eval(`${t1} rect.bar`, (bars) => bars.map((b) => [b.getAttribute('data-hour'), b.querySelector('title')!.textContent])), [
    [hour(-2), `${hour(-2).slice(0, 13).replace('T', ' ')}:00 UTC: 350 tokens, 3 requests`],
    [hour(0), `${hour(0).slice(0, 13).replace('T', ' ')}:00 UTC: 150 tokens, 1 requests`],
  ]);
  const heights = await page.$$eval(`${t1} rect.bar`, (bars) => bars.map((b) => Number(b.getAttribute('height'))));
  t.ok(heights[0]! > heights[1]! * 2, 'the busier hour has the taller bar');
  t.match(await page.$eval('#usage-totals', (e) => e.textContent), /Requests7Prompt tokens700 \(0 cached\)Completion tokens250/);

  await page.type('#usage-app', 'app-a');
  await page.type('#usage-tenant', 't2');
  await page.click('#usage-filter button[type="submit"]');
  await page.waitForFunction(() => document.querySelectorAll('#usage-charts li').length === 1);
  t.equal(await page.$eval('#usage-charts li', (e) => e.getAttribute('data-tenant')), 't2');
  await page.evaluate(() => { (document.getElementById('usage-app') as HTMLInputElement).value = 'no-such-app'; });
  await page.click('#usage-filter button[type="submit"]');
  t.equal(await notice(page, 'APP_NOT_FOUND'), 'APP_NOT_FOUND: The app does not exist');
  t.same(await elementsPastViewport(page), [], 'nothing sticks out at 375 px');
  t.same(await unlabelledControls(page), []);
  t.same(problems, ['console: Failed to load resource: the server responded with a status of 404 (Not Found)'], 'only the unknown app');
});
