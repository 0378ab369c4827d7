// llama-server's log options on inference-server: --log-file copies every printed line to the
// file, --log-jsonl prints them as JSON objects on stdout, one a line ({type, time, level, msg}),
// --log-prefix adds the level letter; llama.cpp's lines and this server's own alike.
// --log-prompts-dir writes each completion request's prompt to a file there.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { serverOptions, usesCommonLog } from '../../src/inference/server-config.js';
import { startInferenceServer } from '../../src/inference/server.js';
import { promptLogName } from '../../src/inference/service/prompt-log.js';
import { native } from '../../src/native/binding.js';
import { postJson } from '../helpers/inference-server.js';
import { ensureTestModels } from '../fixtures/models.js';
import { REPO_ROOT } from '../helpers/reference.js';

const models = await ensureTestModels();
const dir = mkdtempSync(join(tmpdir(), 'log-flags-'));

/** Runs inference-server until `until` matches its stdout or stderr, then stops it (SIGTERM) and waits for its exit. */
async function runUntil(args: string[], until: RegExp): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), join(REPO_ROOT, 'src', 'inference', 'server-main.ts'),
    '-m', models.chat, '-c', '256', '--port', '0', '--no-ui', ...args], { cwd: REPO_ROOT });
  let stdout = '';
  let stderr = '';
  let stopped = false;
  const check = (): void => {
    if (!stopped && until.test(stdout + stderr)) {
      stopped = true;
      child.kill('SIGTERM');
    }
  };
  child.stdout.on('data', (d) => { stdout += d; check(); });
  child.stderr.on('data', (d) => { stderr += d; check(); });
  // 'close', not 'exit': the pipes may still hold the child's last lines when it has exited.
  const [code] = await once(child, 'close');
  return { code: code as number | null, stdout, stderr };
}

t.test('only the options that configure llama.cpp\'s common log route lines through it', async (t) => {
  t.equal(usesCommonLog(['-m', '--port']), false);
  for (const name of ['--log-file', '--log-jsonl', '--log-colors', '--log-prefix', '--log-timestamps']) t.equal(usesCommonLog(['-m', name]), true, name);
});

t.test('--log-file FILE: the lines printed on stderr are also in the file', async (t) => {
  const file = join(dir, 'server.log');
  const out = await runUntil(['--log-file', file], /model ready/);
  t.equal(out.code, 0);
  t.match(out.stderr, /inference-server: listening on http:\/\/127\.0\.0\.1:\d+ /);
  const logged = readFileSync(file, 'utf8');
  t.match(logged, /inference-server: listening on http:\/\/127\.0\.0\.1:\d+ \(backend \w+\), loading /, 'this server\'s own lines');
  t.match(logged, /llama threadpool init/, 'llama.cpp\'s lines');
  t.match(logged, /inference-server: model ready \(llama, \d+ parameters\), n_ctx 256/);
  t.match(logged, /inference-server: shutting down\n/);
});

t.test('--log-jsonl: every line on stdout is a JSON object {type: "log", time, level, msg}', async (t) => {
  const out = await runUntil(['--log-jsonl'], /model ready/);
  t.equal(out.code, 0);
  t.equal(out.stderr, '', 'nothing left on stderr');
  const lines = out.stdout.trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
  t.ok(lines.length >= 3);
  for (const line of lines) {
    t.same(Object.keys(line), ['type', 'time', 'level', 'msg']);
    t.equal(line.type, 'log');
  }
  t.match(lines.find((l) => String(l.msg).includes('model ready')), { level: 'info', msg: /^inference-server: model ready .*\n$/ });
});

t.test('--log-prefix: each line starts with its level letter, as llama-server\'s', async (t) => {
  const out = await runUntil(['--log-prefix'], /model ready/);
  t.match(out.stderr, /^I inference-server: listening on /m);
  t.match(out.stderr, /^I inference-server: model ready /m);
});

t.test('a refused start is logged as an error line', async (t) => {
  // (It exits by itself: `until` is only a backstop.)
  const out = await runUntil(['--log-jsonl', '--ssl-key-file', join(dir, 'key.pem')], /model ready/);
  t.equal(out.code, 1);
  const lines = out.stdout.trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
  t.same(lines, [{ type: 'log', time: 0, level: 'error', msg: 'inference-server: --ssl-key-file needs --ssl-cert-file too: HTTPS takes both a key and its certificate\n' }]);
});

t.test('--log-prompts-dir DIR: created by the parser; each completion request\'s prompt lands in <ms>.txt', async (t) => {
  const prompts = join(dir, 'prompts', 'nested');
  const params = native.ServerParams.parse(['llama-server', '-m', models.chat, '-c', '512', '--log-prompts-dir', prompts]);
  t.ok(existsSync(prompts), 'the folder is made at parse time, as llama-server');
  const server = await startInferenceServer({ ...serverOptions(params.values(), {}, false), host: '127.0.0.1', port: 0 });
  t.teardown(() => server.close());
  await server.ready;
  const base = `http://127.0.0.1:${server.port}`;
  const newFile = async (before: string[]): Promise<string> => {
    // The file is written before the task runs; by the answer it is on disk.
    const added = readdirSync(prompts).filter((f) => !before.includes(f));
    t.equal(added.length, 1, 'one file per request');
    return readFileSync(join(prompts, added[0]!), 'utf8');
  };
  let before = readdirSync(prompts);
  t.equal((await postJson(`${base}/completion`, { prompt: 'Hello there', n_predict: 1 })).status, 200);
  t.equal(await newFile(before), 'Hello there');
  before = readdirSync(prompts);
  t.equal((await postJson(`${base}/completion`, { prompt: ['one', 'two'], n_predict: 1 })).status, 200);
  t.equal(await newFile(before), '[\n  "one",\n  "two"\n]', 'several prompts: a JSON array indented by 2');
  before = readdirSync(prompts);
  t.equal((await postJson(`${base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'Hi' }], max_tokens: 1 })).status, 200);
  t.equal(await newFile(before), '<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n', 'a chat: its rendered template');
  t.match(readdirSync(prompts), Array(3).fill(/^\d{13}\.txt$/), 'named by the wall clock in milliseconds');
  t.same([promptLogName(123), promptLogName(1732345678901)], ['000000000123.txt', '1732345678901.txt'], 'printf\'s %012 pads to 12 digits at least');
});
