// InferenceService: the loaded model and its engine, with what the routes need to know about
// them. Exists only while the model is loaded; routes reach it through the ServiceHost.
import { isNativeError, type CompletionTaskSpec, type EngineInfo, type ModelMetadata, type NativeModel, type NativeVision, type ReasoningFormat } from '../../native/binding.js';
import { EngineTaskError, InferenceEngine, type CompletionOutcome, type EmbeddingInput, type EmbeddingOutcome, type GeneratedToken } from '../engine/engine.js';
import { nativeErrorToHttp } from '../engine/native-errors.js';
import { ErrorType, inferenceError } from '../errors.js';
import type { GenerationContext, GenerationDefaults } from './generation.js';
import type { LoraRegistry } from './lora-registry.js';
import type { MediaPolicy } from './media.js';
import { logPrompts } from './prompt-log.js';
import type { RequestTenant } from '../tenants/tenancy.js';
import { traceCompletions, traceEmbeddings } from '../../telemetry/tracing.js';

/** The server's chat settings (llama-server's --reasoning-format, --reasoning, --prefill-assistant, --reasoning-budget). */
export interface ChatSettings {
  reasoningFormat: ReasoningFormat;
  /** --reasoning on/off; undefined: the template decides. */
  enableThinking: boolean | undefined;
  prefillAssistant: boolean;
  /** Tokens of thinking before the end tag is forced; -1 unlimited. */
  reasoningBudget: number;
  /** --reasoning-budget-message: text forced before the end tag when the budget runs out ('' none). */
  reasoningBudgetMessage: string;
  /** --no-jinja: llama.cpp's built-in templates by name. */
  useJinja: boolean;
  /** --skip-chat-parsing: the reply is all content, reasoning and tool calls included. */
  skipChatParsing: boolean;
}

export interface ServiceSettings {
  modelPath: string;
  /** Name reported as `model` in responses (-a/--alias, else the file name). */
  alias: string;
  defaultNPredict: number;
  /** Where images of chat messages may come from (--media-allow-remote, --media-path). */
  media: MediaPolicy;
  /** --slot-save-path: the directory of slot files; without it, slot actions answer 501. */
  slotSavePath?: string;
  /** --log-prompts-dir: each completion request's prompt is written to a file there (see prompt-log.ts). */
  promptsLogDir?: string;
  /** What requests leave out: llama-server's defaults or its sampling flags. */
  generation: GenerationDefaults;
  /** --chat-template / --chat-template-file: used instead of the model's template. */
  chatTemplate?: string;
  /** --chat-template-kwargs: defaults for every request's chat_template_kwargs. */
  templateKwargs: Record<string, unknown>;
  /** Reasoning and prefill rules of chat requests (--reasoning-format, --reasoning, --prefill-assistant, --reasoning-budget). */
  chat: ChatSettings;
  /** -v: every OpenAI answer carries the native one as `__verbose`, as llama-server's debug output. */
  verbose: boolean;
  /** --spm-infill: infill prompts in suffix/prefix/middle order. */
  spmInfill: boolean;
  /** The default embd_normalize of /embedding (--embd-normalize). */
  embdNormalize: number;
  /** -a: every name of the model; --tags: informational labels. Reported by /v1/models. */
  aliases: string[];
  tags: string[];
}

export class InferenceService implements GenerationContext {
  readonly metadata: ModelMetadata;
  readonly info: EngineInfo;
  readonly vocabSize: number;
  readonly createdAt = Math.floor(Date.now() / 1000);
  /** Generating requests being prepared (counted by the engine) and not yet submitted, by their AbortSignal. */
  private readonly preparing = new WeakSet<AbortSignal>();

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

  get eogTokens(): readonly number[] {
    return this.metadata.eogTokens;
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
   * A generating request has arrived (known by its AbortSignal) and is being prepared: the engine
   * counts it until its first startAll submits its tasks, or endPreparing() (InferenceEngine.beginPreparing).
   */
  beginPreparing(signal: AbortSignal): void {
    if (this.info.embeddings || this.preparing.has(signal)) return;
    this.preparing.add(signal);
    this.engine.beginPreparing();
  }

  /** The request being prepared with `signal` will submit nothing more (it failed, or it is done). */
  endPreparing(signal: AbortSignal): void {
    if (this.preparing.delete(signal)) this.engine.endPreparing();
  }

  /**
   * Starts the tasks of one request (several prompts or choices), submitted together, and
   * resolves once the engine has queued them, to one outcome per task. A refusal (bad grammar,
   * bad media, prompt too long) rejects instead, as an HttpError, before any task runs: a
   * streaming route can still answer it with an error status. The tasks share one fate: if one
   * fails later, the others are cancelled. `tenant`: the request's (its guard admitted it), on
   * the tasks for fair share and metering them; null: none (the engine's default tenant, unmetered).
   * `onToken(i)` gives task i's token callback.
   */
  async startAll(specs: readonly CompletionTaskSpec[], signal: AbortSignal, tenant: RequestTenant | null, onToken?: (index: number) => (t: GeneratedToken) => void): Promise<Array<Promise<CompletionOutcome>>> {
    if (this.info.embeddings) {
      throw inferenceError(ErrorType.NOT_SUPPORTED, 'This server does not support completions. Start it without `--embedding` or `--rerank`');
    }
    const trace = traceCompletions(this.alias, specs);
    for (const spec of specs) if (!spec.media) this.checkPromptFits(spec.prompt);
    if (this.settings.promptsLogDir) await logPrompts(this.settings.promptsLogDir, this.model, specs);
    const group = new AbortController();
    const cancelGroup = (): void => group.abort(signal.reason);
    signal.addEventListener('abort', cancelGroup, { once: true });
    // A client that left while this request was being prepared (its prompts tokenized or logged) gets no task.
    if (signal.aborted) cancelGroup();
    // The request's tenant (tenants/tenancy.ts): on its tasks for fair share, and their usage metered.
    const meter = tenant?.meter(this.alias, specs, Date.now());
    const tasks = tenant ? specs.map((spec) => ({ ...tenant.share(), ...spec })) : specs;
    const onTask = meter ? (index: number) => meter.onToken(onToken?.(index)) : onToken;
    let started: Array<Promise<CompletionOutcome>>;
    try {
      started = await this.engine.submitAll(tasks, { signal: group.signal, onToken: onTask, prepared: this.preparing.delete(signal) });
    } catch (err) {
      signal.removeEventListener('abort', cancelGroup);
      throw this.taskError(err, signal);
    }
    void Promise.allSettled(started).then(() => signal.removeEventListener('abort', cancelGroup));
    meter?.settle(started);
    const outcomes = started.map((p) => p.catch((err: unknown) => {
      // A task that failed on its own takes the others down; their own rejections are then moot.
      group.abort();
      throw this.taskError(err, signal);
    }));
    trace?.follow(outcomes);
    return outcomes;
  }

  /** The tokens of a prompt with images (text with one media marker per image), as the engine would run it. */
  async countTokensWithMedia(promptText: string, media: Uint8Array[]): Promise<number> {
    try {
      return await this.engine.native.countTokens({ prompt: new Int32Array(0), promptText, media });
    } catch (err) {
      throw isNativeError(err) ? nativeErrorToHttp(err) : err;
    }
  }

  /** Runs the tasks of one request to their ends (one fate, as startAll). */
  async runAll(specs: readonly CompletionTaskSpec[], signal: AbortSignal, tenant: RequestTenant | null): Promise<CompletionOutcome[]> {
    return Promise.all(await this.startAll(specs, signal, tenant));
  }

  /** Maps an engine failure to the catalog: refusals by their code (native-errors.ts), task failures 500s. */
  private taskError(err: unknown, signal: AbortSignal): unknown {
    if (signal.aborted) return inferenceError(ErrorType.INVALID_REQUEST, 'the client closed the connection');
    if (err instanceof EngineTaskError) return inferenceError(ErrorType.SERVER, err.message);
    if (isNativeError(err)) return nativeErrorToHttp(err);
    return err;
  }

  /** Embeds tokenized inputs together (embedding mode only), as startAll for `tenant`. */
  async embed(inputs: EmbeddingInput[], signal: AbortSignal, tenant: RequestTenant | null): Promise<EmbeddingOutcome[]> {
    const trace = traceEmbeddings(this.alias);
    try {
      const outcomes = await this.engine.embedAll(inputs, { signal, share: tenant?.share(), follow: (o) => trace?.follow(o) });
      tenant?.meterEmbeddings(this.alias, outcomes.reduce((n, o) => n + o.nPrompt, 0));
      return outcomes;
    } catch (err) {
      throw this.taskError(err, signal);
    }
  }

  async dispose(): Promise<void> {
    await this.engine.dispose();
    this.vision?.dispose();
    this.model.dispose();
  }
}
