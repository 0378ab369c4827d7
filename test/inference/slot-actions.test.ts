// POST /slots/{id}?action=save|restore|erase with --slot-save-path, checked against llama-server's
// answers (tools/server/server-context.cpp) and the confinement of slot files to that directory.
import t from 'tap';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { native } from '../../src/native/binding.js';
import { refusedOptions, serverOptions } from '../../src/inference/server-config.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';

const models = await ensureTestModels();
const root = mkdtempSync(join(tmpdir(), 'slot-actions-'));
const dir = join(root, 'slots');
const outside = join(root, 'outside');
mkdirSync(dir);
mkdirSync(outside);
t.teardown(() => rmSync(root, { recursive: true, force: true }));
const { base, close } = await startTestServer(models.chat, { parallel: 2, ctxSize: 1024, slotSavePath: dir });
t.teardown(close);

const PROMPT = 'The capital of France is a city with many';
const completion = (slot: number, prompt = PROMPT) =>
  postJson(`${base}/completion`, { prompt, id_slot: slot, cache_prompt: true, temperature: 0, n_predict: 8 });
const action = (slot: number | string, name: string, body?: unknown) => postJson(`${base}/slots/${slot}?action=${name}`, body ?? '');
const invalid = (message: string) => ({ error: { code: 400, message, type: 'invalid_request_error' } });

t.test('save, then restore into another slot: the prompt cache is reused and greedy output is the same', async (t) => {
  const first = await completion(1);
  t.equal(first.status, 200);
  const nCache = first.body.timings.prompt_n + first.body.timings.cache_n + first.body.timings.predicted_n - 1;

  const saved = await action(1, 'save', { filename: 'one.bin' });
  t.equal(saved.status, 200);
  t.same(Object.keys(saved.body).sort(), ['filename', 'id_slot', 'n_saved', 'n_written', 'timings']);
  t.match(saved.body, { id_slot: 1, filename: 'one.bin', n_saved: nCache, n_written: statSync(join(dir, 'one.bin')).size });
  t.type(saved.body.timings.save_ms, 'number');

  // llama-server's file: llama_state_seq_save_file's header, then its packed token payload.
  const file = readFileSync(join(dir, 'one.bin'));
  t.same([file.readUInt32LE(0), file.readUInt32LE(4)], [0x67677371, 3], 'magic "ggsq", sequence state version 3');
  t.same([file.readInt32LE(12), file.readUInt32LE(16), file.readUInt32LE(20)], [-1, 1, nCache], 'packed payload: marker, version, token count');

  t.equal((await completion(0, 'Something else entirely, to fill slot zero')).status, 200);
  const restored = await action(0, 'restore', { filename: 'one.bin' });
  t.equal(restored.status, 200);
  t.same(Object.keys(restored.body).sort(), ['filename', 'id_slot', 'n_read', 'n_restored', 'timings']);
  t.match(restored.body, { id_slot: 0, filename: 'one.bin', n_restored: nCache, n_read: file.length });
  t.type(restored.body.timings.restore_ms, 'number');

  const again = await completion(0);
  t.equal(again.status, 200);
  t.equal(again.body.content, first.body.content, 'greedy output equal after restore');
  const nPrompt = first.body.timings.prompt_n + first.body.timings.cache_n;
  t.equal(again.body.tokens_cached, nPrompt - 1, 'the whole prompt but its last token comes from the restored cache');
  t.equal(again.body.timings.prompt_n, 1);
});

t.test('a plain token list (older llama-servers) restores too', async (t) => {
  const file = readFileSync(join(dir, 'one.bin'));
  const payloadSize = file.readUInt32LE(8);
  const nTokens = file.readUInt32LE(20);
  const tokens = file.subarray(24, 24 + nTokens * 4);
  const header = Buffer.from(file.subarray(0, 12));
  header.writeUInt32LE(nTokens, 8);
  writeFileSync(join(dir, 'legacy.bin'), Buffer.concat([header, tokens, file.subarray(12 + payloadSize * 4)]));
  const restored = await action(1, 'restore', { filename: 'legacy.bin' });
  t.equal(restored.status, 200);
  t.equal(restored.body.n_restored, nTokens);
  const again = await completion(1);
  t.equal(again.body.timings.prompt_n, 1, 'the restored cache is reused');
});

t.test('erase empties the slot: the same prompt is evaluated in full again', async (t) => {
  // A prompt of its own: the earlier tests' prompts are in the --cache-ram prompt cache (idle slots
  // go there when a task starts), which erase leaves alone, as llama-server's does.
  const prompt = 'Erase me: a prompt that no other test sends';
  t.equal((await completion(1, prompt)).status, 200);
  const cached = (await completion(1, prompt)).body;
  t.ok(cached.tokens_cached > 0);
  const erased = await action(1, 'erase');
  t.equal(erased.status, 200);
  t.same(erased.body, { id_slot: 1, n_erased: cached.timings.prompt_n + cached.timings.cache_n + cached.timings.predicted_n - 1 });
  const after = await completion(1, prompt);
  t.equal(after.body.tokens_cached, 0);
  t.same((await action(1, 'erase')).body, { id_slot: 1, n_erased: after.body.timings.prompt_n + after.body.timings.predicted_n - 1 });
  t.same((await action(1, 'erase')).body, { id_slot: 1, n_erased: 0 }, 'erasing an empty slot erases nothing');
});

t.test('an action on a busy slot waits for its task to end, as llama-server defers it', async (t) => {
  const res = await fetch(`${base}/completion`, {
    method: 'POST',
    body: JSON.stringify({ prompt: PROMPT, id_slot: 0, temperature: 0, n_predict: 48, ignore_eos: true, stream: true }),
  });
  const reader = res.body!.getReader();
  await reader.read(); // the task is running: its first chunk has arrived
  const saving = action(0, 'save', { filename: 'busy.bin' });
  let text = '';
  for (let r = await reader.read(); !r.done; r = await reader.read()) text += new TextDecoder().decode(r.value);
  const last = text.split('\n\n').filter((b) => b.startsWith('data: ')).map((b) => JSON.parse(b.slice(6))).at(-1);
  const saved = await saving;
  t.equal(saved.status, 200);
  t.equal(saved.body.n_saved, last.timings.cache_n + last.timings.prompt_n + last.timings.predicted_n - 1, 'saved after the task ended, with everything it generated');
});

t.test('filenames llama-server refuses are 400 "Invalid filename", and nothing is written', async (t) => {
  const names = ['../escape.bin', 'a/b.bin', 'a\\b.bin', '..', '.', '', ' lead.bin', 'trail.bin ', 'dot.', 'a..b', 'a:b', 'a*b', 'a?b', 'a|b', 'a<b', 'nul\u0000.bin', 'ctl\u0007.bin', 'x'.repeat(256), 'slash\u2215.bin'];
  for (const name of names) {
    for (const verb of ['save', 'restore']) {
      const res = await action(0, verb, { filename: name });
      t.same([res.status, res.body], [400, invalid('Invalid filename')], `${verb} ${JSON.stringify(name)}`);
    }
  }
  t.notOk(existsSync(join(root, 'escape.bin')), 'nothing written beside the directory');
  t.same(readdirSync(outside), []);
});

t.test('a body without a string filename is a 400 naming the field', async (t) => {
  for (const body of ['{}', '{"filename": 3}', 'not json']) {
    const res = await action(0, 'save', body);
    t.equal(res.status, 400, body);
    t.equal(res.body.error.type, 'invalid_request_error');
  }
});

t.test('a symbolic link planted in the directory is never followed, to write or to read', async (t) => {
  const target = join(outside, 'target.bin');
  writeFileSync(target, 'precious');
  symlinkSync(target, join(dir, 'link.bin'));
  symlinkSync(join(outside, 'created.bin'), join(dir, 'dangling.bin'));
  for (const name of ['link.bin', 'dangling.bin']) {
    const res = await action(0, 'save', { filename: name });
    t.same([res.status, res.body.error.message], [400, 'Unable to save slot: the file is a symbolic link'], `save ${name}`);
  }
  t.equal(readFileSync(target, 'utf8'), 'precious', 'the target is untouched');
  t.notOk(existsSync(join(outside, 'created.bin')), 'no file created through a dangling link');

  // A valid slot file outside the directory, reachable only through a link.
  writeFileSync(target, readFileSync(join(dir, 'one.bin')));
  const res = await action(0, 'restore', { filename: 'link.bin' });
  t.same([res.status, res.body], [400, invalid('Unable to restore slot: the file is a symbolic link')]);
});

t.test('restore: a missing or corrupt file is a 400 and leaves the slot empty', async (t) => {
  t.equal((await completion(0)).status, 200);
  const missing = await action(0, 'restore', { filename: 'missing.bin' });
  t.same([missing.status, missing.body], [400, invalid('Unable to restore slot: file not found')]);
  t.same((await action(0, 'erase')).body, { id_slot: 0, n_erased: 0 }, 'the failed restore emptied the slot');

  writeFileSync(join(dir, 'junk.bin'), 'this is not a slot file at all');
  const junk = await action(0, 'restore', { filename: 'junk.bin' });
  t.same([junk.status, junk.body], [400, invalid('Unable to restore slot: not a slot save file of this version')]);

  const file = readFileSync(join(dir, 'one.bin'));
  writeFileSync(join(dir, 'cut.bin'), file.subarray(0, file.length - 100));
  const cut = await action(0, 'restore', { filename: 'cut.bin' });
  t.same([cut.status, cut.body], [400, invalid('Unable to restore slot: No available space in KV cache or invalid slot save file')]);

  const bad = Buffer.from(file);
  bad.writeInt32LE(1 << 30, 24); // a token id beyond the vocabulary
  writeFileSync(join(dir, 'bad-token.bin'), bad);
  const badToken = await action(0, 'restore', { filename: 'bad-token.bin' });
  t.same([badToken.status, badToken.body], [400, invalid('Unable to restore slot: Invalid tokens in slot save file')]);

  mkdirSync(join(dir, 'subdir'));
  const notFile = await action(0, 'restore', { filename: 'subdir' });
  t.equal(notFile.status, 400, 'a directory is not a slot file');
});

t.test('an invalid slot id or action is a 400, as llama-server', async (t) => {
  for (const slot of ['2', '-1', 'abc', '99999999999']) {
    const res = await action(slot, 'erase');
    t.same([res.status, res.body], [400, invalid('Invalid slot ID')], `slot ${slot}`);
  }
  t.equal((await action('1x', 'erase')).status, 200, 'std::stoi reads the leading digits');
  for (const name of ['drop', 'SAVE', '']) {
    const res = await action(0, name, { filename: 'x.bin' });
    t.same([res.status, res.body], [400, invalid('Invalid action')], `action ${JSON.stringify(name)}`);
  }
  const none = await postJson(`${base}/slots/0`, { filename: 'x.bin' });
  t.same([none.status, none.body], [400, invalid('Invalid action')], 'no action');
});

t.test('without --slot-save-path every slot action is 501', async (t) => {
  const plain = await startTestServer(models.chat, { parallel: 1, ctxSize: 512 });
  t.teardown(plain.close);
  for (const name of ['save', 'restore', 'erase']) {
    const res = await postJson(`${plain.base}/slots/0?action=${name}`, { filename: 'x.bin' });
    t.same([res.status, res.body], [501, { error: { code: 501, message: 'This server does not support slots action. Start it with `--slot-save-path`', type: 'not_supported_error' } }]);
  }
});

t.test('--slot-save-path is served: llama.cpp\'s parser checks the directory, and the server gets it', async (t) => {
  t.same(refusedOptions(['-m', '--slot-save-path']), []);
  const values = native.ServerParams.parse(['llama-server', '-m', models.chat, '--slot-save-path', dir]).values();
  t.equal(serverOptions(values, {}, false).slotSavePath, `${dir}/`, 'with the separator llama.cpp appends');
  t.equal(serverOptions(native.ServerParams.parse(['llama-server', '-m', models.chat]).values(), {}, false).slotSavePath, undefined);
  t.throws(() => native.ServerParams.parse(['llama-server', '-m', models.chat, '--slot-save-path', join(root, 'no-such-dir')]), { code: 'BAD_ARGUMENTS' });
});
