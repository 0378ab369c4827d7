import { copyFile, mkdtemp, open, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { native } from '../../src/native/binding.js';
import { CHAT_TOKENS, CHAT_VOCAB_SIZE, ensureTestModels } from '../fixtures/models.js';

const models = await ensureTestModels();
const scratch = await mkdtemp(join(tmpdir(), 'model-test-'));
t.teardown(() => rm(scratch, { recursive: true, force: true }));

t.test('loads a GGUF model off the JS thread, reporting progress up to 1', async (t) => {
  const progress: number[] = [];
  let ticks = 0;
  const timer = setInterval(() => ticks++, 0);
  const model = await native.Model.load(models.chat, {}, (p) => progress.push(p)).promise;
  clearInterval(timer);
  t.ok(progress.length > 0, 'progress was reported');
  t.equal(progress.at(-1), 1);
  t.ok(progress.every((p, i) => p >= 0 && p <= 1 && (i === 0 || p >= progress[i - 1]!)), 'progress is monotonic in 0..1');
  t.equal(model.disposed, false);
  model.dispose();
  t.equal(model.disposed, true);
  model.dispose();
  t.pass('dispose is idempotent');
  t.throws(() => model.tokenize('x', false, false), /disposed/);
});

t.test('every progress call arrives before the load promise settles, even with a busy JS thread', async (t) => {
  // Progress and completion reach JS through different libuv handles; this once lost the progress
  // calls of most loads when the JS thread was busy.
  const busy = setInterval(() => {
    const until = Date.now() + 1;
    while (Date.now() < until);
  }, 0);
  t.teardown(() => clearInterval(busy));
  const lastReported: (number | undefined)[] = [];
  for (let i = 0; i < 30; i++) {
    const progress: number[] = [];
    const model = await native.Model.load(models.chat, {}, (p) => progress.push(p)).promise;
    lastReported.push(progress.at(-1));
    model.dispose();
  }
  t.same(lastReported, new Array(30).fill(1));
  const progress: number[] = [];
  await t.rejects(native.Model.load(join(scratch, 'missing.gguf'), {}, (p) => progress.push(p)).promise);
  t.same(progress, [], 'a failed load settles too');
});

t.test('metadata describes the model', async (t) => {
  const model = await native.Model.load(models.chat, {}).promise;
  t.teardown(() => model.dispose());
  const m = model.metadata();
  t.equal(m.architecture, 'llama');
  t.equal(m.vocabSize, CHAT_VOCAB_SIZE);
  t.equal(m.vocabType, 'bpe');
  t.equal(m.nEmbd, 64);
  t.equal(m.nLayer, 2);
  t.equal(m.nCtxTrain, 4096);
  t.equal(m.nParams, 6365760);
  t.ok(m.sizeBytes > 20_000_000);
  t.equal(m.tokens.bos, CHAT_TOKENS.endOfText);
  t.equal(m.tokens.eos, CHAT_TOKENS.imEnd);
  t.equal(m.tokens.fimPre, CHAT_TOKENS.fimPrefix);
  t.equal(m.tokens.fimSuf, CHAT_TOKENS.fimSuffix);
  t.equal(m.tokens.fimMid, CHAT_TOKENS.fimMiddle);
  t.match(m.chatTemplate, /<\|im_start\|>/);
  t.equal(m.kv['general.architecture'], 'llama');
  t.equal(m.kv['llama.block_count'], '2');
});

t.test('tokenize and detokenize round-trip text', async (t) => {
  const model = await native.Model.load(models.chat, {}).promise;
  t.teardown(() => model.dispose());
  const text = 'Hello world! Ünïcödé ✓ 你好 and code: fn main() {}';
  const tokens = model.tokenize(text, false, false);
  t.ok(tokens instanceof Int32Array);
  t.ok(tokens.length > 5);
  t.equal(model.detokenize(tokens), text);
  t.equal(model.detokenize([...tokens]), text, 'plain arrays are accepted');
  const pieces = [...tokens].map((id) => Buffer.from(model.tokenPiece(id)));
  t.equal(Buffer.concat(pieces).toString('utf8'), text, 'token pieces are the bytes of the text');
});

t.test('special tokens are parsed only when asked', async (t) => {
  const model = await native.Model.load(models.chat, {}).promise;
  t.teardown(() => model.dispose());
  t.same([...model.tokenize('<|im_end|>', false, true)], [CHAT_TOKENS.imEnd]);
  t.ok(model.tokenize('<|im_end|>', false, false).length > 1, 'as plain text it is several tokens');
});

t.test('a token piece that is not valid UTF-8 on its own comes back as bytes', async (t) => {
  const model = await native.Model.load(models.chat, {}).promise;
  t.teardown(() => model.dispose());
  const tokens = model.tokenize('🦙🌍', false, false);
  const pieces = [...tokens].map((id) => Buffer.from(model.tokenPiece(id)));
  t.equal(Buffer.concat(pieces).toString('utf8'), '🦙🌍');
  t.same(pieces[0], Buffer.from([0xf0, 0x9f]), 'the first piece is half of an emoji');
  t.throws(() => new TextDecoder('utf-8', { fatal: true }).decode(pieces[0]), 'and is not valid UTF-8 alone');
});

t.test('detokenize rejects ids outside the vocabulary', async (t) => {
  const model = await native.Model.load(models.chat, {}).promise;
  t.teardown(() => model.dispose());
  t.throws(() => model.detokenize([CHAT_VOCAB_SIZE]), /out of range/);
  t.throws(() => model.detokenize([-1]), /out of range/);
});

t.test('applies the model chat template', async (t) => {
  const model = await native.Model.load(models.chat, {}).promise;
  t.teardown(() => model.dispose());
  const prompt = model.applyChatTemplate([{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }], {});
  t.equal(prompt, '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n');
  const noGen = model.applyChatTemplate([{ role: 'user', content: 'Hi' }], { addGenerationPrompt: false });
  t.equal(noGen, '<|im_start|>user\nHi<|im_end|>\n');
});

t.test('a missing file is a clear error', async (t) => {
  await t.rejects(native.Model.load(join(scratch, 'missing.gguf'), {}).promise, { message: /model file not found/ });
});

t.test('a file that is not GGUF is a clear error', async (t) => {
  const path = join(scratch, 'not.gguf');
  await writeFile(path, 'this is not a model at all');
  await t.rejects(native.Model.load(path, {}).promise, { message: /not a GGUF file/ });
});

t.test('a truncated GGUF is a clear error, not a crash', async (t) => {
  const path = join(scratch, 'truncated.gguf');
  await copyFile(models.chat, path);
  const size = (await stat(path)).size;
  const handle = await open(path, 'r+');
  await handle.truncate(Math.floor(size / 2));
  await handle.close();
  await t.rejects(native.Model.load(path, {}).promise, { message: /failed to load model/ });
  const headerOnly = join(scratch, 'header-only.gguf');
  await copyFile(models.chat, headerOnly);
  const h2 = await open(headerOnly, 'r+');
  await h2.truncate(100);
  await h2.close();
  await t.rejects(native.Model.load(headerOnly, {}).promise, { message: /failed to load model/ });
});

t.test('loading can be cancelled', async (t) => {
  const handle = native.Model.load(models.chat, {});
  handle.cancel();
  await t.rejects(handle.promise, { message: /model loading was cancelled/ });
  const again = await native.Model.load(models.chat, {}).promise;
  t.equal(again.metadata().architecture, 'llama', 'a later load succeeds');
  again.dispose();
});

t.test('unloading frees memory: RSS returns near its start after load/unload cycles', async (t) => {
  const cycle = async () => {
    const model = await native.Model.load(models.chat, { useMmap: false }).promise;
    model.metadata();
    model.dispose();
  };
  await cycle();
  const start = process.memoryUsage().rss;
  for (let i = 0; i < 8; i++) await cycle();
  const end = process.memoryUsage().rss;
  // Each load reads ~27 MB of weights into memory; one leaked load would exceed the bound.
  t.ok(end - start < 20 * 1024 * 1024, `RSS grew by ${((end - start) / 1048576).toFixed(1)} MB over 8 cycles`);
});
