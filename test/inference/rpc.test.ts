// --rpc host:port,...: layers offloaded to rpc-server processes (llama.cpp's RPC backend), in the
// server and the CLI. Each run is its own process: --rpc registers devices for the whole process.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t, { type Test } from 'tap';
import { UsageError } from '../../src/cli/flags.js';
import { checkRpcEndpoints, rpcArgument } from '../../src/inference/rpc-servers.js';
import { splitCommandLine } from '../../src/inference/server-config.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';
import { REPO_ROOT, referenceTool } from '../helpers/reference.js';
import { freePort } from '../helpers/ports.js';

const models = await ensureTestModels();
const rpcServerBin = await referenceTool('ggml-rpc-server');
const LOADER = join(REPO_ROOT, 'scripts', 'ts-loader.mjs');
const PROMPT = 'Once upon a time';

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => { socket.destroy(); resolve(true); });
    socket.once('error', () => resolve(false));
  });
}

/** An rpc-server on the loopback, ready once it listens. */
async function startRpcServer(t: Test): Promise<{ endpoint: string; child: ChildProcess }> {
  const port = await freePort();
  const child = spawn(rpcServerBin, ['-H', '127.0.0.1', '-p', String(port)], { stdio: 'ignore' });
  t.teardown(() => { child.kill('SIGKILL'); });
  // rpc-server prints nothing until it exits when its output is not a terminal: readiness is the
  // port accepting a connection (as the other server helpers poll /health).
  const deadline = Date.now() + 20_000;
  while (!(await accepts(port))) {
    if (child.exitCode !== null || Date.now() > deadline) throw new Error('rpc-server did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  return { endpoint: `127.0.0.1:${port}`, child };
}

/** inference-server on `args`; resolves with its base URL once the model is ready. */
async function startServerProcess(t: Test, args: string[]): Promise<{ base: string; child: ChildProcess; stderr: () => string }> {
  const child = spawn(process.execPath, ['--import', LOADER, join(REPO_ROOT, 'src', 'inference', 'server-main.ts'), ...args], { cwd: REPO_ROOT });
  t.teardown(() => { child.kill('SIGKILL'); });
  let stderr = '';
  const ready = new Promise<string>((resolve, reject) => {
    child.stderr!.on('data', (d) => {
      stderr += d;
      const port = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr)?.[1];
      if (port && /model ready/.test(stderr)) resolve(`http://127.0.0.1:${port}`);
    });
    child.once('exit', (code) => reject(new Error(`inference-server exited with ${code}: ${stderr}`)));
  });
  return { base: await ready, child, stderr: () => stderr };
}

t.test('the server with --rpc over two rpc-servers answers as the local run; a killed rpc-server ends it with a clear error', async (t) => {
  const local = await startTestServer(models.chat, { parallel: 1, ctxSize: 512 });
  const expected = (await postJson(`${local.base}/completion`, { prompt: PROMPT, n_predict: 12, temperature: 0 })).body.content;
  await local.close();
  const [a, b] = [await startRpcServer(t), await startRpcServer(t)];
  const server = await startServerProcess(t, ['-m', models.chat, '-c', '512', '-np', '1', '--port', '0', '-ngl', '99', '--rpc', `${a.endpoint},${b.endpoint}`]);
  t.ok(server.base, 'the server started');
  const res = await postJson(`${server.base}/completion`, { prompt: PROMPT, n_predict: 12, temperature: 0 });
  t.equal(res.status, 200);
  t.equal(res.body.content, expected, 'greedy output equals the local run');
  const exited = once(server.child, 'exit');
  b.child.kill('SIGKILL');
  await postJson(`${server.base}/completion`, { prompt: PROMPT + ' again', n_predict: 4, temperature: 0 }).catch(() => undefined);
  const [code] = await exited;
  t.not(code, 0, 'the server ends instead of hanging');
  t.match(server.stderr(), /RPC server crashed|Remote RPC/i, 'naming the RPC server');
});

t.test('an unreachable --rpc endpoint fails the start naming it, exit 1 (server and CLI)', async (t) => {
  const port = await freePort();
  // The server's check, as server-main makes it before llama.cpp's parser sees --rpc (ggml would
  // end the process on an endpoint it cannot reach): a usage error, which server-main prints as
  // `inference-server: <message>` before it exits 1.
  const { llama } = splitCommandLine(['-m', models.chat, '--port', '0', '--rpc', `127.0.0.1:${port}`]);
  const refused = await checkRpcEndpoints(rpcArgument(llama, process.env)!).then(() => null, (err: unknown) => err);
  t.type(refused, UsageError, 'a usage error: exit 1');
  t.match((refused as Error).message, new RegExp(`cannot reach the rpc-server at 127\\.0\\.0\\.1:${port} \\(ECONNREFUSED\\)`));
  const cli = await promisify(execFile)(process.execPath, ['--import', LOADER, join(REPO_ROOT, 'src', 'inference', 'cli-main.ts'), '-m', models.chat, '-p', PROMPT, '--rpc', 'nohostport'], { cwd: REPO_ROOT }).catch((e) => e);
  t.equal(cli.code, 2);
  t.match(cli.stderr, /--rpc: "nohostport" is not host:port/);
});

t.test('inference-cli --rpc gives the local greedy text', async (t) => {
  const run = (extra: string[]) => promisify(execFile)(process.execPath, ['--import', LOADER, join(REPO_ROOT, 'src', 'inference', 'cli-main.ts'), '-m', models.chat, '-p', PROMPT, '-n', '12', '--temp', '0', ...extra], { cwd: REPO_ROOT });
  const local = await run([]);
  const [a, b] = [await startRpcServer(t), await startRpcServer(t)];
  const remote = await run(['-ngl', '99', '--rpc', `${a.endpoint},${b.endpoint}`]);
  t.equal(remote.stdout, local.stdout);
});
