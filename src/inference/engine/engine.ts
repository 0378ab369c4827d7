// InferenceEngine: the TypeScript face of a native Engine. It routes the engine's event bundles
// to the task that owns them, turns a task into a promise (plus an optional per-token callback),
// and cancels the task when the caller's AbortSignal fires (a client that disconnects frees its
// slot at the engine's next step).
import { native, type CompletionTaskSpec, type EngineEvent, type EngineParams, type NativeEngine, type NativeModel, type StopType, type TokenProbability } from '../../native/binding.js';

export interface GeneratedToken {
  token: number;
  /** Text this token releases (empty while a stop string or UTF-8 sequence is incomplete). */
  text: string;
  prob?: number;
  probs?: TokenProbability[];
  /** On the first token: the prompt's length in tokens (images included). */
  nPrompt?: number;
  /** A report of the prompt's progress (return_progress) instead of a token: token -1, no text. */
  progress?: PromptProgress;
}

/** llama-server's prompt_progress: tokens of the prompt, reused from the cache, in the cache so far. */
export interface PromptProgress {
  total: number;
  cache: number;
  processed: number;
  time_ms: number;
}

export interface CompletionOutcome {
  /** The whole generated text, stop string removed. */
  content: string;
  tokens: number[];
  stop: StopType;
  stoppingWord: string;
  truncated: boolean;
  nPrompt: number;
  nCached: number;
  nPredicted: number;
  tPromptMs: number;
  tPredictMs: number;
  slot: number;
  /** Speculative decoding: tokens drafted for this task, and those accepted (0 without speculation). */
  nDraft: number;
  nDraftAccepted: number;
  /** Per generated token, when probabilities were requested. */
  probabilities: Array<{ token: number; prob: number; probs: TokenProbability[] }>;
}

/** Whom a task belongs to, for fair share (native/admission.h): the tenant fields of its CompletionTaskSpec. */
export type TaskShare = Pick<CompletionTaskSpec, 'tenant' | 'tenantWeight' | 'priorityClass' | 'priority'>;

export class EngineTaskError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'EngineTaskError';
  }
}

export interface EmbeddingOutcome {
  embedding: Float32Array;
  nVectors: number;
  nPrompt: number;
  /** From the slot taking the input to its vector. */
  tPromptMs: number;
  slot: number;
}

export interface EmbeddingOptions {
  /** Cancels the inputs not yet embedded; the call rejects with its reason. */
  signal?: AbortSignal;
  share?: TaskShare;
  /** Receives the inputs' outcome promises once created, before the call's own reactions (traces). */
  follow?: (outcomes: ReadonlyArray<Promise<EmbeddingOutcome>>) => void;
}

/** An embedding input: its tokens, or text with one media marker per image and the images' bytes. */
export type EmbeddingInput = Int32Array | { text: string; media: Uint8Array[] };

interface PendingEmbedding {
  resolve(outcome: EmbeddingOutcome): void;
  reject(error: Error): void;
}

interface PendingTask {
  onToken?: TokenCallback;
  resolve(outcome: CompletionOutcome): void;
  reject(error: Error): void;
  content: string[];
  tokens: number[];
  probabilities: CompletionOutcome['probabilities'];
  keepProbs: boolean;
  /** Indices of the LoRA adapters the task runs with (a scale other than 0). */
  adapters: number[];
}

export type TokenCallback = (token: GeneratedToken) => void | Promise<void>;

export interface RunOptions {
  signal?: AbortSignal;
  onToken?: TokenCallback;
}

export interface SubmitOptions {
  /** Aborting cancels every task of the submission (and rejects their outcomes with its reason). */
  signal?: AbortSignal;
  /** Task `index`'s token callback, if any. */
  onToken?: (index: number) => TokenCallback | undefined;
  /** The tasks are those of a request counted by beginPreparing(): it stops counting now. */
  prepared?: boolean;
}

export class InferenceEngine {
  private readonly pending = new Map<number, PendingTask>();
  private readonly embeddings = new Map<number, PendingEmbedding>();
  private constructor(private readonly engine: NativeEngine) {}

  static async create(model: NativeModel, params: EngineParams): Promise<InferenceEngine> {
    let self: InferenceEngine | null = null;
    const early: EngineEvent[][] = [];
    const nativeEngine = await native.Engine.create(model, params, (events) => {
      if (self) self.dispatch(events); else early.push(events);
    });
    self = new InferenceEngine(nativeEngine);
    for (const events of early) self.dispatch(events);
    return self;
  }

  get native(): NativeEngine {
    return this.engine;
  }

  /**
   * Submits completion tasks together (they can share their first batch) and resolves, once all
   * of them are queued, to one outcome promise per task. Rejects with the NativeError of a task
   * the engine refuses (then none runs: nothing has been streamed), or with the signal's reason
   * when it fires first. Each outcome rejects with EngineTaskError when the engine fails its task,
   * or with the signal's reason when aborted (the task is cancelled first). Whoever awaits this
   * runs before the first token of these tasks reaches `onToken` (see NativeEngine.submit).
   */
  async submitAll(specs: readonly CompletionTaskSpec[], options: SubmitOptions = {}): Promise<Array<Promise<CompletionOutcome>>> {
    const { signal, onToken, prepared = false } = options;
    if (signal?.aborted) {
      if (prepared) this.endPreparing();
      throw signal.reason ?? new Error('aborted');
    }
    const { ids, queued } = this.engine.submit([...specs], prepared);
    const outcomes = ids.map((id, index) => this.track(id, specs[index]!, onToken?.(index)));
    const onAbort = (): void => {
      for (const id of ids) {
        const task = this.pending.get(id);
        if (!task) continue;
        this.pending.delete(id);
        this.engine.cancel(id);
        task.reject(signal?.reason ?? new Error('aborted'));
      }
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    void Promise.allSettled(outcomes).then(() => signal?.removeEventListener('abort', onAbort));
    try {
      await queued;
      if (signal?.aborted) throw signal.reason ?? new Error('aborted');
    } catch (err) {
      // Refused or aborted: no task of the submission runs; their outcomes settle unobserved.
      for (const outcome of outcomes) outcome.catch(() => {});
      for (const id of ids) {
        this.pending.get(id)?.reject(err as Error);
        this.pending.delete(id);
      }
      throw err;
    }
    return outcomes;
  }

  /**
   * A generating request has arrived and is being prepared (chat template, tokens): while it is,
   * an idle engine that has tasks waits for its tasks too (up to 25 times burstWaitMs), so that
   * requests sent together share their first batch. Each beginPreparing() is ended once: by a
   * submitAll with `prepared`, or by endPreparing().
   */
  beginPreparing(): void {
    this.engine.beginPreparing();
  }

  /** Router mode: tenants' tokens on the router's other model processes, for fair share (NativeEngine.chargeTenants). */
  chargeTenants(charges: Array<[string, number]>): void {
    this.engine.chargeTenants(charges);
  }

  /** A request being prepared that will submit nothing (it failed, or its client left). */
  endPreparing(): void {
    this.engine.endPreparing();
  }

  /**
   * The LoRA adapters (by index) of the completion tasks a slot holds now (running) and of those
   * still waiting for a slot, for /metrics.
   */
  loraActivity(): { running: Set<number>; waiting: Set<number> } {
    const inSlot = new Set(this.engine.slots().flatMap((slot) => (slot.taskId === null ? [] : [slot.taskId])));
    const running = new Set<number>();
    const waiting = new Set<number>();
    for (const [id, task] of this.pending) for (const adapter of task.adapters) (inSlot.has(id) ? running : waiting).add(adapter);
    return { running, waiting };
  }

  /** Runs one completion task to its end: submitAll of one task. */
  async run(spec: CompletionTaskSpec, options: RunOptions = {}): Promise<CompletionOutcome> {
    const [outcome] = await this.submitAll([spec], { signal: options.signal, onToken: () => options.onToken });
    return outcome!;
  }

  /** Registers a submitted task; its outcome settles from its events. */
  private track(id: number, spec: CompletionTaskSpec, onToken: TokenCallback | undefined): Promise<CompletionOutcome> {
    return new Promise<CompletionOutcome>((resolve, reject) => {
      const adapters = (spec.loraScales ?? []).flatMap((scale, index) => (scale !== 0 ? [index] : []));
      this.pending.set(id, { onToken, resolve, reject, content: [], tokens: [], probabilities: [], keepProbs: (spec.nProbs ?? 0) > 0, adapters });
    });
  }

  /**
   * Embeds inputs on an engine in embedding mode. They are queued together, so they share
   * batches (and the batch composition of a request does not depend on timing). Rejects with
   * the NativeError of a refused input, EngineTaskError when the engine fails one, or the
   * signal's reason.
   */
  async embedAll(inputs: EmbeddingInput[], { signal, share = {}, follow }: EmbeddingOptions = {}): Promise<EmbeddingOutcome[]> {
    if (signal?.aborted) throw signal.reason ?? new Error('aborted');
    const { ids, queued } = this.engine.submit(inputs.map((input) => (input instanceof Int32Array
      ? { kind: 'embedding' as const, prompt: input, ...share }
      : { kind: 'embedding' as const, prompt: new Int32Array(0), promptText: input.text, media: input.media, ...share })));
    const outcomes = ids.map((id) => new Promise<EmbeddingOutcome>((resolve, reject) => this.embeddings.set(id, { resolve, reject })));
    follow?.(outcomes);
    const onAbort = (): void => {
      for (const id of ids) {
        const waiting = this.embeddings.get(id);
        if (!waiting) continue;
        this.embeddings.delete(id);
        this.engine.cancel(id);
        waiting.reject(signal?.reason ?? new Error('aborted'));
      }
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    const all = Promise.all(outcomes);
    all.then(() => signal?.removeEventListener('abort', onAbort), () => onAbort());
    try {
      await queued;
    } catch (err) {
      all.catch(() => {});
      for (const id of ids) {
        this.embeddings.get(id)?.reject(err as Error);
        this.embeddings.delete(id);
      }
      throw err;
    }
    return all;
  }

  private dispatch(events: EngineEvent[]): void {
    for (const event of events) {
      if (event.kind === 'embedding' || (event.kind === 'error' && this.embeddings.has(event.task))) {
        const waiting = this.embeddings.get(event.task);
        if (!waiting) continue;
        this.embeddings.delete(event.task);
        if (event.kind === 'embedding') waiting.resolve({ embedding: event.embedding, nVectors: event.nVectors, nPrompt: event.nPrompt, tPromptMs: event.tPromptMs, slot: event.slot });
        else waiting.reject(new EngineTaskError(event.message));
        continue;
      }
      const task = this.pending.get(event.task);
      if (!task) continue;
      switch (event.kind) {
        case 'token': {
          task.tokens.push(event.token);
          if (event.text) task.content.push(event.text);
          if (task.keepProbs && event.probs) task.probabilities.push({ token: event.token, prob: event.prob ?? 0, probs: event.probs });
          if (task.onToken) void task.onToken(event);
          break;
        }
        case 'done': {
          this.pending.delete(event.task);
          if (event.text) {
            task.content.push(event.text);
            if (task.onToken) void task.onToken({ token: -1, text: event.text });
          }
          task.resolve({
            content: task.content.join(''),
            tokens: task.tokens,
            stop: event.stop,
            stoppingWord: event.stoppingWord,
            truncated: event.truncated,
            nPrompt: event.nPrompt,
            nCached: event.nCached,
            nPredicted: event.nPredicted,
            tPromptMs: event.tPromptMs,
            tPredictMs: event.tPredictMs,
            slot: event.slot,
            nDraft: event.nDraft,
            nDraftAccepted: event.nDraftAccepted,
            probabilities: task.probabilities,
          });
          break;
        }
        case 'progress':
          if (task.onToken) void task.onToken({ token: -1, text: '', progress: { total: event.total, cache: event.cache, processed: event.processed, time_ms: event.timeMs } });
          break;
        case 'error':
          this.pending.delete(event.task);
          task.reject(new EngineTaskError(event.message));
          break;
      }
    }
  }

  async dispose(): Promise<void> {
    for (const [id, task] of this.pending) {
      this.engine.cancel(id);
      task.reject(new EngineTaskError('the engine was shut down'));
    }
    this.pending.clear();
    for (const [id, waiting] of this.embeddings) {
      this.engine.cancel(id);
      waiting.reject(new EngineTaskError('the engine was shut down'));
    }
    this.embeddings.clear();
    await this.engine.dispose();
  }
}
