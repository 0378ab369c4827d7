// The router's spare model processes (--spares): processes started ahead of need, Node, the
// server's modules and the addon loaded, each waiting for the command line of the model it will
// serve (child-link.ts spareCommandLine), so that a model load does not pay for process start-up.
import { ModelProcess } from './model-process.js';

/** A spare is started once the router has been idle (busy() false) for this long. */
const SPARE_REFILL_IDLE_MS = 500;

export interface SparePoolOptions {
  /** How many spares to keep started (0: none). */
  size: number;
  /** The program and arguments that start a model's server. */
  command: readonly string[];
  /** True while any model has a request in flight or a load under way. */
  busy: () => boolean;
  /** A new spare's process id (the registry's `spare` event). */
  onSpare: (pid: number) => void;
  log: (line: string) => void;
}

export class SparePool {
  private readonly spares: ModelProcess[] = [];
  private refillTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(private readonly options: SparePoolOptions) {
    this.refill();
  }

  /** The spares' process ids, oldest first. */
  get pids(): number[] {
    return this.spares.map((s) => s.pid!);
  }

  /** A started process for a model's command line: a spare when one is waiting, else a new process. */
  start(args: readonly string[], log: (line: string) => void): ModelProcess {
    for (let spare = this.spares.shift(); spare; spare = this.spares.shift()) {
      const started = spare.start(args, log);
      if (started) return started;
    }
    return new ModelProcess({ command: this.options.command, args, log });
  }

  /**
   * A spare taken by a load is replaced once the router is idle (no request in flight, no load
   * under way, for SPARE_REFILL_IDLE_MS): starting one takes a CPU core for a while (figure:
   * docs/benchmarks.md, "Figures moved from code comments"), which would otherwise slow the new
   * model's first requests.
   */
  scheduleRefill(): void {
    if (this.closed || this.spares.length >= this.options.size) return;
    if (this.refillTimer) clearTimeout(this.refillTimer);
    this.refillTimer = setTimeout(() => {
      this.refillTimer = null;
      if (this.options.busy()) this.scheduleRefill();
      else this.refill();
    }, SPARE_REFILL_IDLE_MS);
    this.refillTimer.unref();
  }

  /** Kills the spares; resolves once they have exited. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.refillTimer) clearTimeout(this.refillTimer);
    const spares = this.spares.splice(0);
    for (const spare of spares) spare.kill();
    await Promise.all(spares.map((s) => s.exited));
  }

  /** Starts spares up to the configured number at once. */
  private refill(): void {
    while (!this.closed && this.spares.length < this.options.size) {
      const spare = new ModelProcess({ command: this.options.command, args: null, log: (line) => this.options.log(`[spare] ${line}`) });
      this.spares.push(spare);
      this.options.onSpare(spare.pid!);
      // A spare that dies waiting is dropped; the next load starts a process of its own.
      spare.on('exit', (code) => {
        const i = this.spares.indexOf(spare);
        if (i < 0) return;
        this.spares.splice(i, 1);
        this.options.log(`router: a spare model process exited with code ${code}`);
      });
    }
  }
}
