// Web pages: asset sizes (raw and gzip) and time to first paint in headless Chromium, each page
// loaded cold (new browser context) several times against real servers on this machine.
// node --import ./scripts/ts-loader.mjs bench/web-pages.ts
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { ensureTestModels } from '../test/fixtures/models.js';
import { startAuthHarness } from '../test/auth/fixtures/harness.js';
import { launchBrowser } from '../test/helpers/browser.js';
import { startTestServer } from '../test/helpers/inference-server.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);

function sizes(page: string): { files: number; raw: number; gzip: number } {
  const dir = join('dist', 'web', page);
  const files = readdirSync(dir).map((f) => readFileSync(join(dir, f)));
  return { files: files.length, raw: files.reduce((n, f) => n + f.length, 0), gzip: files.reduce((n, f) => n + gzipSync(f).length, 0) };
}

async function paints(url: string, ready: string): Promise<{ firstPaint: number; fcp: number; ready: number }[]> {
  const browser = await launchBrowser();
  const out = [];
  try {
    for (let i = 0; i < ROUNDS; i++) {
      const context = await browser.createBrowserContext();
      const page = await context.newPage();
      await page.setViewport({ width: 1200, height: 800 });
      const started = Date.now();
      await page.goto(url);
      await page.waitForSelector(ready);
      const readyMs = Date.now() - started;
      const entries = await page.evaluate(() => Object.fromEntries(performance.getEntriesByType('paint').map((e) => [e.name, e.startTime])));
      out.push({ firstPaint: entries['first-paint'] ?? NaN, fcp: entries['first-contentful-paint'] ?? NaN, ready: readyMs });
      await context.close();
    }
  } finally {
    await browser.close();
  }
  return out;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const models = await ensureTestModels();
const inference = await startTestServer(models.chat, { webui: true });
const auth = await startAuthHarness({ adminConsole: true });
try {
  for (const [page, url, ready] of [['chat', `${inference.base}/`, '#prompt:not([disabled])'], ['admin', `${auth.base}/admin/`, '#admin-key']] as const) {
    const s = sizes(page);
    const runs = await paints(url, ready);
    console.log(`${page}: ${s.files} files, ${(s.raw / 1024).toFixed(1)} KiB raw, ${(s.gzip / 1024).toFixed(1)} KiB gzip; ` +
      `first paint median ${median(runs.map((r) => r.firstPaint)).toFixed(0)} ms, first contentful paint ${median(runs.map((r) => r.fcp)).toFixed(0)} ms, ` +
      `usable (${ready}) ${median(runs.map((r) => r.ready))} ms; ${ROUNDS} cold loads`);
  }
} finally {
  await inference.close();
  await auth.close();
}
