// `inference-server -hf OWNER/REPO:TAG` as a new user runs it, against the local mock hub: the
// first start downloads into an empty cache, the next one starts --offline from it, two starts at
// once share the cache, and llama-server (built from the same source) and this server use each
// other's cache.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { native } from '../../src/native/binding.js';
import { logProgress } from '../../src/inference/download/progress.js';
import { resolveModels } from '../../src/inference/download/resolve-models.js';
import { ensureTestModels } from '../fixtures/models.js';
import { startMockHub } from '../fixtures/mock-hub.js';
import { referenceTool, REPO_ROOT } from '../helpers/reference.js';
import { freePort } from '../helpers/ports.js';

const models = await ensureTestModels();
const chat = readFileSync(models.chat);
const REPO = 'example/tiny-chat-GGUF';
const hub = await startMockHub({
  [REPO]: {
    files: [
      { path: 'README.md', bytes: Buffer.from('# tiny chat\n') },
      { path: 'tiny-chat-Q8_0.gguf', bytes: chat },
      { path: 'mmproj-tiny-chat-F16.gguf', bytes: readFileSync(models.mmproj) },
    ],
  },
});
t.teardown(() => hub.close());

const caches: string[] = [];
t.teardown(() => { for (const dir of caches) rmSync(dir, { recursive: true, force: true }); });
function freshCache(): string {
  const dir = mkdtempSync(join(tmpdir(), 'hub-cli-'));
  caches.push(dir);
  return dir;
}

interface Started {
  child: ChildProcess;
  stderr: () => string;
  /** Resolves with the exit code once the process ends. */
  exited: Promise<number | null>;
}

/** Starts a server process; `ready` resolves when its stderr matches `until` (rejects if it exits first). */
function startProcess(command: string, args: string[], env: Record<string, string>): Started & { ready: (until: RegExp) => Promise<void> } {
  const child = spawn(command, args, { cwd: REPO_ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr!.on('data', (d) => { err += d; });
  child.stdout!.on('data', (d) => { err += d; });
  const exited = once(child, 'exit').then(([code]) => code as number | null);
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL'); });
  return {
    child,
    stderr: () => err,
    exited,
    ready: (until) => new Promise<void>((resolve, reject) => {
      const check = (): void => { if (until.test(err)) { child.stderr!.off('data', check); child.stdout!.off('data', check); resolve(); } };
      child.stderr!.on('data', check);
      child.stdout!.on('data', check);
      check();
      void exited.then((code) => reject(new Error(`exited (${code}) before ${until}:\n${err}`)));
      // A bound, not a wait: a start that never gets there fails with its log instead of hanging the file.
      setTimeout(() => reject(new Error(`no ${until} within 60 s:\n${err}`)), 60_000).unref();
    }),
  };
}

function ours(args: string[], cache: string): ReturnType<typeof startProcess> {
  // --no-webui: the page's files are not what these tests are about (and may be rebuilt meanwhile).
  return startProcess(process.execPath, ['--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), join(REPO_ROOT, 'src', 'inference', 'server-main.ts'), '--no-webui', ...args],
    { LLAMA_CACHE: cache, MODEL_ENDPOINT: hub.url });
}

async function stop(s: Started): Promise<void> {
  s.child.kill('SIGTERM');
  const killer = setTimeout(() => s.child.kill('SIGKILL'), 10_000);
  await s.exited;
  clearTimeout(killer);
}

async function greedy(port: number): Promise<{ status: number; body: any }> {
  const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Hello' }], max_tokens: 8, temperature: 0 }),
  });
  return { status: res.status, body: await res.json() };
}

const cdnGets = (since: number, sha: string): number => hub.requests.slice(since).filter((r) => r.method === 'GET' && r.path.startsWith(`/cdn/${sha}`)).length;
const chatSha = (await import('node:crypto')).createHash('sha256').update(chat).digest('hex');

t.test('-hf OWNER/REPO:Q8_0 from an empty cache: progress in the log, the model answers under its hub name; then --offline from the cache', async (t) => {
  const cache = freshCache();
  const port = await freePort();
  const first = ours(['-hf', `${REPO}:Q8_0`, '--port', String(port), '-c', '512', '-np', '1'], cache);
  await first.ready(/model ready/);
  const log = first.stderr();
  t.match(log, `inference-server: downloading ${hub.url}${REPO}/resolve/`);
  t.match(log, /tiny-chat-Q8_0\.gguf \(25\.9 MiB\)/);
  for (const pct of [10, 50, 90]) t.match(log, new RegExp(`inference-server: downloading tiny-chat-Q8_0\\.gguf: ${pct}% \\(`), `${pct}% logged`);
  t.match(log, 'inference-server: downloaded mmproj-tiny-chat-F16.gguf', 'the mmproj came with it');
  const answer = await greedy(port);
  t.equal(answer.status, 200);
  t.equal(answer.body.model, `${REPO}:Q8_0`, 'named as llama-server names an -hf model');
  const models = await (await fetch(`http://127.0.0.1:${port}/v1/models`)).json();
  t.equal(models.data[0].id, `${REPO}:Q8_0`);
  await stop(first);

  const before = hub.requests.length;
  const second = ours(['-hf', `${REPO}:Q8_0`, '--offline', '--port', String(port), '-c', '512', '-np', '1'], cache);
  await second.ready(/model ready/);
  t.notMatch(second.stderr(), /downloading/);
  const again = await greedy(port);
  t.equal(again.body.choices[0].message.content, answer.body.choices[0].message.content, 'the same model, the same greedy answer');
  t.equal(hub.requests.length, before, 'the offline start asked the hub nothing');
  await stop(second);
});

t.test('--offline with an empty cache exits 1 naming the cache', async (t) => {
  const cache = freshCache();
  // In this process, as server-main resolves -hf before anything loads (with ours()'s environment);
  // it prints the refusal as `inference-server: <message>` and exits 1.
  const values = native.ServerParams.parse(['llama-server', '--no-webui', '-hf', `${REPO}:Q8_0`, '--offline', '--port', '0']).values();
  const log: string[] = [];
  const options = { env: { ...process.env, LLAMA_CACHE: cache, MODEL_ENDPOINT: hub.url }, log: (line: string) => log.push(line), progress: logProgress((line) => log.push(line)), userAgent: 'download-cli.test' };
  const refused = await resolveModels(values, options).then(() => null, (err: unknown) => err as Error);
  t.ok(refused, 'the start fails: exit 1');
  t.match(`inference-server: ${refused?.message}`, `inference-server: -hf ${REPO}: not in the cache at ${cache}, and --offline forbids downloading it`);
});

t.test('two servers started at once on one empty cache both serve, and each file is fetched once', async (t) => {
  const cache = freshCache();
  const before = hub.requests.length;
  const [pa, pb] = [await freePort(), await freePort()];
  // The model's download stays under way until one server has seen the other holding the file.
  const release = hub.holdDownloads(REPO, 'tiny-chat-Q8_0.gguf');
  const a = ours(['-hf', `${REPO}:Q8_0`, '--port', String(pa), '-c', '512', '-np', '1'], cache);
  const b = ours(['-hf', `${REPO}:Q8_0`, '--port', String(pb), '-c', '512', '-np', '1'], cache);
  const waiting = /tiny-chat-Q8_0\.gguf is being downloaded by another process \(into .*\): waiting for it/;
  await Promise.race([a.ready(waiting), b.ready(waiting)]);
  release();
  await Promise.all([a.ready(/model ready/), b.ready(/model ready/)]);
  const [ra, rb] = [await greedy(pa), await greedy(pb)];
  t.equal(ra.status, 200);
  t.equal(ra.body.choices[0].message.content, rb.body.choices[0].message.content);
  t.equal(cdnGets(before, chatSha), 1, 'the model was downloaded once');
  t.equal([a.stderr(), b.stderr()].filter((log) => waiting.test(log)).length, 1, 'one waited for the other');
  await Promise.all([stop(a), stop(b)]);
});

t.test('llama-server and this server use each other\'s cache', async (t) => {
  const llamaServer = await referenceTool('llama-server');
  const health = async (port: number): Promise<number> => (await fetch(`http://127.0.0.1:${port}/health`)).status;

  // llama-server downloads; this server starts offline from what it left.
  const byLlama = freshCache();
  const port = await freePort();
  const llama = startProcess(llamaServer, ['-hf', `${REPO}:Q8_0`, '--port', String(port), '-c', '512', '-np', '1'], { LLAMA_CACHE: byLlama, MODEL_ENDPOINT: hub.url });
  await llama.ready(/llama_server: listening on http/);
  t.equal(await health(port), 200);
  await stop(llama);
  const before = hub.requests.length;
  const oursOffline = ours(['-hf', `${REPO}:Q8_0`, '--offline', '--port', String(port), '-c', '512', '-np', '1'], byLlama);
  await oursOffline.ready(/model ready/);
  t.equal((await greedy(port)).status, 200, 'ours serves the model llama-server downloaded');
  await stop(oursOffline);

  // This server downloads; llama-server starts offline from what it left.
  const byOurs = freshCache();
  const oursOnline = ours(['-hf', `${REPO}:Q8_0`, '--port', String(port), '-c', '512', '-np', '1'], byOurs);
  await oursOnline.ready(/model ready/);
  await stop(oursOnline);
  t.equal(cdnGets(before, chatSha), 1, 'ours downloaded the model (the offline start before it fetched nothing)');
  const afterOurs = hub.requests.length;
  const llamaOffline = startProcess(llamaServer, ['-hf', `${REPO}:Q8_0`, '--offline', '--port', String(port), '-c', '512', '-np', '1'], { LLAMA_CACHE: byOurs, MODEL_ENDPOINT: hub.url });
  await llamaOffline.ready(/llama_server: listening on http/);
  t.equal(await health(port), 200, 'llama-server serves the model ours downloaded');
  t.equal(hub.requests.length, afterOurs, 'llama-server --offline asked the hub nothing');
  await stop(llamaOffline);
});
