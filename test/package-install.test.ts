// The packed package, installed as a user installs it: `npm pack` (of the dist/ that npm ci
// built), with the prebuilt addon package of this checkout's build, `npm install -g` into a
// temporary prefix. Nothing is compiled, the bins run from the prefix, inference-server answers,
// and `npm uninstall -g` leaves nothing. .ci/run also runs scripts/packed-install.mjs itself,
// with prepack and auth-server; the source-build fallback is measured in docs/design.md.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { ensureTestModels } from './fixtures/models.js';
// @ts-expect-error: a plain ES module of the package's scripts, without type declarations
import { installGlobal, packPrebuilt, packProject, PACKAGE_NAME, PREBUILT_NAME, probeInferenceServer, uninstallGlobal } from '../scripts/packed-install.mjs';

const BINS = ['inference-server', 'inference-cli', 'auth-server'];
const models = await ensureTestModels();
const work = mkdtempSync(join(tmpdir(), 'package-install-'));
t.teardown(() => rmSync(work, { recursive: true, force: true }));
const tarball: string = packProject(work, { runPrepack: false });
const prebuilt: string = packPrebuilt(work);
const prefix = join(work, 'prefix');
const installed = join(prefix, 'lib', 'node_modules', PACKAGE_NAME);

t.test('the tarball holds what runs and what builds the addon, and no tests, benchmarks, TypeScript sources or source maps', async (t) => {
  const paths = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).trim().split('\n').map((p) => p.replace(/^package\//, ''));
  t.same(paths.filter((p) => /^(test|bench)\//.test(p) || /\.(ts|cts|map)$/.test(p)), []);
  for (const file of ['dist/inference/inference-server.cjs', 'dist/inference/cli-main.js', 'dist/auth/server-main.js', 'dist/bundle/server-main.js',
    'dist/web/chat/index.html', 'src/auth/migrations/0001_create_apps.sql', 'native/addon.cpp', 'CMakeLists.txt', 'vendor/fetch-llama.mjs',
    'vendor/llama.cpp.pin.json', 'scripts/install.mjs', 'scripts/build-addon.mjs']) {
    t.ok(paths.includes(file), file);
  }
});

t.test('installed with the prebuilt addon package: nothing compiled, the bins run from the prefix, inference-server answers', async (t) => {
  const { output } = installGlobal(prefix, [tarball, prebuilt]);
  t.match(output, `[install] using the prebuilt addon ${PREBUILT_NAME}: nothing to compile`);
  t.notOk(existsSync(join(installed, 'build')), 'no build directory');
  t.notOk(existsSync(join(installed, 'vendor', 'llama.cpp')), 'llama.cpp was not fetched');
  for (const bin of BINS) {
    const help = execFileSync(join(prefix, 'bin', bin), ['--help'], { encoding: 'utf8', env: { ...process.env, AUTH_ADMIN_KEY: '' } });
    t.match(help, new RegExp(`usage: ${bin}`), `${bin} --help`);
  }
  const { health, completion } = await probeInferenceServer(prefix, models.chat);
  t.same(health, { status: 200, body: { status: 'ok' } });
  t.equal(completion.status, 200);
  t.equal(completion.body.tokens_predicted, 4);
});

t.test('npm uninstall -g leaves nothing behind', async (t) => {
  t.same(uninstallGlobal(prefix, [PACKAGE_NAME, PREBUILT_NAME]), []);
});
