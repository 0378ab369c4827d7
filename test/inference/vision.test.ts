import t from 'tap';
import { startInferenceServer } from '../../src/inference/server.js';
import { resolveRuntime } from '../../src/inference/options.js';
import { serverOptions } from '../../src/inference/server-config.js';
import { native } from '../../src/native/binding.js';
import { ensureTestModels } from '../fixtures/models.js';
import { parseSse, postJson, startTestServer } from '../helpers/inference-server.js';
import { dataUrl, encodePng } from '../helpers/png.js';
import { startLlamaServer } from '../helpers/llama-server.js';

const models = await ensureTestModels();
const vision = await startTestServer(models.chat, { mmproj: models.mmproj, ctxSize: 2048 });
t.teardown(vision.close);

const red = encodePng(64, 64, () => [255, 0, 0]);
const blue = encodePng(64, 64, () => [0, 0, 255]);
const gradient = encodePng(64, 64, (x, y) => [x * 4, y * 4, 128]);
const ask = (url: string, extra: object = {}) => postJson(`${vision.base}/v1/chat/completions`, {
  messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in the picture?' }, { type: 'image_url', image_url: { url } }] }],
  max_tokens: 8, temperature: 0, ...extra,
});

t.test('/props reports vision', async (t) => {
  const props = await (await fetch(`${vision.base}/props`)).json();
  t.same(props.modalities, { vision: true, video: false, audio: false });
});

t.test('/models and /v1/models list the multimodal capability with a projector, as llama-server', async (t) => {
  for (const path of ['/models', '/v1/models']) {
    const body = await (await fetch(`${vision.base}${path}`)).json();
    t.same(body.models[0].capabilities, ['completion', 'multimodal'], path);
  }
});

t.test('a PNG data URL passes through the projector and changes the output', async (t) => {
  const text = await postJson(`${vision.base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'What is in the picture?' }], max_tokens: 8, temperature: 0 });
  const a = await ask(dataUrl(red));
  const b = await ask(dataUrl(blue));
  const c = await ask(dataUrl(gradient));
  t.equal(a.status, 200);
  t.equal(a.body.usage.prompt_tokens, text.body.usage.prompt_tokens + 64, 'the image adds its 64 tokens (llama.cpp joins a marker to its text without a line break)');
  const outputs = new Set([text, a, b, c].map((r) => r.body.choices[0].message.content));
  t.equal(outputs.size, 4, 'each image gives a different answer, and none equals the text-only one');
  t.equal((await ask(dataUrl(red))).body.choices[0].message.content, a.body.choices[0].message.content, 'deterministic');
});

t.test('the decoder sniffs the format whatever the data URL says; jpeg MIME with PNG bytes works', async (t) => {
  const res = await ask(`data:image/jpeg;base64,${red.toString('base64')}`);
  t.equal(res.status, 200);
  t.equal(res.body.choices[0].message.content, (await ask(dataUrl(red))).body.choices[0].message.content);
});

t.test('streaming a vision chat works', async (t) => {
  const res = await fetch(`${vision.base}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: dataUrl(blue) } }, { type: 'text', text: 'hi' }] }], max_tokens: 4, temperature: 0, stream: true }) });
  const text = await res.text();
  t.match(text, /data: \[DONE\]\n\n\n\n$/, 'the last event and its tail');
});

t.test('/completion accepts llama-server multimodal_data', async (t) => {
  const res = await postJson(`${vision.base}/completion`, { prompt: { prompt_string: 'Look: <__media__> and say', multimodal_data: [red.toString('base64')] }, n_predict: 4, temperature: 0 });
  t.equal(res.status, 200);
  t.ok(res.body.tokens_evaluated > 64);
  const top = await postJson(`${vision.base}/completion`, { prompt: 'Look: <__media__> and say', multimodal_data: [red.toString('base64')], n_predict: 4, temperature: 0 });
  t.equal(top.body.content, res.body.content, 'top-level multimodal_data is the same');
  const mismatch = await postJson(`${vision.base}/completion`, { prompt: 'no marker here', multimodal_data: [red.toString('base64')] });
  t.equal(mismatch.status, 400);
  t.match(mismatch.body.error.message, /number of images/);
});

t.test('an array of prompts may hold prompts with images, at /completion and /v1/completions, as llama-server', async (t) => {
  const withRed = { prompt_string: 'Look: <__media__> and say', multimodal_data: [red.toString('base64')] };
  const alone = await postJson(`${vision.base}/completion`, { prompt: withRed, n_predict: 4, temperature: 0 });
  const text = await postJson(`${vision.base}/completion`, { prompt: 'Look: and say', n_predict: 4, temperature: 0 });
  const both = await postJson(`${vision.base}/completion`, { prompt: [withRed, 'Look: and say'], n_predict: 4, temperature: 0 });
  t.equal(both.status, 200);
  t.same(both.body.map((r: any) => [r.index, r.content, r.tokens_evaluated]), [
    [0, alone.body.content, alone.body.tokens_evaluated],
    [1, text.body.content, text.body.tokens_evaluated],
  ], 'each prompt answered as alone, in order');
  const openai = await postJson(`${vision.base}/v1/completions`, { prompt: [withRed], max_tokens: 4, temperature: 0 });
  t.equal(openai.status, 200);
  t.equal(openai.body.choices[0].text, alone.body.content);
  const bad = await postJson(`${vision.base}/completion`, { prompt: ['fine', { prompt_string: 'two markers <__media__> <__media__>', multimodal_data: [red.toString('base64')] }] });
  t.equal(bad.status, 400);
  t.match(bad.body.error.message, /number of images and audio clips \(1\) does not match the number of media markers/);
  const notBase64Image = await postJson(`${vision.base}/completion`, { prompt: [{ prompt_string: 'x <__media__>', multimodal_data: [''] }] });
  t.equal(notBase64Image.status, 400);
  t.same([notBase64Image.body.error.field, notBase64Image.body.error.message], ['prompt[0].multimodal_data[0]', 'Invalid field "prompt[0].multimodal_data[0]": the image is empty']);
});

t.test('embeddings of prompts with images: stable, changed by the image, read from the text after it (as llama-server)', async (t) => {
  const embedding = await startTestServer(models.chat, { mmproj: models.mmproj, embedding: true, pooling: 'mean', ctxSize: 2048 });
  t.teardown(embedding.close);
  const image = (png: Buffer) => ({ prompt_string: 'What is this: <__media__>\n', multimodal_data: [png.toString('base64')] });
  const res = await postJson(`${embedding.base}/embeddings`, { content: [image(red), image(red), { prompt_string: 'What is this: <__media__>\n' }, image(blue)] });
  t.equal(res.status, 200);
  const vectors = res.body.map((r: any) => r.embedding[0]);
  t.same(res.body.map((r: any) => r.index), [0, 1, 2, 3]);
  t.same(vectors[1], vectors[0], 'the same image and text give the same vector');
  t.not(JSON.stringify(vectors[2]), JSON.stringify(vectors[0]), 'without the image the vector differs');
  t.not(JSON.stringify(vectors[3]), JSON.stringify(vectors[0]), 'another image gives another vector');
  const openai = await postJson(`${embedding.base}/v1/embeddings`, { input: [image(red)] });
  t.equal(openai.status, 200);
  const norm = Math.hypot(...vectors[0]);
  t.same(openai.body.data[0].embedding.map((x: number) => Math.round(x * 1e5)), vectors[0].map((x: number) => Math.round((x / norm) * 1e5)), '/v1/embeddings: the same vector, normalised');
  t.ok(openai.body.usage.prompt_tokens > 64, 'usage counts the image\'s positions');
  const mismatch = await postJson(`${embedding.base}/embeddings`, { content: [{ prompt_string: 'What is this:\n', multimodal_data: [red.toString('base64')] }] });
  t.equal(mismatch.status, 400);
  t.match(mismatch.body.error.message, /number of images and audio clips \(1\) does not match/);

  // Pooling none: one vector per token of the text after the image (llama-server's last decode).
  const perToken = await startTestServer(models.chat, { mmproj: models.mmproj, embedding: true, pooling: 'none', ctxSize: 2048 });
  t.teardown(perToken.close);
  const tail = (await postJson(`${perToken.base}/tokenize`, { content: ' tail of the prompt', add_special: false })).body.tokens;
  const none = await postJson(`${perToken.base}/embeddings`, { content: [{ prompt_string: 'What is this: <__media__> tail of the prompt', multimodal_data: [red.toString('base64')] }] });
  t.equal(none.status, 200);
  t.equal(none.body[0].embedding.length, tail.length, `${tail.length} vectors, one per token after the image`);
});

t.test('streamed /completion chunks with an image report the prompt tokens, images included', async (t) => {
  const body = { prompt: 'Look: <__media__> and say', multimodal_data: [red.toString('base64')], n_predict: 4, temperature: 0 };
  const whole = await postJson(`${vision.base}/completion`, body);
  const res = await fetch(`${vision.base}/completion`, { method: 'POST', body: JSON.stringify({ ...body, stream: true }) });
  const events = parseSse(await res.text()) as any[];
  t.ok(events.length >= 2);
  t.ok(whole.body.tokens_evaluated > 64);
  t.same(events.map((e) => e.tokens_evaluated), events.map(() => whole.body.tokens_evaluated), 'every chunk, the first included');
});

t.test('the prompt cache reuses an image only when the same image is at the same place', async (t) => {
  const run = (image: Buffer, text: string, cache = true) => postJson(`${vision.base}/completion`, {
    prompt: text, multimodal_data: [image.toString('base64')], n_predict: 8, temperature: 0, id_slot: 2, cache_prompt: cache,
  });
  const first = await run(red, 'Look closely: <__media__> and say');
  const again = await run(red, 'Look closely: <__media__> and say');
  t.equal(again.body.tokens_cached, again.body.tokens_evaluated - 1, 'all but the last prompt token reused, the image included');
  t.equal(again.body.content, first.body.content);
  t.equal(again.body.content, (await run(red, 'Look closely: <__media__> and say', false)).body.content, 'same answer as without the cache');
  t.equal((await vision.server.ready).engine.native.slots()[2]!.nCache, 0, 'the run without the cache left the slot empty');
  await run(red, 'Look closely: <__media__> and say');

  const longer = await run(red, 'Look closely: <__media__> and say it again, slowly');
  t.ok(longer.body.tokens_cached > 64, `the image is reused when only the text after it changes (${longer.body.tokens_cached} cached)`);
  t.equal(longer.body.content, (await run(red, 'Look closely: <__media__> and say it again, slowly', false)).body.content);

  await run(red, 'Look: <__media__> and say');
  const other = await run(blue, 'Look: <__media__> and say');
  t.ok(other.body.tokens_cached < 64, `another image at the same place is evaluated afresh (${other.body.tokens_cached} cached)`);
  t.equal(other.body.content, (await run(blue, 'Look: <__media__> and say', false)).body.content);
  t.not(other.body.content, first.body.content);
});

t.test('bad images fail cleanly with 400 and the server keeps serving', async (t) => {
  const truncated = red.subarray(0, 60);
  const cases: Array<[string, RegExp]> = [
    ['data:image/png;base64,AAAAAAAAAAAA', /not in a supported format/],
    [dataUrl(truncated), /could not be decoded/],
    ['data:image/png;base64,', /data URL|empty/],
    ['not a url', /data URL/],
    ['https://example.com/cat.png', /remote image URLs are not allowed/],
  ];
  for (const [url, message] of cases) {
    const res = await ask(url);
    t.equal(res.status, 400, url.slice(0, 40));
    t.match(res.body.error.message, message);
  }
  const big = Buffer.alloc(21 * 1024 * 1024, 1);
  const huge = await postJson(`${vision.base}/v1/chat/completions`, { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: dataUrl(big) } }] }] });
  t.equal(huge.status, 413, 'a body beyond the server cap');
  t.equal((await ask(dataUrl(red))).status, 200, 'still serving');
});

t.test('an image part without a projector is llama-server\'s 500; multimodal_data without one is a 400', async (t) => {
  const plain = await startTestServer(models.chat, { parallel: 1, ctxSize: 512 });
  t.teardown(plain.close);
  const res = await postJson(`${plain.base}/v1/chat/completions`, { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: dataUrl(red) } }] }] });
  t.equal(res.status, 500);
  t.match(res.body.error.message, /^image input is not supported - hint: .*provide the mmproj/);
  const mm = await postJson(`${plain.base}/completion`, { prompt: 'x <__media__> y', multimodal_data: [red.toString('base64')] });
  t.equal(mm.status, 400);
});

t.test('a projector file that is missing fails at start-up', async (t) => {
  const server = await startInferenceServer({ runtime: resolveRuntime({ model: models.chat }, false), host: '127.0.0.1', port: 0, parallel: 1, apiKeys: [], metrics: false, nPredict: -1, maxBodyBytes: 1 << 20, mmproj: '/nope/mmproj.gguf' });
  await t.rejects(server.ready, /multimodal projector file not found/);
  await server.close();
});

t.test('--media-path: file:// URLs read images under that directory only', async (t) => {
  const { mkdtemp, mkdir, writeFile, symlink } = await import('node:fs/promises');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const root = await mkdtemp(join(tmpdir(), 'media-'));
  await mkdir(join(root, 'media', 'sub'), { recursive: true });
  await writeFile(join(root, 'media', 'sub', 'red.png'), red);
  await writeFile(join(root, 'secret.png'), blue);
  await symlink(join(root, 'secret.png'), join(root, 'media', 'escape.png'));
  const local = await startTestServer(models.chat, { mmproj: models.mmproj, ctxSize: 2048, mediaPath: join(root, 'media') });
  t.teardown(local.close);
  const askLocal = (url: string) => postJson(`${local.base}/v1/chat/completions`, {
    messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in the picture?' }, { type: 'image_url', image_url: { url } }] }],
    max_tokens: 8, temperature: 0,
  });
  const fromFile = await askLocal('file://sub/red.png');
  t.equal(fromFile.status, 200);
  t.equal(fromFile.body.choices[0].message.content, (await ask(dataUrl(red))).body.choices[0].message.content, 'the same image as the data URL');
  t.equal((await askLocal('file:////sub//red.png')).status, 200, 'leading and doubled slashes name the same file');
  for (const [url, message] of [
    ['file://sub/missing.png', /cannot read the file/],
    ['file://../secret.png', /file path is not allowed/],
    ['file://sub/../../secret.png', /file path is not allowed/],
    ['file://escape.png', /file path is not allowed/],
  ] as const) {
    const res = await askLocal(url);
    t.equal(res.status, 400, url);
    t.match(res.body.error.message, message, url);
  }
  const without = await ask('file://sub/red.png');
  t.equal(without.status, 400);
  t.match(without.body.error.message, /file:\/\/ URLs are not allowed unless --media-path is specified/);
});

t.test('the token-count routes count images as their tokens, as llama-server', async (t) => {
  const content = [{ type: 'text', text: 'What is in the picture?' }, { type: 'image_url', image_url: { url: dataUrl(red) } }];
  const run = await ask(dataUrl(red));
  const chat = await postJson(`${vision.base}/v1/chat/completions/input_tokens`, { messages: [{ role: 'user', content }] });
  t.equal(chat.status, 200);
  t.same(chat.body, { input_tokens: run.body.usage.prompt_tokens, object: 'response.input_tokens' }, 'equal to the prompt the chat runs');
  const responses = await postJson(`${vision.base}/v1/responses/input_tokens`, {
    input: [{ role: 'user', content: [{ type: 'input_text', text: 'What is in the picture?' }, { type: 'input_image', image_url: dataUrl(red) }] }],
  });
  t.same(responses.body, { input_tokens: run.body.usage.prompt_tokens, object: 'response.input_tokens' });
  const anthropic = await postJson(`${vision.base}/v1/messages/count_tokens`, {
    model: 'x',
    messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in the picture?' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: red.toString('base64') } }] }],
  });
  t.equal(anthropic.status, 200);
  t.ok(anthropic.body.input_tokens > 64, 'the image counts');
  const reference = await startLlamaServer(['-m', models.chat, '-mm', models.mmproj, '-c', '2048']);
  t.teardown(reference.close);
  const theirs = await postJson(`${reference.base}/v1/chat/completions/input_tokens`, { messages: [{ role: 'user', content }] });
  t.same(chat.body, theirs.body, 'llama-server counts the same');
  const theirsAnthropic = await postJson(`${reference.base}/v1/messages/count_tokens`, {
    model: 'x',
    messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in the picture?' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: red.toString('base64') } }] }],
  });
  t.equal(anthropic.body.input_tokens, theirsAnthropic.body.input_tokens);
  const corrupt = await postJson(`${vision.base}/v1/chat/completions/input_tokens`, { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: dataUrl(red.subarray(0, 60)) } }, { type: 'text', text: 'x' }] }] });
  t.equal(corrupt.status, 400);
  t.match(corrupt.body.error.message, /could not be decoded/);
});

t.test('the projector flags (-mmdev, --image-min/max-tokens, --mtmd-batch-max-tokens) go to mtmd as in llama-server', async (t) => {
  const argv = ['llama-server', '-m', models.chat, '-mm', models.mmproj, '-mmdev', 'none', '--image-min-tokens', '4', '--image-max-tokens', '8', '--mtmd-batch-max-tokens', '16'];
  const params = native.ServerParams.parse(argv);
  t.same(params.given().filter((f) => f.startsWith('-mm') || f.startsWith('--image') || f.startsWith('--mtmd')), ['-mm', '-mmdev', '--image-min-tokens', '--image-max-tokens', '--mtmd-batch-max-tokens']);
  const options = serverOptions(params.values(), {}, false);
  const flagged = await startInferenceServer({ ...options, serverParams: params, host: '127.0.0.1', port: 0, runtime: { ...options.runtime, ctxSize: 2048 } });
  t.teardown(() => flagged.close());
  await flagged.ready;
  const body = { messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in the picture?' }, { type: 'image_url', image_url: { url: dataUrl(red) } }] }], max_tokens: 8, temperature: 0 };
  const res = await postJson(`http://127.0.0.1:${flagged.port}/v1/chat/completions`, body);
  t.equal(res.status, 200);
  t.equal(res.body.choices[0].message.content, (await ask(dataUrl(red))).body.choices[0].message.content, 'a fixed-resolution projector on the CPU answers as before');
  t.throws(() => native.ServerParams.parse(['llama-server', '-m', models.chat, '-mmdev', 'no-such-device']), 'an unknown device is refused by llama.cpp\'s parser');
});
