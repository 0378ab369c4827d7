// The admin console's SMS defences of an app, in headless Chromium: the settings saved from the
// form reach the API, and a tripped verification-ratio guard shows its country throttled.
import type { Dialog } from 'puppeteer-core';
import t from 'tap';
import { assertPageBuilt, collectProblems, launchBrowser, unlabelledControls } from '../helpers/browser.js';
import { ADMIN_KEY, startAuthHarness } from './fixtures/harness.js';

assertPageBuilt('admin');
const h = await startAuthHarness({ adminConsole: true });
t.teardown(() => h.close());
const browser = await launchBrowser();
t.teardown(() => browser.close());

t.test('the "SMS" button of an app shows and saves its defences and this hour\'s countries', async (t) => {
  const { app } = await h.startFresh();
  const page = await browser.newPage();
  t.teardown(() => page.close());
  const problems = collectProblems(page);
  page.on('dialog', (dialog: Dialog) => { void dialog.accept(); });
  await page.goto(`${h.base}/admin/`);
  await page.type('#admin-key', ADMIN_KEY);
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => !document.getElementById('console')!.hidden);
  await page.click('button[aria-label="SMS defences of app-a"]');
  await page.waitForFunction(() => document.activeElement?.id === 'sms-heading');
  t.equal(await page.$eval('#sms-heading', (e) => e.textContent), 'SMS defences of app-a');
  t.equal(await page.$eval('#sms-countries', (e) => e.textContent), 'No SMS codes this hour.');

  await page.type('#sms-allowed', '1, +44');
  await page.type('#sms-ratio', '0.5');
  await page.type('#sms-ratio-sent', '2');
  await page.click('#sms-form button[type="submit"]');
  await page.waitForFunction(() => /Saved the SMS defences of app-a/.test(document.getElementById('notice')?.textContent ?? ''));
  const saved = await h.admin('GET', `/admin/apps/${app.id}/sms-defences`);
  t.match(saved.body.settings, { allowed_calling_codes: ['1', '44'], daily_cap: null, prefix_hourly: null, country_hourly: null, ratio_min_sent: 2, ratio_min_verified: 0.5 });

  // Two codes to US numbers, none verified: the third trips the guard.
  for (const phone of ['+14155550100', '+12125550100']) t.equal((await h.post('/auth/otp/request', { ...h.credentials(app), phone })).status, 200);
  t.equal((await h.post('/auth/otp/request', { ...h.credentials(app), phone: '+13105550100' })).status, 429);
  await page.click('button[aria-label="SMS defences of app-a"]');
  await page.waitForSelector('#sms-countries li[data-calling-code="1"] .tag.danger');
  t.match(await page.$eval('#sms-countries li[data-calling-code="1"]', (e) => e.textContent), /\+1throttled since .*2 sent, 0 verified/);
  t.equal(await page.$eval('#sms-allowed', (e) => (e as HTMLInputElement).value), '1, 44', 'the form shows the saved settings');
  t.same(await unlabelledControls(page), []);
  t.same(problems, []);
});
