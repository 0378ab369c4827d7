// One model's child process in router mode: an inference-server on a loopback port, started with
// the model's own command line. It tells the router over Node's IPC channel when it listens and
// when its model is ready (child-link.ts); the router asks it to exit the same way and kills it
// when it does not within the model's stop timeout. Its output is forwarded, line by line, with
// the model's name in front; the last lines are kept for the error of a failed load.
// A spare (ModelProcess.spare) is started without a model and given its command line by start().
import { spawn, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import type { UsageEntry } from '../tenants/usage-meter.js';
import { createInterface } from 'node:readline';
import { ROUTER_CHILD_ENV, ROUTER_SPARE_ENV, type ChildMessage } from './child-link.js';

/** What the router learns from a child. */
export interface ModelProcessEvents {
  /** The HTTP port is open (the model is still loading). */
  listening: [port: number];
  /** The model is loaded; `info` is its GET /v1/models entry. */
  ready: [info: Record<string, unknown>];
  /** What its tenants used since its last report (child-link.ts "usage"). */
  usage: [tokens: Array<[string, number]>, entries: UsageEntry[]];
  /** The process has ended: its exit code, 128 + the signal number when killed. */
  exit: [code: number];
}

export interface ModelProcessOptions {
  /** The program and the arguments before the model's (e.g. node and the server's entry). */
  command: readonly string[];
  /** The model's command line; null starts a spare, which waits for start(). */
  args: readonly string[] | null;
  /** Receives each output line of the child. */
  log: (line: string) => void;
}

const SIGNAL_NUMBERS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGKILL: 9, SIGSEGV: 11, SIGTERM: 15, SIGABRT: 6 };
const KEPT_LINES = 20;

export class ModelProcess extends EventEmitter<ModelProcessEvents> {
  private readonly child: ChildProcess;
  private killTimer: NodeJS.Timeout | null = null;
  private readonly lastLines: string[] = [];
  private log: (line: string) => void;
  /** Resolves with the exit code once the process has ended. */
  readonly exited: Promise<number>;
  exitCode: number | null = null;
  port = 0;

  constructor(options: ModelProcessOptions) {
    super();
    this.log = options.log;
    const [program, ...pre] = options.command;
    const spare = options.args === null ? { [ROUTER_SPARE_ENV]: '1' } : {};
    this.child = spawn(program!, [...pre, ...(options.args ?? [])], {
      env: { ...process.env, [ROUTER_CHILD_ENV]: '1', ...spare },
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    });
    for (const stream of [this.child.stdout!, this.child.stderr!]) {
      createInterface({ input: stream }).on('line', (line) => {
        this.lastLines.push(line);
        if (this.lastLines.length > KEPT_LINES) this.lastLines.shift();
        this.log(line);
      });
    }
    this.child.on('message', (message: ChildMessage) => this.onMessage(message));
    this.exited = new Promise((resolve) => {
      const done = (code: number): void => {
        if (this.exitCode !== null) return;
        this.exitCode = code;
        if (this.killTimer) clearTimeout(this.killTimer);
        this.emit('exit', code);
        resolve(code);
      };
      this.child.on('exit', (code, signal) => done(code ?? 128 + (SIGNAL_NUMBERS[signal ?? ''] ?? 1)));
      // Spawning itself failed (no such program): never started.
      this.child.on('error', () => done(127));
    });
  }

  /** A spare, started: null when it has exited or lost its channel (start a new process instead). */
  start(args: readonly string[], log: (line: string) => void): this | null {
    if (!this.alive || !this.child.connected) return null;
    this.log = log;
    this.child.send({ type: 'start', args: [...args] } satisfies ChildMessage, () => {});
    return this;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get alive(): boolean {
    return this.exitCode === null;
  }

  /** Why the child failed, from its last output: its own "inference-server: ..." message, else its last error line. */
  failureReason(): string | undefined {
    const own = this.lastLines.filter((l) => l.startsWith('inference-server: ')).at(-1);
    if (own) return own.slice('inference-server: '.length);
    return this.lastLines.filter((l) => /error|failed|cannot|invalid|refus/i.test(l)).at(-1);
  }

  /** Asks the child to exit, and kills it when it has not within `timeoutMs`. */
  stop(timeoutMs: number): void {
    if (!this.alive) return;
    if (this.child.connected) this.child.send({ type: 'exit' } satisfies ChildMessage, () => {});
    else this.child.kill('SIGTERM');
    this.killTimer ??= setTimeout(() => this.kill(), timeoutMs);
  }

  /** The tenants' use of the router's other model processes (child-link.ts, "elsewhere"). */
  chargeElsewhere(tokens: Array<[string, number]>): void {
    if (this.alive && this.child.connected) this.child.send({ type: 'elsewhere', tokens } satisfies ChildMessage, () => {});
  }

  /** Ends the child at once. */
  kill(): void {
    if (this.alive) this.child.kill('SIGKILL');
  }

  private onMessage(message: ChildMessage): void {
    if (message.type === 'listening') {
      this.port = message.port;
      this.emit('listening', message.port);
    } else if (message.type === 'ready') {
      this.emit('ready', message.info);
    } else if (message.type === 'usage') {
      this.emit('usage', message.tokens, message.entries);
    }
  }
}
