// inference-server's entry point (src/inference/inference-server.cts): it sizes libuv's thread
// pool to the CPUs before anything loads, and its processes inherit that; in router mode it keeps
// one spare model process by default (--models-spare N changes that). Observed from outside, on
// the router's child processes: a process's own environment changes are not visible in /proc.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import t from 'tap';
import { ensureTestModels } from '../fixtures/models.js';
import { REPO_ROOT } from '../helpers/reference.js';

const models = await ensureTestModels();
const dir = mkdtempSync(join(tmpdir(), 'entry-point-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const preset = join(dir, 'preset.ini');
writeFileSync(preset, `[chat]\nmodel = ${models.chat}\n`);

const ENTRY = join(REPO_ROOT, 'src', 'inference', 'inference-server.cts');

/** Starts a router through the entry point; resolves once it listens (its spares are started before). */
async function startRouter(t: { teardown(fn: () => void): void }, extra: string[], env: NodeJS.ProcessEnv): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), ENTRY, '--models-preset', preset, '--port', '0', ...extra],
    { cwd: REPO_ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] });
  t.teardown(() => child.kill('SIGTERM'));
  for await (const line of createInterface({ input: child.stderr! })) if (line.includes('router listening')) break;
  return child;
}

/**
 * The model processes `pid` started, from /proc: its children that run Node (the TypeScript
 * loader of this test's router has an esbuild service child of its own, which is not one).
 */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const isNode = readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0')[0] === process.execPath;
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid && isNode) out.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** The environment a process was started with. */
function environOf(pid: number): Record<string, string> {
  const entries = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter((e) => e.includes('='));
  return Object.fromEntries(entries.map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
}

const { UV_THREADPOOL_SIZE: _unset, ...baseEnv } = process.env;

t.test('libuv\'s thread pool is sized to the CPUs, and the router keeps one spare by default', async (t) => {
  const router = await startRouter(t, [], baseEnv);
  const spares = childrenOf(router.pid!);
  t.equal(spares.length, 1, 'one spare model process');
  t.equal(environOf(spares[0]!)['UV_THREADPOOL_SIZE'], String(availableParallelism()), 'it runs with one pool thread per CPU');
});

t.test('UV_THREADPOOL_SIZE given by the user wins; --models-spare N keeps N spares', async (t) => {
  const router = await startRouter(t, ['--models-spare', '2'], { ...baseEnv, UV_THREADPOOL_SIZE: '7' });
  const spares = childrenOf(router.pid!);
  t.equal(spares.length, 2);
  t.same(spares.map((pid) => environOf(pid)['UV_THREADPOOL_SIZE']), ['7', '7']);
});

t.test('--models-spare 0: no spare', async (t) => {
  const router = await startRouter(t, ['--models-spare', '0'], baseEnv);
  t.same(childrenOf(router.pid!), []);
});
