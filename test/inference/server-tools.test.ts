// llama-server's built-in agent tools (--tools, -ag): each tool on a temporary directory, GET/POST
// /tools compared with llama-server's own answers, the 403 without tools, the API key, bad input,
// the time limit of exec_shell_command, a client that leaves, and the container/ssh runtimes'
// command lines (docker, podman and ssh are not run here).
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { native } from '../../src/native/binding.js';
import { serverOptions } from '../../src/inference/server-config.js';
import { ContainerIo, shellQuoteJoin, SshIo } from '../../src/inference/server-tools/isolate-io.js';
import { makeToolsIo, startToolsRuntime } from '../../src/inference/server-tools/runtime.js';
import { ToolsService } from '../../src/inference/server-tools/tools-service.js';
import { ensureTestModels } from '../fixtures/models.js';
import { parseSse, postJson, startTestServer } from '../helpers/inference-server.js';
import { startLlamaServer } from '../helpers/llama-server.js';

const models = await ensureTestModels();
const ALL = { names: ['all'], runtime: '' };

/** A fresh directory: a.txt, sub/b.md (typographic quotes, trailing spaces), sub/deep/big.txt (20 KB), build/junk.txt. */
function fixtureDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tools-test-'));
  writeFileSync(join(dir, 'a.txt'), 'line1\nline2 café\nline3\n');
  mkdirSync(join(dir, 'sub', 'deep'), { recursive: true });
  writeFileSync(join(dir, 'sub', 'b.md'), 'hello\nworld \u201cquoted\u201d  \n');
  writeFileSync(join(dir, 'sub', 'deep', 'big.txt'), 'x'.repeat(20000));
  mkdirSync(join(dir, 'build'));
  writeFileSync(join(dir, 'build', 'junk.txt'), 'junk');
  return dir;
}

const dir = fixtureDir();
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const ours = await startTestServer(models.chat, { tools: ALL });
t.teardown(() => ours.close());
const call = (tool: string, params: unknown, headers: Record<string, string> = {}) => postJson(`${ours.base}/tools`, { tool, params }, headers);

t.test('read_file: lines, a range with line numbers, the 16 KB cap, base64', async (t) => {
  t.same((await call('read_file', { path: join(dir, 'a.txt') })).body, { plain_text_response: 'line1\nline2 café\nline3\n' });
  t.same((await call('read_file', { path: join(dir, 'a.txt'), start_line: 2, end_line: 2, append_loc: true })).body, { plain_text_response: '2\u2192line2 café\n' });
  t.same((await call('read_file', { path: join(dir, 'sub/deep/big.txt') })).body, { error: 'file too large (20000 bytes, max 16384). Use start_line/end_line to read a portion.' });
  t.same((await call('read_file', { path: join(dir, 'nope.txt') })).body, { error: `cannot stat file: ${join(dir, 'nope.txt')}` });
  const b64 = await call('read_file', { path: 'a.txt' }, { 'x-resp-type': 'base64', 'x-tool-cwd': dir });
  t.same(b64.body, { base64: Buffer.from('line1\nline2 café\nline3\n').toString('base64'), size_bytes: 24 });
});

t.test('file_glob_search: files, directories, depth, limit, junk directories', async (t) => {
  const files = (await call('file_glob_search', { path: dir, include: '*.txt' })).body;
  t.same(files.entries.map((e: { path: string }) => e.path).sort(), ['a.txt', 'sub/deep/big.txt'], 'build/ is never walked');
  t.equal(files.base, dir);
  t.match(files.plain_text_response, /\n---\nTotal matches: 2\n$/);
  const dirs = (await call('file_glob_search', { path: '.', type: 'dir' }, { 'x-tool-cwd': dir })).body;
  t.same(dirs.entries.map((e: { path: string; type: string }) => `${e.path}:${e.type}`).sort(), ['build:dir', 'sub/deep:dir', 'sub:dir']);
  t.same((await call('file_glob_search', { path: dir, max_depth: 1 })).body.entries, [{ path: 'a.txt', type: 'file' }]);
  const limited = (await call('file_glob_search', { path: dir, limit: 1 })).body;
  t.equal(limited.entries.length, 1);
  t.match(limited.plain_text_response, 'Total matches: 3\n[1 results limit reached (3 total matches). Refine the glob pattern to narrow the search.]\n');
  t.same((await call('file_glob_search', { path: dir, type: 'bogus' })).body, { error: 'invalid type: bogus (expected "file", "dir" or "all")' });
  t.same((await call('file_glob_search', { path: dir, limit: 0 })).body, { error: 'invalid limit: 0 (expected 1 or more)' });
});

t.test('grep_search: matches with numbers and context, literal, ignore_case, a bad regex', async (t) => {
  t.same((await call('grep_search', { path: dir, pattern: 'line[23]', return_line_numbers: true })).body,
    { plain_text_response: 'a.txt:2:line2 café\na.txt:3:line3\n\n---\nTotal matches: 2\n' });
  t.same((await call('grep_search', { path: join(dir, 'sub/b.md'), pattern: 'WORLD', ignore_case: true, context_lines: 1 })).body,
    { plain_text_response: `${join(dir, 'sub/b.md')}-1-hello\n${join(dir, 'sub/b.md')}:2:world \u201cquoted\u201d  \n--\n\n---\nTotal matches: 1\n` });
  t.match((await call('grep_search', { path: dir, pattern: 'line.', literal: true })).body.plain_text_response, 'Total matches: 0\n');
  t.match((await call('grep_search', { path: dir, pattern: '(' })).body.error, /^invalid regex: /);
  t.same((await call('grep_search', { path: join(dir, 'nope'), pattern: 'x' })).body, { error: `path does not exist: ${join(dir, 'nope')}` });
});

t.test('write_file then edit_file: several edits, fuzzy quotes, uniqueness, overlap, no change', async (t) => {
  const file = join(dir, 'out', 'w.txt');
  t.same((await call('write_file', { path: file, content: 'line1\nline2\nline3\n' })).body, { result: 'file written successfully', path: file, bytes: 18 });
  const edited = await call('edit_file', { path: file, edits: [{ old_text: 'line2', new_text: 'line2-edited' }, { old_text: 'line3\n', new_text: 'line3\nline4\n' }] });
  t.same(edited.body, { result: 'file edited successfully', path: file, edits_applied: 2 });
  t.equal(readFileSync(file, 'utf8'), 'line1\nline2-edited\nline3\nline4\n');
  const md = join(dir, 'sub', 'b.md');
  t.same((await call('edit_file', { path: md, edits: [{ old_text: 'world "quoted"', new_text: 'plain' }] })).body.result, 'file edited successfully', 'ASCII quotes find typographic ones');
  t.equal(readFileSync(md, 'utf8'), 'hello\nplain\n');
  writeFileSync(file, 'dup\ndup\n');
  t.same((await call('edit_file', { path: file, edits: [{ old_text: 'dup', new_text: 'x' }] })).body, { error: `found 2 occurrences of edits[0].old_text in ${file}, it must be unique` });
  writeFileSync(file, 'line1\nline2\n');
  t.same((await call('edit_file', { path: file, edits: [{ old_text: 'line1\nline2', new_text: 'a' }, { old_text: 'line2', new_text: 'b' }] })).body,
    { error: `edits[0] and edits[1] overlap in ${file}; merge them into one edit or target disjoint regions` });
  t.same((await call('edit_file', { path: file, edits: [{ old_text: 'line1', new_text: 'line1' }] })).body, { error: 'no changes made: the replacement(s) produced identical content' });
  t.same((await call('edit_file', { path: file, edits: [] })).body, { error: '"edits" must be a non-empty array' });
  t.equal(readFileSync(file, 'utf8'), 'line1\nline2\n', 'a refused edit writes nothing');
  t.same((await call('write_file', { path: '/proc/nope/x', content: 'x' })).body, { error: 'failed to write file: /proc/nope/x' }, 'a path that cannot be made fails (Node\'s recursive mkdir would hang there)');
});

t.test('exec_shell_command and get_info run in the working directory', async (t) => {
  t.same((await call('exec_shell_command', { command: 'echo hi; echo err >&2; exit 3' })).body, { plain_text_response: 'hi\nerr\n\n[exit code: 3]' });
  t.same((await call('exec_shell_command', { command: 'pwd' }, { 'x-tool-cwd': dir })).body, { plain_text_response: `${dir}\n\n[exit code: 0]` });
  t.same((await call('exec_shell_command', { command: 'sleep 5', timeout: 0 })).body, { plain_text_response: '\n[exit code: 1] [exit due to timed out]' }, 'no time: killed at once');
  t.same((await call('exec_shell_command', { command: 'yes | head -c 100', max_output_size: 10 })).body, { plain_text_response: 'y\ny\ny\ny\ny\n\n[output truncated]\n[exit code: 0]' });
  const info = (await call('get_info', {}, { 'x-tool-cwd': dir })).body;
  t.equal(info.cwd, dir);
  t.match(info.os, /^Linux /);
});

t.test('a command that outlives its timeout is killed, its children too', async (t) => {
  const pidFile = join(dir, 'child.pid');
  const started = Date.now();
  const res = await call('exec_shell_command', { command: `sleep 30 & echo $! > ${pidFile}; wait`, timeout: 1 });
  t.same(res.body, { plain_text_response: '\n[exit code: 1] [exit due to timed out]' });
  t.ok(Date.now() - started < 10_000, 'answered after the timeout, not after the command');
  t.ok(isDead(Number(readFileSync(pidFile, 'utf8'))), 'the background sleep was killed with it');
});

/** True once the process is gone (or a zombie waiting for its reaper). */
function isDead(pid: number): boolean {
  if (!existsSync(`/proc/${pid}/stat`)) return true;
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
  } catch {
    return true;
  }
}

t.test('streaming: chunks then done; a failure ends in done with its error; a client that leaves kills the command', async (t) => {
  const streamed = await postJson(`${ours.base}/tools`, { tool: 'exec_shell_command', params: { command: 'echo hello' }, stream: true });
  t.equal(streamed.headers.get('content-type'), 'text/event-stream');
  t.same(parseSse(streamed.body as string), [{ chunk: 'hello\n' }, { chunk: '\n[exit code: 0]' }, { done: true }]);
  const failed = await postJson(`${ours.base}/tools`, { tool: 'exec_shell_command', params: {}, stream: true });
  t.same(parseSse(failed.body as string), [{ done: true, error: "[json.exception.out_of_range.403] key 'command' not found" }]);

  const pidFile = join(dir, 'stream.pid');
  const abort = new AbortController();
  const res = await fetch(`${ours.base}/tools`, { method: 'POST', signal: abort.signal, body: JSON.stringify({ tool: 'exec_shell_command', params: { command: `echo $$ > ${pidFile}; echo started; exec sleep 30`, timeout: 60 }, stream: true }) });
  const reader = res.body!.getReader();
  t.match(new TextDecoder().decode((await reader.read()).value), 'started');
  const pid = Number(readFileSync(pidFile, 'utf8'));
  abort.abort();
  const deadline = Date.now() + 5000;
  while (!isDead(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.ok(isDead(pid), 'the command died when the client left');
});

t.test('bad input: clear 4xx/5xx in llama-server\'s shapes, never a crash', async (t) => {
  t.same(await call('nope', {}).then((r) => [r.status, r.body]), [404, { error: { message: 'File Not Found', type: 'not_found_error', code: 404 } }]);
  t.same(await postJson(`${ours.base}/tools`, { tool: 'read_file', params: { path: 'a.txt' }, stream: true }).then((r) => r.status), 404, 'read_file cannot stream');
  t.same(await postJson(`${ours.base}/tools`, { params: {} }).then((r) => [r.status, r.body]), [400, { code: 400, message: "[json.exception.out_of_range.403] key 'tool' not found", type: 'invalid_request_error' }]);
  t.same(await call('read_file', {}).then((r) => [r.status, r.body.message]), [400, "[json.exception.out_of_range.403] key 'path' not found"]);
  t.same(await call('read_file', { path: 5 }).then((r) => [r.status, r.body.message]), [400, '[json.exception.type_error.302] type must be string, but is number']);
  t.same(await call('edit_file', { path: 'x', edits: [5] }).then((r) => [r.status, r.body.message]), [400, '[json.exception.type_error.304] cannot use at() with number']);
  const notJson = await postJson(`${ours.base}/tools`, 'not json');
  t.same([notJson.status, notJson.body.type], [400, 'invalid_request_error']);
  const runtime = (value: string) => call('exec_shell_command', { command: 'echo hi' }, { 'x-tool-runtime': value }).then((r) => [r.status, r.body.message]);
  t.same(await runtime('fake:x'), [500, 'unknown tool runtime: fake:x'], 'never the host instead');
  t.same(await runtime('ssh:-oProxyCommand=touch /tmp/pwned'), [500, 'invalid ssh target: -oProxyCommand=touch /tmp/pwned']);
  t.same(await runtime('docker-container:--privileged'), [500, 'invalid container id: --privileged']);
  t.same(await runtime('podman:alpine'), [500, 'tool runtime must name a running container: podman:alpine']);
  t.equal((await fetch(`${ours.base}/health`)).status, 200, 'still serving');
});

t.test('without --tools: GET and POST /tools answer 403 feature_disabled', async (t) => {
  const plain = await startTestServer(models.chat);
  t.teardown(() => plain.close());
  const disabled = { error: { message: 'this feature is disabled', type: 'feature_disabled' } };
  const get = await fetch(`${plain.base}/tools`);
  t.same([get.status, await get.json()], [403, disabled]);
  t.same(await postJson(`${plain.base}/tools`, { tool: 'get_info', params: {} }).then((r) => [r.status, r.body]), [403, disabled]);
});

t.test('a list of tools, behind the API key', async (t) => {
  const keyed = await startTestServer(models.chat, { tools: { names: ['get_info', 'read_file'], runtime: '' }, apiKeys: ['sekrit'] });
  t.teardown(() => keyed.close());
  t.equal((await fetch(`${keyed.base}/tools`)).status, 401);
  t.equal((await postJson(`${keyed.base}/tools`, { tool: 'get_info', params: {} })).status, 401);
  const auth = { authorization: 'Bearer sekrit' };
  const list = await (await fetch(`${keyed.base}/tools`, { headers: auth })).json();
  t.same(list.map((e: { tool: string }) => e.tool), ['read_file', 'get_info'], "llama-server's order");
  t.equal((await postJson(`${keyed.base}/tools`, { tool: 'get_info', params: {} }, auth)).status, 200);
  t.equal((await postJson(`${keyed.base}/tools`, { tool: 'write_file', params: {} }, auth)).status, 404, 'a tool not enabled');
});

t.test('--tools all: CORS answers only localhost origins unless --cors-origins is given', async (t) => {
  const parsed = serverOptions(native.ServerParams.parse(['llama-server', '-m', models.chat, '--tools', 'all']).values(), {}, false);
  const local = await startTestServer(models.chat, { tools: parsed.tools!, cors: parsed.cors! });
  t.teardown(() => local.close());
  const preflight = (origin: string) => fetch(`${local.base}/completions`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'Authorization' } });
  const fromLocalhost = await preflight('http://localhost:8080');
  t.same([fromLocalhost.status, fromLocalhost.headers.get('access-control-allow-origin')], [200, 'http://localhost:8080']);
  const fromElsewhere = await preflight('http://evil.com');
  t.same([fromElsewhere.status, fromElsewhere.headers.get('access-control-allow-origin')], [200, null]);
});

t.test('start-up: an unknown tool name or runtime fails, as llama-server', async (t) => {
  await t.rejects(ToolsService.start({ names: ['read_file', 'nope'], runtime: '' }),
    { message: 'unknown tool "nope". available tools: read_file, file_glob_search, grep_search, exec_shell_command, write_file, edit_file, get_info' });
  await t.rejects(ToolsService.start({ names: ['all'], runtime: 'fake' }), { message: 'unknown tool runtime: fake' });
  await t.rejects(startToolsRuntime('docker:'), { message: '--tools-runtime docker:<image> requires an image name' });
  await t.rejects(startToolsRuntime('podman:busybox'), { message: 'failed to spawn podman container for tools runtime (image: busybox)' }, 'podman is not installed here');
  t.equal(await (await startToolsRuntime('ssh:user@box'))!.spec(), 'ssh:user@box');
});

t.test('container and ssh runtimes: the command lines they run', async (t) => {
  const container = new ContainerIo('docker', 'abc123', '/work');
  t.same(container.buildArgv(['cat', '--', '/f'], false), ['docker', 'exec', 'abc123', 'cat', '--', '/f']);
  t.same(container.buildArgv(['sh', '-c', 'x'], true), ['docker', 'exec', '-i', 'abc123', 'sh', '-c', 'x']);
  t.equal(container.resolve('a/b'), '/work/a/b');
  t.equal(container.resolve('/abs'), '/abs');
  const ssh = new SshIo('me@host');
  t.same(ssh.buildArgv(['echo', "it's"], false), ['ssh', '-o', 'BatchMode=yes', '-o', 'PasswordAuthentication=no', '-o', 'KbdInteractiveAuthentication=no', '-o', 'StrictHostKeyChecking=yes', '-n', 'me@host', "'echo' 'it'\\''s'"]);
  t.equal(shellQuoteJoin(['a b', '']), "'a b' ''");
  t.ok(makeToolsIo('podman-container:c1', '') instanceof ContainerIo);
  t.ok(makeToolsIo('ssh:h', '') instanceof SshIo);
  const res = await makeToolsIo('podman-container:abc', '').run(['echo', 'hi'], 100, 5);
  t.same(res, { output: 'failed to spawn process', exitCode: -1, timedOut: false }, 'podman is not installed here: the call says so');
});

t.test("GET /tools and POST /tools answers equal llama-server's", async (t) => {
  const refDir = fixtureDir();
  const oursDir = fixtureDir();
  t.teardown(() => [refDir, oursDir].forEach((d) => rmSync(d, { recursive: true, force: true })));
  const ref = await startLlamaServer(['-m', models.chat, '-c', '512', '--tools', 'all']);
  t.teardown(() => ref.close());
  t.equal(await (await fetch(`${ours.base}/tools`)).text(), await (await fetch(`${ref.base}/tools`)).text(), 'GET /tools, byte for byte');
  // Paths are relative (x-tool-cwd), so each server works on its own copy of the same tree.
  const calls: Array<[unknown, Record<string, string>?]> = [
    [{ tool: 'read_file', params: { path: 'a.txt', start_line: 2, append_loc: true } }],
    [{ tool: 'read_file', params: { path: 'sub/deep/big.txt', end_line: 1 } }],
    [{ tool: 'read_file', params: { path: 'a.txt' } }, { 'x-resp-type': 'base64' }],
    [{ tool: 'file_glob_search', params: { path: '.', type: 'all' } }],
    [{ tool: 'file_glob_search', params: { path: '.', include: 'sub/**', max_depth: 2 } }],
    [{ tool: 'grep_search', params: { path: '.', pattern: 'l.ne', context_lines: 1 } }],
    [{ tool: 'grep_search', params: { path: 'a.txt', pattern: 'CAF', ignore_case: true, return_line_numbers: true } }],
    [{ tool: 'exec_shell_command', params: { command: 'ls; exit 2' } }],
    [{ tool: 'exec_shell_command', params: { command: 'sleep 5', timeout: 1 } }],
    [{ tool: 'exec_shell_command', params: { command: 'printf abc' }, stream: true }],
    [{ tool: 'write_file', params: { path: 'new/x.txt', content: 'one\ntwo\n' } }],
    [{ tool: 'edit_file', params: { path: 'new/x.txt', edits: [{ old_text: 'one', new_text: 'uno' }] } }],
    [{ tool: 'edit_file', params: { path: 'sub/b.md', edits: [{ old_text: 'world "quoted"', new_text: 'W' }] } }],
    [{ tool: 'edit_file', params: { path: 'sub/b.md', edits: [{ old_text: 'zzz', new_text: 'W' }] } }],
    [{ tool: 'read_file', params: {} }],
    [{ tool: 'nope', params: {} }],
    [{ tool: 'exec_shell_command', params: { command: 'echo' } }, { 'x-tool-runtime': 'fake:x' }],
  ];
  for (const [body, headers] of calls) {
    const a = await postJson(`${ref.base}/tools`, body, { 'x-tool-cwd': refDir, ...headers });
    const b = await postJson(`${ours.base}/tools`, body, { 'x-tool-cwd': oursDir, ...headers });
    // Our event streams follow each event with a blank-line tail (src/http/complete-chunks.ts): compared without it.
    const untailed = (x: unknown) => (typeof x === 'string' ? x.replaceAll('\n\n\n\n', '\n\n') : x);
    const same = (x: unknown) => JSON.stringify(untailed(x)).replaceAll(refDir, '<dir>').replaceAll(oursDir, '<dir>');
    t.same([b.status, same(b.body)], [a.status, same(a.body)], JSON.stringify(body));
  }
  t.equal(readFileSync(join(oursDir, 'sub/b.md'), 'utf8'), readFileSync(join(refDir, 'sub/b.md'), 'utf8'), 'the edited files are equal');
});
