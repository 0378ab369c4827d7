import { execFile } from 'node:child_process';
import { copyFile, mkdtemp, open, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { ensureAudioProjector } from '../fixtures/audio-projector.js';
import { ensureTestModels } from '../fixtures/models.js';
import { encodePng } from '../helpers/png.js';
import { llamaSimpleGreedy, REPO_ROOT } from '../helpers/reference.js';

const run = promisify(execFile);
const models = await ensureTestModels();
const CLI = [join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), join(REPO_ROOT, 'src', 'inference', 'cli-main.ts')];

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, ['--import', CLI[0]!, CLI[1]!, ...args], { cwd: REPO_ROOT, timeout: 120_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

t.test('inference-cli -p "Hello" -n 16 --temp 0 prints llama.cpp\'s greedy text and a timing line', async (t) => {
  const reference = await llamaSimpleGreedy(models.chat, 'Hello', 16);
  const out = await cli(['-m', models.chat, '-p', 'Hello', '-n', '16', '--temp', '0']);
  t.equal(out.code, 0);
  t.equal(out.stdout, reference + '\n');
  t.match(out.stderr, /prompt: \d+ tokens, [\d.]+ tokens\/s \| generation: 16 tokens, [\d.]+ tokens\/s/);
});

t.test('-c, -ngl, --layer-window and --seed are accepted', async (t) => {
  const a = await cli(['-m', models.chat, '-p', 'Hi', '-n', '8', '--temp', '0.9', '--seed', '42', '-c', '512', '-ngl', '0', '--layer-window', 'auto']);
  const b = await cli(['-m', models.chat, '-p', 'Hi', '-n', '8', '--temp', '0.9', '--seed', '42', '-c', '512']);
  t.equal(a.code, 0);
  t.equal(a.stdout, b.stdout, 'the same seed gives the same text');
});

t.test('a truncated GGUF is a clear error and exit code 1', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'cli-test-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const path = join(dir, 'truncated.gguf');
  await copyFile(models.chat, path);
  const handle = await open(path, 'r+');
  await handle.truncate(Math.floor((await stat(path)).size / 3));
  await handle.close();
  const out = await cli(['-m', path, '-p', 'Hello', '-n', '4']);
  t.equal(out.code, 1);
  t.match(out.stderr, /inference-cli: failed to load model/);
  t.equal(out.stdout, '');
});

t.test('a missing model file is exit code 1 with the path', async (t) => {
  const out = await cli(['-m', '/nonexistent/model.gguf', '-p', 'x']);
  t.equal(out.code, 1);
  t.match(out.stderr, /model file not found: \/nonexistent\/model.gguf/);
});

t.test('--image with -mm runs the prompt and the image through the chat template', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'cli-image-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const red = join(dir, 'red.png');
  const blue = join(dir, 'blue.png');
  await writeFile(red, encodePng(64, 64, () => [255, 0, 0]));
  await writeFile(blue, encodePng(64, 64, () => [0, 0, 255]));
  const a = await cli(['-m', models.chat, '-mm', models.mmproj, '--image', red, '-p', 'Describe it', '-n', '8', '--temp', '0']);
  const b = await cli(['-m', models.chat, '-mm', models.mmproj, '--image', blue, '-p', 'Describe it', '-n', '8', '--temp', '0']);
  t.equal(a.code, 0, a.stderr);
  t.match(a.stderr, /prompt: (7\d|8\d) tokens/, 'the image tokens are in the prompt');
  t.not(a.stdout, b.stdout, 'the image changes the output');
  const noProjector = await cli(['-m', models.chat, '--image', red, '-p', 'x']);
  t.equal(noProjector.code, 2);
  t.match(noProjector.stderr, /needs a multimodal projector/);
  const bad = join(dir, 'bad.png');
  await writeFile(bad, 'not an image');
  const badImage = await cli(['-m', models.chat, '-mm', models.mmproj, '--image', bad, '-p', 'x', '-n', '2']);
  t.equal(badImage.code, 2);
  t.match(badImage.stderr, /not in a supported format/);
});

t.test('--audio with an audio projector runs the clip through the chat template (mtmd-cli\'s flag)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'cli-audio-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const mp3 = join(REPO_ROOT, 'vendor', 'llama.cpp', 'tools', 'mtmd', 'test-2.mp3');
  const projector = await ensureAudioProjector();
  const out = await cli(['-m', models.chat, '-mm', projector, '--audio', mp3, '-p', 'What is said?', '-n', '4', '--temp', '0']);
  t.equal(out.code, 0, out.stderr);
  t.match(out.stderr, /prompt: 7\d\d tokens/, "the clip's 750 audio positions are in the prompt");
  const image = join(dir, 'red.png');
  await writeFile(image, encodePng(8, 8, () => [255, 0, 0]));
  const refused = await cli(['-m', models.chat, '-mm', projector, '--image', image, '-p', 'x', '-n', '2']);
  t.equal(refused.code, 2, 'an image to an audio-only projector is refused');
  t.match(refused.stderr, /projector does not read images/);
});

t.test('--interactive chats on stdin/stdout with the chat template and keeps history', async (t) => {
  const child = execFile(process.execPath, ['--import', CLI[0]!, CLI[1]!, '-m', models.chat, '--interactive', '-n', '6', '--temp', '0'], { cwd: REPO_ROOT, timeout: 120_000 });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => { stdout += d; });
  child.stderr!.on('data', (d) => { stderr += d; });
  child.stdin!.write('Hello there\nAnd again\n/exit\n');
  child.stdin!.end();
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  t.equal(code, 0, stderr);
  const replies = stdout.trim().split('\n');
  t.equal(replies.length, 2, 'one reply per message');
  t.equal((stderr.match(/generation: 6 tokens/g) ?? []).length, 2);
  const prompts = [...stderr.matchAll(/prompt: (\d+) tokens/g)].map((m) => Number(m[1]));
  t.ok(prompts[1]! > prompts[0]!, 'the second turn carries the history');
});

t.test('an unknown flag or a bad value is a usage error', async (t) => {
  const unknown = await cli(['-m', models.chat, '-p', 'x', '--bogus']);
  t.equal(unknown.code, 2);
  t.match(unknown.stderr, /unknown option --bogus/);
  const bad = await cli(['-m', models.chat, '-p', 'x', '-n', 'many']);
  t.equal(bad.code, 2);
  t.match(bad.stderr, /-n: expected an integer/);
});
