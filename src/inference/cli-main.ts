#!/usr/bin/env node
// inference-cli: one prompt, streamed to stdout; a timing summary on stderr.
import { native } from '../native/binding.js';
import { InferenceEngine } from './engine.js';
import { DEFAULT_SAMPLING, DEFAULT_SAMPLERS } from './generation.js';
import { contextSize, MODEL_FLAGS, parseFlags, resolveRuntime, usage, UsageError, type FlagSpec } from './options.js';

const CLI_FLAGS: FlagSpec[] = [
  ...MODEL_FLAGS,
  { names: ['-p', '--prompt'], kind: 'string', key: 'prompt', help: 'the prompt' },
  { names: ['-n', '--n-predict'], kind: 'int', key: 'nPredict', help: 'tokens to generate (default -1 = until end of generation or full context)' },
  { names: ['--temp', '--temperature'], kind: 'float', key: 'temp', help: `sampling temperature (default ${DEFAULT_SAMPLING.temperature}; 0 = greedy)` },
  { names: ['--seed', '-s'], kind: 'int', key: 'seed', help: 'random seed (default -1 = random)' },
  { names: ['--top-k'], kind: 'int', key: 'topK', help: `top-k (default ${DEFAULT_SAMPLING.top_k})` },
  { names: ['--top-p'], kind: 'float', key: 'topP', help: `top-p (default ${DEFAULT_SAMPLING.top_p})` },
  { names: ['--min-p'], kind: 'float', key: 'minP', help: `min-p (default ${DEFAULT_SAMPLING.min_p})` },
  { names: ['--repeat-penalty'], kind: 'float', key: 'repeatPenalty', help: 'repeat penalty (default 1.0 = off)' },
  { names: ['-mm', '--mmproj'], kind: 'string', key: 'mmproj', help: 'multimodal projector file', unsupported: 'not supported yet in this version' },
  { names: ['--image'], kind: 'string', key: 'image', help: 'image file for a vision model (with -mm)', unsupported: 'not supported yet in this version' },
  { names: ['-i', '--interactive'], kind: 'bool', key: 'interactive', help: 'chat loop on stdin/stdout', unsupported: 'not supported yet in this version' },
  { names: ['-h', '--help'], kind: 'bool', key: 'help', help: 'show this help' },
];

function progressBar(progress: number): void {
  const width = 30;
  const done = Math.round(progress * width);
  process.stderr.write(`\rloading model [${'#'.repeat(done)}${'.'.repeat(width - done)}] ${(progress * 100).toFixed(0).padStart(3)}%`);
}

async function main(): Promise<number> {
  const flags = parseFlags(process.argv.slice(2), CLI_FLAGS);
  if (flags.help) {
    console.log(usage('inference-cli', 'Runs one prompt through a GGUF model and streams the generated text to stdout.', CLI_FLAGS));
    return 0;
  }
  const runtime = resolveRuntime(flags, native.systemInfo().supportsGpuOffload);
  if (typeof flags.prompt !== 'string') throw new UsageError('-p <prompt> is required');
  const showProgress = process.stderr.isTTY === true;
  const handle = native.Model.load(runtime.model, { nGpuLayers: runtime.nGpuLayers, useMmap: runtime.useMmap }, showProgress ? progressBar : undefined);
  const onSignal = (): void => handle.cancel();
  process.once('SIGINT', onSignal);
  const model = await handle.promise;
  process.off('SIGINT', onSignal);
  if (showProgress) process.stderr.write('\n');
  const metadata = model.metadata();
  const engine = await InferenceEngine.create(model, {
    nCtx: contextSize(runtime.ctxSize, metadata.nCtxTrain),
    nParallel: 1,
    nBatch: runtime.batchSize,
    nUbatch: runtime.ubatchSize,
    nThreads: runtime.threads,
    nThreadsBatch: runtime.threadsBatch,
    flashAttn: runtime.flashAttn,
  });
  try {
    const prompt = model.tokenize(flags.prompt, true, true);
    const nCtx = engine.native.info().nCtxSlot;
    if (prompt.length >= nCtx) throw new UsageError(`the prompt has ${prompt.length} tokens, more than the context of ${nCtx} (-c)`);
    const abort = new AbortController();
    process.once('SIGINT', () => abort.abort());
    const outcome = await engine.run({
      prompt,
      nPredict: (flags.nPredict as number | undefined) ?? -1,
      sampling: {
        temperature: (flags.temp as number | undefined) ?? DEFAULT_SAMPLING.temperature,
        seed: (flags.seed as number | undefined) ?? -1,
        topK: (flags.topK as number | undefined) ?? DEFAULT_SAMPLING.top_k,
        topP: (flags.topP as number | undefined) ?? DEFAULT_SAMPLING.top_p,
        minP: (flags.minP as number | undefined) ?? DEFAULT_SAMPLING.min_p,
        repeatPenalty: (flags.repeatPenalty as number | undefined) ?? 1,
        samplers: ['penalties', ...DEFAULT_SAMPLERS],
      },
    }, { signal: abort.signal, onToken: (t) => { if (t.text) process.stdout.write(t.text); } }).catch((err) => {
      if (abort.signal.aborted) return null;
      throw err;
    });
    process.stdout.write('\n');
    if (outcome) {
      const promptN = outcome.nPrompt - outcome.nCached;
      const pps = outcome.tPromptMs > 0 ? (1000 * promptN) / outcome.tPromptMs : 0;
      const gps = outcome.tPredictMs > 0 ? (1000 * outcome.nPredicted) / outcome.tPredictMs : 0;
      process.stderr.write(`prompt: ${promptN} tokens, ${pps.toFixed(1)} tokens/s | generation: ${outcome.nPredicted} tokens, ${gps.toFixed(1)} tokens/s | stop: ${outcome.stop}\n`);
    }
  } finally {
    await engine.dispose();
    model.dispose();
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
