// The router's models and their life (llama-server's server_models):
//
//   unloaded --load--> loading --ready--> loaded --idle (--sleep-idle-seconds)--> stopping --exit 0--> sleeping
//      ^                  |                 |                                                           |
//      |                  +-----unload------+--> stopping --exit--> unloaded       the next request loads it again
//      +-------exited-----+-----------------+
//
// A model is in one state at a time (ModelState); every change goes through ModelRegistry.enter,
// which also ends the timer of the state left (a load's deadline, an idle model's sleep). Each
// running model is one child process (model-process.ts), taken from the spare pool
// (spare-pool.ts) when one waits. A request that needs a model waits while it loads; concurrent
// requests for one unloaded model share one load (load-queue.ts), and with --models-max the least
// recently used idle model is stopped to make room. A model whose child exits with an error is
// `unloaded` with its exit code and failure; its waiting requests get a 500 and the next request
// tries again. Every change is an event for GET /models/sse. What a model's tenants used is
// charged to them on the others (usage-fan-out.ts).
import type { UsageEntry } from '../tenants/usage-meter.js';
import { EventEmitter } from 'node:events';
import { setTimeout as delay } from 'node:timers/promises';
import type { RouterModelSpec } from '../../native/binding.js';
import { ErrorType, badRequest, inferenceError } from '../errors.js';
import { LoadQueue, type ModelPlaces } from './load-queue.js';
import { checkModelNames, sameLaunch } from './model-catalog.js';
import type { ModelProcess } from './model-process.js';
import { SparePool } from './spare-pool.js';
import { fanOutUsage } from './usage-fan-out.js';

/** A model's status as GET /models lists it: a stopping model is listed as what it was until its process exits. */
export type ModelStatus = 'unloaded' | 'loading' | 'loaded' | 'sleeping';

/** Where a model is in its life; each state holds what exists only in it. */
export type ModelState =
  /** No process. `exitCode`: the last one (non-zero after a failed load or a crash), with why. */
  | { name: 'unloaded'; exitCode: number; failure: string | null }
  /** Its process is starting; killed if not ready by `loadTimer`. */
  | { name: 'loading'; process: ModelProcess; loadTimer: NodeJS.Timeout }
  /** Serving; `info` is the child's GET /v1/models entry; `idleTimer` puts it to sleep (--sleep-idle-seconds). */
  | { name: 'loaded'; process: ModelProcess; info: Record<string, unknown>; idleTimer: NodeJS.Timeout | null }
  /** Asked to stop, still counted as running until its process exits; then `unloaded`, or `sleeping` after a clean exit when `then` says so. */
  | { name: 'stopping'; process: ModelProcess; from: 'loading' | 'loaded'; info: Record<string, unknown> | null; then: 'unloaded' | 'sleeping' }
  /** Stopped for being idle: the next request loads it again, even without autoload. */
  | { name: 'sleeping' };

/** One model: its spec and where it is in its life. Read-only outside the registry. */
export interface ModelEntry {
  spec: RouterModelSpec;
  state: ModelState;
  /** The child's full command line (GET /models status.args). */
  args: string[];
  inFlight: number;
  lastUsed: number;
}

/** The status GET /models lists for the model. */
export function listedStatus(entry: ModelEntry): ModelStatus {
  return entry.state.name === 'stopping' ? entry.state.from : entry.state.name;
}

/** The model's process while one runs (loading, loaded, stopping). */
export function modelProcess(entry: ModelEntry): ModelProcess | null {
  return 'process' in entry.state ? entry.state.process : null;
}

/** The child's GET /v1/models entry while it is loaded (or stopping from loaded). */
export function modelInfo(entry: ModelEntry): Record<string, unknown> | null {
  return 'info' in entry.state ? entry.state.info : null;
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
  /**
   * Milliseconds added to every load and every proxied request (0: none). llama-server's tests
   * rely on 2000 (its LLAMA_SERVER_DEBUG_FAKE_TIMING, read by the command line, not here).
   */
  fakeDelayMs: number;
  log: (line: string) => void;
  /** What a model process reports its tenants used (child-link.ts "usage"). */
  onUsage?: (tokens: Array<[string, number]>, entries: UsageEntry[]) => void;
}

export const modelNotFound = (name: string) => badRequest(`model '${name}' not found`);

const UNLOADED: ModelState = { name: 'unloaded', exitCode: 0, failure: null };

/** The SSE event of a change of listed status. */
const statusChange = (status: ModelStatus, data: Record<string, unknown> = {}) => ({ event: 'status_change', data: { status, ...data } });

export class ModelRegistry extends EventEmitter<{ event: [ModelEvent]; spare: [pid: number] }> {
  private readonly entries = new Map<string, ModelEntry>();
  /** Woken on every state change; waiters re-check their condition. */
  private readonly changes = new EventEmitter();
  private readonly queue: LoadQueue;
  private readonly spares: SparePool;
  private closed = false;

  constructor(private readonly options: RegistryOptions) {
    super();
    this.changes.setMaxListeners(0);
    const specs = options.readSpecs();
    checkModelNames(specs);
    for (const spec of specs) this.entries.set(spec.name, newEntry(spec));
    this.queue = new LoadQueue(this.places());
    this.spares = new SparePool({
      size: options.spares ?? 0,
      command: options.command,
      busy: () => this.list().some((e) => e.inFlight > 0 || listedStatus(e) === 'loading'),
      onSpare: (pid) => this.emit('spare', pid),
      log: options.log,
    });
  }

  /** The spares' process ids, oldest first. */
  get sparePids(): number[] {
    return this.spares.pids;
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
    return modelProcess(entry) !== null || entry.state.name === 'sleeping';
  }

  static isFailed(entry: ModelEntry): boolean {
    return entry.state.name === 'unloaded' && entry.state.exitCode !== 0;
  }

  /**
   * Waits until the model is loaded, loading it when it is not (llama-server's
   * ensure_model_ready), then calls `onReady` in the same turn. Throws 500 when the load it
   * waited for fails, and stops waiting when `signal` aborts.
   */
  private async ensureReady<T>(entry: ModelEntry, signal: AbortSignal, onReady: () => T): Promise<T> {
    if (entry.state.name === 'loaded') return onReady();
    const name = entry.spec.name;
    // In line for a place under --models-max (load-queue.ts).
    let queued = false;
    // A load began while this request waited: the model unloaded again means that load failed.
    let loadBegan = false;
    try {
      for (;;) {
        if (this.closed) throw inferenceError(ErrorType.UNAVAILABLE, 'server is shutting down');
        // Read afresh on each turn: the awaits below change it.
        const state = entry.state as ModelState;
        if (state.name === 'loaded') return onReady();
        if (state.name === 'loading') {
          loadBegan = true;
        } else if (state.name === 'unloaded' && loadBegan) {
          throw state.exitCode !== 0 ? this.loadFailed(entry) : inferenceError(ErrorType.UNAVAILABLE, `model '${name}' was unloaded while it loaded`);
        } else if (!queued) {
          // unloaded, sleeping, or stopping (it loads again once its process has exited).
          this.queue.join(name);
          this.queue.tick();
          queued = true;
        }
        if (signal.aborted) throw inferenceError(ErrorType.UNAVAILABLE, `request cancelled while waiting for model '${name}'`);
        if ((state.name === 'unloaded' || state.name === 'sleeping') && this.queue.tryClaim(name)) {
          if (await this.claimedLoad(entry)) loadBegan = true;
          continue;
        }
        await this.nextChange(signal);
      }
    } catch (err) {
      // A place freed for this request goes to the next one in line.
      if (queued) this.queue.leave(name);
      queued = false;
      this.queue.tick();
      throw err;
    } finally {
      // On success the queue is not ticked: the model just loaded must not be given up before
      // its request holds it (acquire, right after).
      if (queued) this.queue.leave(name);
    }
  }

  /**
   * Holds the model for one proxied request, first loading it when `load` is set; the hold is
   * taken in the same turn the wait ends, so no eviction comes in between. Call the returned
   * release when the request is over.
   */
  async use(entry: ModelEntry, load: boolean, signal: AbortSignal, updateLastUsed: boolean): Promise<{ port: number; release: () => void }> {
    const release = load ? await this.ensureReady(entry, signal, () => this.hold(entry, updateLastUsed)) : this.hold(entry, updateLastUsed);
    const proc = modelProcess(entry);
    if (proc === null || proc.port === 0 || listedStatus(entry) === 'loading') {
      release();
      throw inferenceError(ErrorType.UNAVAILABLE, proc === null ? `model '${entry.spec.name}' is not running` : 'Loading model');
    }
    if (this.options.fakeDelayMs > 0) await delay(this.options.fakeDelayMs);
    return { port: proc.port, release };
  }

  /** Counts a request on the model (it is not given up while one runs); returns its release. */
  private hold(entry: ModelEntry, updateLastUsed: boolean): () => void {
    if (updateLastUsed) entry.lastUsed = Date.now();
    entry.inFlight++;
    stopIdleTimer(entry.state);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      entry.inFlight--;
      if (entry.inFlight === 0) {
        this.queue.tick();
        this.startIdleTimer(entry);
        this.spares.scheduleRefill();
      }
    };
  }

  /**
   * POST /models/load: makes room under --models-max (stopping the least recently used idle
   * model and waiting for it to exit), then starts the model without waiting for it.
   */
  async load(entry: ModelEntry): Promise<void> {
    if (this.options.fakeDelayMs > 0) await delay(this.options.fakeDelayMs);
    if (!this.queue.hasCapacity()) {
      const victim = this.victim(() => false);
      if (victim !== null) {
        const stopped = this.entries.get(victim)!;
        const exited = modelProcess(stopped)?.exited;
        this.stop(stopped);
        await exited;
      }
    }
    if (modelProcess(entry) !== null) return;
    if (!this.queue.hasCapacity()) throw inferenceError(ErrorType.SERVER, 'model limit reached, try again later');
    this.spawn(entry);
  }

  /** POST /models/unload: stops the model (a loading one is killed, as llama-server does). */
  unload(entry: ModelEntry): void {
    const state = entry.state;
    if (state.name === 'sleeping') this.enter(entry, UNLOADED, statusChange('unloaded'));
    if (state.name === 'loading') state.process.kill();
    this.stop(entry);
  }

  /** GET /models?reload=1: reads the model list again; running models whose launch changed or that are gone are unloaded first. */
  async reload(): Promise<void> {
    const specs = this.options.readSpecs();
    checkModelNames(specs);
    const byName = new Map(specs.map((s) => [s.name, s]));
    const outdated = this.list().filter((e) => modelProcess(e) !== null && (!byName.has(e.spec.name) || !sameLaunch(e.spec, byName.get(e.spec.name)!)));
    const exits = outdated.map((e) => modelProcess(e)!.exited);
    for (const entry of outdated) this.unload(entry);
    await Promise.all(exits);
    for (const [name, entry] of this.entries) {
      const spec = byName.get(name);
      if (!spec) {
        this.entries.delete(name);
      } else if (modelProcess(entry) === null) {
        entry.spec = spec;
        // A new list forgets the last failure.
        if (entry.state.name === 'unloaded') entry.state = UNLOADED;
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

  /** Stops every child and the spares, and waits for them. */
  async close(): Promise<void> {
    this.closed = true;
    this.changes.emit('change');
    const running = this.list().filter((e) => modelProcess(e) !== null);
    const exits = running.map((e) => modelProcess(e)!.exited);
    for (const entry of running) {
      if (entry.state.name === 'loading') entry.state.process.kill();
      this.stop(entry);
    }
    await Promise.all([...exits, this.spares.close()]);
  }

  private async claimedLoad(entry: ModelEntry): Promise<boolean> {
    let ok = true;
    try {
      if (this.options.fakeDelayMs > 0) await delay(this.options.fakeDelayMs);
      if (modelProcess(entry) === null && !this.closed) this.spawn(entry);
    } catch (err) {
      this.options.log(`router: loading ${entry.spec.name} did not start: ${(err as Error).message}`);
      ok = false;
    }
    this.queue.claimDone(entry.spec.name, ok);
    this.queue.tick();
    return ok;
  }

  private loadFailed(entry: ModelEntry) {
    const failure = entry.state.name === 'unloaded' ? entry.state.failure : null;
    return inferenceError(ErrorType.SERVER, failure ?? `model '${entry.spec.name}' failed to load`);
  }

  private spawn(entry: ModelEntry): void {
    const name = entry.spec.name;
    const args = [...entry.spec.args, ...this.options.childArgs, '--host', '127.0.0.1', '--port', '0', '--alias', name];
    const proc = this.spares.start(args, (line) => this.options.log(`[${name}] ${line}`));
    entry.args = [...this.options.command, ...args];
    entry.lastUsed = Date.now();
    const loadTimer = setTimeout(() => {
      this.options.log(`router: model ${name} was not ready within ${this.options.loadTimeoutMs / 1000} s; killing it`);
      proc.kill();
    }, this.options.loadTimeoutMs);
    this.enter(entry, { name: 'loading', process: proc, loadTimer }, { event: 'model_status', data: { status: 'loading' } });
    this.options.log(`router: starting model ${name} (pid ${proc.pid})`);
    proc.on('ready', (info) => this.onReady(entry, proc, info));
    proc.on('exit', (code) => this.onExit(entry, proc, code));
    proc.on('usage', (tokens: Array<[string, number]>, entries: UsageEntry[]) => {
      this.options.onUsage?.(tokens, entries);
      fanOutUsage(proc, this.list().filter((e) => listedStatus(e) === 'loaded').map((e) => modelProcess(e)!), tokens);
    });
  }

  private onReady(entry: ModelEntry, proc: ModelProcess, info: Record<string, unknown>): void {
    const state = entry.state;
    if (modelProcess(entry) !== proc) return;
    // Ready while being stopped: listed as loaded until it exits.
    if (state.name === 'stopping') this.enter(entry, { ...state, from: 'loaded', info }, statusChange('loaded', { info }));
    else this.enter(entry, { name: 'loaded', process: proc, info, idleTimer: null }, statusChange('loaded', { info }));
    this.queue.tick();
    this.startIdleTimer(entry);
  }

  private onExit(entry: ModelEntry, proc: ModelProcess, code: number): void {
    const state = entry.state;
    if (modelProcess(entry) !== proc) return;
    const wasLoading = listedStatus(entry) === 'loading';
    this.options.log(`router: model ${entry.spec.name} exited with code ${code}`);
    if (state.name === 'stopping' && state.then === 'sleeping' && code === 0) {
      this.enter(entry, { name: 'sleeping' }, statusChange('sleeping'));
    } else {
      const reason = code === 0 ? undefined : proc.failureReason();
      const failure = code === 0 ? null : wasLoading
        ? `model '${entry.spec.name}' failed to load (exit code ${code})${reason ? `: ${reason}` : ''}`
        : `model '${entry.spec.name}' exited with code ${code}`;
      this.enter(entry, { name: 'unloaded', exitCode: code, failure }, statusChange('unloaded', { exit_code: code }));
    }
    this.queue.tick();
    this.spares.scheduleRefill();
  }

  /**
   * Every change of a model's state: ends the timer of the state left, then tells the waiters
   * (and, with `event`, GET /models/sse).
   */
  private enter(entry: ModelEntry, next: ModelState, event: Omit<ModelEvent, 'model'> | null): void {
    const left = entry.state;
    if (left.name === 'loading' && next.name !== 'loading') clearTimeout(left.loadTimer);
    stopIdleTimer(left);
    entry.state = next;
    if (event) this.emit('event', { model: entry.spec.name, ...event });
    this.changes.emit('change');
  }

  /** Asks the model's process to stop (`then`: what it becomes after a clean exit). */
  private stop(entry: ModelEntry, then: 'unloaded' | 'sleeping' = 'unloaded'): void {
    const state = entry.state;
    if (state.name !== 'loading' && state.name !== 'loaded') return;
    this.options.log(`router: stopping model ${entry.spec.name}`);
    state.process.stop(entry.spec.stopTimeout * 1000);
    this.enter(entry, { name: 'stopping', process: state.process, from: state.name, info: state.name === 'loaded' ? state.info : null, then }, null);
  }

  private startIdleTimer(entry: ModelEntry): void {
    const state = entry.state;
    const seconds = entry.spec.sleepIdleSeconds;
    if (seconds <= 0 || state.name !== 'loaded' || entry.inFlight > 0 || this.closed) return;
    stopIdleTimer(state);
    state.idleTimer = setTimeout(() => {
      state.idleTimer = null;
      if (entry.state === state && entry.inFlight === 0) this.stop(entry, 'sleeping');
    }, seconds * 1000);
    state.idleTimer.unref();
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
      if (e.inFlight !== 0 || e.state.name !== 'loaded' || excluded(e.spec.name)) continue;
      if (best === null || e.lastUsed < best.lastUsed) best = e;
    }
    return best?.spec.name ?? null;
  }

  private places(): ModelPlaces {
    const running = () => this.list().filter((e) => modelProcess(e) !== null);
    return {
      max: this.options.modelsMax,
      running: () => running().length,
      stopping: () => running().filter((e) => e.state.name === 'stopping').length,
      isRunning: (model) => { const e = this.entries.get(model); return e !== undefined && modelProcess(e) !== null; },
      victim: (excluded) => this.victim(excluded),
      stop: (model) => this.stop(this.entries.get(model)!),
    };
  }
}

function stopIdleTimer(state: ModelState): void {
  if (state.name !== 'loaded' || !state.idleTimer) return;
  clearTimeout(state.idleTimer);
  state.idleTimer = null;
}

function newEntry(spec: RouterModelSpec): ModelEntry {
  return { spec, state: UNLOADED, args: [], inFlight: 0, lastUsed: 0 };
}
