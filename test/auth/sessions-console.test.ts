// The admin console shows a user's live sessions under the user's card and ends one: the
// sessions API's admin half, in headless Chromium.
import type { Dialog } from 'puppeteer-core';
import t from 'tap';
import { assertPageBuilt, collectProblems, launchBrowser } from '../helpers/browser.js';
import { ADMIN_KEY, startAuthHarness } from './fixtures/harness.js';

assertPageBuilt('admin');
const h = await startAuthHarness({ adminConsole: true });
t.teardown(() => h.close());
const browser = await launchBrowser();
t.teardown(() => browser.close());

t.test('the user card lists the live sessions; "End session" ends one', async (t) => {
  const { app, tokens } = await h.startFresh({ session: true });
  h.clock.advance(60_000);
  const second = await h.login(app, 'ann@example.com');
  const page = await browser.newPage();
  t.teardown(() => page.close());
  const problems = collectProblems(page);
  const confirms: string[] = [];
  page.on('dialog', (dialog: Dialog) => { confirms.push(dialog.message()); void dialog.accept(); });
  await page.goto(`${h.base}/admin/`);
  await page.type('#admin-key', ADMIN_KEY);
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => !document.getElementById('console')!.hidden);
  await page.type('#user-query', 'ann@example.com');
  await page.keyboard.press('Enter');
  await page.waitForSelector('article.user .sessions li');
  const listed = await page.$$eval('article.user .sessions li', (items) => items.map((li) => li.getAttribute('data-session-id')));
  const api = await h.admin('GET', `/admin/users/${tokens.user_id}/sessions`);
  t.same(listed, api.body.sessions.map((s: { id: string }) => s.id), 'the sessions the API lists, most recently used first');
  t.equal(listed.length, 2);
  t.match(await page.$eval('article.user .sessions h3', (e) => e.textContent), 'Live sessions (2)');

  await page.click(`article.user .sessions li[data-session-id="${listed[0]}"] button`);
  await page.waitForFunction(() => document.querySelectorAll('article.user .sessions li').length === 1);
  t.same(confirms, ['End this app-a session? Its refresh token stops working.']);
  t.match(await page.$eval('#notice', (e) => e.textContent), 'Ended the app-a session.');
  const ended = await h.refresh(app, second.refresh_token);
  t.equal(ended.status, 401);
  t.equal(ended.body.error.code, 'TOKEN_REVOKED', 'the most recent session (the second login) was ended');
  t.equal((await h.refresh(app, tokens.refresh_token)).status, 200, 'the other one lives on');
  t.same(problems, []);
});
