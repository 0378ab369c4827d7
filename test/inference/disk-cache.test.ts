// --cache-disk: the prompt cache's disk tier. States are written off the step loop, adopted after
// a restart when their fingerprint matches (model file, KV types, context layout, adapters and
// their scales), never loaded when they do not or when a file is truncated or corrupted, kept
// under a budget least recently used first across restarts, and found again after a router
// unloads a model; a kill -9 at any moment leaves nothing that is read as valid.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, copyFileSync, writeFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readSync, rmSync, statSync, truncateSync, watch, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import t from 'tap';
import { native } from '../../src/native/binding.js';
import { startRouterServer } from '../../src/inference/multi-model/server.js';
import { serverOptions, splitCommandLine } from '../../src/inference/server-config.js';
import { startInferenceServer, type InferenceServerOptions } from '../../src/inference/server.js';
import { ensureDraftModels, ensureTestModels } from '../fixtures/models.js';
import { completionTokens, sameGreedyAnswer } from '../helpers/greedy.js';
import { parseSse, postJson, startTestServer, type TestServer } from '../helpers/inference-server.js';
import { REPO_ROOT } from '../helpers/reference.js';

const models = await ensureTestModels();
const drafts = await ensureDraftModels();
const root = mkdtempSync(join(tmpdir(), 'disk-cache-test-'));
t.teardown(() => rmSync(root, { recursive: true, force: true }));
let dirs = 0;
const newDir = (): string => join(root, `cache-${dirs++}`);

// Distinct prompts of many tokens (a state is written at a task's end from 256 new tokens on).
const WORDS = ['river', 'lantern', 'copper', 'meadow', 'falcon', 'harbor', 'violet', 'engine', 'garden', 'winter', 'signal', 'marble', 'orchard', 'thunder', 'pepper', 'canyon'];
function text(seed: number, words: number): string {
  let x = seed * 2654435761;
  const out: string[] = [];
  for (let i = 0; i < words; i++) {
    x = (x * 1103515245 + 12345) % 2147483648;
    out.push(WORDS[x % WORDS.length]!);
  }
  return out.join(' ');
}
const P1 = text(1, 400);
const P2 = text(2, 400);
const P3 = text(3, 400);
const SHORT = text(4, 120); // fewer than 256 tokens: written only at shutdown
const MORE = ' and then the story went on';

const SIZES = { parallel: 2, ctxSize: 4096 };
const open = (dir: string, extra: Partial<InferenceServerOptions> = {}, model = models.chat): Promise<TestServer> =>
  startTestServer(model, { ...SIZES, ...extra, engine: { cacheDisk: dir, ...extra.engine } });

async function complete(base: string, prompt: string) {
  const res = await postJson(`${base}/completion`, { prompt, n_predict: 12, temperature: 0, n_probs: 2 });
  if (res.status !== 200) throw new Error(`completion: ${res.status} ${JSON.stringify(res.body)}`);
  return { cached: res.body.timings.cache_n as number, evaluated: res.body.tokens_evaluated as number, tokens: completionTokens(res.body), content: res.body.content as string };
}

async function metric(base: string, name: string): Promise<number> {
  const text = await (await fetch(`${base}/metrics`)).text();
  const m = new RegExp(`^llamacpp:${name} (\\S+)$`, 'm').exec(text);
  if (!m) throw new Error(`no metric ${name}`);
  return Number(m[1]);
}

/** Reads a metric until it equals `value` (at most 2,000 reads); false if it never does. */
async function metricReaches(base: string, name: string, value: number): Promise<boolean> {
  for (let i = 0; i < 2000; i++) {
    if ((await metric(base, name)) === value) return true;
    await new Promise((resolve) => setImmediate(resolve));
  }
  return false;
}

const stateFiles = (dir: string): string[] =>
  existsSync(dir) ? readdirSync(dir).flatMap((d) => readdirSync(join(dir, d)).filter((f) => f.endsWith('.kv')).map((f) => join(dir, d, f))) : [];
const tempFiles = (dir: string): string[] =>
  existsSync(dir) ? readdirSync(dir).flatMap((d) => readdirSync(join(dir, d)).filter((f) => f.startsWith('.tmp-')).map((f) => join(dir, d, f))) : [];

// The answers of a fresh server without the disk tier: the reference every restored state must give.
const reference = new Map<string, Awaited<ReturnType<typeof complete>>>();
{
  const fresh = await startTestServer(models.chat, SIZES);
  for (const prompt of [P1, P2, P3, SHORT, P1 + MORE, P2 + MORE, P3 + MORE, SHORT + MORE]) reference.set(prompt, await complete(fresh.base, prompt));
  await fresh.close();
}
const promptTokens = async (base: string, prompt: string): Promise<number> => (await postJson(`${base}/tokenize`, { content: prompt })).body.tokens.length;

t.test('a restarted server adopts the states of the one before and restores them: the answers equal a fresh server\'s', async (t) => {
  const dir = newDir();
  const first = await open(dir);
  t.equal((await complete(first.base, P1)).content, reference.get(P1)!.content);
  t.equal((await complete(first.base, SHORT)).content, reference.get(SHORT)!.content);
  await first.close();
  t.equal(stateFiles(dir).length, 2, 'one state at the long task\'s end, the short one at shutdown');

  const second = await open(dir);
  t.teardown(second.close);
  t.equal(await metric(second.base, 'prompt_cache_disk_adopted_total'), 2);
  for (const prompt of [P1, SHORT]) {
    const got = await complete(second.base, prompt + MORE);
    t.ok(got.cached >= (await promptTokens(second.base, prompt)) - 2, `the whole of the earlier prompt came back (${got.cached} tokens)`);
    sameGreedyAnswer(t, got.tokens, reference.get(prompt + MORE)!.tokens, 'restored from disk');
  }
  t.equal(await metric(second.base, 'prompt_cache_disk_hits_total'), 2);
  t.equal(await metric(second.base, 'prompt_cache_disk_rejected_total'), 0);
});

t.test('states of another model, another KV type or other adapter scales are never loaded', async (t) => {
  const dir = newDir();
  const writer = await open(dir);
  await complete(writer.base, P1);
  await writer.close();
  const written = stateFiles(dir);
  t.equal(written.length, 1);

  const other = await open(dir, {}, drafts.chat);
  t.equal(await metric(other.base, 'prompt_cache_disk_adopted_total'), 0, 'another model sees none');
  t.equal((await complete(other.base, P1 + MORE)).cached, 0);
  t.equal(await metric(other.base, 'prompt_cache_disk_hits_total'), 0);
  await other.close();

  const params = native.ServerParams.parse(['llama-server', '-m', models.chat, '-c', String(SIZES.ctxSize), '-np', String(SIZES.parallel), '-ctk', 'f32']);
  const q8 = await startInferenceServer({ ...serverOptions(params.values(), { cacheDisk: dir }, false), serverParams: params, host: '127.0.0.1', port: 0, metrics: true });
  await q8.ready;
  const q8Base = `http://127.0.0.1:${q8.port}`;
  t.equal(await metric(q8Base, 'prompt_cache_disk_adopted_total'), 0, 'an f32 K cache sees none');
  t.equal((await complete(q8Base, P1 + MORE)).cached, 0);
  await q8.close();

  t.ok(written.every((f) => existsSync(f)), 'the f16 state is left alone');
  const again = await open(dir);
  t.equal(await metric(again.base, 'prompt_cache_disk_adopted_total'), 1);
  await again.close();

  const loraDir = newDir();
  const scaled = await open(loraDir, { loras: [{ path: models.lora, scale: 1 }] });
  await complete(scaled.base, P2);
  await scaled.close();
  const unscaled = await open(loraDir, { loras: [{ path: models.lora, scale: 0.5 }] });
  t.equal(await metric(unscaled.base, 'prompt_cache_disk_adopted_total'), 1, 'same files: adopted');
  t.equal((await complete(unscaled.base, P2 + MORE)).cached, 0, 'computed under another scale: not restored');
  t.equal(await metric(unscaled.base, 'prompt_cache_disk_hits_total'), 0);
  await unscaled.close();
  const rescaled = await open(loraDir, { loras: [{ path: models.lora, scale: 1 }] });
  t.ok((await complete(rescaled.base, P2 + MORE)).cached >= (await promptTokens(rescaled.base, P2)) - 2, 'the same scale again: the whole prompt restored');
  t.equal(await metric(rescaled.base, 'prompt_cache_disk_hits_total'), 1);
  await rescaled.close();
});

t.test('a truncated file is deleted at start-up, a corrupted one when it is about to be loaded; both are recomputed', async (t) => {
  const dir = newDir();
  const writer = await open(dir);
  await complete(writer.base, P1);
  await complete(writer.base, P2);
  await writer.close();
  const [a, b] = stateFiles(dir).sort();
  t.ok(a && b, 'two states');
  truncateSync(a!, statSync(a!).size - 1000);
  const fd = openSync(b!, 'r+');
  const byte = Buffer.alloc(1);
  const at = Math.floor(statSync(b!).size / 2);
  readSync(fd, byte, 0, 1, at);
  byte[0] = byte[0]! ^ 0xff;
  writeSync(fd, byte, 0, 1, at);
  closeSync(fd);

  const server = await open(dir);
  t.teardown(server.close);
  t.equal(await metric(server.base, 'prompt_cache_disk_rejected_total'), 1, 'the truncated file');
  t.equal(await metric(server.base, 'prompt_cache_disk_adopted_total'), 1);
  t.notOk(existsSync(a!));
  for (const prompt of [P1, P2]) sameGreedyAnswer(t, (await complete(server.base, prompt + MORE)).tokens, reference.get(prompt + MORE)!.tokens, 'recomputed');
  t.equal(await metric(server.base, 'prompt_cache_disk_rejected_total'), 2, 'the corrupted file, at its load');
  t.equal(await metric(server.base, 'prompt_cache_disk_hits_total'), 0);
  t.notOk(existsSync(b!));
});

/** Resolves once `dir` holds a state file (at once when it does already); rejects after 120 s. */
function stateFileWritten(dir: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = (err?: Error): void => {
      w.close();
      clearTimeout(deadline);
      if (err) reject(err);
      else resolve();
    };
    const w = watch(dir, { recursive: true }, (_event, name) => {
      if (name && /\d+\.kv$/.test(String(name))) done();
    });
    const deadline = setTimeout(() => done(new Error(`no state file in ${dir} after 120 s`)), 120_000);
    if (stateFiles(dir).length > 0) done();
  });
}

/**
 * The same server as `open` in a child process, which the test kills; `engine` adds engine
 * settings (a slow disk). It prints "ready PORT" once its model is loaded.
 */
async function startChild(dir: string, engine: Record<string, number> = {}) {
  const helper = pathToFileURL(join(REPO_ROOT, 'test', 'helpers', 'inference-server.ts')).href;
  const main = `const { startTestServer } = await import(${JSON.stringify(helper)});
    const s = await startTestServer(${JSON.stringify(models.chat)}, ${JSON.stringify({ ...SIZES, engine: { cacheDisk: dir, ...engine } })});
    console.log('ready ' + s.server.port);`;
  const child = spawn(process.execPath, ['--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), '--input-type=module', '--eval', main],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const port = await new Promise<string>((resolve, reject) => {
    const read = (d: Buffer): void => {
      output += d.toString();
      const m = /^ready (\d+)$/m.exec(output);
      if (m) resolve(m[1]!);
    };
    child.stdout!.on('data', read);
    child.stderr!.on('data', read);
    child.once('exit', (code) => reject(new Error(`child exited ${code}: ${output}`)));
  });
  return { child, base: `http://127.0.0.1:${port}`, kill: async () => { child.kill('SIGKILL'); if (child.exitCode === null && child.signalCode === null) await once(child, 'exit'); } };
}

t.test('kill -9 while a state is being written leaves nothing that is read as valid', async (t) => {
  const dir = newDir();
  mkdirSync(dir, { recursive: true });
  // A slow disk: each write waits half way; the kill comes as soon as the temporary file exists.
  const tmpSeen = new Promise<void>((resolve) => {
    const w = watch(dir, { recursive: true }, (_event, name) => {
      if (name && String(name).includes('.tmp-')) { w.close(); resolve(); }
    });
  });
  const server = await startChild(dir, { cacheDiskTestWriteDelayMs: 600000 });
  await postJson(`${server.base}/completion`, { prompt: P1, n_predict: 12, temperature: 0 });
  await tmpSeen;
  await server.kill();
  t.equal(tempFiles(dir).length, 1, 'a half-written temporary file is left');
  t.equal(stateFiles(dir).length, 0);

  // Kills at random moments of a burst of requests' writes: once the first of their states is on
  // disk (the second round's child has the first round's at once), within 400 ms.
  for (let round = 0; round < 2; round++) {
    const s = await startChild(dir);
    const written = stateFileWritten(dir);
    const burst = [P1, P2, P3].map((p) => postJson(`${s.base}/completion`, { prompt: p, n_predict: 40, temperature: 0 }).catch(() => null));
    await postJson(`${s.base}/completion`, { prompt: SHORT, n_predict: 4, temperature: 0 });
    await written;
    const killed = new Promise<void>((resolve) => setTimeout(() => { void s.kill().then(resolve); }, Math.floor(Math.random() * 400)));
    await killed;
    await Promise.all(burst);
  }
  // Nothing writes now: these are the files the kills left.
  const left = stateFiles(dir);
  t.ok(left.length > 0, `states were on disk before the kills (${left.length})`);

  const after = await open(dir);
  t.teardown(after.close);
  t.equal(tempFiles(dir).length, 0, 'temporary files are deleted at start-up');
  t.equal(await metric(after.base, 'prompt_cache_disk_rejected_total'), 0, 'every file left is complete');
  t.equal(await metric(after.base, 'prompt_cache_disk_adopted_total'), left.length, 'and adopted');
  // One state per prompt at most (the second round adds too few tokens to write again): each file
  // brings its prompt back whole.
  let whole = 0;
  for (const prompt of [P1, P2, P3]) {
    const got = await complete(after.base, prompt + MORE);
    sameGreedyAnswer(t, got.tokens, reference.get(prompt + MORE)!.tokens, 'after the kills');
    if (got.cached >= (await promptTokens(after.base, prompt)) - 2) whole++;
  }
  t.equal(whole, left.length, 'each state left brought its whole prompt back from disk');
  t.equal(await metric(after.base, 'prompt_cache_disk_hits_total'), left.length);
  t.equal(await metric(after.base, 'prompt_cache_disk_rejected_total'), 0, 'and every file loaded passed its checksum');
});

t.test('the budget holds across restarts, least recently used first out', async (t) => {
  const dir = newDir();
  const first = await open(dir);
  await complete(first.base, P1);
  await complete(first.base, P2);
  await first.close();
  const files = stateFiles(dir);
  t.equal(files.length, 2);
  // A budget that holds these two and not a third of their size.
  const total = files.reduce((n, f) => n + statSync(f).size, 0);
  const budget = { cacheDiskMib: (total * 1.25) / (1024 * 1024) };

  const second = await open(dir, { engine: budget });
  t.equal(await metric(second.base, 'prompt_cache_disk_adopted_total'), 2);
  t.ok((await complete(second.base, P1 + MORE)).cached >= (await promptTokens(second.base, P1)) - 2, 'P1 restored whole: now the most recently used');
  await complete(second.base, P3);
  await second.close();
  t.equal(stateFiles(dir).length, 2, 'P3 written, one evicted');

  const third = await open(dir, { engine: budget });
  t.teardown(third.close);
  t.equal(await metric(third.base, 'prompt_cache_disk_adopted_total'), 2);
  // The files kept are read first: a prompt computed here (P2's) writes a state of its own, which
  // the budget makes room for by evicting the least recently used of them.
  for (const prompt of [P1, P3]) {
    const { cached } = await complete(third.base, prompt + MORE);
    const whole = await promptTokens(third.base, prompt);
    t.ok(cached >= whole - 2, `${prompt === P1 ? 'P1' : 'P3'} stayed: restored whole (${cached} of ${whole} tokens)`);
  }
  t.equal(await metric(third.base, 'prompt_cache_disk_hits_total'), 2);
  sameGreedyAnswer(t, (await complete(third.base, P2 + MORE)).tokens, reference.get(P2 + MORE)!.tokens, 'P2 computed');
  t.equal(await metric(third.base, 'prompt_cache_disk_hits_total'), 2, 'P2, the least recently used, went: nothing restored from disk for it');
});

t.test('the step loop never waits for a disk write', async (t) => {
  const dir = newDir();
  const server = await open(dir, { engine: { cacheDiskTestWriteDelayMs: 600000 } });
  await complete(server.base, P1);
  // The state is copied once the engine is idle, just after the answer went out: /metrics is
  // read until it shows the write (it has no event to await).
  t.ok(await metricReaches(server.base, 'prompt_cache_disk_pending', 1), 'P1\'s state is being written (the disk is stuck half way)');
  const other = await complete(server.base, P2);
  t.equal(other.content, reference.get(P2)!.content, 'another request is served meanwhile');
  t.ok(await metricReaches(server.base, 'prompt_cache_disk_pending', 2), 'its state waits behind');
  await server.close();
  t.equal(stateFiles(dir).length, 2, 'shutdown finishes the writes');
  const again = await open(dir);
  t.teardown(again.close);
  t.equal(await metric(again.base, 'prompt_cache_disk_adopted_total'), 2);
});

t.test('the step loop never waits for a disk read: the task waits for its state while the other slots decode', async (t) => {
  const dir = newDir();
  const first = await open(dir);
  await complete(first.base, P1);
  await first.close();
  // A slow disk: every read waits 3 s before it starts.
  const server = await open(dir, { engine: { cacheDiskTestReadDelayMs: 3000 } });
  t.teardown(server.close);
  const stream = async (prompt: string, nPredict: number, signal: AbortSignal, onEvent: () => void): Promise<string> => {
    const res = await fetch(`${server.base}/completion`, { method: 'POST', body: JSON.stringify({ prompt, n_predict: nPredict, temperature: 0, n_probs: 2, stream: true }), signal });
    const decoder = new TextDecoder();
    let text = '';
    for await (const chunk of res.body!) {
      const part = decoder.decode(chunk as Uint8Array, { stream: true });
      for (let i = 0; i < (part.match(/^data: /gm)?.length ?? 0); i++) onEvent();
      text += part;
    }
    return text;
  };
  // B generates on its own slot throughout; its events are counted while A waits for its read.
  const stopB = new AbortController();
  let bEvents = 0;
  let bStarted!: () => void;
  const bRunning = new Promise<void>((resolve) => { bStarted = resolve; });
  const b = stream(P2, 1500, stopB.signal, () => { bEvents++; bStarted(); }).catch(() => '');
  await bRunning;
  const bBefore = bEvents;
  let bWhileReading = -1;
  const aDone = stream(P1 + MORE, 12, new AbortController().signal, () => { if (bWhileReading < 0) bWhileReading = bEvents - bBefore; });
  // The same prompt again, sent while the state is being read: it shares the read.
  const second = complete(server.base, P1 + MORE);
  const a = await aDone;
  t.equal((await second).content, reference.get(P1 + MORE)!.content, 'the second request answers as the reference');
  stopB.abort();
  await b;
  t.ok(bWhileReading >= 20, `B got ${bWhileReading} tokens while A's state was read (the engine did not wait for the disk)`);
  const events = parseSse(a) as any[];
  const last = events.filter((e) => e !== '[DONE]').at(-1);
  t.ok(last.timings.cache_n >= (await promptTokens(server.base, P1)) - 2, `A's prompt came back from the disk (${last.timings.cache_n} tokens)`);
  sameGreedyAnswer(t, completionTokens(events), reference.get(P1 + MORE)!.tokens, 'restored after a slow read');
  t.equal(await metric(server.base, 'prompt_cache_disk_hits_total'), 1);
  t.equal(await metric(server.base, 'prompt_cache_disk_bytes_read_total'), statSync(stateFiles(dir)[0]!).size, 'the file was read once for both requests');
});

t.test('router mode: a model unloaded and loaded again finds its states; two models never read each other\'s', async (t) => {
  const dir = newDir();
  const modelsDir = join(root, 'router-models');
  mkdirSync(modelsDir, { recursive: true });
  copyFileSync(models.chat, join(modelsDir, 'chat.gguf'));
  copyFileSync(drafts.chat, join(modelsDir, 'small.gguf'));
  const params = native.ServerParams.parse(['llama-server', '--models-dir', modelsDir, '-c', String(SIZES.ctxSize), '-np', String(SIZES.parallel), '-t', '1']);
  const router = await startRouterServer({
    host: '127.0.0.1', port: 0, apiKeys: [], maxBodyBytes: 1 << 20, autoload: true, modelsMax: 0, spares: 0, buildInfo: 'b1-test',
    readSpecs: () => params.routerModels(),
    command: [process.execPath, '--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), join(REPO_ROOT, 'src', 'inference', 'server-main.ts')],
    childArgs: ['--cache-disk', dir], log: () => {},
  });
  t.teardown(() => router.close());
  const base = `http://127.0.0.1:${router.port}`;
  const ask = async (model: string, prompt: string) => {
    const res = await postJson(`${base}/completion`, { model, prompt, n_predict: 12, temperature: 0 });
    t.equal(res.status, 200);
    return { cached: res.body.timings.cache_n as number, content: res.body.content as string };
  };
  await ask('chat', P1);
  const unloaded = new Promise<void>((resolve) => {
    const on = (e: { model: string; data?: Record<string, unknown> }): void => {
      if (e.model === 'chat' && e.data?.['status'] === 'unloaded') { router.registry.off('event', on); resolve(); }
    };
    router.registry.on('event', on);
  });
  t.equal((await postJson(`${base}/models/unload`, { model: 'chat' })).status, 200);
  await unloaded;
  const back = await ask('chat', P1 + MORE);
  const p1Tokens = (await postJson(`${base}/tokenize`, { model: 'chat', content: P1 })).body.tokens.length as number;
  t.ok(back.cached >= p1Tokens - 2, `the reloaded model restored its whole state (${back.cached} of ${p1Tokens} tokens)`);
  t.equal(back.content, reference.get(P1 + MORE)!.content);
  t.equal((await ask('small', P1 + MORE)).cached, 0, 'the other model computes its own');
  t.equal(readdirSync(dir).length, 2, 'one directory per model');
});

t.test('the flags: --cache-disk DIR [--cache-disk-mib N]; a budget without a directory, or a directory that cannot be made, is refused', async (t) => {
  const values = native.ServerParams.parse(['llama-server', '-m', models.chat]).values();
  const dir = newDir();
  t.match(serverOptions(values, splitCommandLine(['--cache-disk', dir, '--cache-disk-mib', '100']).own, false).engine, { cacheDisk: dir, cacheDiskMib: 100 });
  t.same(serverOptions(values, {}, false).engine!.cacheDisk, undefined, 'off without the flag');
  t.throws(() => serverOptions(values, splitCommandLine(['--cache-disk-mib', '100']).own, false), { name: 'UsageError', message: '--cache-disk-mib needs --cache-disk DIR' });
  t.throws(() => serverOptions(values, splitCommandLine(['--cache-disk', dir, '--cache-disk-mib', '0']).own, false), { message: '--cache-disk-mib: must be at least 1, got 0' });
  const file = join(root, 'a-file');
  writeFileSync(file, 'not a directory');
  await t.rejects(open(join(file, 'cache')), { message: /^--cache-disk: cannot create / });
});
