// llama-server's log options on inference-server: --log-file copies every printed line to the
// file, --log-jsonl prints them as JSON objects on stdout, one a line ({type, time, level, msg}),
// --log-prefix adds the level letter; llama.cpp's lines and this server's own alike.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { usesCommonLog } from '../../src/inference/server-config.js';
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
  const [code] = await once(child, 'exit');
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
