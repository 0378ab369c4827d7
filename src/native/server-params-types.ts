// llama-server's command line as llama.cpp's parser reads it (native/server-params.h), and the
// process-wide calls' types.

export interface SystemInfo {
  backend: 'CPU' | 'CUDA' | 'Metal';
  llamaSystemInfo: string;
  supportsGpuOffload: boolean;
  supportsMmap: boolean;
  maxDevices: number;
}

export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'none';

/** One option of llama-server's command line, as llama.cpp's parser defines it. */
export interface ServerOption {
  names: string[];
  /** The --no-... spellings of a boolean option. */
  negatedNames: string[];
  env: string | null;
  valueHint: string | null;
  help: string;
  sampling: boolean;
}

export interface ServerSamplingValues {
  seed: number; nProbs: number; minKeep: number; topK: number; topP: number; minP: number;
  xtcProbability: number; xtcThreshold: number; typicalP: number; temperature: number;
  dynatempRange: number; dynatempExponent: number; repeatLastN: number; repeatPenalty: number;
  frequencyPenalty: number; presencePenalty: number; dryMultiplier: number; dryBase: number;
  dryAllowedLength: number; dryPenaltyLastN: number; drySequenceBreakers: string[];
  adaptiveTarget: number; adaptiveDecay: number; reasoningBudgetMessage: string; mirostat: number; mirostatTau: number; mirostatEta: number;
  topNSigma: number; ignoreEos: boolean; backendSampling: boolean; timingsPerToken: boolean; samplers: string[]; grammar: string;
  logitBias: Array<[number, number]>; reasoningBudget: number;
}

/** The values of llama-server's common_params that this server reads (names as in TypeScript). */
export interface ServerParamValues {
  model: string; mmproj: string; noMmproj: boolean; mmprojUseGpu: boolean; aliases: string[]; tags: string[];
  /** -hf/-hfr repo[:quant], -hff file, -hft token (or HF_TOKEN), -mu URL, -mmu URL, --offline, -hfd repo[:quant], -md file. */
  hfRepo: string; hfFile: string; hfToken: string; modelUrl: string; mmprojUrl: string; offline: boolean; draftHfRepo: string; draftModel: string;
  hosts: string[]; port: number; reusePort: boolean; apiKeys: string[]; apiPrefix: string;
  nParallel: number; nCtx: number; nBatch: number; nUbatch: number; nPredict: number; nKeep: number;
  threads: number; threadsBatch: number; threadsHttp: number; nGpuLayers: number; flashAttn: number; loadMode: number;
  ctxShift: boolean; kvUnified: boolean; kvUnifiedPerSlot: number; swaFull: boolean; cacheReuse: number; cachePrompt: boolean; cacheRamMib: number; cacheIdleSlots: boolean; special: boolean;
  cacheTypeK: string; cacheTypeV: string; slotSavePath: string; slotPromptSimilarity: number;
  endpointSlots: boolean; endpointProps: boolean; endpointMetrics: boolean;
  corsOrigins: string; corsMethods: string; corsHeaders: string; corsCredentials: boolean;
  timeoutRead: number; timeoutWrite: number; publicPath: string; webui: boolean;
  sslKeyFile: string; sslCertFile: string; ssePingInterval: number; promptsLogDir: string;
  uiMcpProxy: boolean; serverTools: string[]; serverToolsRuntime: string; mcpServersConfig: string; mcpServersJson: string; corsOriginsExplicit: boolean;
  chatTemplate: string; useJinja: boolean; skipChatParsing: boolean; enableChatTemplate: boolean; chatTemplateKwargs: Record<string, string>;
  reasoningFormat: string; enableReasoning: number; prefillAssistant: boolean; sleepIdleSeconds: number;
  mediaPath: string; verbosity: number; logJson: boolean; embedding: boolean; poolingType: number; embdNormalize: number; antiprompt: string[]; spmInfill: boolean;
  loras: Array<{ path: string; scale: number }>; loraInitWithoutApply: boolean;
  modelsDir: string; modelsPreset: string; modelsMax: number; modelsAutoload: boolean;
  sampling: ServerSamplingValues;
}

/** llama-server's command line parsed by llama.cpp's own parser (common/arg.cpp). */
export interface NativeServerParams {
  values(): ServerParamValues;
  /** First names of the options set on the command line or through their environment variables. */
  given(): string[];
  /**
   * Router mode's models (llama-server's load_models): the HF cache's, --models-dir's and
   * --models-preset's, with the command line laid over each; sorted by name. Throws
   * (BAD_ARGUMENTS) when the directory or the preset file cannot be read.
   */
  routerModels(): RouterModelSpec[];
}

/** One model of router mode, as llama.cpp's preset code describes it. */
export interface RouterModelSpec {
  name: string;
  source: 'preset' | 'models_dir' | 'cache';
  /** A cache model a preset with dedup-cache-models serves: left out of GET /models, still usable. */
  hidden: boolean;
  aliases: string[];
  tags: string[];
  /** Seconds a stopping child gets before it is killed (preset stop-timeout, default 10). */
  stopTimeout: number;
  /** Preset load-on-startup. */
  loadOnStartup: boolean;
  /** --sleep-idle-seconds for this model (taken out of args: the router unloads idle models); -1 never. */
  sleepIdleSeconds: number;
  /** The preset in INI form, as GET /models shows it. */
  presetIni: string;
  /** The projector file, "" for none. */
  mmproj: string;
  /** The child's command line (without program, host, port and alias). */
  args: string[];
}
