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
  /** Per generated token, when probabilities were requested. */
  probabilities: Array<{ token: number; prob: number; probs: TokenProbability[] }>;
}

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
}

interface PendingEmbedding {
  resolve(outcome: EmbeddingOutcome): void;
  reject(error: Error): void;
}

interface PendingTask {
  onToken?: (token: GeneratedToken) => void | Promise<void>;
  resolve(outcome: CompletionOutcome): void;
  reject(error: Error): void;
  content: string[];
  tokens: number[];
  probabilities: CompletionOutcome['probabilities'];
  keepProbs: boolean;
}

export interface RunOptions {
  signal?: AbortSignal;
  onToken?: (token: GeneratedToken) => void | Promise<void>;
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
   * Runs a completion task to its end. Throws at once when the engine refuses the task at
   * submission (bad grammar, bad media, prompt too long); the promise rejects with
   * EngineTaskError when the engine fails the task, or with the signal's reason when aborted
   * (the task is cancelled first).
   */
  run(spec: CompletionTaskSpec, options: RunOptions = {}): Promise<CompletionOutcome> {
    const { signal, onToken } = options;
    if (signal?.aborted) return Promise.reject(signal.reason ?? new Error('aborted'));
    // Events for this id arrive on a later turn of the event loop, after `pending` has it.
    const id = this.engine.submit(spec);
    return new Promise<CompletionOutcome>((resolve, reject) => {
      const task: PendingTask = {
        onToken, resolve, reject, content: [], tokens: [], probabilities: [], keepProbs: (spec.nProbs ?? 0) > 0,
      };
      this.pending.set(id, task);
      if (signal) {
        const onAbort = (): void => {
          if (!this.pending.delete(id)) return;
          this.engine.cancel(id);
          reject(signal.reason ?? new Error('aborted'));
        };
        signal.addEventListener('abort', onAbort, { once: true });
        const cleanup = (): void => signal.removeEventListener('abort', onAbort);
        task.resolve = (o) => { cleanup(); resolve(o); };
        task.reject = (e) => { cleanup(); reject(e); };
      }
    });
  }

  /**
   * Embeds inputs on an engine in embedding mode. They are queued together, so they share
   * batches (and the batch composition of a request does not depend on timing).
   */
  embedAll(prompts: Int32Array[], signal?: AbortSignal): Promise<EmbeddingOutcome[]> {
    if (signal?.aborted) return Promise.reject(signal.reason ?? new Error('aborted'));
    const ids = this.engine.submit(prompts.map((prompt) => ({ kind: 'embedding' as const, prompt })));
    const outcomes = ids.map((id) => new Promise<EmbeddingOutcome>((resolve, reject) => this.embeddings.set(id, { resolve, reject })));
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
    return all;
  }

  private dispatch(events: EngineEvent[]): void {
    for (const event of events) {
      if (event.kind === 'embedding' || (event.kind === 'error' && this.embeddings.has(event.task))) {
        const waiting = this.embeddings.get(event.task);
        if (!waiting) continue;
        this.embeddings.delete(event.task);
        if (event.kind === 'embedding') waiting.resolve({ embedding: event.embedding, nVectors: event.nVectors, nPrompt: event.nPrompt });
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
            probabilities: task.probabilities,
          });
          break;
        }
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
