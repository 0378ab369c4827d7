// Router mode's model downloads, as llama-server's: POST /models fetches a model by its hub name
// (the local mock hub) into the cache with progress on /models/sse, it is then one of the router's
// cache models; DELETE /models removes it (a download under way is cancelled, a running model
// stopped).
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, mkdirSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { native } from '../../src/native/binding.js';
import { startRouterServer, type RouterServer } from '../../src/inference/multi-model/server.js';
import { modelProcess, type ModelEvent } from '../../src/inference/multi-model/model-registry.js';
import { ensureTestModels } from '../fixtures/models.js';
import { startMockHub } from '../fixtures/mock-hub.js';
import { wholeChunks } from '../helpers/chunked.js';
import { postJson } from '../helpers/inference-server.js';
import { REPO_ROOT } from '../helpers/reference.js';

const models = await ensureTestModels();
const chat = readFileSync(models.chat);
const REPO = 'org/chat-GGUF';
const hub = await startMockHub({
  [REPO]: { files: [{ path: 'chat-Q8_0.gguf', bytes: chat }, { path: 'mmproj-chat-F16.gguf', bytes: readFileSync(models.mmproj) }] },
  'org/slow-GGUF': { files: [{ path: 'slow-Q8_0.gguf', bytes: chat }] },
});
t.teardown(() => hub.close());
const dir = mkdtempSync(join(tmpdir(), 'router-dl-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const cache = join(dir, 'cache');
const modelsDir = join(dir, 'models');
mkdirSync(modelsDir);
symlinkSync(models.chat, join(modelsDir, 'local.gguf'));
// llama.cpp reads the cache directory from the environment (once per process): set before any use.
process.env['LLAMA_CACHE'] = cache;
process.env['MODEL_ENDPOINT'] = hub.url;

const CHILD = [process.execPath, '--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), join(REPO_ROOT, 'src', 'inference', 'server-main.ts')];
const params = native.ServerParams.parse(['llama-server', '--models-dir', modelsDir, '-c', '512', '-np', '1', '-t', '1']);
const router: RouterServer = await startRouterServer({
  host: '127.0.0.1', port: 0, apiKeys: [], maxBodyBytes: 1 << 20, autoload: true, modelsMax: 0, spares: 0, buildInfo: 'b1-test',
  readSpecs: () => params.routerModels(), command: CHILD, childArgs: [], log: () => {},
});
t.teardown(() => router.close());
const base = `http://127.0.0.1:${router.port}`;

/** GET /models/sse, collected; `until` resolves with the first event that matches. */
async function subscribe(): Promise<{ events: ModelEvent[]; until: (match: (e: ModelEvent) => boolean) => Promise<ModelEvent>; close: () => void }> {
  const abort = new AbortController();
  const res = await fetch(`${base}/models/sse`, { signal: abort.signal });
  const events: ModelEvent[] = [];
  const waiters: Array<{ match: (e: ModelEvent) => boolean; resolve: (e: ModelEvent) => void }> = [];
  void (async () => {
    let buffer = '';
    try {
      for await (const chunk of res.body!) {
        buffer += Buffer.from(chunk).toString();
        // Line by line, as an SSE parser reads (blank lines and comments carry no event).
        let end: number;
        while ((end = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, end);
          buffer = buffer.slice(end + 1);
          if (!line.startsWith('data: ')) continue;
          const event = JSON.parse(line.slice(6)) as ModelEvent;
          events.push(event);
          for (const w of waiters.splice(0)) if (w.match(event)) w.resolve(event); else waiters.push(w);
        }
      }
    } catch {
      // closed
    }
  })();
  return {
    events,
    until: (match) => new Promise((resolve) => {
      const seen = events.find(match);
      if (seen) resolve(seen);
      else waiters.push({ match, resolve });
    }),
    close: () => abort.abort(),
  };
}

const listed = async (): Promise<any[]> => (await (await fetch(`${base}/models`)).json()).data;
const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

t.test('POST /models downloads a model by its hub name with progress on /models/sse; it is then a cache model that serves', async (t) => {
  const sse = await subscribe();
  t.teardown(sse.close);
  const name = `${REPO}:Q8_0`;
  const res = await postJson(`${base}/models`, { model: name });
  t.same(res, { status: 200, body: { success: true }, headers: res.headers });
  const finished = await sse.until((e) => e.model === name && (e.event === 'download_finished' || e.event === 'download_failed'));
  t.same(finished, { model: name, event: 'download_finished' });
  const mine = sse.events.filter((e) => e.model === name);
  t.same(mine[0], { model: name, event: 'model_status', data: { status: 'downloading' } });
  const progress = mine.filter((e) => e.event === 'download_progress');
  t.ok(progress.length >= 2, 'progress events');
  const last = progress.at(-1)!.data!['progress'] as Record<string, { done: number; total: number }>;
  const modelUrl = Object.keys(last).find((u) => u.endsWith('/chat-Q8_0.gguf'))!;
  t.same(last[modelUrl], { done: chat.length, total: chat.length }, 'by URL, done and total bytes, as llama-server');
  t.ok(Object.keys(last).some((u) => u.endsWith('/mmproj-chat-F16.gguf')), 'the mmproj came with it');

  const entry = (await listed()).find((m) => m.id === name);
  t.match(entry, { id: name, source: 'cache', can_remove: true, status: { value: 'unloaded' }, architecture: { input_modalities: ['text', 'image'] } });
  const answer = await postJson(`${base}/v1/chat/completions`, { model: name, messages: [{ role: 'user', content: 'Hello' }], max_tokens: 4 });
  t.equal(answer.status, 200, 'the downloaded model loads and answers');
  t.equal(answer.body.model, name);

  const again = await postJson(`${base}/models`, { model: name });
  t.same(again.body, { error: { code: 400, message: `model '${name}' already exists`, type: 'invalid_request_error' } });
});

t.test('POST /models refuses what it cannot download: no name, a bad name, an unknown repository', async (t) => {
  t.same((await postJson(`${base}/models`, {})).body, { error: { code: 400, message: 'model must be a non-empty string', type: 'invalid_request_error' } });
  t.same((await postJson(`${base}/models`, { model: 'no-slash' })).body.error.message, 'invalid Hugging Face repository \'no-slash\': expected <user>/<model>[:quant]');
  const unknown = await postJson(`${base}/models`, { model: 'org/missing' });
  t.equal(unknown.status, 400);
  t.match(unknown.body.error.message, /^model validation failed, unable to download: GET .*api\/models\/org\/missing\/refs failed \(404\): Repository not found$/);
});

t.test('DELETE /models removes a cache model: its process stopped, its files gone, model_remove on /models/sse', async (t) => {
  const name = `${REPO}:Q8_0`;
  const entry = router.registry.list().find((e) => e.spec.name === name)!;
  t.equal(entry.state.name, 'loaded', 'loaded by the test before');
  const pid = modelProcess(entry)!.pid!;
  const sse = await subscribe();
  t.teardown(sse.close);
  const res = await fetch(`${base}/models?model=${encodeURIComponent(name)}`, { method: 'DELETE' });
  t.equal(res.status, 200);
  t.same(await res.json(), { success: true });
  t.same(await sse.until((e) => e.event === 'model_remove'), { model: name, event: 'model_remove' });
  t.throws(() => process.kill(pid, 0), 'its process has exited');
  t.notOk((await listed()).some((m) => m.id === name), 'no longer listed');
  const repoDir = join(cache, 'models--org--chat-GGUF');
  const snapshot = join(repoDir, 'snapshots', readdirSync(join(repoDir, 'snapshots'))[0]!);
  t.notOk(existsSync(join(snapshot, 'chat-Q8_0.gguf')), 'the snapshot entry is gone');
  t.notOk(existsSync(join(repoDir, 'blobs', sha256(chat))), 'and its blob');

  const gone = await fetch(`${base}/models?model=${encodeURIComponent(name)}`, { method: 'DELETE' });
  t.same({ status: gone.status, body: await gone.json() }, { status: 500, body: { error: { code: 500, message: `model name=${name} is not found`, type: 'server_error' } } });
  const local = await fetch(`${base}/models?model=local`, { method: 'DELETE' });
  t.same({ status: local.status, body: await local.json() }, { status: 500, body: { error: { code: 500, message: 'model name=local is not removable (not from cache)', type: 'server_error' } } });
  t.same(await (await fetch(`${base}/models`, { method: 'DELETE' })).json(), { error: { code: 400, message: 'model must be a non-empty string', type: 'invalid_request_error' } });
});

t.test('DELETE /models during a download cancels it: download_failed, nothing left in the cache', async (t) => {
  const name = 'org/slow-GGUF:Q8_0';
  const release = hub.holdDownloads('org/slow-GGUF', 'slow-Q8_0.gguf');
  t.teardown(release);
  const sse = await subscribe();
  t.teardown(sse.close);
  t.equal((await postJson(`${base}/models`, { model: name })).status, 200);
  await sse.until((e) => e.model === name && e.event === 'download_progress');
  t.match((await listed()).find((m) => m.id === name), { status: { value: 'downloading' }, can_remove: true }, 'listed while it downloads');
  const res = await fetch(`${base}/models?model=${encodeURIComponent(name)}`, { method: 'DELETE' });
  t.same(await res.json(), { success: true });
  // The events travel on the other connection: the answer to DELETE can come first.
  await sse.until((e) => e.model === name && e.event === 'model_remove');
  t.same(sse.events.filter((e) => e.model === name).slice(-2), [{ model: name, event: 'download_failed' }, { model: name, event: 'model_remove' }]);
  t.notOk(existsSync(join(cache, 'models--org--slow-GGUF', 'blobs', sha256(chat))), 'no blob');
  t.notOk(existsSync(join(cache, 'models--org--slow-GGUF', 'blobs', `${sha256(chat)}.downloadInProgress`)), 'no partial file');
  t.notOk((await listed()).some((m) => m.id === name));
});

t.test('the last /models/sse event reaches a client that reads whole HTTP chunks (llama.cpp\'s Python tests) without waiting for the next one', async (t) => {
  const socket = connect(router.port, '127.0.0.1');
  t.teardown(() => socket.destroy());
  let raw = '';
  socket.on('data', (d) => { raw += d; });
  const seen = (text: string, arrived = (): boolean => raw.includes(text)): Promise<void> => new Promise((resolve, reject) => {
    const check = (): void => {
      if (!arrived()) return;
      socket.off('data', check);
      clearTimeout(bound);
      resolve();
    };
    // A bound, not a wait: without the fix the chunk's end comes only with the 30 s ping.
    const bound = setTimeout(() => reject(new Error(`no ${JSON.stringify(text)} in ${JSON.stringify(raw)}`)), 5000);
    socket.on('data', check);
    check();
  });
  socket.write('GET /models/sse HTTP/1.1\r\nHost: x\r\n\r\n');
  await seen(': connected');
  await fetch(`${base}/models?reload=1`);
  const event = 'data: {"model":"*","event":"models_reload"}\n\n';
  await seen(event, () => wholeChunks(raw).body.includes(event));
  t.pass('the event, its closing blank line included, is in complete chunks (their closing CRLFs arrived)');
});
