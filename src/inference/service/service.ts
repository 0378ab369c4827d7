// InferenceService: the loaded model and its engine, with what the routes need to know about
// them. Exists only while the model is loaded; routes reach it through the ServiceHost.
import type { CompletionTaskSpec, EngineInfo, ModelMetadata, NativeModel, NativeVision } from '../../native/binding.js';
import { EngineTaskError, InferenceEngine, type CompletionOutcome, type EmbeddingOutcome, type GeneratedToken } from '../engine/engine.js';
import { ErrorType, inferenceError } from '../errors.js';
import type { GenerationContext, GenerationDefaults } from './generation.js';
import type { LoraRegistry } from './lora-registry.js';
import type { MediaPolicy } from './media.js';

export interface ServiceSettings {
  modelPath: string;
  /** Name reported as `model` in responses (-a/--alias, else the file name). */
  alias: string;
  defaultNPredict: number;
  /** Where images of chat messages may come from (--media-allow-remote, --media-path). */
  media: MediaPolicy;
  /** What requests leave out: llama-server's defaults or its sampling flags. */
  generation: GenerationDefaults;
  /** --chat-template / --chat-template-file: used instead of the model's template. */
  chatTemplate?: string;
  /** --chat-template-kwargs: defaults for every request's chat_template_kwargs. */
  templateKwargs: Record<string, unknown>;
}

export class InferenceService implements GenerationContext {
  readonly metadata: ModelMetadata;
  readonly info: EngineInfo;
  readonly vocabSize: number;
  readonly createdAt = Math.floor(Date.now() / 1000);

  constructor(
    readonly model: NativeModel,
    readonly vision: NativeVision | null,
    readonly engine: InferenceEngine,
    readonly settings: ServiceSettings,
    readonly lora: LoraRegistry,
  ) {
    this.metadata = model.metadata();
    this.info = engine.native.info();
    this.vocabSize = this.metadata.vocabSize;
  }

  get alias(): string {
    return this.settings.alias;
  }

  get defaults(): GenerationDefaults {
    return this.settings.generation;
  }

  get defaultNPredict(): number {
    return this.settings.defaultNPredict;
  }

  get nSlots(): number {
    return this.info.nParallel;
  }

  /** Rejects a prompt that cannot fit a slot's context (llama-server's exceed_context_size_error). */
  checkPromptFits(tokens: Int32Array): void {
    if (tokens.length === 0) throw inferenceError(ErrorType.INVALID_REQUEST, 'The prompt is empty');
    if (tokens.length >= this.info.nCtxSlot) {
      throw inferenceError(
        ErrorType.EXCEED_CONTEXT,
        `the request exceeds the available context size (${tokens.length} prompt tokens, context ${this.info.nCtxSlot}), try increasing it`,
        { n_prompt_tokens: tokens.length, n_ctx: this.info.nCtxSlot },
      );
    }
  }

  /**
   * Submits one task and returns its outcome. A refusal at submission (bad grammar, bad media,
   * prompt too long) throws at once, as an HttpError, so a streaming route can still answer it
   * with an error status before its first event; engine failures become 500s.
   */
  start(spec: CompletionTaskSpec, signal: AbortSignal, onToken?: (t: GeneratedToken) => void): Promise<CompletionOutcome> {
    if (this.info.embeddings) {
      throw inferenceError(ErrorType.NOT_SUPPORTED, 'This server does not support completions. Start it without `--embedding` or `--rerank`');
    }
    if (!spec.media) this.checkPromptFits(spec.prompt);
    let running: Promise<CompletionOutcome>;
    try {
      running = this.engine.run(spec, { signal, onToken });
    } catch (err) {
      throw this.taskError(err, signal);
    }
    return running.catch((err: unknown) => {
      throw this.taskError(err, signal);
    });
  }

  /**
   * Starts the tasks of one request (several prompts or choices). They share one fate: if one
   * is refused at submission, those already started are cancelled and the refusal is thrown;
   * if one fails later, the others are cancelled. `onToken(i)` gives task i's token callback.
   */
  startAll(specs: readonly CompletionTaskSpec[], signal: AbortSignal, onToken?: (index: number) => (t: GeneratedToken) => void): Array<Promise<CompletionOutcome>> {
    const group = new AbortController();
    const cancelGroup = (): void => group.abort(signal.reason);
    signal.addEventListener('abort', cancelGroup, { once: true });
    const started: Array<Promise<CompletionOutcome>> = [];
    try {
      for (const [i, spec] of specs.entries()) started.push(this.start(spec, group.signal, onToken?.(i)));
    } catch (err) {
      group.abort();
      for (const p of started) p.catch(() => {});
      signal.removeEventListener('abort', cancelGroup);
      throw err;
    }
    void Promise.allSettled(started).then(() => signal.removeEventListener('abort', cancelGroup));
    return started.map((p) => p.catch((err: unknown) => {
      // A task that failed on its own takes the others down; their own rejections are then moot.
      group.abort();
      throw err;
    }));
  }

  /** Runs the tasks of one request to their ends (one fate, as startAll). */
  runAll(specs: readonly CompletionTaskSpec[], signal: AbortSignal): Promise<CompletionOutcome[]> {
    return Promise.all(this.startAll(specs, signal));
  }

  /** Maps an engine failure to the catalog: submit-time refusals 400s, task failures 500s. */
  private taskError(err: unknown, signal: AbortSignal): unknown {
    if (signal.aborted) return inferenceError(ErrorType.INVALID_REQUEST, 'the client closed the connection');
    if (err instanceof EngineTaskError) return inferenceError(ErrorType.SERVER, err.message);
    const { message = String(err), code } = err as Error & { code?: string };
    if (code === 'EXCEEDS_CONTEXT') return inferenceError(ErrorType.EXCEED_CONTEXT, message, { n_ctx: this.info.nCtxSlot });
    if (code === 'BAD_MEDIA' || /^invalid sampling parameters/.test(message)) return inferenceError(ErrorType.INVALID_REQUEST, message);
    return err;
  }

  /** Embeds tokenized inputs together (embedding mode only). */
  async embed(prompts: Int32Array[], signal: AbortSignal): Promise<EmbeddingOutcome[]> {
    try {
      return await this.engine.embedAll(prompts, signal);
    } catch (err) {
      if (signal.aborted) throw inferenceError(ErrorType.INVALID_REQUEST, 'the client closed the connection');
      if (err instanceof EngineTaskError) throw inferenceError(ErrorType.SERVER, err.message);
      throw err;
    }
  }

  async dispose(): Promise<void> {
    await this.engine.dispose();
    this.vision?.dispose();
    this.model.dispose();
  }
}
