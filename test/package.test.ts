// After `npm install`, the package's bins are compiled, executable and runnable through npx.
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { REPO_ROOT } from './helpers/reference.js';

const { bin } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { bin: Record<string, string> };

for (const [name, path] of Object.entries(bin)) {
  t.test(`${name} is an executable node script that answers --help`, async (t) => {
    const file = join(REPO_ROOT, path);
    t.ok(statSync(file).mode & 0o111, `${path} is executable`);
    t.match(readFileSync(file, 'utf8').split('\n')[0], /^#!\/usr\/bin\/env node/);
    const out = execFileSync(file, ['--help'], { cwd: REPO_ROOT, encoding: 'utf8', env: { ...process.env, AUTH_ADMIN_KEY: '' } });
    t.match(out, new RegExp(`usage: ${name}`));
  });
}
