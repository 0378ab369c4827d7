// Starting and stopping the servers under test. Every child process is tracked, so that an error,
// Ctrl-C or SIGTERM in the bench stops them all; servers listen on loopback ports only.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { BenchError, httpJson, sleep } from './load.js';

const children = new Set<ChildProcess>();
const launchesByName = new Map<string, number>();
let hooksInstalled = false;

/** Kills every server still running (synchronous: usable from an 'exit' handler). */
export function killAllServers(signal: NodeJS.Signals = 'SIGKILL'): void {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      try {
        child.kill(signal);
      } catch {
        // already gone
      }
    }
  }
  children.clear();
}

function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on('exit', () => killAllServers('SIGKILL'));
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(sig, () => {
      console.error(`\nbench: ${sig}, stopping the servers it started`);
      killAllServers('SIGKILL');
      process.exit(130);
    });
  }
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

export interface ServerLaunch {
  /** Short id (file names, JSON keys). */
  id: string;
  /** Label for the table. */
  label: string;
  command: string;
  /** Arguments before the port (the port is appended as --port N). */
  args: string[];
  /** Environment variables set for this server on top of the bench's own. */
  env?: Record<string, string>;
}

export interface RunningServer {
  launch: ServerLaunch;
  base: string;
  port: number;
  pid: number;
  logPath: string;
  /** Seconds from spawn to the first 200 from /health. */
  startupSeconds: number;
  /**
   * SIGTERM, then SIGKILL if it has not exited after `graceMs` (default 10 s). Resolves once it has
   * exited: 'exited' (already gone, or by itself), 'SIGTERM' (ended by it) or 'SIGKILL' (it had to be killed).
   */
  stop(graceMs?: number): Promise<'exited' | 'SIGTERM' | 'SIGKILL'>;
}

/** Spawns a server and waits until GET /health answers 200 (bounded). */
export async function startServer(launch: ServerLaunch, logDir: string, logName: string = launch.id, timeoutMs = 180_000): Promise<RunningServer> {
  installHooks();
  mkdirSync(logDir, { recursive: true });
  const port = await freePort();
  const n = (launchesByName.get(logName) ?? 0) + 1;
  launchesByName.set(logName, n);
  const logPath = join(logDir, n === 1 ? `${logName}.log` : `${logName}-${n}.log`);
  const log = createWriteStream(logPath);
  const args = [...launch.args, '--host', '127.0.0.1', '--port', String(port)];
  log.write(`$ ${launch.command} ${args.join(' ')}\n`);
  const child = spawn(launch.command, args, { stdio: ['ignore', 'pipe', 'pipe'], ...(launch.env ? { env: { ...process.env, ...launch.env } } : {}) });
  children.add(child);
  child.stdout!.pipe(log, { end: false });
  child.stderr!.pipe(log, { end: false });
  let exited: string | undefined;
  child.once('exit', (code, signal) => {
    exited = `exited with ${signal ?? `code ${code}`}`;
    children.delete(child);
  });
  const base = `http://127.0.0.1:${port}`;
  const t0 = Date.now();
  const tail = (): string => {
    try {
      return readFileSync(logPath, 'utf8').split('\n').slice(-30).join('\n');
    } catch {
      return '';
    }
  };
  for (;;) {
    if (exited) throw new BenchError(`${launch.label} ${exited} before it was ready (log ${logPath})`, tail());
    if (Date.now() - t0 > timeoutMs) {
      child.kill('SIGKILL');
      throw new BenchError(`${launch.label} not ready after ${timeoutMs / 1000} s (log ${logPath})`, tail());
    }
    try {
      const res = await httpJson(base, 'GET', '/health', undefined, 2000);
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  const startupSeconds = (Date.now() - t0) / 1000;

  const stop = async (graceMs = 10_000): Promise<'exited' | 'SIGTERM' | 'SIGKILL'> => {
    if (exited) return 'exited';
    const gone = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    let killed = false;
    const timer = setTimeout(() => {
      killed = true;
      child.kill('SIGKILL');
    }, graceMs);
    await gone;
    clearTimeout(timer);
    children.delete(child);
    log.end();
    return killed ? 'SIGKILL' : 'SIGTERM';
  };
  return { launch, base, port, pid: child.pid!, logPath, startupSeconds, stop };
}
