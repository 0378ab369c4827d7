// The router's models and their life (llama-server's server_models):
//
//   unloaded --load--> loading --ready--> loaded --idle (--sleep-idle-seconds)--> sleeping
//      ^                  |                 |                                       |
//      +----exited--------+----unloaded-----+        the next request loads it again
//
// Each loaded model is one child process (model-process.ts). A request that needs a model waits
// while it loads; concurrent requests for one unloaded model share one load (load-queue.ts), and
// with --models-max the least recently used idle model is stopped to make room. A model whose
// child exits with an error is `unloaded` with `failed`; its waiting requests get a 500 and the
// next request tries again. Every change is an event for GET /models/sse.
import type { UsageEntry } from '../tenants/usage-meter.js';
import { EventEmitter } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import type { RouterModelSpec } from '../../native/binding.js';
import { ErrorType, badRequest, inferenceError } from '../errors.js';
import { LoadQueue, type ModelPlaces } from './load-queue.js';
import { checkModelNames, sameLaunch } from './model-catalog.js';
import { ModelProcess } from './model-process.js';

export type ModelStatus = 'unloaded' | 'loading' | 'loaded' | 'sleeping';

/** One model: its spec and what runs for it. Read-only outside the registry. */
export interface ModelEntry {
  spec: RouterModelSpec;
  status: ModelStatus;
  process: ModelProcess | null;
  /** Asked to stop; still counted as running until its process exits. */
  stopping: boolean;
  /** The last exit code; non-zero after a failed load or a crash. */
  exitCode: number;
  /** Why the last load failed, when it did. */
  failure: string | null;
  /** The child's GET /v1/models entry once loaded. */
  info: Record<string, unknown> | null;
  /** The child's full command line (GET /models status.args). */
  args: string[];
  inFlight: number;
  lastUsed: number;
  sleepOnExit: boolean;
  idleTimer: NodeJS.Timeout | null;
  loadTimer: NodeJS.Timeout | null;
}

/** A GET /models/sse event. */
export interface ModelEvent {
  model: string;
  event: string;
  data?: Record<string, unknown>;
}

export interface RegistryOptions {
  /** The models (re-read by reload()). */
  readSpecs: () => RouterModelSpec[];
  /** --models-max; <= 0 no limit. */
  modelsMax: number;
  /** The program and arguments that start a model's server (node and inference-server's entry). */
  command: readonly string[];
  /** Arguments of this server's own given to every child (e.g. --max-body-bytes). */
  childArgs: readonly string[];
  /**
   * Spare model processes kept started (Node, the server and the addon loaded, no model): a load
   * takes one instead of starting a process, and a new one is started once the model is ready.
   * Default 0.
   */
  spares?: number;
  /** A child that is not ready within this long is killed and its load fails. */
  loadTimeoutMs: number;
  /** LLAMA_SERVER_DEBUG_FAKE_TIMING: 2 s more per load and per proxied request, as llama-server (its tests rely on it). */
  fakeTiming: boolean;
  log: (line: string) => void;
  /** What a model process reports its tenants used (child-link.ts "usage"). */
  onUsage?: (tokens: Array<[string, number]>, entries: UsageEntry[]) => void;
}

export const modelNotFound = (name: string) => badRequest(`model '${name}' not found`);

/** A spare is started once no model has had a request in flight or a load under way for this long. */
const SPARE_REFILL_IDLE_MS = 500;

export class ModelRegistry extends EventEmitter<{ event: [ModelEvent]; spare: [pid: number] }> {
  private readonly entries = new Map<string, ModelEntry>();
  /** Woken on every state change; waiters re-check their condition. */
  private readonly changes = new EventEmitter();
  private readonly queue: LoadQueue;
  private readonly spares: ModelProcess[] = [];
  private refillTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(private readonly options: RegistryOptions) {
    super();
    this.changes.setMaxListeners(0);
    const specs = options.readSpecs();
    checkModelNames(specs);
    for (const spec of specs) this.entries.set(spec.name, newEntry(spec));
    this.queue = new LoadQueue(this.places());
    this.refillSpares();
  }

  /** The spares' process ids, oldest first. */
  get sparePids(): number[] {
    return this.spares.map((s) => s.pid!);
  }

  get modelsMax(): number {
    return this.options.modelsMax;
  }

  list(): ModelEntry[] {
    return [...this.entries.values()];
  }

  /** The model named `name` or having it as an alias. */
  find(name: string): ModelEntry | undefined {
    return this.entries.get(name) ?? [...this.entries.values()].find((e) => e.spec.aliases.includes(name));
  }

  /** Its process runs (loading, loaded, stopping) or it sleeps (a request wakes it). */
  static isRunning(entry: ModelEntry): boolean {
    return entry.process !== null || entry.status === 'sleeping';
  }

  static isFailed(entry: ModelEntry): boolean {
    return entry.status === 'unloaded' && entry.exitCode !== 0;
  }

  /**
   * Waits until the model is loaded, loading it when it is not (llama-server's
   * ensure_model_ready), then calls `onReady` in the same turn. Throws 500 when its load fails,
   * and stops waiting when `signal` aborts.
   */
  private async ensureReady<T>(entry: ModelEntry, signal: AbortSignal, onReady: () => T): Promise<T> {
    if (!entry.stopping && entry.status === 'loaded') return onReady();
    let queued = false;
    let didLoad = false;
    let sawLoading = false;
    const join = (): void => {
      if (queued) return;
      this.queue.join(entry.spec.name);
      this.queue.tick();
      queued = true;
    };
    try {
      if (entry.status === 'unloaded' || entry.status === 'sleeping') join();
      for (;;) {
        if (this.closed) throw inferenceError(ErrorType.UNAVAILABLE, 'server is shutting down');
        if (entry.stopping) {
          join();
        } else if (entry.status === 'loaded') {
          return onReady();
        } else if (entry.status === 'loading') {
          sawLoading = true;
        } else if (didLoad || sawLoading) {
          if (ModelRegistry.isFailed(entry)) throw this.loadFailed(entry);
          throw inferenceError(ErrorType.UNAVAILABLE, `model '${entry.spec.name}' was unloaded while it loaded`);
        } else if (!queued) {
          join();
        }
        if (signal.aborted) throw inferenceError(ErrorType.UNAVAILABLE, `request cancelled while waiting for model '${entry.spec.name}'`);
        if (!entry.stopping && entry.process === null && this.queue.tryClaim(entry.spec.name)) {
          didLoad = await this.claimedLoad(entry);
          continue;
        }
        await this.nextChange(signal);
      }
    } catch (err) {
      // A place freed for this request goes to the next one in line.
      if (queued) this.queue.leave(entry.spec.name);
      queued = false;
      this.queue.tick();
      throw err;
    } finally {
      // On success the queue is not ticked: the model just loaded must not be given up before
      // its request holds it (acquire, right after).
      if (queued) this.queue.leave(entry.spec.name);
    }
  }

  /**
   * Holds the model for one proxied request, first loading it when `load` is set; the hold is
   * taken in the same turn the wait ends, so no eviction comes in between. Call the returned
   * release when the request is over.
   */
  async use(entry: ModelEntry, load: boolean, signal: AbortSignal, updateLastUsed: boolean): Promise<{ port: number; release: () => void }> {
    const release = load ? await this.ensureReady(entry, signal, () => this.hold(entry, updateLastUsed)) : this.hold(entry, updateLastUsed);
    const proc = entry.process;
    if (proc === null || proc.port === 0 || entry.status === 'loading') {
      release();
      throw inferenceError(ErrorType.UNAVAILABLE, proc === null ? `model '${entry.spec.name}' is not running` : 'Loading model');
    }
    if (this.options.fakeTiming) await delay(2000);
    return { port: proc.port, release };
  }

  /** Counts a request on the model (it is not given up while one runs); returns its release. */
  private hold(entry: ModelEntry, updateLastUsed: boolean): () => void {
    if (updateLastUsed) entry.lastUsed = Date.now();
    entry.inFlight++;
    this.stopIdleTimer(entry);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      entry.inFlight--;
      if (entry.inFlight === 0) {
        this.queue.tick();
        this.startIdleTimer(entry);
        this.scheduleRefill();
      }
    };
  }

  /**
   * POST /models/load: makes room under --models-max (stopping the least recently used idle
   * model and waiting for it to exit), then starts the model without waiting for it.
   */
  async load(entry: ModelEntry): Promise<void> {
    if (this.options.fakeTiming) await delay(2000);
    if (!this.queue.hasCapacity()) {
      const victim = this.victim(() => false);
      if (victim !== null) {
        const stopped = this.entries.get(victim)!;
        this.stop(stopped);
        await stopped.process?.exited;
      }
    }
    if (entry.process !== null) return;
    if (!this.queue.hasCapacity()) throw inferenceError(ErrorType.SERVER, 'model limit reached, try again later');
    this.spawn(entry);
  }

  /** POST /models/unload: stops the model (a loading one is killed, as llama-server does). */
  unload(entry: ModelEntry): void {
    if (entry.process === null) {
      if (entry.status === 'sleeping') this.setStatus(entry, 'unloaded');
      return;
    }
    if (entry.status === 'loading') entry.process.kill();
    this.stop(entry);
  }

  /** GET /models?reload=1: reads the model list again; running models whose launch changed or that are gone are unloaded first. */
  async reload(): Promise<void> {
    const specs = this.options.readSpecs();
    checkModelNames(specs);
    const byName = new Map(specs.map((s) => [s.name, s]));
    const outdated = this.list().filter((e) => e.process !== null && (!byName.has(e.spec.name) || !sameLaunch(e.spec, byName.get(e.spec.name)!)));
    for (const entry of outdated) this.unload(entry);
    await Promise.all(outdated.map((e) => e.process?.exited));
    for (const [name, entry] of this.entries) {
      const spec = byName.get(name);
      if (!spec) {
        this.stopIdleTimer(entry);
        this.entries.delete(name);
      } else if (entry.process === null) {
        entry.spec = spec;
        entry.exitCode = 0;
        entry.failure = null;
      } else {
        // A running model keeps what it was started with; only its listing follows the new list.
        entry.spec = { ...entry.spec, hidden: spec.hidden };
      }
    }
    for (const spec of specs) if (!this.entries.has(spec.name)) this.entries.set(spec.name, newEntry(spec));
    this.emit('event', { model: '*', event: 'models_reload' });
    this.changes.emit('change');
  }

  /** Loads the models marked load-on-startup (refused when they are more than --models-max). */
  loadStartupModels(): void {
    const startup = this.list().filter((e) => e.spec.loadOnStartup);
    if (this.options.modelsMax > 0 && startup.length > this.options.modelsMax) {
      throw new Error(`number of models to load on startup (${startup.length}) exceeds models_max (${this.options.modelsMax})`);
    }
    for (const entry of startup) this.spawn(entry);
  }

  /** Stops every child and waits for them. */
  async close(): Promise<void> {
    this.closed = true;
    this.changes.emit('change');
    const running = this.list().filter((e) => e.process !== null);
    for (const entry of running) {
      this.stopIdleTimer(entry);
      if (entry.status === 'loading') entry.process!.kill();
      this.stop(entry);
    }
    if (this.refillTimer) clearTimeout(this.refillTimer);
    const spares = this.spares.splice(0);
    for (const spare of spares) spare.kill();
    await Promise.all([...running.map((e) => e.process?.exited), ...spares.map((s) => s.exited)]);
  }

  /**
   * A spare taken by a load is replaced once the router is idle (no request in flight, no load
   * under way, for SPARE_REFILL_IDLE_MS): starting one takes a CPU core for a while (figure:
   * docs/benchmarks.md, "Figures moved from code comments"), which would otherwise slow the new
   * model's first requests.
   */
  private scheduleRefill(): void {
    if (this.closed || this.spares.length >= (this.options.spares ?? 0)) return;
    if (this.refillTimer) clearTimeout(this.refillTimer);
    this.refillTimer = setTimeout(() => {
      this.refillTimer = null;
      const busy = this.list().some((e) => e.inFlight > 0 || e.status === 'loading');
      if (busy) this.scheduleRefill();
      else this.refillSpares();
    }, SPARE_REFILL_IDLE_MS);
    this.refillTimer.unref();
  }

  /** Starts spares up to the configured number at once. */
  private refillSpares(): void {
    while (!this.closed && this.spares.length < (this.options.spares ?? 0)) {
      const spare = new ModelProcess({ command: this.options.command, args: null, log: (line) => this.options.log(`[spare] ${line}`) });
      this.spares.push(spare);
      this.emit('spare', spare.pid!);
      // A spare that dies waiting is dropped; the next load starts a process of its own.
      spare.on('exit', (code) => {
        const i = this.spares.indexOf(spare);
        if (i < 0) return;
        this.spares.splice(i, 1);
        this.options.log(`router: a spare model process exited with code ${code}`);
      });
    }
  }

  /** A started process for the model's command line: a spare when one is waiting. */
  private startProcess(args: readonly string[], log: (line: string) => void): ModelProcess {
    for (let spare = this.spares.shift(); spare; spare = this.spares.shift()) {
      const started = spare.start(args, log);
      if (started) return started;
    }
    return new ModelProcess({ command: this.options.command, args, log });
  }

  private async claimedLoad(entry: ModelEntry): Promise<boolean> {
    let ok = true;
    try {
      if (this.options.fakeTiming) await delay(2000);
      if (entry.process === null && !this.closed) this.spawn(entry);
    } catch (err) {
      this.options.log(`router: loading ${entry.spec.name} did not start: ${(err as Error).message}`);
      ok = false;
    }
    this.queue.claimDone(entry.spec.name, ok);
    this.queue.tick();
    return ok;
  }

  private loadFailed(entry: ModelEntry) {
    return inferenceError(ErrorType.SERVER, entry.failure ?? `model '${entry.spec.name}' failed to load`);
  }

  private spawn(entry: ModelEntry): void {
    const name = entry.spec.name;
    const args = [...entry.spec.args, ...this.options.childArgs, '--host', '127.0.0.1', '--port', '0', '--alias', name];
    const proc = this.startProcess(args, (line) => this.options.log(`[${name}] ${line}`));
    Object.assign(entry, { process: proc, stopping: false, sleepOnExit: false, exitCode: 0, failure: null, info: null, lastUsed: Date.now() });
    entry.args = [...this.options.command, ...args];
    entry.status = 'loading';
    this.emit('event', { model: name, event: 'model_status', data: { status: 'loading' } });
    this.options.log(`router: starting model ${name} (pid ${proc.pid})`);
    entry.loadTimer = setTimeout(() => {
      this.options.log(`router: model ${name} was not ready within ${this.options.loadTimeoutMs / 1000} s; killing it`);
      proc.kill();
    }, this.options.loadTimeoutMs);
    proc.on('ready', (info) => {
      if (entry.process !== proc) return;
      if (entry.loadTimer) clearTimeout(entry.loadTimer);
      entry.info = info;
      this.setStatus(entry, 'loaded', { info });
      this.queue.tick();
      this.startIdleTimer(entry);
    });
    proc.on('exit', (code) => this.onExit(entry, proc, code));
    proc.on('usage', (tokens: Array<[string, number]>, entries: UsageEntry[]) => {
      this.options.onUsage?.(tokens, entries);
      this.shareUsage(entry, tokens);
    });
  }

  /**
   * Fair share across the models: what the tenants used on `from` is charged to them on every
   * other loaded model process (each charges the tenants that have tasks there).
   */
  private shareUsage(from: ModelEntry, tokens: Array<[string, number]>): void {
    if (tokens.length === 0) return;
    for (const entry of this.entries.values()) {
      if (entry !== from && entry.status === 'loaded') entry.process?.chargeElsewhere(tokens);
    }
  }

  private onExit(entry: ModelEntry, proc: ModelProcess, code: number): void {
    if (entry.process !== proc) return;
    if (entry.loadTimer) clearTimeout(entry.loadTimer);
    this.stopIdleTimer(entry);
    const wasLoading = entry.status === 'loading';
    entry.process = null;
    entry.stopping = false;
    entry.info = null;
    entry.exitCode = code;
    if (code !== 0) {
      const reason = proc.failureReason();
      entry.failure = wasLoading
        ? `model '${entry.spec.name}' failed to load (exit code ${code})${reason ? `: ${reason}` : ''}`
        : `model '${entry.spec.name}' exited with code ${code}`;
    }
    this.options.log(`router: model ${entry.spec.name} exited with code ${code}`);
    const status = entry.sleepOnExit && code === 0 ? 'sleeping' : 'unloaded';
    entry.sleepOnExit = false;
    this.setStatus(entry, status, status === 'unloaded' ? { exit_code: code } : {});
    this.queue.tick();
    this.scheduleRefill();
  }

  private setStatus(entry: ModelEntry, status: ModelStatus, data: Record<string, unknown> = {}): void {
    entry.status = status;
    this.emit('event', { model: entry.spec.name, event: 'status_change', data: { status, ...data } });
    this.changes.emit('change');
  }

  private stop(entry: ModelEntry): void {
    if (entry.process === null || entry.stopping) return;
    entry.stopping = true;
    this.options.log(`router: stopping model ${entry.spec.name}`);
    entry.process.stop(entry.spec.stopTimeout * 1000);
    this.changes.emit('change');
  }

  private startIdleTimer(entry: ModelEntry): void {
    const seconds = entry.spec.sleepIdleSeconds;
    if (seconds <= 0 || entry.status !== 'loaded' || entry.inFlight > 0 || this.closed) return;
    this.stopIdleTimer(entry);
    entry.idleTimer = setTimeout(() => {
      entry.idleTimer = null;
      if (entry.status !== 'loaded' || entry.inFlight > 0 || entry.stopping) return;
      entry.sleepOnExit = true;
      this.stop(entry);
    }, seconds * 1000);
    entry.idleTimer.unref();
  }

  private stopIdleTimer(entry: ModelEntry): void {
    if (entry.idleTimer) clearTimeout(entry.idleTimer);
    entry.idleTimer = null;
  }

  /** Resolves on the next state change, or when `signal` aborts. */
  private nextChange(signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const done = (): void => {
        this.changes.off('change', done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      this.changes.on('change', done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  private victim(excluded: (model: string) => boolean): string | null {
    let best: ModelEntry | null = null;
    for (const e of this.entries.values()) {
      if (e.inFlight !== 0 || e.status !== 'loaded' || e.stopping || excluded(e.spec.name)) continue;
      if (best === null || e.lastUsed < best.lastUsed) best = e;
    }
    return best?.spec.name ?? null;
  }

  private places(): ModelPlaces {
    const running = () => this.list().filter((e) => e.process !== null);
    return {
      max: this.options.modelsMax,
      running: () => running().length,
      stopping: () => running().filter((e) => e.stopping).length,
      isRunning: (model) => this.entries.get(model)?.process != null,
      victim: (excluded) => this.victim(excluded),
      stop: (model) => this.stop(this.entries.get(model)!),
    };
  }
}

function newEntry(spec: RouterModelSpec): ModelEntry {
  return {
    spec, status: 'unloaded', process: null, stopping: false, exitCode: 0, failure: null, info: null, args: [],
    inFlight: 0, lastUsed: 0, sleepOnExit: false, idleTimer: null, loadTimer: null,
  };
}
