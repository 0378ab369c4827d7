// The auth suite again with the routes served as auth-server serves them, from worker threads
// (AUTH_TEST_WORKERS=2, see fixtures/harness.ts): every file of test/auth that starts the harness
// runs in its own process, and its tests are this file's subtests. The same assertions hold
// whether one thread or two workers on one port answer, the races included (50 concurrent
// refreshes of one token spread over both workers: exactly one 200). workers.test.ts always runs
// two workers and is not repeated here.
import { readdirSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import t from 'tap';

const here = dirname(fileURLToPath(import.meta.url));
const loader = join(here, '..', '..', 'scripts', 'ts-loader.mjs');
const skip = new Set([basename(fileURLToPath(import.meta.url)), 'workers.test.ts']);
const files = readdirSync(here)
  .filter((name) => name.endsWith('.test.ts') && !skip.has(name))
  .filter((name) => readFileSync(join(here, name), 'utf8').includes('startAuthHarness('))
  .sort();

t.ok(files.length >= 10, `the harness's files were found (${files.length})`);
for (const file of files) {
  t.spawn(process.execPath, ['--import', loader, join(here, file)], { env: { ...process.env, AUTH_TEST_WORKERS: '2' } }, `${file}, routes served by 2 worker threads`);
}
