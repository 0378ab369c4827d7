#!/usr/bin/env node
// inference-cli: one prompt, streamed to stdout; a timing summary on stderr.
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { isNativeError, native, type ChatMessageText, type CompletionTaskSpec, type NativeModel, type NativeVision, type SamplingParams } from '../native/binding.js';
import { InferenceEngine } from './engine/engine.js';
import { LLAMA_SERVER_DEFAULTS } from './service/generation.js';

const DEFAULT_SAMPLING = LLAMA_SERVER_DEFAULTS.sampling;
import { parseFlags, usage, UsageError, type FlagSpec } from '../cli/flags.js';
import { contextSize, MODEL_FLAGS, resolveRuntime } from './options.js';
import { checkRpcEndpoints } from './rpc-servers.js';

const CLI_FLAGS = [
  ...MODEL_FLAGS,
  { names: ['-p', '--prompt'], kind: 'string', key: 'prompt', help: 'the prompt' },
  { names: ['-n', '--n-predict'], kind: 'int', key: 'nPredict', help: 'tokens to generate (default -1 = until end of generation or full context)' },
  { names: ['--temp', '--temperature'], kind: 'float', key: 'temp', help: `sampling temperature (default ${DEFAULT_SAMPLING.temperature}; 0 = greedy)` },
  { names: ['--seed', '-s'], kind: 'int', key: 'seed', help: 'random seed (default -1 = random)' },
  { names: ['--top-k'], kind: 'int', key: 'topK', help: `top-k (default ${DEFAULT_SAMPLING.topK})` },
  { names: ['--top-p'], kind: 'float', key: 'topP', help: `top-p (default ${DEFAULT_SAMPLING.topP})` },
  { names: ['--min-p'], kind: 'float', key: 'minP', help: `min-p (default ${DEFAULT_SAMPLING.minP})` },
  { names: ['--repeat-penalty'], kind: 'float', key: 'repeatPenalty', help: 'repeat penalty (default 1.0 = off)' },
  { names: ['-mm', '--mmproj'], kind: 'string', key: 'mmproj', help: 'multimodal projector file (images, audio)' },
  { names: ['--rpc'], kind: 'string', key: 'rpc', help: 'rpc-servers to offload layers to (host:port,...; with -ngl), as llama.cpp\'s --rpc', env: 'LLAMA_ARG_RPC' },
  { names: ['--image', '--audio'], kind: 'list', key: 'image', help: 'image or audio file(s) for the prompt (with -mm), as llama.cpp\'s mtmd-cli; the prompt goes through the chat template' },
  { names: ['-i', '--interactive'], kind: 'bool', key: 'interactive', help: 'chat loop on stdin/stdout with the model\'s chat template (/exit or end of input quits)' },
  { names: ['-h', '--help'], kind: 'bool', key: 'help', help: 'show this help' },
] as const satisfies readonly FlagSpec[];

function progressBar(progress: number): void {
  const width = 30;
  const done = Math.round(progress * width);
  process.stderr.write(`\rloading model [${'#'.repeat(done)}${'.'.repeat(width - done)}] ${(progress * 100).toFixed(0).padStart(3)}%`);
}

type Flags = ReturnType<typeof parseCliFlags>;
const parseCliFlags = (argv: readonly string[]) => parseFlags(argv, CLI_FLAGS);

/** What one run holds: the model, its projector and an engine of one slot over them. */
interface Loaded {
  model: NativeModel;
  vision: NativeVision | undefined;
  engine: InferenceEngine;
}

async function load(flags: Flags): Promise<Loaded> {
  if (flags.rpc !== undefined) {
    await checkRpcEndpoints(flags.rpc);
    native.addRpcServers(flags.rpc);
  }
  const runtime = resolveRuntime(flags, native.systemInfo().supportsGpuOffload);
  const showProgress = process.stderr.isTTY === true;
  const handle = native.Model.load(runtime.model, { nGpuLayers: runtime.nGpuLayers, useMmap: runtime.useMmap }, showProgress ? progressBar : undefined);
  const onSignal = (): void => handle.cancel();
  process.once('SIGINT', onSignal);
  const model = await handle.promise;
  process.off('SIGINT', onSignal);
  if (showProgress) process.stderr.write('\n');
  let vision: NativeVision | undefined;
  if (flags.mmproj !== undefined) vision = await native.Vision.load(model, flags.mmproj, { nThreads: runtime.threads, useGpu: runtime.nGpuLayers !== 0 });
  const engine = await InferenceEngine.create(model, {
    ...(vision ? { vision } : {}),
    nCtx: contextSize(runtime.ctxSize, model.metadata().nCtxTrain),
    nParallel: 1,
    nBatch: runtime.batchSize,
    nUbatch: runtime.ubatchSize,
    nThreads: runtime.threads,
    nThreadsBatch: runtime.threadsBatch,
    flashAttn: runtime.flashAttn,
  });
  return { model, vision, engine };
}

function samplingOf(flags: Flags): SamplingParams {
  return {
    temperature: flags.temp ?? DEFAULT_SAMPLING.temperature,
    seed: flags.seed ?? -1,
    topK: flags.topK ?? DEFAULT_SAMPLING.topK,
    topP: flags.topP ?? DEFAULT_SAMPLING.topP,
    minP: flags.minP ?? DEFAULT_SAMPLING.minP,
    repeatPenalty: flags.repeatPenalty ?? 1,
    samplers: DEFAULT_SAMPLING.samplers,
  };
}

type Task = Pick<CompletionTaskSpec, 'prompt' | 'promptText' | 'media'>;

/** Generates for one prompt, streaming to stdout; the text, or null when Ctrl-C stopped it. */
async function generate(loaded: Loaded, task: Task, nPredict: number, sampling: SamplingParams): Promise<string | null> {
  const nCtx = loaded.engine.native.info().nCtxSlot;
  if (!task.media && task.prompt.length >= nCtx) throw new UsageError(`the prompt has ${task.prompt.length} tokens, more than the context of ${nCtx} (-c)`);
  const abort = new AbortController();
  const onSigint = (): void => abort.abort();
  process.once('SIGINT', onSigint);
  try {
    const outcome = await loaded.engine.run({ ...task, nPredict, sampling }, { signal: abort.signal, onToken: (t) => { if (t.text) process.stdout.write(t.text); } });
    process.stdout.write('\n');
    const promptN = outcome.nPrompt - outcome.nCached;
    const pps = outcome.tPromptMs > 0 ? (1000 * promptN) / outcome.tPromptMs : 0;
    const gps = outcome.tPredictMs > 0 ? (1000 * outcome.nPredicted) / outcome.tPredictMs : 0;
    process.stderr.write(`prompt: ${promptN} tokens, ${pps.toFixed(1)} tokens/s | generation: ${outcome.nPredicted} tokens, ${gps.toFixed(1)} tokens/s | stop: ${outcome.stop}\n`);
    return outcome.content;
  } catch (err) {
    if (abort.signal.aborted) {
      process.stdout.write('\n');
      return null;
    }
    if (isNativeError(err) && (err.code === 'BAD_MEDIA' || err.code === 'NOT_SUPPORTED' || err.code === 'EXCEEDS_CONTEXT')) throw new UsageError(err.message);
    throw err;
  } finally {
    process.off('SIGINT', onSigint);
  }
}

/** The chat template applied to `messages`; with images, the user turn starts with their markers. */
function chatTask(model: NativeModel, messages: ChatMessageText[], media: Uint8Array[]): Task {
  const promptText = model.applyChatTemplate(messages, { addGenerationPrompt: true });
  return media.length > 0 ? { prompt: new Int32Array(0), promptText, media } : { prompt: model.tokenize(promptText, true, true) };
}

function imageMarkers(vision: NativeVision | undefined, images: readonly Uint8Array[]): string {
  return images.length > 0 && vision ? images.map(() => vision.marker).join('\n') + '\n' : '';
}

/** The chat loop of --interactive: the history goes through the chat template each turn. */
async function chatLoop(loaded: Loaded, firstPrompt: string | undefined, images: Uint8Array[], nPredict: number, sampling: SamplingParams): Promise<void> {
  const history: ChatMessageText[] = [];
  const rl = createInterface({ input: process.stdin, terminal: false });
  let pendingImages = images;
  if (process.stdin.isTTY) process.stderr.write('interactive chat: type a message, /exit or end of input to quit\n> ');
  const lines = (async function* () {
    if (firstPrompt !== undefined) yield firstPrompt;
    for await (const line of rl) yield line;
  })();
  for await (const line of lines) {
    if (line.trim() === '/exit') break;
    if (line.trim() === '') continue;
    history.push({ role: 'user', content: imageMarkers(loaded.vision, pendingImages) + line });
    const reply = await generate(loaded, chatTask(loaded.model, history, pendingImages), nPredict < 0 ? 512 : nPredict, sampling);
    pendingImages = [];
    history.push({ role: 'assistant', content: reply ?? '' });
    if (process.stdin.isTTY) process.stderr.write('> ');
  }
  rl.close();
}

function readImages(paths: readonly string[]): Uint8Array[] {
  return paths.map((path) => {
    try {
      return readFileSync(path);
    } catch {
      throw new UsageError(`--image: cannot read ${path}`);
    }
  });
}

async function main(): Promise<number> {
  const flags = parseCliFlags(process.argv.slice(2));
  if (flags.help) {
    console.log(usage('inference-cli', 'Runs one prompt through a GGUF model and streams the generated text to stdout.', CLI_FLAGS));
    return 0;
  }
  const images = flags.image ?? [];
  if (flags.prompt === undefined && !flags.interactive) throw new UsageError('-p <prompt> is required (or --interactive)');
  if (images.length > 0 && flags.mmproj === undefined) throw new UsageError('--image needs a multimodal projector: -mm <mmproj.gguf>');
  const imageBytes = readImages(images);
  const loaded = await load(flags);
  const sampling = samplingOf(flags);
  const nPredict = flags.nPredict ?? -1;
  try {
    if (flags.interactive) {
      await chatLoop(loaded, flags.prompt, imageBytes, nPredict, sampling);
    } else if (imageBytes.length > 0) {
      const content = imageMarkers(loaded.vision, imageBytes) + flags.prompt!;
      await generate(loaded, chatTask(loaded.model, [{ role: 'user', content }], imageBytes), nPredict, sampling);
    } else {
      await generate(loaded, { prompt: loaded.model.tokenize(flags.prompt!, true, true) }, nPredict, sampling);
    }
  } finally {
    await loaded.engine.dispose();
    loaded.vision?.dispose();
    loaded.model.dispose();
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`inference-cli: ${(err as Error).message}`);
    process.exit(err instanceof UsageError ? 2 : 1);
  },
);
