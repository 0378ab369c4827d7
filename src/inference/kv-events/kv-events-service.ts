// KvEventsService: the loaded model's KV-cache events, published as vLLM publishes them
// (--kv-events ENDPOINT; docs/scaling.md). While a model is loaded, its engine reports its slots'
// cache changes (native/cache-events.h: its slots' cells, its host-memory cache's entries, its disk
// tier's files, the files adopted at start-up first) and this service takes them every `pollMs` on the event
// loop, off the engine's thread (the step loop never waits for it), turns them into events
// (slot-ledger.ts) and publishes them under the model's name as routers use it (an adapter's
// blocks under the adapter's name). A load (the first, or a wake after sleep) starts with
// AllBlocksCleared: whatever a router knew of this pod's cells is gone; so does an unload.
import type { ServiceHost } from '../service/host.js';
import type { InferenceService } from '../service/service.js';
import type { BlockKeyRule } from './block-keys.js';
import { TierLedgers, type LedgerModel } from './slot-ledger.js';
import { eventTopic, KvEventPublisher, type PublisherOptions } from './zmq-publisher.js';

export interface KvEventsOptions {
  publisher: PublisherOptions;
  rule: BlockKeyRule;
  /** The pod's name in the topic (kv@<pod>@<model>). */
  pod: string;
  /** How often the engine's changes are taken (ms; default 50). */
  pollMs?: number;
}

/** The model a slot's cache belongs to, by its adapter scales: the base model, or one adapter alone at scale 1. */
export function modelOfScales(service: InferenceService, lora: readonly number[]): LedgerModel | null {
  const used = lora.flatMap((scale, index) => (scale !== 0 ? [{ index, scale }] : []));
  if (used.length === 0) return { name: service.alias, adapter: null };
  if (used.length > 1 || used[0]!.scale !== 1) return null;
  const name = service.lora.names()[used[0]!.index]!;
  return { name, adapter: { id: used[0]!.index + 1, name } };
}

export class KvEventsService {
  private attached: { service: InferenceService; ledger: TierLedgers } | null = null;
  private readonly timer: NodeJS.Timeout;

  private constructor(private readonly publisher: KvEventPublisher, private readonly host: ServiceHost, private readonly options: KvEventsOptions) {
    host.on('awake', this.onAwake);
    host.on('asleep', this.onAsleep);
    this.timer = setInterval(() => this.poll(), options.pollMs ?? 50);
    this.timer.unref();
  }

  static async start(host: ServiceHost, options: KvEventsOptions): Promise<KvEventsService> {
    return new KvEventsService(await KvEventPublisher.open(options.publisher), host, options);
  }

  private readonly onAwake = (): void => {
    let service: InferenceService;
    try {
      const view = this.host.view();
      if (view.asleep) return;
      service = view.service;
    } catch {
      return;
    }
    service.engine.native.enableCacheEvents(this.options.rule.blockSize);
    this.attached = { service, ledger: new TierLedgers(this.options.rule, (lora) => modelOfScales(service, lora)) };
    this.clearAll(service);
  };

  private readonly onAsleep = (): void => {
    const attached = this.attached;
    this.attached = null;
    if (attached) this.clearAll(attached.service);
  };

  /** AllBlocksCleared under the model's name and each adapter's. */
  private clearAll(service: InferenceService): void {
    for (const model of [service.alias, ...service.lora.names()]) this.publisher.publish(eventTopic(this.options.pod, model), [{ type: 'AllBlocksCleared' }]);
  }

  /** Takes the engine's changes and publishes their events, a batch per model in order. */
  poll(): void {
    const attached = this.attached;
    if (!attached) return;
    const changes = attached.service.engine.native.cacheChanges();
    if (changes.length === 0) return;
    for (const { model, events } of attached.ledger.apply(changes)) this.publisher.publish(eventTopic(this.options.pod, model), events);
  }

  /** Resolves once every published batch has gone to the socket. */
  flush(): Promise<void> {
    this.poll();
    return this.publisher.flush();
  }

  close(): void {
    clearInterval(this.timer);
    this.host.off('awake', this.onAwake);
    this.host.off('asleep', this.onAsleep);
    this.publisher.close();
  }
}
