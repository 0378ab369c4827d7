// Router mode (inference-server without -m): a models directory with a chat model and a corrupt
// GGUF, and a preset with an embedding model. Each model loads on demand in its own child
// process and answers as the single-model server does; the corrupt one fails on its own.
import { copyFileSync, mkdtempSync, openSync, readSync, readdirSync, readFileSync, closeSync, writeFileSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { native } from '../../src/native/binding.js';
import { startRouterServer, type RouterServer } from '../../src/inference/multi-model/server.js';
import { routerOptions } from '../../src/inference/server-config.js';
import { modelProcess, type ModelEvent } from '../../src/inference/multi-model/model-registry.js';
import { ensureAudioProjector } from '../fixtures/audio-projector.js';
import { ensureTestModels } from '../fixtures/models.js';
import { parseSse, postJson, startTestServer } from '../helpers/inference-server.js';
import { REPO_ROOT } from '../helpers/reference.js';

const models = await ensureTestModels();
const dir = mkdtempSync(join(tmpdir(), 'router-test-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const modelsDir = join(dir, 'models');
rmSync(modelsDir, { recursive: true, force: true });
await import('node:fs/promises').then((fs) => fs.mkdir(modelsDir));
copyFileSync(models.chat, join(modelsDir, 'chat.gguf'));
// The first 4 KiB of a real GGUF: its header promises tensors that are not there.
const head = Buffer.alloc(4096);
const fd = openSync(models.embedding, 'r');
readSync(fd, head, 0, head.length, 0);
closeSync(fd);
writeFileSync(join(modelsDir, 'corrupt.gguf'), head);
const preset = join(dir, 'preset.ini');
writeFileSync(preset, `[embed]\nmodel = ${models.embedding}\nembeddings = true\nalias = embedder\n`);

const CHILD = [process.execPath, '--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), join(REPO_ROOT, 'src', 'inference', 'server-main.ts')];

async function startRouter(extra: string[], modelsMax = 0, spares = 0): Promise<{ router: RouterServer; base: string }> {
  const params = native.ServerParams.parse(['llama-server', '--models-dir', modelsDir, '--models-preset', preset, '-c', '512', '-np', '2', '-t', '1', ...extra]);
  const router = await startRouterServer({
    host: '127.0.0.1', port: 0, apiKeys: [], maxBodyBytes: 1 << 20, autoload: true, modelsMax, spares, buildInfo: 'b1-test',
    readSpecs: () => params.routerModels(), command: CHILD, childArgs: [], log: () => {},
  });
  return { router, base: `http://127.0.0.1:${router.port}` };
}

/** Resolves with the first registry event that `match` accepts. */
function nextEvent(router: RouterServer, match: (e: ModelEvent) => boolean): Promise<ModelEvent> {
  return new Promise((resolve) => {
    const on = (e: ModelEvent): void => {
      if (!match(e)) return;
      router.registry.off('event', on);
      resolve(e);
    };
    router.registry.on('event', on);
  });
}

const isAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Resident memory (bytes) of a process and all its descendants, from /proc. */
function treeRss(root: number): number {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(name)]);
    } catch {
      // gone meanwhile
    }
  }
  const rss = (pid: number): number => {
    try {
      return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;
    } catch {
      return 0;
    }
  };
  const walk = (pid: number): number => rss(pid) + (children.get(pid) ?? []).reduce((sum, c) => sum + walk(c), 0);
  return walk(root);
}

/**
 * The bound on what an unloaded or sleeping model may leave behind: the router process and its
 * children together hold at most this much more than before the model was loaded (the model's
 * process has exited; what remains is the router's own heap from proxying).
 */
const RSS_BOUND = 32 * 1024 * 1024;

async function statusOf(base: string, id: string): Promise<Record<string, unknown>> {
  const list = (await (await fetch(`${base}/models`)).json()) as { data: Array<{ id: string; status: Record<string, unknown> }> };
  return list.data.find((m) => m.id === id)!.status;
}

const COMPLETION = { prompt: 'Hello there', n_predict: 12, temperature: 0 };
const EMBED = { input: 'a sentence to embed' };

// What the single-model server answers, for comparison.
const reference = await (async () => {
  const chat = await startTestServer(models.chat, { ctxSize: 512, parallel: 2 });
  const completion = (await postJson(`${chat.base}/completion`, COMPLETION)).body.content as string;
  await chat.close();
  const embed = await startTestServer(models.embedding, { ctxSize: 512, parallel: 2, embedding: true });
  const embedding = (await postJson(`${embed.base}/v1/embeddings`, EMBED)).body.data[0].embedding as number[];
  await embed.close();
  return { completion, embedding };
})();

t.test('models load on demand, answer as the single-model server, and the corrupt one fails alone', async (t) => {
  const { router, base } = await startRouter([]);
  t.teardown(() => router.close());
  t.same((await statusOf(base, 'chat')).value, 'unloaded');

  const completion = await postJson(`${base}/completion`, { ...COMPLETION, model: 'chat' });
  t.equal(completion.status, 200);
  t.equal(completion.body.content, reference.completion, 'greedy output equals the single-model server');
  const embedding = await postJson(`${base}/v1/embeddings`, { ...EMBED, model: 'embedder' });
  t.equal(embedding.status, 200);
  t.same(embedding.body.data[0].embedding, reference.embedding, 'the alias reaches the embedding model');

  const stream = await postJson(`${base}/completion`, { ...COMPLETION, model: 'chat', stream: true });
  t.match(stream.headers.get('content-type'), /text\/event-stream/);
  const streamed = (parseSse(stream.body as string) as Array<{ content: string }>).map((e) => e.content).join('');
  t.equal(streamed, reference.completion, 'streamed through the router, the same text');

  const corrupt = await postJson(`${base}/completion`, { ...COMPLETION, model: 'corrupt' });
  t.equal(corrupt.status, 500);
  t.equal(corrupt.body.error.type, 'server_error');
  t.match(corrupt.body.error.message, /model 'corrupt' failed to load \(exit code 1\)/);
  const failed = await statusOf(base, 'corrupt');
  t.same({ value: failed.value, failed: failed.failed, exit_code: failed.exit_code }, { value: 'unloaded', failed: true, exit_code: 1 });

  t.equal((await postJson(`${base}/completion`, { ...COMPLETION, model: 'chat' })).body.content, reference.completion, 'the others keep serving');
  t.equal((await statusOf(base, 'chat')).value, 'loaded');
  t.equal((await statusOf(base, 'embed')).value, 'loaded');
  const models = (await (await fetch(`${base}/v1/models`)).json()) as { data: Array<{ id: string; meta?: { n_ctx: number } }> };
  t.type(models.data.find((m) => m.id === 'chat')!.meta?.n_ctx, 'number', 'a loaded model lists its own /v1/models fields');
});

t.test('bad input to the router is a clear 4xx', async (t) => {
  const { router, base } = await startRouter([]);
  t.teardown(() => router.close());
  const cases: Array<[string, unknown, number, string]> = [
    ['/models/load', {}, 400, 'model name is missing from the request'],
    ['/models/load', { model: 'nope' }, 404, 'model is not found'],
    ['/models/load', { model: 42 }, 400, '"model" must be a string'],
    ['/models/unload', { model: 'nope' }, 400, 'model is not found'],
    ['/models/unload', { model: 'chat' }, 400, 'model is not running'],
    ['/models/unload', {}, 400, 'model name is missing from the request'],
    ['/completion', { prompt: 'x' }, 400, 'model name is missing from the request'],
    ['/completion', { prompt: 'x', model: 'nope' }, 400, "model 'nope' not found"],
  ];
  for (const [path, body, status, message] of cases) {
    const res = await postJson(`${base}${path}`, body);
    t.same({ status: res.status, message: res.body.error?.message }, { status, message }, `${path} ${JSON.stringify(body)}`);
  }
  const notJson = await postJson(`${base}/completion`, '{not json');
  t.equal(notJson.status, 400);
  t.equal((await fetch(`${base}/slots`)).status, 400, 'GET routes name the model with ?model=');
});

t.test('concurrent first requests load the model once; unload ends its process', async (t) => {
  const { router, base } = await startRouter([]);
  t.teardown(() => router.close());
  const rssBefore = treeRss(process.pid);
  let spawns = 0;
  router.registry.on('event', (e) => { if (e.model === 'chat' && e.event === 'model_status') spawns++; });
  const answers = await Promise.all([1, 2, 3].map(() => postJson(`${base}/completion`, { ...COMPLETION, model: 'chat' })));
  t.same(answers.map((a) => a.body.content), [reference.completion, reference.completion, reference.completion]);
  t.equal(spawns, 1, 'one load for three requests');

  const sse = await fetch(`${base}/models/sse`);
  const reader = sse.body!.getReader();
  const pid = modelProcess(router.registry.find('chat')!)!.pid!;
  t.ok(isAlive(pid));
  const modelRss = treeRss(pid);
  t.ok(modelRss > RSS_BOUND, `the loaded model's process holds ${(modelRss / 2 ** 20).toFixed(0)} MiB`);
  const unloaded = nextEvent(router, (e) => e.model === 'chat' && e.data?.['status'] === 'unloaded');
  t.same((await postJson(`${base}/models/unload`, { model: 'chat' })).body, { success: true });
  await unloaded;
  t.notOk(isAlive(pid), 'the child process has exited');
  const rssAfter = treeRss(process.pid);
  t.ok(rssAfter - rssBefore < RSS_BOUND, `after unload the router and its children hold ${((rssAfter - rssBefore) / 2 ** 20).toFixed(1)} MiB more than before the load (bound ${RSS_BOUND / 2 ** 20} MiB)`);
  let text = '';
  while (!text.includes('"unloaded"')) text += new TextDecoder().decode((await reader.read()).value);
  await reader.cancel();
  t.match(text, /data: \{"model":"chat","event":"status_change","data":\{"status":"unloaded","exit_code":0\}\}/, '/models/sse reports it');
  t.equal((await statusOf(base, 'chat')).value, 'unloaded');
});

t.test('--models-max 1: alternating requests swap the models and stay correct', async (t) => {
  const { router, base } = await startRouter([], 1);
  t.teardown(() => router.close());
  for (let round = 0; round < 2; round++) {
    const chat = await postJson(`${base}/completion`, { ...COMPLETION, model: 'chat' });
    t.equal(chat.body.content, reference.completion);
    const chatPid = modelProcess(router.registry.find('chat')!)!.pid!;
    const embed = await postJson(`${base}/v1/embeddings`, { ...EMBED, model: 'embed' });
    t.same(embed.body.data[0].embedding, reference.embedding);
    t.equal((await statusOf(base, 'chat')).value, 'unloaded', 'the least recently used model made room');
    t.notOk(isAlive(chatPid), 'and its process has exited');
    t.equal((await statusOf(base, 'embed')).value, 'loaded');
  }
});

t.test('--sleep-idle-seconds: an idle model is unloaded (its process exits) and the next request loads it again', async (t) => {
  const { router, base } = await startRouter(['--sleep-idle-seconds', '1']);
  t.teardown(() => router.close());
  const rssBefore = treeRss(process.pid);
  t.equal((await postJson(`${base}/completion`, { ...COMPLETION, model: 'chat' })).body.content, reference.completion);
  const pid = modelProcess(router.registry.find('chat')!)!.pid!;
  await nextEvent(router, (e) => e.model === 'chat' && e.data?.['status'] === 'sleeping');
  t.notOk(isAlive(pid), 'the idle model\'s process has exited');
  const rssAfter = treeRss(process.pid);
  t.ok(rssAfter - rssBefore < RSS_BOUND, `asleep, the router and its children hold ${((rssAfter - rssBefore) / 2 ** 20).toFixed(1)} MiB more than before the load (bound ${RSS_BOUND / 2 ** 20} MiB)`);
  t.equal((await statusOf(base, 'chat')).value, 'sleeping');
  t.equal((await postJson(`${base}/completion`, { ...COMPLETION, model: 'chat' })).body.content, reference.completion);
  t.equal((await statusOf(base, 'chat')).value, 'loaded');
});

t.test('a client that disconnects from a stream frees the model\'s slot at once', async (t) => {
  const { router, base } = await startRouter([]);
  t.teardown(() => router.close());
  const controller = new AbortController();
  const res = await fetch(`${base}/completion`, { method: 'POST', signal: controller.signal, body: JSON.stringify({ model: 'chat', prompt: 'Hello', n_predict: 100000, ignore_eos: true, stream: true }) });
  const reader = res.body!.getReader();
  await reader.read();
  controller.abort();
  const slotsBusy = async () => ((await (await fetch(`${base}/slots?model=chat`)).json()) as Array<{ is_processing: boolean }>).some((s) => s.is_processing);
  const deadline = Date.now() + 5000;
  while ((await slotsBusy()) && Date.now() < deadline) await new Promise((r) => setImmediate(r));
  t.equal(await slotsBusy(), false, 'the child cancelled the task');
});

t.test('the router serves /tools and /cors-proxy itself, behind its key, as llama-server\'s router', async (t) => {
  const params = native.ServerParams.parse(['llama-server', '--models-dir', modelsDir, '--tools', 'read_file,get_info', '--api-key', 'k']);
  const options = routerOptions(params.values(), {});
  t.same(options.tools, { names: ['read_file', 'get_info'], runtime: '' });
  t.equal(options.corsProxy, false);
  t.equal(options.cors!.origins, 'localhost', '--tools limits the default CORS origins to localhost, as there');
  const router = await startRouterServer({
    ...options, port: 0, buildInfo: 'b1-test', readSpecs: () => params.routerModels(), command: CHILD, log: () => {},
  });
  t.teardown(() => router.close());
  const base = `http://127.0.0.1:${router.port}`;
  t.equal((await fetch(`${base}/tools`)).status, 401, 'the key applies');
  const listed = await (await fetch(`${base}/tools`, { headers: { authorization: 'Bearer k' } })).json();
  t.same(listed.map((tool: any) => tool.tool), ['read_file', 'get_info']);
  const proxy = await fetch(`${base}/cors-proxy?url=http://127.0.0.1:1/`, { headers: { authorization: 'Bearer k' } });
  t.equal(proxy.status, 403, 'without --ui-mcp-proxy, llama-server\'s 403');
  const unknown = await fetch(`${base}/no/such/route`, { method: 'POST', body: '{}' });
  t.equal(unknown.status, 401, 'a path the router does not serve needs the key first, as llama-server');
  t.same(await unknown.json(), { error: { code: 401, message: 'Invalid API Key', type: 'authentication_error' } });
  t.equal((await fetch(`${base}/no/such/route`, { headers: { authorization: 'Bearer k' } })).status, 404, 'with the key: 404');
});

t.test('a spare model process: a load takes it, it is replaced once the request is over, and close ends it', async (t) => {
  const { router, base } = await startRouter([], 0, 1);
  const replaced = once(router.registry, 'spare');
  const [spare] = router.registry.sparePids;
  t.ok(spare !== undefined && isAlive(spare), 'the router starts a spare at once');
  t.equal((await postJson(`${base}/completion`, { ...COMPLETION, model: 'chat' })).body.content, reference.completion, 'greedy output equals the single-model server');
  t.equal(modelProcess(router.registry.find('chat')!)!.pid, spare, 'the model runs in the spare');
  t.same(router.registry.sparePids, [], 'the spare is not replaced while the new model serves its first requests');
  const [next] = (await replaced) as [number];
  t.ok(next !== spare && isAlive(next), 'a new spare replaces it once the router is idle');
  t.same(router.registry.sparePids, [next]);
  const embedding = await postJson(`${base}/v1/embeddings`, { ...EMBED, model: 'embedder' });
  t.same(embedding.body.data[0].embedding, reference.embedding, 'a spare takes the preset model\'s own command line');
  t.equal(modelProcess(router.registry.find('embed')!)!.pid, next);
  await router.close();
  t.notOk(isAlive(next!), 'close ends the model processes');
  t.same(router.registry.sparePids, [], 'and the spares');
  t.ok(router.registry.list().every((e) => modelProcess(e) === null));
});

t.test('a model with an audio projector: listed with its modalities, transcription uploads forwarded by their form\'s model field', async (t) => {
  const listenerPreset = join(dir, 'listener.ini');
  writeFileSync(listenerPreset, `[listener]\nmodel = ${models.chat}\nmmproj = ${await ensureAudioProjector()}\n\n[seer]\nmodel = ${models.chat}\nmmproj = ${models.mmproj}\n`);
  const params = native.ServerParams.parse(['llama-server', '--models-preset', listenerPreset, '-c', '2048', '-np', '1', '-t', '1']);
  const router = await startRouterServer({
    host: '127.0.0.1', port: 0, apiKeys: [], maxBodyBytes: 1 << 20, autoload: true, modelsMax: 0, spares: 0, buildInfo: 'b1-test',
    readSpecs: () => params.routerModels(), command: CHILD, childArgs: [], log: () => {},
  });
  t.teardown(() => router.close());
  const base = `http://127.0.0.1:${router.port}`;
  const listing = (await (await fetch(`${base}/v1/models`)).json()) as { data: Array<{ id: string; architecture: { input_modalities: string[] } }> };
  t.same(listing.data.find((m) => m.id === 'listener')!.architecture.input_modalities, ['text', 'audio'], 'the audio projector: text and audio');
  t.same(listing.data.find((m) => m.id === 'seer')!.architecture.input_modalities, ['text', 'image'], 'the image projector: text and image');

  const samples = 8000;
  const wav = Buffer.alloc(44 + samples * 2);
  wav.write('RIFF', 0); wav.writeUInt32LE(36 + samples * 2, 4); wav.write('WAVEfmt ', 8); wav.writeUInt32LE(16, 16); wav.writeUInt16LE(1, 20); wav.writeUInt16LE(1, 22);
  wav.writeUInt32LE(16000, 24); wav.writeUInt32LE(32000, 28); wav.writeUInt16LE(2, 32); wav.writeUInt16LE(16, 34); wav.write('data', 36); wav.writeUInt32LE(samples * 2, 40);
  const upload = (model: string | null): RequestInit => {
    const form = new FormData();
    form.append('file', new Blob([wav], { type: 'audio/wav' }), 'speech.wav');
    if (model !== null) form.append('model', model);
    form.append('max_tokens', '4');
    form.append('temperature', '0');
    return { method: 'POST', body: form };
  };
  const res = await fetch(`${base}/v1/audio/transcriptions`, upload('listener'));
  const body = await res.json();
  t.equal(res.status, 200, JSON.stringify(body));
  t.match(body, { type: 'transcript.text.done', text: String, usage: { output_tokens: 4 } }, 'transcribed by the model the form names');
  const missing = await fetch(`${base}/v1/audio/transcriptions`, upload(null));
  t.same([missing.status, (await missing.json()).error.message], [400, 'model name is missing from the request']);
  const seer = await fetch(`${base}/audio/transcriptions`, upload('seer'));
  t.same([seer.status, (await seer.json()).error.message], [501, 'The current model does not support audio input.'], 'a model without audio: its own 501');
});
