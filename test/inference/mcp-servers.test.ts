// MCP servers (--mcp-servers-config, --mcp-servers-json), as llama-server: each server's tools
// are listed in GET /tools as <server>_<tool> and called through POST /tools on one live process
// per server, respawned when it died; a server that cannot run leaves the others and the server
// working; a config that cannot be read fails the start.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Socket } from 'node:net';
import { mkdtempSync, realpathSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { native } from '../../src/native/binding.js';
import { DEFAULT_MCP_TIMEOUT_MS, readMcpServerConfigs, type McpServerConfig } from '../../src/inference/server-tools/mcp-config.js';
import { McpServers } from '../../src/inference/server-tools/mcp-servers.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';
import { REPO_ROOT } from '../helpers/reference.js';

const models = await ensureTestModels();
const FIXTURE = join(REPO_ROOT, 'test', 'fixtures', 'mcp-test-server.mjs');
const dir = realpathSync(mkdtempSync(join(tmpdir(), 'mcp-')));
const server = (name: string, extra: Partial<McpServerConfig> = {}): McpServerConfig => ({
  name, command: process.execPath, args: [FIXTURE], env: {}, cwd: '', timeoutMs: DEFAULT_MCP_TIMEOUT_MS, ...extra,
});

const logged: string[] = [];
const configs = [
  server('echo', { env: { MCP_TEST_VALUE: 'from-config' }, cwd: dir }),
  server('quick', { timeoutMs: 2000 }),
  server('missing', { command: 'this-command-does-not-exist-12345' }),
  server('gone', { args: [FIXTURE, '--exit-at-once'] }),
  server('empty', { args: [FIXTURE, '--no-tools'] }),
];
const ours = await startTestServer(models.chat, { ctxSize: 256, parallel: 1, tools: { names: [], runtime: '', mcp: configs }, log: (line) => logged.push(line) });
t.teardown(ours.close);
const callTool = (tool: string, params: object = {}) => postJson(`${ours.base}/tools`, { tool, params });

t.test('the config: both sources, the file first; duplicates and servers without a command skipped; llama-server\'s errors', async (t) => {
  const file = join(dir, 'mcp.json');
  writeFileSync(file, JSON.stringify({ mcpServers: { a: { command: 'node', args: ['x.js'], env: { K: 'v' }, cwd: '/tmp', timeout_ms: 500 } } }));
  const warnings: string[] = [];
  const read = readMcpServerConfigs(file, JSON.stringify({ mcpServers: { a: { command: 'other' }, b: { command: 'python3' }, c: { args: [] } } }), (w) => warnings.push(w));
  t.same(read, [
    { name: 'a', command: 'node', args: ['x.js'], env: { K: 'v' }, cwd: '/tmp', timeoutMs: 500 },
    { name: 'b', command: 'python3', args: [], env: {}, cwd: '', timeoutMs: 30000 },
  ]);
  t.same(warnings, ["MCP server 'c' has no command, skipping", "MCP config: duplicate server name 'a', skipping"]);
  t.same(readMcpServerConfigs('', '', () => {}), [], 'nothing configured');
  const none: string[] = [];
  t.same(readMcpServerConfigs('', '{"servers": {}}', (w) => none.push(w)), []);
  t.same(none, ['MCP config: no servers found in JSON']);
  t.throws(() => readMcpServerConfigs('', 'not valid json', () => {}), /^failed to parse MCP config JSON: /);
  t.throws(() => readMcpServerConfigs('/nonexistent/path.json', '', () => {}), { message: 'failed to open MCP config file: /nonexistent/path.json' });
  t.throws(() => readMcpServerConfigs('', '{"mcpServers": {"a": {"command": "x", "args": [1]}}}', () => {}), { message: 'failed to parse MCP config JSON: mcpServers.a.args has the wrong type' });
});

t.test('GET /tools lists each running server\'s tools as <server>_<tool>, in llama-server\'s shape; failed and empty servers add none', async (t) => {
  const res = await fetch(`${ours.base}/tools`);
  t.equal(res.status, 200);
  const tools = await res.json() as Array<{ tool: string }>;
  const names = tools.map((x) => x.tool);
  t.same(names.filter((n) => n.startsWith('echo_')), ['echo_echo', 'echo_add', 'echo_whoami', 'echo_fails', 'echo_rpc_error', 'echo_noisy', 'echo_slow', 'echo_die', 'echo_grandchild']);
  t.equal(names.filter((n) => n.startsWith('quick_')).length, 9);
  t.same(names.filter((n) => /^(missing|gone|empty)_/.test(n)), []);
  t.same(tools.find((x) => x.tool === 'echo_add'), {
    display_name: 'echo_add', tool: 'echo_add', type: 'mcp', permissions: { write: false }, uses_cwd: false,
    definition: { type: 'function', function: { name: 'echo_add', description: 'Add two numbers', parameters: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] } } },
  });
  t.same((tools.find((x) => x.tool === 'echo_whoami') as any).definition.function.parameters, {}, 'a tool without an input schema: {}');
  t.ok(logged.some((l) => /^MCP warmup: failed to spawn 'missing': cannot run this-command-does-not-exist-12345: spawn this-command-does-not-exist-12345 ENOENT/.test(l)), 'the failed spawn is logged');
  t.ok(logged.some((l) => /^MCP warmup: 'gone': initialize failed: transport closed \(exit code 3\)/.test(l)), 'the server that exited is logged');
  t.ok(logged.includes("MCP warmup: 'empty' discovered 0 tools"));
});

t.test('POST /tools: text parts as plain_text_response; isError, JSON-RPC errors and unknown names as llama-server answers them', async (t) => {
  t.same((await callTool('echo_echo', { message: 'hello world' })).body, { plain_text_response: 'echo: hello world' });
  t.same((await callTool('echo_add', { a: 3, b: 5 })).body, { plain_text_response: '8' });
  const failed = await callTool('echo_fails');
  t.same([failed.status, failed.body], [200, { error: 'it failed' }]);
  t.same((await callTool('echo_rpc_error')).body, { error: 'tool exploded' });
  const unknown = await callTool('echo_nothing');
  t.equal(unknown.status, 404);
});

t.test('the server runs with the config\'s env and cwd; notifications, non-JSON lines and stale replies are skipped', async (t) => {
  const [, cwd, value] = (await callTool('echo_whoami')).body.plain_text_response.split(' ');
  t.same([cwd, value], [dir, 'from-config']);
  t.same((await callTool('echo_noisy', { message: 'through' })).body, { plain_text_response: 'echo: through' });
});

t.test('concurrent calls share one process and each gets its own answer', async (t) => {
  const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => callTool('echo_echo', { message: `m${i}` })));
  t.same(answers.map((a) => a.body), Array.from({ length: 10 }, (_, i) => ({ plain_text_response: `echo: m${i}` })));
  const pids = await Promise.all(Array.from({ length: 4 }, () => callTool('echo_whoami')));
  t.equal(new Set(pids.map((p) => p.body.plain_text_response.split(' ')[0])).size, 1, 'one process');
});

t.test('a call past timeout_ms answers "request timed out"; its late reply does not answer the next call', async (t) => {
  t.same((await callTool('quick_slow', { ms: 4000 })).body, { error: 'request timed out' });
  t.same((await callTool('quick_echo', { message: 'after' })).body, { plain_text_response: 'echo: after' });
});

t.test('a call in flight when its server dies answers "transport closed"; the next call starts the server again', async (t) => {
  const before = (await callTool('echo_whoami')).body.plain_text_response.split(' ')[0];
  t.same((await callTool('echo_die')).body, { error: 'transport closed' });
  const after = (await callTool('echo_whoami')).body.plain_text_response.split(' ')[0];
  t.not(after, before, 'a new process');
  t.same((await callTool('echo_echo', { message: 'again' })).body, { plain_text_response: 'echo: again' });
  t.ok(logged.some((l) => l.startsWith("MCP 'echo' is no longer alive: exit code 1")));
});

t.test('closing kills the servers: a call in flight answers "cancelled", later calls find the server unavailable', async (t) => {
  const servers = await McpServers.start([server('s')], () => {});
  const slow = servers.call('s', 'slow', { ms: 60_000 }, new AbortController().signal);
  // The call is in flight once the process answered something before it.
  t.same(await servers.call('s', 'echo', { message: 'up' }, new AbortController().signal), { plain_text_response: 'echo: up' });
  servers.close();
  t.same(await slow, { error: 'cancelled' });
  t.same(await servers.call('s', 'echo', { message: 'x' }, new AbortController().signal), { error: 'MCP server unavailable: s' });
});

t.test('a call whose client leaves is cancelled', async (t) => {
  const servers = await McpServers.start([server('s')], () => {});
  t.teardown(() => servers.close());
  t.same(await servers.call('s', 'echo', { message: 'up' }, new AbortController().signal), { plain_text_response: 'echo: up' });
  const client = new AbortController();
  const slow = servers.call('s', 'slow', { ms: 60_000 }, client.signal);
  client.abort();
  t.same(await slow, { error: 'cancelled' });
});

t.test('a server whose command cannot run is unavailable, and not tried again for 5 s', async (t) => {
  const servers = await McpServers.start([server('missing', { command: 'this-command-does-not-exist-12345' })], () => {});
  t.teardown(() => servers.close());
  t.same(servers.tools, []);
  const signal = new AbortController().signal;
  t.same(await servers.call('missing', 'echo', {}, signal), { error: 'MCP server unavailable: missing' });
  t.same(await servers.call('missing', 'echo', {}, signal), { error: 'MCP server unavailable: missing' });
});

t.test('a grandchild holding the server\'s pipes neither blocks calls nor survives close()', async (t) => {
  // The grandchild connects here and holds the connection: it closes when the process dies.
  const held = new Promise<Socket>((resolve) => {
    const listener = createServer((socket) => resolve(socket)).listen(0, '127.0.0.1');
    t.teardown(() => listener.close());
    listener.on('listening', () => ready((listener.address() as { port: number }).port));
  });
  let ready!: (port: number) => void;
  const port = await new Promise<number>((resolve) => (ready = resolve));
  const servers = await McpServers.start([server('gc')], () => {});
  const signal = new AbortController().signal;
  t.match(await servers.call('gc', 'grandchild', { port }, signal), { plain_text_response: /^\d+$/ });
  const socket = await held;
  t.same(await servers.call('gc', 'echo', { message: 'still' }, signal), { plain_text_response: 'echo: still' });
  servers.close();
  await once(socket, 'close');
  t.pass('the grandchild died with the server\'s process group');
});

t.test('an MCP tool named as a tool before it is left out, with a warning', async (t) => {
  const lines: string[] = [];
  const named = await startTestServer(models.chat, { ctxSize: 256, parallel: 1, tools: { names: ['get_info'], runtime: '', mcp: [server('get', { args: [FIXTURE, '--info-tool'] })] }, log: (line) => lines.push(line) });
  t.teardown(named.close);
  const tools = (await (await fetch(`${named.base}/tools`)).json()) as Array<{ tool: string; type: string }>;
  t.same(tools.filter((x) => x.tool === 'get_info').map((x) => x.type), ['server'], 'the built-in get_info, once');
  t.ok(tools.some((x) => x.tool === 'get_echo' && x.type === 'mcp'), 'the server\'s other tools are there');
  t.ok(lines.includes('MCP tool "get_info" from server "get" collides with an existing tool, skipping'));
});

t.test('inference-server: --mcp-servers-json that does not parse, or a config file that is missing, fails the start', async (t) => {
  for (const [flag, value, message] of [
    ['--mcp-servers-json', 'not valid json', /failed to parse MCP config JSON/],
    ['--mcp-servers-config', '/nonexistent/path.json', /failed to open MCP config file: \/nonexistent\/path\.json/],
  ] as const) {
    // In this process, as server-main reads the configuration from llama.cpp's parsed command line
    // before it starts the server; it prints the error as `inference-server: <message>` and exits 1.
    const v = native.ServerParams.parse(['llama-server', '-m', models.chat, '-c', '256', '--port', '0', '--no-ui', flag, value]).values();
    let refused: Error | null = null;
    try {
      readMcpServerConfigs(v.mcpServersConfig, v.mcpServersJson, () => {});
    } catch (err) {
      refused = err as Error;
    }
    t.ok(refused, `${flag}: the start fails, exit 1`);
    t.match(refused?.message, message);
  }
});

t.test('inference-server --mcp-servers-json: llama.cpp\'s parser takes the flag, the tools are served, the start warns as llama-server', async (t) => {
  const json = JSON.stringify({ mcpServers: { echo: { command: process.execPath, args: [FIXTURE] } } });
  const child = spawn(process.execPath, ['--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), join(REPO_ROOT, 'src', 'inference', 'server-main.ts'),
    '-m', models.chat, '-c', '256', '--port', '0', '--no-ui', '--mcp-servers-json', json], { cwd: REPO_ROOT });
  t.teardown(() => child.kill('SIGKILL'));
  let stderr = '';
  await new Promise<void>((resolve, reject) => {
    child.stderr.on('data', (d) => {
      stderr += d;
      if (/model ready/.test(stderr)) resolve();
    });
    child.on('exit', (code) => reject(new Error(`exited ${code}: ${stderr}`)));
  });
  t.match(stderr, "MCP warmup: 'echo' discovered 9 tools");
  t.match(stderr, /security: MCP servers \(experimental\) enabled/);
  const port = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr)![1];
  const called = await postJson(`http://127.0.0.1:${port}/tools`, { tool: 'echo_echo', params: { message: 'through the flag' } });
  t.same(called.body, { plain_text_response: 'echo: through the flag' });
});
