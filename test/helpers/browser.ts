// Headless Chromium for the web-page tests (Debian's `chromium`, or CHROME_PATH), driven by
// puppeteer-core, and the checks every page shares: built files up to date, page errors and
// CSP violations collected, tab order, labels, horizontal overflow, screenshots.
import { mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const CHROME_PATH = process.env.CHROME_PATH ?? '/usr/bin/chromium';
export const SCREENSHOT_DIR = join(ROOT, 'screenshots');

/** Throws unless dist/web/<page> is at least as new as every file of src/web/<page>. */
export function assertPageBuilt(page: string): void {
  const newest = (dir: string): number => Math.max(0, ...readdirSync(dir).map((f) => statSync(join(dir, f)).mtimeMs));
  const oldest = (dir: string): number => Math.min(...readdirSync(dir).map((f) => statSync(join(dir, f)).mtimeMs));
  const built = join(ROOT, 'dist', 'web', page);
  let stale: boolean;
  try {
    stale = oldest(built) < newest(join(ROOT, 'src', 'web', page));
  } catch {
    stale = true;
  }
  if (stale) throw new Error(`dist/web/${page} is missing or older than src/web/${page}: run "npm run build:web" (npm test does it first)`);
}

/** `extraArgs`: more Chromium switches (e.g. `--host-resolver-rules=MAP auth.test 127.0.0.1:<port>` for a test issuer's host). */
export async function launchBrowser(extraArgs: string[] = []): Promise<Browser> {
  return puppeteer.launch({
    executablePath: CHROME_PATH,
    headless: true,
    // As root Chromium refuses its sandbox; the pages under test are our own.
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check', ...extraArgs],
  });
}

/** Page errors, console errors and CSP violations seen by the page, collected as they happen. */
export function collectProblems(page: Page): string[] {
  const problems: string[] = [];
  page.on('pageerror', (error) => problems.push(`pageerror: ${(error as Error).message}`));
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console: ${message.text()}`);
  });
  return problems;
}

export async function screenshot(page: Page, name: string): Promise<void> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  await page.screenshot({ path: join(SCREENSHOT_DIR, `${name}.png`) as `${string}.png`, fullPage: false });
}

/**
 * Presses Tab until focus comes back to the first element reached; returns a description of
 * each element focused (`#id`, or `tag[accessible text]`), as a cycle starting at `first`.
 */
export async function tabOrder(page: Page, first: string, limit = 200): Promise<string[]> {
  const order: string[] = [];
  for (let i = 0; i < limit; i++) {
    await page.keyboard.press('Tab');
    const current = await page.evaluate(() => {
      const el = document.activeElement as HTMLElement | null;
      if (!el || el === document.body) return null;
      return el.id ? `#${el.id}` : `${el.tagName.toLowerCase()}[${el.getAttribute('aria-label') ?? el.textContent?.trim() ?? ''}]`;
    });
    if (current === null) continue;
    if (order.length > 0 && current === order[0]) break;
    order.push(current);
  }
  const start = order.indexOf(first);
  return start < 0 ? order : [...order.slice(start), ...order.slice(0, start)];
}

/** Visible form controls and buttons that have no accessible name (label, aria-label(ledby), or text). */
export async function unlabelledControls(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const missing: string[] = [];
    for (const el of document.querySelectorAll<HTMLElement>('input, textarea, select, button')) {
      if (el.closest('[hidden]')) continue;
      const labelled = (el as HTMLInputElement).labels?.length
        || el.getAttribute('aria-label')
        || el.getAttribute('aria-labelledby')
        || (el.tagName === 'BUTTON' && el.textContent?.trim());
      if (!labelled) missing.push(el.outerHTML.slice(0, 120));
    }
    return missing;
  });
}

/**
 * Elements that stick out sideways: past the viewport's right edge, or a scrolling box whose
 * content is wider than itself. Code blocks (`pre`) are left out: they scroll by design.
 */
export async function elementsPastViewport(page: Page): Promise<string[]> {
  return page.evaluate(() => [...document.querySelectorAll<HTMLElement>('body *')]
    .filter((e) => !e.closest('pre'))
    .filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5
      || (['auto', 'scroll'].includes(getComputedStyle(e).overflowX) && e.scrollWidth > e.clientWidth + 1))
    .map((e) => `${e.tagName.toLowerCase()}${e.id ? `#${e.id}` : ''}${e.className ? `.${e.className}` : ''}`));
}

/** True when the page is wider than its viewport (something forces horizontal scrolling). */
export async function overflowsHorizontally(page: Page): Promise<boolean> {
  return page.evaluate(() => document.documentElement.scrollWidth > document.documentElement.clientWidth);
}
