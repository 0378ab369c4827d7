// Models by name from a hub (src/inference/download), against the local mock hub: the files
// chosen, the cache llama.cpp lays out, offline use, resume, checks, split models, gated
// repositories and concurrent use of one cache.
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, lstatSync, mkdtempSync, readFileSync, readlinkSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { hubCacheDir, urlCacheDir, cachedFiles, type HubFile } from '../../src/inference/download/hub-cache.js';
import { modelEndpoint } from '../../src/inference/download/hub-api.js';
import { findBestModel, findBestSibling } from '../../src/inference/download/model-plan.js';
import { resolveModels, type ModelSources, type ResolveOptions } from '../../src/inference/download/resolve-models.js';
import { logProgress, terminalProgress, type DownloadProgress, type ProgressSink } from '../../src/inference/download/progress.js';
import { native } from '../../src/native/binding.js';
import { ensureTestModels } from '../fixtures/models.js';
import { splitGguf } from '../fixtures/gguf-split.js';
import { startMockHub, type MockHub } from '../fixtures/mock-hub.js';

const models = await ensureTestModels();
const sha256 = (b: Buffer): string => createHash('sha256').update(b).digest('hex');
const TOKEN = `hf_${'a1B2c3D4e5'.repeat(4)}`;

// Small distinct files where only the bytes' path matters; real models where they are loaded.
const q4 = randomBytes(3 << 20);
const q8 = randomBytes(1 << 20);
const f32 = randomBytes(4096);
const mmproj = randomBytes(2048);
const [part1, part2] = splitGguf(models.chat, 2);

const hub: MockHub = await startMockHub({
  'org/model-GGUF': {
    files: [
      { path: 'README.md', bytes: Buffer.from('# model\n') },
      { path: 'model-F32.gguf', bytes: f32 },
      { path: 'model-Q8_0.gguf', bytes: q8 },
      { path: 'model-Q4_K_M.gguf', bytes: q4 },
      { path: 'mmproj-model-F16.gguf', bytes: mmproj },
    ],
  },
  'org/first-only': { files: [{ path: 'weights-BF16.gguf', bytes: f32 }, { path: 'imatrix.gguf', bytes: q8 }] },
  'org/split-GGUF': {
    files: [
      { path: 'chat-F16-00001-of-00002.gguf', bytes: part1! },
      { path: 'chat-F16-00002-of-00002.gguf', bytes: part2! },
    ],
  },
  'org/gated-GGUF': { token: TOKEN, files: [{ path: 'gated-Q8_0.gguf', bytes: q8 }] },
});
t.teardown(() => hub.close());

function sources(overrides: Partial<ModelSources>): ModelSources {
  return { model: '', mmproj: '', noMmproj: false, hfRepo: '', hfFile: '', hfToken: '', modelUrl: '', mmprojUrl: '', offline: false, draftHfRepo: '', draftModel: '', ...overrides };
}

const caches: string[] = [];
t.teardown(() => { for (const dir of caches) rmSync(dir, { recursive: true, force: true }); });

function freshCache(): string {
  const dir = mkdtempSync(join(tmpdir(), 'hub-cache-'));
  caches.push(dir);
  return dir;
}

function options(cache: string, extra: Partial<ResolveOptions> = {}): ResolveOptions & { lines: string[] } {
  const lines: string[] = [];
  return {
    env: { LLAMA_CACHE: cache, MODEL_ENDPOINT: hub.url },
    log: (line) => lines.push(line),
    progress: logProgress((line) => lines.push(line)),
    userAgent: 'test',
    retryDelayMs: 10,
    lines,
    ...extra,
  };
}

const requestsSince = (n: number) => hub.requests.slice(n);
const file = (path: string): HubFile => ({ repo: 'r/x', path, url: '', localPath: path, finalPath: path, oid: '', size: -1 });

t.test('the cache directory and the hub address come from the environment as in llama.cpp', async (t) => {
  t.equal(hubCacheDir({ LLAMA_CACHE: '/a', HF_HUB_CACHE: '/b' }), '/a');
  t.equal(hubCacheDir({ HF_HUB_CACHE: '/b', HF_HOME: '/c' }), '/b');
  t.equal(hubCacheDir({ HUGGINGFACE_HUB_CACHE: '/b2', HF_HOME: '/c' }), '/b2');
  t.equal(hubCacheDir({ HF_HOME: '/c', XDG_CACHE_HOME: '/d' }), '/c/hub');
  t.equal(hubCacheDir({ XDG_CACHE_HOME: '/d', HOME: '/h' }), '/d/huggingface/hub');
  t.equal(hubCacheDir({ HOME: '/h' }), '/h/.cache/huggingface/hub');
  t.equal(urlCacheDir({ LLAMA_CACHE: '/a' }), '/a');
  t.equal(urlCacheDir({ XDG_CACHE_HOME: '/d' }), '/d/llama.cpp');
  t.equal(modelEndpoint({}), 'https://huggingface.co/');
  t.equal(modelEndpoint({ MODEL_ENDPOINT: 'http://m', HF_ENDPOINT: 'http://h/' }), 'http://m/');
  t.equal(modelEndpoint({ HF_ENDPOINT: 'http://h/' }), 'http://h/');
});

t.test('quant selection as llama.cpp: the :TAG (any case), else Q4_K_M, then Q8_0, then the first model file', async (t) => {
  const files = ['mmproj-x-Q4_K_M.gguf', 'x-Q8_0.gguf', 'x-Q4_K_M.gguf', 'x-F16-00002-of-00002.gguf', 'x-F16-00001-of-00002.gguf', 'imatrix-Q4_K_M.gguf'].map(file);
  t.equal(findBestModel(files, '')?.path, 'x-Q4_K_M.gguf', 'Q4_K_M by default, never an mmproj or imatrix');
  t.equal(findBestModel(files, 'q8_0')?.path, 'x-Q8_0.gguf');
  t.equal(findBestModel(files, 'F16')?.path, 'x-F16-00001-of-00002.gguf', 'a split model by its first part');
  t.equal(findBestModel(files, 'Q2_K'), null, 'a tag that is not there matches nothing');
  t.equal(findBestModel(['a-Q8_0.gguf', 'b-F32.gguf'].map(file), '')?.path, 'a-Q8_0.gguf');
  t.equal(findBestModel(['b-BF16.gguf', 'c-F32.gguf'].map(file), '')?.path, 'b-BF16.gguf', 'no default tag: the first model file');
  const siblings = ['mmproj-F32.gguf', 'mmproj-Q8_0.gguf', 'sub/mmproj-F16.gguf'].map(file);
  t.equal(findBestSibling(siblings, 'x-Q8_0.gguf', 'mmproj')?.path, 'mmproj-Q8_0.gguf', 'the closest quantization');
  t.equal(findBestSibling(siblings, 'sub/x-Q8_0.gguf', 'mmproj')?.path, 'sub/mmproj-F16.gguf', 'the deepest shared directory first');
});

t.test('first download: llama.cpp\'s cache layout, the mmproj fetched with the model, one log line per 10%', async (t) => {
  const cache = freshCache();
  const o = options(cache);
  const got = await resolveModels(sources({ hfRepo: 'org/model-GGUF' }), o);
  const repo = join(cache, 'models--org--model-GGUF');
  const commit = readFileSync(join(repo, 'refs', 'main'), 'utf8');
  t.match(commit, /^[0-9a-f]{40}$/);
  t.equal(got.model, join(repo, 'snapshots', commit, 'model-Q4_K_M.gguf'), 'Q4_K_M when no tag is given');
  t.equal(got.mmproj, join(repo, 'snapshots', commit, 'mmproj-model-F16.gguf'));
  t.equal(got.draftModel, '');
  t.ok(lstatSync(got.model).isSymbolicLink());
  t.equal(readlinkSync(got.model), `../../blobs/${sha256(q4)}`, 'a relative link to the blob named by its sha256');
  t.same(readFileSync(got.model), q4);
  t.same(readFileSync(got.mmproj), mmproj);
  t.notOk(existsSync(join(repo, 'snapshots', commit, 'model-Q8_0.gguf')), 'other quantizations are not fetched');
  const tenths = o.lines.filter((l) => /^downloading model-Q4_K_M\.gguf: \d+% /.test(l)).map((l) => Number(/: (\d+)%/.exec(l)![1]));
  t.same(tenths, [10, 20, 30, 40, 50, 60, 70, 80, 90], 'one line per 10%');
  t.ok(o.lines.includes('downloaded model-Q4_K_M.gguf (3.0 MiB)'));
});

t.test('a tag picks its file; --no-mmproj and a given -mm fetch no mmproj', async (t) => {
  const cache = freshCache();
  const a = await resolveModels(sources({ hfRepo: 'org/model-GGUF:q8_0', noMmproj: true }), options(cache));
  t.match(a.model, /model-Q8_0\.gguf$/);
  t.equal(a.mmproj, '');
  const b = await resolveModels(sources({ hfRepo: 'org/model-GGUF:Q8_0', mmproj: '/my/mmproj.gguf' }), options(cache));
  t.equal(b.mmproj, '/my/mmproj.gguf', '-mm wins');
  t.notOk(existsSync(join(cache, 'models--org--model-GGUF', 'blobs', sha256(mmproj))), 'the mmproj was never fetched');
  await t.rejects(resolveModels(sources({ hfRepo: 'org/model-GGUF:Q2_K' }), options(cache)), /no GGUF file with the tag Q2_K in repository org\/model-GGUF; available GGUF files:\n  - model-F32\.gguf/);
  await t.rejects(resolveModels(sources({ hfRepo: 'org/model-GGUF', hfFile: 'nope.gguf' }), options(cache)), /file 'nope\.gguf' not found in repository org\/model-GGUF/);
  const first = await resolveModels(sources({ hfRepo: 'org/first-only' }), options(cache));
  t.match(first.model, /weights-BF16\.gguf$/, 'no Q4_K_M or Q8_0: the first model file');
});

t.test('a second start with --offline reads the cache and asks the hub nothing; an empty cache is a clear error', async (t) => {
  const cache = freshCache();
  const online = await resolveModels(sources({ hfRepo: 'org/model-GGUF:Q8_0' }), options(cache));
  const before = hub.requests.length;
  const offline = await resolveModels(sources({ hfRepo: 'org/model-GGUF:Q8_0', offline: true }), options(cache));
  t.same(offline, online);
  t.equal(hub.requests.length, before, 'no request reached the hub');
  const empty = freshCache();
  await t.rejects(resolveModels(sources({ hfRepo: 'org/model-GGUF:Q8_0', offline: true }), options(empty)),
    { message: `-hf org/model-GGUF: not in the cache at ${empty}, and --offline forbids downloading it` });
  t.equal(hub.requests.length, before);
});

t.test('a cut connection is resumed with a Range request from where it stopped', async (t) => {
  const cache = freshCache();
  const n = hub.requests.length;
  hub.cutNextDownload('org/model-GGUF', 'model-Q4_K_M.gguf', 1 << 20);
  const o = options(cache);
  const got = await resolveModels(sources({ hfRepo: 'org/model-GGUF', noMmproj: true }), o);
  t.same(readFileSync(got.model), q4);
  const gets = requestsSince(n).filter((r) => r.method === 'GET' && r.path.startsWith(`/cdn/${sha256(q4)}`));
  t.equal(gets.length, 2);
  t.equal(gets[0]!.range, null);
  // The server sent 1 MiB before ending the connection; what reached the disk is resumed from.
  const resumedAt = Number(/^bytes=(\d+)-$/.exec(gets[1]!.range ?? '')?.[1]);
  t.ok(resumedAt > 0 && resumedAt <= 1 << 20, `the second GET asks for the rest only (from ${resumedAt})`);
  // The cut surfaces as a stream error ("interrupted at N bytes (...)") or, when the socket's end
  // is read first, as a short body ("the connection ended at N bytes of M"): either names N.
  const retried = new RegExp(`^model-Q4_K_M\\.gguf: (interrupted at ${resumedAt} bytes \\(.*\\)|the connection ended at ${resumedAt} bytes of \\d+); retrying in 0\\.0 s$`);
  t.ok(o.lines.some((l) => retried.test(l)), `the retry is logged with where it stopped (${o.lines.filter((l) => l.includes('retrying')).join(' | ')})`);
});

t.test('a partial file left by an interrupted start is resumed by the next one', async (t) => {
  const cache = freshCache();
  await resolveModels(sources({ hfRepo: 'org/model-GGUF:Q8_0', noMmproj: true }), options(cache));
  // As an interrupted run leaves it: the refs, and llama.cpp's <blob>.downloadInProgress.
  const blob = join(cache, 'models--org--model-GGUF', 'blobs', sha256(q4));
  writeFileSync(`${blob}.downloadInProgress`, q4.subarray(0, 12345));
  const n = hub.requests.length;
  const got = await resolveModels(sources({ hfRepo: 'org/model-GGUF:Q4_K_M', noMmproj: true }), options(cache));
  t.same(readFileSync(got.model), q4);
  t.same(requestsSince(n).filter((r) => r.path.startsWith('/cdn/')).map((r) => r.range), ['bytes=12345-']);
  t.notOk(existsSync(`${blob}.downloadInProgress`));
});

t.test('bytes that do not match the listed sha256 are never kept; fetched again once the hub serves the right ones', async (t) => {
  const cache = freshCache();
  const corrupt = Buffer.from(q8);
  corrupt[1000] ^= 0xff;
  hub.serveInstead('org/model-GGUF', 'model-Q8_0.gguf', corrupt);
  const o = options(cache);
  await t.rejects(resolveModels(sources({ hfRepo: 'org/model-GGUF:Q8_0', noMmproj: true }), o),
    new RegExp(`download of ${hub.url}org/model-GGUF/resolve/[0-9a-f]{40}/model-Q8_0\\.gguf failed after 3 attempts: checksum mismatch: the hub lists ${sha256(q8)}, the downloaded bytes hash to ${sha256(corrupt)}$`));
  const blobs = join(cache, 'models--org--model-GGUF', 'blobs');
  t.notOk(existsSync(join(blobs, sha256(q8))), 'no blob under the hash');
  t.notOk(existsSync(join(blobs, `${sha256(q8)}.downloadInProgress`)), 'no partial file to resume from');
  t.equal(o.lines.filter((l) => l.startsWith('model-Q8_0.gguf: checksum mismatch')).length, 2, 'two retries logged');
  hub.serveInstead('org/model-GGUF', 'model-Q8_0.gguf', null);
  const got = await resolveModels(sources({ hfRepo: 'org/model-GGUF:Q8_0', noMmproj: true }), options(cache));
  t.same(readFileSync(got.model), q8);
});

t.test('a cached file whose size differs from the hub\'s listing (truncated) is fetched again', async (t) => {
  const cache = freshCache();
  const first = await resolveModels(sources({ hfRepo: 'org/model-GGUF:Q8_0', noMmproj: true }), options(cache));
  writeFileSync(realpathSync(first.model), q8.subarray(0, 100));
  const o = options(cache);
  const again = await resolveModels(sources({ hfRepo: 'org/model-GGUF:Q8_0', noMmproj: true }), o);
  t.same(readFileSync(again.model), q8);
  t.ok(o.lines.some((l) => l.endsWith(`has 100 bytes, the hub lists ${q8.length}: downloading it again`)));
});

t.test('a split model: every part fetched and linked, and the model loads from the first part', async (t) => {
  const cache = freshCache();
  const got = await resolveModels(sources({ hfRepo: 'org/split-GGUF:F16' }), options(cache));
  t.match(got.model, /chat-F16-00001-of-00002\.gguf$/);
  const second = got.model.replace('00001-of', '00002-of');
  t.same(readFileSync(second), part2);
  const cached = cachedFiles(cache, 'org/split-GGUF').map((f) => f.path);
  t.same(cached, ['chat-F16-00001-of-00002.gguf', 'chat-F16-00002-of-00002.gguf']);
  const split = await native.Model.load(got.model, { nGpuLayers: 0 }).promise;
  const whole = await native.Model.load(models.chat, { nGpuLayers: 0 }).promise;
  t.teardown(() => { split.dispose(); whole.dispose(); });
  t.equal(split.metadata().nParams, whole.metadata().nParams, 'the same parameters as the unsplit model');
});

t.test('a gated repository: 401 without a token is a clear error; with -hft the files come', async (t) => {
  const cache = freshCache();
  await t.rejects(resolveModels(sources({ hfRepo: 'org/gated-GGUF' }), options(cache)),
    { message: `-hf org/gated-GGUF: the hub at ${hub.url} refused access (401): a gated or private repository needs a token (-hft or HF_TOKEN)` });
  const n = hub.requests.length;
  const got = await resolveModels(sources({ hfRepo: 'org/gated-GGUF', hfToken: TOKEN }), options(cache));
  t.same(readFileSync(got.model), q8);
  t.ok(requestsSince(n).filter((r) => !r.path.startsWith('/cdn/')).every((r) => r.authorization === `Bearer ${TOKEN}`), 'the token went with every hub request');
});

t.test('two resolutions at once on one cache fetch each file once and both get it whole', async (t) => {
  const cache = freshCache();
  const n = hub.requests.length;
  const [a, b] = await Promise.all([
    resolveModels(sources({ hfRepo: 'org/model-GGUF' }), options(cache)),
    resolveModels(sources({ hfRepo: 'org/model-GGUF' }), options(cache)),
  ]);
  t.same(a, b);
  t.same(readFileSync(a.model), q4);
  const gets = requestsSince(n).filter((r) => r.method === 'GET' && r.path.startsWith('/cdn/'));
  t.equal(gets.filter((r) => r.path.startsWith(`/cdn/${sha256(q4)}`)).length, 1, 'the model once');
  t.equal(gets.filter((r) => r.path.startsWith(`/cdn/${sha256(mmproj)}`)).length, 1, 'the mmproj once');
});

t.test('-mu URL: downloaded into LLAMA_CACHE with its ETag kept; fetched again only when the ETag changes', async (t) => {
  const cache = freshCache();
  const commit = (await (await fetch(`${hub.url}api/models/org/model-GGUF/refs`)).json()).branches[0].targetCommit;
  const url = `${hub.url}org/model-GGUF/resolve/${commit}/model-Q8_0.gguf`;
  const got = await resolveModels(sources({ modelUrl: url }), options(cache));
  t.equal(got.model, join(cache, 'model-Q8_0.gguf'));
  t.same(readFileSync(got.model), q8);
  t.equal(readFileSync(`${got.model}.etag`, 'utf8'), `"${sha256(q8)}"`);
  const n = hub.requests.length;
  await resolveModels(sources({ modelUrl: url }), options(cache));
  t.same(requestsSince(n).map((r) => r.method), ['HEAD', 'HEAD'], 'a HEAD (through the redirect) and no GET: the ETag is the same');
  writeFileSync(`${got.model}.etag`, '"old"');
  await resolveModels(sources({ modelUrl: url }), options(cache));
  t.same(readFileSync(got.model), q8);
  t.equal(readFileSync(`${got.model}.etag`, 'utf8'), `"${sha256(q8)}"`, 'a changed ETag: fetched again');
});

t.test('an unknown repository, or no hub and no cache, is a clear error', async (t) => {
  const cache = freshCache();
  await t.rejects(resolveModels(sources({ hfRepo: 'org/missing' }), options(cache)), /^-hf org\/missing: cannot list it on the hub \(GET .*\/api\/models\/org\/missing\/refs failed \(404\): Repository not found\) and the cache at .* does not hold it$/);
  await t.rejects(resolveModels(sources({ hfRepo: 'not-a-repo' }), options(cache)), /invalid Hugging Face repository 'not-a-repo': expected <user>\/<model>\[:quant\]/);
  // The hub gone: the cache serves what it holds, as llama.cpp falls back.
  const filled = freshCache();
  const online = await resolveModels(sources({ hfRepo: 'org/model-GGUF:Q8_0' }), options(filled));
  const o = options(filled, { env: { LLAMA_CACHE: filled, MODEL_ENDPOINT: 'http://127.0.0.1:1/' } });
  t.same(await resolveModels(sources({ hfRepo: 'org/model-GGUF:Q8_0' }), o), online);
  t.ok(o.lines.some((l) => l.startsWith('warning: -hf org/model-GGUF: cannot list it on the hub (cannot reach the hub at http://127.0.0.1:1/')));
});

t.test('progress reaches a sink as start, updates and done (what /models/sse reports in router mode)', async (t) => {
  const cache = freshCache();
  const seen: Array<[string, DownloadProgress]> = [];
  const sink: ProgressSink = { start: (p) => seen.push(['start', p]), update: (p) => seen.push(['update', p]), done: (p, ok) => seen.push([ok ? 'done' : 'failed', p]) };
  await resolveModels(sources({ hfRepo: 'org/model-GGUF:Q8_0', noMmproj: true }), options(cache, { progress: sink }));
  t.equal(seen[0]![0], 'start');
  t.match(seen[0]![1], { name: 'model-Q8_0.gguf', downloaded: 0, total: q8.length });
  t.same(seen.at(-1), ['done', { ...seen.at(-1)![1], downloaded: q8.length, total: q8.length }]);
  t.ok(seen.slice(1, -1).every(([kind]) => kind === 'update'));
});


t.test('on a terminal, llama.cpp\'s bar redrawn in place; one line per file', async (t) => {
  let out = '';
  const bar = terminalProgress({ write: (s: string) => { out += s; } });
  const p = { name: 'model-Q8_0.gguf', url: 'http://h/model-Q8_0.gguf', downloaded: 0, total: 200 };
  bar.start(p);
  bar.update({ ...p, downloaded: 50 });
  bar.update({ ...p, downloaded: 51 });
  bar.update({ ...p, downloaded: 53 });
  bar.update({ ...p, downloaded: 200 });
  bar.done({ ...p, downloaded: 200 }, true);
  const frames = out.split('\r').filter(Boolean);
  t.equal(frames.length, 3, 'a frame per whole percent, none for the same percent again');
  // (55 - 15 name characters) * 2 = 80 columns: 40 cells of 2, a half cell '╴' at an odd column.
  t.equal(frames[0], `Downloading model-Q8_0.gguf ${'─'.repeat(10)}${' '.repeat(30)}  25%\x1b[K`);
  t.equal(frames[1], `Downloading model-Q8_0.gguf ${'─'.repeat(10)}╴${' '.repeat(29)}  26%\x1b[K`);
  t.equal(frames[2], `Downloading model-Q8_0.gguf ${'─'.repeat(40)} 100%\x1b[K\n`);
});
