// InferenceService: the loaded model and its engine, with what the routes need to know about
// them. Exists only once the model is ready; routes reach it through ServerState.ready().
import type { CompletionTaskSpec, EngineInfo, ModelMetadata, NativeModel, NativeVision } from '../native/binding.js';
import { EngineTaskError, InferenceEngine, type CompletionOutcome, type EmbeddingOutcome, type GeneratedToken } from './engine.js';
import { ErrorType, inferenceError } from './errors.js';
import type { GenerationContext } from './generation.js';
import type { LoraRegistry } from './lora.js';

export interface ServiceSettings {
  modelPath: string;
  /** Name reported as `model` in responses (-a/--alias, else the file name). */
  alias: string;
  defaultNPredict: number;
  /** Fetch http(s) image URLs in chat messages (--media-allow-remote). */
  allowRemoteMedia: boolean;
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

  /** Runs one task; engine failures become 500s, submit-time refusals 400s. */
  async run(spec: CompletionTaskSpec, signal: AbortSignal, onToken?: (t: GeneratedToken) => void): Promise<CompletionOutcome> {
    if (this.info.embeddings) {
      throw inferenceError(ErrorType.NOT_SUPPORTED, 'This server does not support completions. Start it without `--embedding` or `--rerank`');
    }
    if (!spec.media) this.checkPromptFits(spec.prompt);
    try {
      return await this.engine.run(spec, { signal, onToken });
    } catch (err) {
      if (signal.aborted) throw inferenceError(ErrorType.INVALID_REQUEST, 'the client closed the connection');
      if (err instanceof EngineTaskError) throw inferenceError(ErrorType.SERVER, err.message);
      const { message = String(err), code } = err as Error & { code?: string };
      if (code === 'EXCEEDS_CONTEXT') throw inferenceError(ErrorType.EXCEED_CONTEXT, message, { n_ctx: this.info.nCtxSlot });
      if (code === 'BAD_MEDIA' || /^invalid sampling parameters/.test(message)) throw inferenceError(ErrorType.INVALID_REQUEST, message);
      throw err;
    }
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
