// ServiceHost: the life of the one loaded service. The HTTP port is open from the start; the
// service loads (503 "Loading model" meanwhile), serves, and with --sleep-idle-seconds is
// unloaded once no request has used it for that long, then loaded again by the next request
// that needs the model, which waits for it. Read-only endpoints (/props, /v1/models, /metrics,
// /slots, /health) never wake it: while asleep they answer from what was taken before sleeping.
//
// Races: one load at a time (a wake shares the promise of a load under way); the idle timer runs
// only while no request holds the service (acquire/release count them), and it is checked again
// when it fires, so a request that arrived in between keeps the service awake.
import { EventEmitter } from 'node:events';
import { metricsText, modelsBody, propsBody, slotsBody } from '../dialects/server-info.js';
import { modelServerMetricsText } from '../dialects/model-server-metrics.js';
import { DEFAULT_BLOCK_KEY_RULE } from '../kv-events/block-keys.js';
import { loadingModel } from '../errors.js';
import type { ServiceLoad } from './load.js';
import { MetricsLedger, type RequestCounters } from './metrics-ledger.js';
import type { InferenceService } from './service.js';

/** What the read-only endpoints show of a sleeping service, taken just before it slept. */
export interface SleepSnapshot {
  props: unknown;
  models: unknown;
  slots: unknown[];
}

/** The read-only endpoints' view: the live service, or its snapshot while asleep. */
export type ServiceView = { asleep: false; service: InferenceService } | { asleep: true; snapshot: SleepSnapshot };

export type ServiceLoader = (onProgress: (progress: number) => void) => ServiceLoad;

/** Events: 'asleep' once the service is unloaded, 'awake' once it is loaded (first load and wakes). */
export class ServiceHost extends EventEmitter {
  private service: InferenceService | null = null;
  private snapshot: SleepSnapshot | null = null;
  /** The load under way (first load or wake), if any. */
  private load: ServiceLoad | null = null;
  private loading: Promise<InferenceService> | null = null;
  private inFlight = 0;
  /** The unloading of a service that went to sleep; a wake waits for it, so two never coexist. */
  private disposing: Promise<void> = Promise.resolve();
  private idleTimer: NodeJS.Timeout | null = null;
  private closed = false;
  /** Model loading progress of the first load, 0..1. */
  progress = 0;
  readonly counters: RequestCounters = { requests: 0, errors: 0 };
  private readonly ledger = new MetricsLedger();
  /**
   * The model-server gauges the last scrape of the loaded service reported (taken at the sleep
   * when none was): a sleeping service repeats them, so that a scrape during sleep equals the
   * last one before it (their lora_requests_info carries its scrape's time).
   */
  private modelServerText: string | null = null;

  /**
   * `sleepIdleMs` <= 0: never sleep. `kvBlockSize`: the KV-cache events' block size
   * (--kv-events-block-size), which cache_config_info tells the picker.
   */
  constructor(private readonly loader: ServiceLoader, private readonly sleepIdleMs: number, private readonly onProgress?: (progress: number) => void,
    private readonly kvBlockSize = DEFAULT_BLOCK_KEY_RULE.blockSize) {
    super();
  }

  /** Starts the first load; resolves with the service, or rejects when it fails. */
  start(): Promise<InferenceService> {
    return this.loadService((p) => {
      this.progress = p;
      this.onProgress?.(p);
    });
  }

  get isReady(): boolean {
    return this.service !== null;
  }

  get isSleeping(): boolean {
    return this.snapshot !== null && this.service === null;
  }

  /** The live service, or 503 "Loading model" (first load, or asleep). */
  ready(): InferenceService {
    if (!this.service) throw loadingModel();
    return this.service;
  }

  /**
   * The service for a request that needs the model: 503 during the first load; a sleeping
   * service is loaded again and the request waits for it. Every acquire needs its release().
   */
  async acquire(): Promise<InferenceService> {
    this.inFlight++;
    this.stopIdleTimer();
    try {
      if (this.service) return this.service;
      if (!this.snapshot || this.closed) throw loadingModel();
      this.loading ??= this.disposing.then(() => this.loadService(() => {}));
      return await this.loading;
    } catch (err) {
      this.release();
      throw err;
    }
  }

  release(): void {
    this.inFlight--;
    if (this.inFlight === 0) this.startIdleTimer();
  }

  /** For read-only endpoints: never wakes the service; 503 during the first load. */
  view(): ServiceView {
    if (this.service) return { asleep: false, service: this.service };
    if (this.snapshot) return { asleep: true, snapshot: this.snapshot };
    throw loadingModel();
  }

  /** /metrics: the counters since start-up (across sleeps), the gauges over the window since the last scrape. */
  metrics(view: ServiceView): string {
    const text = metricsText(this.ledger.scrape(view.asleep ? null : view.service.engine.native.metrics()), this.counters);
    if (!view.asleep) this.modelServerText = modelServerMetricsText(modelServerGauges(view.service, this.kvBlockSize));
    return text + (this.modelServerText ?? '');
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stopIdleTimer();
    this.load?.cancel();
    await this.loading?.catch(() => {});
    const service = this.service;
    this.service = null;
    if (service) await service.dispose();
  }

  private loadService(onProgress: (progress: number) => void): Promise<InferenceService> {
    const load = this.loader(onProgress);
    this.load = load;
    this.loading = load.promise.then(
      (service) => {
        this.load = null;
        this.loading = null;
        if (this.closed) {
          void service.dispose();
          throw new Error('server closed while loading');
        }
        this.service = service;
        this.snapshot = null;
        this.progress = 1;
        if (this.inFlight === 0) this.startIdleTimer();
        this.emit('awake');
        return service;
      },
      (err: unknown) => {
        this.load = null;
        this.loading = null;
        throw err;
      },
    );
    return this.loading;
  }

  private startIdleTimer(): void {
    if (this.sleepIdleMs <= 0 || !this.service || this.closed) return;
    this.stopIdleTimer();
    this.idleTimer = setTimeout(() => void this.sleep(), this.sleepIdleMs);
    this.idleTimer.unref();
  }

  private stopIdleTimer(): void {
    if (this.idleTimer) clearTimeout(this.idleTimer);
    this.idleTimer = null;
  }

  /** Unloads an idle service, keeping what the read-only endpoints show. */
  private async sleep(): Promise<void> {
    this.idleTimer = null;
    const service = this.service;
    if (!service || this.inFlight > 0 || this.closed) return;
    this.snapshot = {
      props: propsBody(service, true),
      models: modelsBody(service),
      slots: slotsBody(service),
    };
    this.modelServerText ??= modelServerMetricsText(modelServerGauges(service, this.kvBlockSize));
    this.ledger.retire(service.engine.native.metrics());
    this.service = null;
    this.disposing = service.dispose();
    await this.disposing;
    this.emit('asleep');
  }
}

/** The model-server protocol's gauges of a loaded service (GIE's endpoint picker reads them). */
function modelServerGauges(service: InferenceService, blockSize: number): Parameters<typeof modelServerMetricsText>[0] {
  const names = service.lora.names();
  const activity = service.engine.loraActivity();
  const named = (ids: Set<number>): string[] => [...ids].sort((a, b) => a - b).map((id) => names[id]!);
  return {
    slotTokens: service.engine.native.slots().map((slot) => slot.nCache),
    nCtx: service.info.nCtx,
    adapters: names,
    runningAdapters: named(activity.running),
    waitingAdapters: named(activity.waiting),
    blockSize,
    now: Date.now() / 1000,
  };
}
