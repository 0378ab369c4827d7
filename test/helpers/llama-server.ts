// A llama-server built from the vendored source, started on a free port for comparisons.
import { spawn, type ChildProcess } from 'node:child_process';
import { referenceTool } from './reference.js';
import { TEST_THREADS } from './test-threads.js';
import { freePort } from './ports.js';

export interface ReferenceServer {
  base: string;
  close(): Promise<void>;
}

export async function startLlamaServer(args: string[]): Promise<ReferenceServer> {
  const bin = await referenceTool('llama-server');
  const port = await freePort();
  const threads = args.some((a) => a === '-t' || a === '--threads') ? [] : ['-t', String(TEST_THREADS)];
  const child: ChildProcess = spawn(bin, [...args, ...threads, '--host', '127.0.0.1', '--port', String(port), '--no-webui'], { stdio: 'ignore' });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`llama-server exited with ${child.exitCode}`);
    try {
      if ((await fetch(`${base}/health`)).status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error('llama-server did not become ready');
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    base,
    close: () => new Promise<void>((resolve) => {
      if (child.exitCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    }),
  };
}
