// inference-server takes llama-server's command line: parsed by llama.cpp's own parser, each
// option served, handed to llama.cpp, ignored as llama-server does, or refused with a reason.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { UsageError } from '../../src/cli/flags.js';
import { native } from '../../src/native/binding.js';
import { LLAMA_SERVER_FLAGS } from '../../src/inference/llama-server-flags.js';
import { logLevel, refusedOptions, refuseUnhonoured, serverOptions, splitCommandLine } from '../../src/inference/server-config.js';
import { startInferenceServer } from '../../src/inference/server.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson } from '../helpers/inference-server.js';
import { startLlamaServer } from '../helpers/llama-server.js';
import { REPO_ROOT } from '../helpers/reference.js';

const models = await ensureTestModels();
const parse = (...argv: string[]) => native.ServerParams.parse(['llama-server', ...argv]);

t.test('every option of the vendored llama-server is classified, and nothing else is', async (t) => {
  const names = native.ServerParams.options().map((o) => o.names[0] ?? o.negatedNames[0]!);
  t.ok(names.length > 200, 'the parser lists llama-server\'s options');
  t.same(names.filter((n) => !(n in LLAMA_SERVER_FLAGS)), [], 'unclassified options');
  t.same(Object.keys(LLAMA_SERVER_FLAGS).filter((n) => !names.includes(n)), [], 'classified names the parser does not have');
});

t.test('given() names each option by its first name, from argv and from LLAMA_ARG_* variables', async (t) => {
  const threads = process.env.LLAMA_ARG_THREADS; // npm test runs every server with one thread
  delete process.env.LLAMA_ARG_THREADS;
  process.env.LLAMA_ARG_N_PREDICT = '7';
  t.teardown(() => {
    delete process.env.LLAMA_ARG_N_PREDICT;
    if (threads !== undefined) process.env.LLAMA_ARG_THREADS = threads;
  });
  const params = parse('--temperature', '0.3', '--ctx-size', '512', '--parallel', '2', '--cont-batching', '--jinja', '-m', 'x.gguf');
  t.same(params.given(), ['--temp', '-c', '-np', '-cb', '--jinja', '-m', '-n']);
  t.equal(params.values().nPredict, 7);
});

t.test('our own flags are taken out before llama-server\'s command line is parsed', async (t) => {
  const { own, llama } = splitCommandLine(['-m', 'x.gguf', '--max-body-bytes', '1000', '--auth-app=demo', '--temp', '0', '--media-allow-remote']);
  t.same(llama, ['-m', 'x.gguf', '--temp', '0']);
  t.same(own, { maxBodyBytes: 1000, authApp: 'demo', mediaAllowRemote: true });
});

t.test('refused options are named with their reason; served and ignored ones are not', async (t) => {
  t.same(refusedOptions(['-m', '-cb', '--temp', '-hf', '-dr', '--spec-draft-model', '--video-fps']), [
    '-dr: models from the Docker registry are not supported: name a Hugging Face repository (-hf) or a URL (-mu)',
    '--video-fps: video input is not supported (images only)',
  ]);
});

t.test('the sampling flags become the defaults of requests, as in llama-server', async (t) => {
  const params = parse('-m', models.chat, '--temp', '0.25', '--top-k', '7', '--top-p', '0.5', '--min-p', '0.1', '--seed', '42',
    '--repeat-penalty', '1.1', '--repeat-last-n', '32', '--presence-penalty', '0.2', '--frequency-penalty', '0.3',
    '--dry-multiplier', '0.5', '--xtc-probability', '0.1', '--mirostat', '2', '--samplers', 'top_k;temperature', '--ignore-eos', '-n', '9', '--adaptive-target', '0.4', '--adaptive-decay', '0.8');
  const options = serverOptions(params.values(), {}, false);
  const s = options.generation!.sampling;
  t.same([s.temperature, s.topK, s.topP, s.minP, s.seed, s.repeatPenalty, s.repeatLastN, s.presencePenalty, s.frequencyPenalty, s.dryMultiplier, s.xtcProbability, s.mirostat, s.ignoreEos],
    [Math.fround(0.25), 7, 0.5, Math.fround(0.1), 42, Math.fround(1.1), 32, Math.fround(0.2), Math.fround(0.3), 0.5, Math.fround(0.1), 2, true]);
  t.same(s.samplers, ['top_k', 'temperature']);
  t.equal(options.nPredict, 9);

  const server = await startInferenceServer({ ...options, host: '127.0.0.1', port: 0, runtime: { ...options.runtime, ctxSize: 1024 } });
  t.teardown(() => server.close());
  await server.ready;
  const base = `http://127.0.0.1:${server.port}`;
  const props = await (await fetch(`${base}/props`)).json();
  const p = props.default_generation_settings.params;
  t.same([p.temperature, p.top_k, p.top_p, p.seed, p.repeat_last_n, p.mirostat, p.ignore_eos, p.n_predict], [Math.fround(0.25), 7, 0.5, 42, 32, 2, true, 9]);
  t.same(p.samplers, ['top_k', 'temperature'], 'the list as given, as llama-server reports it');
  t.same([p.adaptive_target, p.adaptive_decay], [Math.fround(0.4), Math.fround(0.8)]);
  const res = await postJson(`${base}/completion`, { prompt: 'Hello', top_k: 3 });
  t.equal(res.body.generation_settings.top_k, 3, 'a request still overrides a default');
  t.equal(res.body.generation_settings.temperature, Math.fround(0.25));
  t.equal(res.body.tokens_predicted, 9, '-n is the default n_predict');
});

t.test('-np with and without --kv-unified: one shared pool, or n_ctx / np per slot', async (t) => {
  const shared = serverOptions(parse('-m', models.chat, '-c', '1024').values(), {}, false);
  t.same([shared.parallel, shared.engine!.kvUnified], [4, true], 'the default -np is 4 slots on one pool');
  const split = serverOptions(parse('-m', models.chat, '-c', '1024', '-np', '2').values(), {}, false);
  t.same([split.parallel, split.engine!.kvUnified], [2, false]);
  const unified = serverOptions(parse('-m', models.chat, '-c', '1024', '-np', '2', '-kvu').values(), {}, false);
  t.same([unified.parallel, unified.engine!.kvUnified], [2, true]);

  for (const [options, perSlot] of [[split, 512], [unified, 1024]] as const) {
    const server = await startInferenceServer({ ...options, host: '127.0.0.1', port: 0 });
    await server.ready;
    const props = await (await fetch(`http://127.0.0.1:${server.port}/props`)).json();
    t.equal(props.default_generation_settings.n_ctx, perSlot, `n_ctx per slot with kvUnified ${options.engine!.kvUnified}`);
    t.equal(props.total_slots, 2);
    await server.close();
  }
});

t.test('--kv-unified-per-slot: caps each slot, and sizes the pool when -c is not given, as llama-server', async (t) => {
  for (const argv of [['-np', '2', '-kvu', '--kv-unified-per-slot', '256'], ['-c', '1024', '-np', '2', '-kvu', '--kv-unified-per-slot', '300']]) {
    const options = serverOptions(parse('-m', models.chat, ...argv).values(), {}, false);
    const server = await startInferenceServer({ ...options, host: '127.0.0.1', port: 0 });
    t.teardown(() => server.close());
    await server.ready;
    const reference = await startLlamaServer(['-m', models.chat, ...argv]);
    t.teardown(reference.close);
    const base = `http://127.0.0.1:${server.port}`;
    const [mine, theirs] = await Promise.all([base, reference.base].map(async (b) => (await (await fetch(`${b}/props`)).json()).default_generation_settings.n_ctx));
    t.equal(mine, Number(argv.at(-1)), `${argv.join(' ')}: each slot holds at most the cap`);
    t.equal(mine, theirs, 'as llama-server reports it');
    const long = await postJson(`${base}/completion`, { prompt: 'word '.repeat(Number(argv.at(-1)) + 10), n_predict: 1 });
    t.equal(long.status, 400, 'a prompt longer than the cap is refused');
  }
});

t.test('LoRA, alias, API keys, chat template and kwargs from llama-server\'s flags', async (t) => {
  const o = serverOptions(parse('-m', models.chat, '--lora', models.lora, '-a', 'tiny', '--api-key', 'k1,k2', '--chat-template', 'chatml',
    '--chat-template-kwargs', '{"enable_thinking":false}', '--no-mmproj').values(), {}, false);
  t.same(o.loras, [{ path: models.lora, scale: 1 }]);
  t.equal(o.alias, 'tiny');
  t.same(o.apiKeys, ['k1', 'k2']);
  t.equal(o.chatTemplate, 'chatml');
  t.same(o.templateKwargs, { enable_thinking: false, preserve_reasoning: true });
  const noPreserve = serverOptions(parse('-m', models.chat, '--no-reasoning-preserve').values(), {}, false);
  t.same(noPreserve.templateKwargs, { preserve_reasoning: false }, '--no-reasoning-preserve sets the template kwarg, as there');
  const message = serverOptions(parse('-m', models.chat, '--reasoning-budget-message', 'Done thinking.').values(), {}, false);
  t.equal(message.chat!.reasoningBudgetMessage, 'Done thinking.');
  const idle = serverOptions(parse('-m', models.chat, '--lora', models.lora, '--lora-init-without-apply').values(), {}, false);
  t.same(idle.loras, [{ path: models.lora, scale: 0 }]);
});

/** Runs inference-server to its exit (or until `until` matches its stderr, then stops it). */
async function runServer(args: string[], until?: RegExp): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), join(REPO_ROOT, 'src', 'inference', 'server-main.ts'), ...args], { cwd: REPO_ROOT });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d) => { stdout += d; });
  child.stderr.on('data', (d) => {
    stderr += d;
    if (until?.test(stderr)) child.kill('SIGTERM');
  });
  const [code] = await once(child, 'exit');
  return { code: code as number | null, stdout, stderr };
}

t.test('a launcher\'s llama-server command line starts the server', async (t) => {
  const out = await runServer(['-m', models.chat, '--temp', '0.8', '--seed', '42', '--ctx-size', '512', '--parallel', '2', '--cont-batching', '--jinja', '--port', '0', '-ngl', '99', '--no-webui'], /model ready/);
  t.match(out.stderr, /model ready .* n_ctx 512, 2 slots/);
});

/**
 * Asserts that `start` refuses the start-up as server-main's main() does: a UsageError, which it
 * prints on stderr as `inference-server: <message>` before it exits 1 (a spawned server shows that
 * path in log-flags.test.ts, "a refused start is logged as an error line"), with a message matching
 * `message`. One spawned test below shows llama.cpp's own refusal of an option: its message, exit 1.
 */
function refuses(t: Test, start: () => unknown, message: RegExp): void {
  try {
    start();
  } catch (err) {
    t.type(err, UsageError, 'a usage error: exit 1');
    t.match((err as Error).message, message);
    return;
  }
  t.fail(`not refused: ${message}`);
}

t.test('an unknown option fails as llama-server fails: its message, exit 1', async (t) => {
  const out = await runServer(['-m', models.chat, '--bogus']);
  t.equal(out.code, 1);
  t.match(out.stderr, /error: invalid argument: --bogus/);
});

t.test('an option this server cannot honour fails at start-up naming why, exit 1', async (t) => {
  refuses(t, () => refuseUnhonoured(parse('-m', models.chat, '-dr', 'gemma3').given()), /-dr: models from the Docker registry are not supported/);
});

t.test('--prefill-budget and --prefill-budget-ms reach the engine; when absent, the engine default token budget and 1000 ms', async (t) => {
  const values = parse('-m', models.chat).values();
  t.equal(serverOptions(values, splitCommandLine(['--prefill-budget', '64']).own, false).engine!.prefillBudget, 64);
  t.equal(serverOptions(values, splitCommandLine(['--prefill-budget=0']).own, false).engine!.prefillBudget, 0, '0: no budget');
  t.equal(serverOptions(values, {}, false).engine!.prefillBudget, undefined, 'absent: the engine decides (512, or 0 with a GPU device)');
  t.equal(serverOptions(values, splitCommandLine(['--prefill-budget-ms', '250']).own, false).engine!.prefillBudgetMs, 250);
  t.equal(serverOptions(values, splitCommandLine(['--prefill-budget-ms=0']).own, false).engine!.prefillBudgetMs, 0, '0: no time target');
  t.equal(serverOptions(values, {}, false).engine!.prefillBudgetMs, undefined, 'absent: the engine decides (1000 ms)');
  const own = splitCommandLine(['--prefill-budget', '64', '--prefill-budget-ms', '250']).own;
  const server = await startInferenceServer({ ...serverOptions(values, own, false), host: '127.0.0.1', port: 0, runtime: { ...serverOptions(values, {}, false).runtime, ctxSize: 512 } });
  t.teardown(() => server.close());
  const service = await server.ready;
  t.equal(service.engine.native.info().prefillBudget, 64);
  t.equal(service.engine.native.info().prefillBudgetMs, 250);
  const plain = await startInferenceServer({ ...serverOptions(values, {}, false), host: '127.0.0.1', port: 0, runtime: { ...serverOptions(values, {}, false).runtime, ctxSize: 512 } });
  t.teardown(() => plain.close());
  const info = (await plain.ready).engine.native.info();
  t.equal(info.prefillBudget, info.splitSteps ? 512 : 0, `no --prefill-budget: ${info.splitSteps ? '512 (no GPU device)' : '0 (a GPU device)'}`);
});

t.test('--overload-lifo-ms reaches the engine; 1000 ms when absent; a bad value fails at start-up, exit 1', async (t) => {
  const values = parse('-m', models.chat).values();
  t.equal(serverOptions(values, splitCommandLine(['--overload-lifo-ms', '250']).own, false).engine!.overloadLifoMs, 250);
  t.equal(serverOptions(values, splitCommandLine(['--overload-lifo-ms=0']).own, false).engine!.overloadLifoMs, 0, '0: always oldest first');
  t.equal(serverOptions(values, {}, false).engine!.overloadLifoMs, undefined, 'absent: the engine decides (1000 ms)');
  const own = splitCommandLine(['--overload-lifo-ms', '250']).own;
  const server = await startInferenceServer({ ...serverOptions(values, own, false), host: '127.0.0.1', port: 0, runtime: { ...serverOptions(values, {}, false).runtime, ctxSize: 512 } });
  t.teardown(() => server.close());
  const service = await server.ready;
  t.equal(service.engine.native.info().overloadLifoMs, 250);
  refuses(t, () => serverOptions(values, splitCommandLine(['--overload-lifo-ms', '-5']).own, false),
    /--overload-lifo-ms: must be a number of milliseconds from 0 \(always oldest first\) to 3600000, got -5/);
});

t.test('--no-split-steps, --no-early-outputs and --no-prepare-saves turn the step modes off; absent, the engine decides', async (t) => {
  const values = parse('-m', models.chat).values();
  const own = splitCommandLine(['--no-split-steps', '--no-early-outputs', '--no-prepare-saves']).own;
  t.match(serverOptions(values, own, false).engine, { splitSteps: false, earlyOutputs: false, prepareSaves: false });
  const absent = serverOptions(values, {}, false).engine!;
  t.same([absent.splitSteps, absent.earlyOutputs, absent.prepareSaves], [undefined, undefined, undefined]);
  const server = await startInferenceServer({ ...serverOptions(values, own, false), host: '127.0.0.1', port: 0, runtime: { ...serverOptions(values, {}, false).runtime, ctxSize: 512 } });
  t.teardown(() => server.close());
  const info = (await server.ready).engine.native.info();
  t.same([info.splitSteps, info.earlyOutputs, info.prepareSaves], [false, false, false]);
});

t.test('--burst-wait-ms reaches the engine; the engine\'s default when absent; a bad value fails at start-up, exit 1', async (t) => {
  const values = parse('-m', models.chat).values();
  t.equal(serverOptions(values, splitCommandLine(['--burst-wait-ms', '10']).own, false).engine!.burstWaitMs, 10);
  t.equal(serverOptions(values, splitCommandLine(['--burst-wait-ms=0']).own, false).engine!.burstWaitMs, 0, '0: start at once');
  t.equal(serverOptions(values, {}, false).engine!.burstWaitMs, undefined, 'absent: the engine decides (4 ms, 0 with a GPU device)');
  const own = splitCommandLine(['--burst-wait-ms', '10']).own;
  const server = await startInferenceServer({ ...serverOptions(values, own, false), host: '127.0.0.1', port: 0, runtime: { ...serverOptions(values, {}, false).runtime, ctxSize: 512 } });
  t.teardown(() => server.close());
  const service = await server.ready;
  t.equal(service.engine.native.info().burstWaitMs, 10);
  refuses(t, () => serverOptions(values, splitCommandLine(['--burst-wait-ms', '1001']).own, false),
    /--burst-wait-ms: must be a number of milliseconds from 0 \(no wait\) to 1000, got 1001/);
});

t.test('--cache-idle-slots needs a prompt cache: with --cache-ram 0 it is turned off with llama-server\'s warning', async (t) => {
  t.equal(serverOptions(parse('-m', models.chat).values(), {}, false).engine!.cacheIdleSlots, true, 'on by default (--cache-ram 8192)');
  t.equal(serverOptions(parse('-m', models.chat, '--no-cache-idle-slots').values(), {}, false).engine!.cacheIdleSlots, false);
  t.equal(serverOptions(parse('-m', models.chat, '--cache-ram', '0').values(), {}, false).engine!.cacheIdleSlots, false);
  const off = await runServer(['-m', models.chat, '-c', '512', '--port', '0', '--cache-ram', '0'], /model ready/);
  t.match(off.stderr, /--cache-idle-slots requires --cache-ram, disabling/);
  const on = await runServer(['-m', models.chat, '-c', '512', '--port', '0'], /model ready/);
  t.notMatch(on.stderr, /--cache-idle-slots requires/, 'no warning with the default prompt cache');
});

t.test('-sps reaches the engine\'s slot choice; 0.1 when absent, as llama-server', async (t) => {
  for (const [argv, want] of [[['-sps', '0.5'], 0.5], [['--slot-prompt-similarity', '0'], 0], [[], 0.1]] as const) {
    const params = parse('-m', models.chat, '-c', '512', ...argv);
    const server = await startInferenceServer({ ...serverOptions(params.values(), {}, false), serverParams: params, host: '127.0.0.1', port: 0 });
    t.teardown(() => server.close());
    const service = await server.ready;
    t.ok(Math.abs(service.engine.native.info().slotPromptSimilarity - want) < 1e-6, `${argv.join(' ') || 'absent'}: ${want}`);
  }
});

t.test('a bad --prefill-budget or --prefill-budget-ms fails at start-up with a clear message, exit 1', async (t) => {
  const values = parse('-m', models.chat).values();
  // What the server does with its own flags: split them out, then turn them into its options.
  const start = (...own: string[]) => () => serverOptions(values, splitCommandLine(own).own, false);
  refuses(t, start('--prefill-budget', '-1'), /--prefill-budget: must be an integer >= 0 \(0: no budget\), got -1/);
  refuses(t, start('--prefill-budget', 'lots'), /--prefill-budget: expected an integer, got "lots"/);
  refuses(t, start('--prefill-budget-ms', '-5'), /--prefill-budget-ms: must be a number of milliseconds from 0 \(no time target\) to 3600000, got -5/);
  refuses(t, start('--prefill-budget-ms', '3600001'), /--prefill-budget-ms: must be a number of milliseconds from 0 \(no time target\) to 3600000, got 3600001/);
});

t.test('--help prints our options and then llama-server\'s, exit 0', async (t) => {
  const out = await runServer(['--help']);
  t.equal(out.code, 0);
  t.match(out.stdout, /--max-body-bytes/);
  t.match(out.stdout, /--ctx-size/);
});

t.test('-v, -lv N and --log-disable set llama.cpp\'s log level; without them the default stays', async (t) => {
  const level = (...argv: string[]) => {
    const params = parse('-m', 'x.gguf', ...argv);
    return logLevel(params.values(), params.given());
  };
  t.equal(level(), null);
  t.equal(level('-v'), 'debug');
  t.equal(level('-lv', '4'), 'debug');
  t.equal(level('-lv', '3'), 'info');
  t.equal(level('-lv', '2'), 'warn');
  t.equal(level('-lv', '1'), 'error');
  t.equal(level('--log-disable'), 'none');
  t.throws(() => native.setLogLevel('loud' as never), /debug, info, warn, error or none/);
});

t.test('-r, --keep, --no-cache-prompt, --spm-infill, --embd-normalize, -a with several names, --tags', async (t) => {
  const o = serverOptions(parse('-m', models.chat, '-r', 'User:', '--keep', '5', '--no-cache-prompt', '--spm-infill', '--embd-normalize', '1', '-a', 'one,two', '--tags', 'chat,small', '--no-mmproj-offload').values(), {}, false);
  t.same(o.generation!.stop, ['User:']);
  t.equal(o.generation!.nKeep, 5);
  t.equal(o.generation!.cachePrompt, false);
  t.same([o.spmInfill, o.embdNormalize, o.alias, o.aliases, o.tags, o.mmprojUseGpu], [true, 1, 'one', ['one', 'two'], ['chat', 'small'], false]);

  const server = await startInferenceServer({ ...o, host: '127.0.0.1', port: 0, runtime: { ...o.runtime, ctxSize: 512 } });
  t.teardown(() => server.close());
  await server.ready;
  const base = `http://127.0.0.1:${server.port}`;
  const res = await postJson(`${base}/completion`, { prompt: 'Hello', n_predict: 1, stop: ['zz'] });
  t.same(res.body.generation_settings.stop, ['User:', 'zz'], 'the reverse prompt stops every request, with its own stops');
  t.equal(res.body.generation_settings.n_keep, 5);
  const list = await (await fetch(`${base}/v1/models`)).json();
  t.same([list.data[0].id, list.data[0].aliases, list.data[0].tags, list.data[0].meta.n_ctx], ['one', ['one', 'two'], ['chat', 'small'], 512]);
});

t.test('--chat-template NAME with --no-jinja uses llama.cpp\'s built-in template, as llama-server', async (t) => {
  const o = serverOptions(parse('-m', models.chat, '--no-jinja', '--chat-template', 'llama3').values(), {}, false);
  t.equal(o.chat?.useJinja, false);
  const server = await startInferenceServer({ ...o, host: '127.0.0.1', port: 0, runtime: { ...o.runtime, ctxSize: 512 } });
  t.teardown(() => server.close());
  await server.ready;
  const res = await postJson(`http://127.0.0.1:${server.port}/apply-template`, { messages: [{ role: 'system', content: 'Book' }, { role: 'user', content: 'Hi' }] });
  t.equal(res.body.prompt, '<|start_header_id|>system<|end_header_id|>\n\nBook<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n');
});

t.test('context flags reach llama.cpp: a quantized V cache needs flash attention, as in llama-server', async (t) => {
  const start = async (...argv: string[]) => {
    const params = parse('-m', models.chat, '-c', '512', ...argv);
    const o = serverOptions(params.values(), {}, false);
    const server = await startInferenceServer({ ...o, serverParams: params, host: '127.0.0.1', port: 0 });
    t.teardown(() => server.close());
    return server;
  };
  const refused = await start('-ctk', 'q8_0', '-ctv', 'q8_0', '-fa', 'off');
  await t.rejects(refused.ready, /failed to create the inference context: .*quantized V cache requires flash_attn/);
  // (q8_0 blocks do not divide this tiny model's 16-wide heads; f32 is another cache type.)
  const wide = await start('-ctk', 'f32', '-ctv', 'f32');
  await wide.ready;
  const res = await postJson(`http://127.0.0.1:${wide.port}/completion`, { prompt: 'Hello', n_predict: 4, temperature: 0 });
  t.equal(res.status, 200, 'an f32 KV cache serves');
  t.equal(res.body.tokens_predicted, 4);
});
