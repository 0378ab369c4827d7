// npm run test:llama-suite [-- --target llama-server,ours,ours-lenient] [--files test_basic,...]
//                                 [--jobs 2] [--timeout 180] [--threads 1] [--port-base 18500] [--out .llama-suite] [--no-build]
//                                 [--report-only]
//
// Runs llama.cpp's own server test suite (vendor/llama.cpp/tools/server/tests, pytest) against
// llama-server built from the vendored source and against inference-server, on generated models
// that stand in for the hub models of its presets, and prints the per-file comparison:
//
//   llama-server   build/bin/llama-server
//   ours           inference-server through test/llama-suite/server-shim.mjs, flags unchanged
//   ours-lenient   the same, with the llama-server flags inference-server does not know dropped
//                  (or rewritten to a spelling it knows); the shim logs each start's dropped flags
//
// Both servers fetch from a local mock hub (test/fixtures/mock-hub.ts, as MODEL_ENDPOINT) that serves
// the model test_router downloads, each into its own LLAMA_CACHE (test_router downloads into it and
// deletes from it). Nothing reaches the network.
//
// Each (server, file) pair is one pytest process on its own port, `--jobs` at a time. Results:
// <out>/results.json (every test's outcome per server, failure message, last HTTP exchanges,
// dropped flags, grouped causes) and <out>/report.md; pytest logs in <out>/logs/.
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ensureSuiteModels, type SuiteModels } from '../fixtures/suite-models.js';
import { REPO_ROOT, referenceTool } from '../helpers/reference.js';
import { parseLlamaHelp, parseOurHelp, type FlagTable } from './flags.js';
import {
  droppedFlagCounts, failingDifferently, fileRows, formatCauses, formatTable, groupCauses, type Results, type Target, type TestResult,
} from './report.js';
import { writeSuiteHfCache } from './hf-cache.js';
import { standardRepos, startMockHub, type MockHub } from '../fixtures/mock-hub.js';
import { copySuite, missingPythonModules, preparePythonPath } from './suite-copy.js';

const VENDOR = join(REPO_ROOT, 'vendor', 'llama.cpp');
const SHIM = join(REPO_ROOT, 'test', 'llama-suite', 'server-shim.mjs');
const PYTHON_SOURCES = join(REPO_ROOT, 'test', 'llama-suite', 'python');

/** pytest processes under way; interrupted (SIGINT: pytest stops its servers) when this run is. */
const running = new Set<ChildProcess>();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    for (const child of running) child.kill('SIGINT');
    process.exit(130);
  });
}

/** The files run by default: every file of the suite, the heaviest first, so the pool ends with short runs. */
export const TARGET_FILES = [
  'test_router', 'test_completion', 'test_chat_completion', 'test_mcp_servers', 'test_speculative', 'test_slot_save',
  'test_embedding', 'test_security', 'test_template', 'test_compat_anthropic', 'test_rerank', 'test_metrics', 'test_basic',
  'test_ctx_shift', 'test_vision_api', 'test_lora', 'test_infill', 'test_tokenize', 'test_stream', 'test_ignore_eos',
  'test_sleep', 'test_tools_builtin', 'test_tool_call', 'test_compat_oai_responses', 'test_proxy', 'test_compat_gcp',
  'test_kv_keep_only_active',
] as const;

const ALL_TARGETS: Target[] = ['llama-server', 'ours', 'ours-lenient'];

interface Options {
  targets: Target[];
  files: string[];
  jobs: number;
  timeout: number;
  /** --threads for every server start (both servers): 1 keeps a loaded 2-core machine usable. */
  threads: number;
  /** Job i serves its tests on port portBase + 10 * i. */
  portBase: number;
  out: string;
  build: boolean;
  /** Only rebuild results.json and report.md from the per-file results a previous run left in <out>/runs. */
  reportOnly: boolean;
}

function parseOptions(argv: string[]): Options {
  const opts: Options = { targets: ALL_TARGETS, files: [...TARGET_FILES], jobs: 2, timeout: 180, threads: 1, portBase: 18500, out: join(REPO_ROOT, '.llama-suite'), build: true, reportOnly: false };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    if (arg === '--target') opts.targets = value().split(',') as Target[];
    else if (arg === '--files') opts.files = value().split(',').map((f) => f.replace(/\.py$/, ''));
    else if (arg === '--jobs') opts.jobs = Number(value());
    else if (arg === '--timeout') opts.timeout = Number(value());
    else if (arg === '--threads') opts.threads = Number(value());
    else if (arg === '--port-base') opts.portBase = Number(value());
    else if (arg === '--out') opts.out = resolve(value());
    else if (arg === '--no-build') opts.build = false;
    else if (arg === '--report-only') opts.reportOnly = true;
    else throw new Error(`unknown option ${arg}`);
  }
  for (const t of opts.targets) if (!ALL_TARGETS.includes(t)) throw new Error(`--target: unknown server ${t}`);
  if (!(opts.jobs >= 1)) throw new Error('--jobs must be at least 1');
  return opts;
}

interface Setup {
  llamaServer: string;
  models: SuiteModels;
  flagsFile: string;
  pythonPath: string;
  stubbed: string[];
  /** LLAMA_CACHE per server (each its own, as test_router downloads into and deletes from it): the stand-ins under test_router's hub names. */
  hfCaches: Partial<Record<Target, string>>;
  /** MODEL_ENDPOINT of both servers: the local mock hub, serving the model test_router downloads. */
  hub: MockHub;
}

/** Builds what the run needs (dist/, llama-server, models) and writes the flag table and stubs. */
async function prepare(opts: Options): Promise<Setup> {
  if (opts.build) {
    // As `npm run build`: compile, then make the bins executable again.
    execFileSync(process.execPath, [join(REPO_ROOT, 'node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.json'], { cwd: REPO_ROOT, stdio: 'inherit' });
    execFileSync(process.execPath, [join(REPO_ROOT, 'scripts', 'chmod-bins.mjs')], { cwd: REPO_ROOT, stdio: 'inherit' });
  }
  const llamaServer = await referenceTool('llama-server');
  const models = await ensureSuiteModels();
  mkdirSync(opts.out, { recursive: true });
  const table: FlagTable = {
    llama: parseLlamaHelp(execFileSync(llamaServer, ['--help'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })),
    ours: parseOurHelp(execFileSync(process.execPath, [join(REPO_ROOT, 'dist', 'inference', 'server-main.js'), '--help'], { encoding: 'utf8' })),
  };
  const flagsFile = join(opts.out, 'flags.json');
  writeFileSync(flagsFile, JSON.stringify(table, null, 1));
  const stubbed = missingPythonModules();
  const pythonPath = preparePythonPath(PYTHON_SOURCES, join(opts.out, 'python'), stubbed);
  const hfCaches = Object.fromEntries(opts.targets.map((target) => [target, writeSuiteHfCache(join(opts.out, 'hf-cache', target), models)]));
  const hub = await startMockHub(await standardRepos());
  return { llamaServer, models, flagsFile, pythonPath, stubbed, hfCaches, hub };
}

interface Task {
  target: Target;
  file: string;
}

/** Runs one test file against one server; resolves to its per-test results. */
function runFile(task: Task, slot: number, tests: string, setup: Setup, opts: Options): Promise<Record<string, TestResult>> {
  const dir = join(opts.out, 'runs', task.target);
  const report = join(dir, `${task.file}.json`);
  const shimLog = join(dir, `${task.file}.shim.jsonl`);
  rmSync(report, { force: true });
  rmSync(shimLog, { force: true });
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PYTHONPATH: setup.pythonPath,
    LLAMA_CACHE: setup.hfCaches[task.target]!,
    MODEL_ENDPOINT: setup.hub.url,
    PORT: String(opts.portBase + slot * 10),
    LLAMA_SERVER_BIN_PATH: task.target === 'llama-server' ? setup.llamaServer : SHIM,
    LLAMA_SUITE_MODE: task.target === 'ours-lenient' ? 'lenient' : 'strict',
    LLAMA_SUITE_FLAGS: setup.flagsFile,
    LLAMA_SUITE_SHIM_LOG: shimLog,
    LLAMA_SUITE_REPORT: report,
    LLAMA_SUITE_MODELS: JSON.stringify(setup.models),
    LLAMA_SUITE_URL_MAP: JSON.stringify({
      'moe_shakespeare15M.gguf': setup.models.stories15mMoeLora,
      // test_speculative's draft model
      'stories15M-q4_0.gguf': setup.models.stories15m,
      // test_slot_save's two pictures (hub URLs): two different vendored images
      '91_cat.png': join(VENDOR, 'tools', 'mtmd', 'test-1.jpeg'),
      '11_truck.png': join(VENDOR, 'media', 'llama1-logo.png'),
    }),
    LLAMA_SUITE_TEST_TIMEOUT: String(opts.timeout),
    LLAMA_SUITE_THREADS: String(opts.threads),
  };
  const args = ['-m', 'pytest', `unit/${task.file}.py`, '-p', 'llama_suite_plugin', '-p', 'no:cacheprovider', '-m', 'not slow', '-q', '-rN', '--no-header'];
  const log = join(opts.out, 'logs', `${task.target}.${task.file}.log`);
  return new Promise((resolvePromise, reject) => {
    const fd = openSync(log, 'w');
    const child = spawn('python3', args, { cwd: tests, env, stdio: ['ignore', fd, fd] });
    running.add(child);
    child.on('error', reject);
    child.on('close', () => {
      running.delete(child);
      closeSync(fd);
      if (!existsSync(report)) return reject(new Error(`pytest wrote no report for ${task.target} ${task.file}; see ${log}`));
      resolvePromise(JSON.parse(readFileSync(report, 'utf8')) as Record<string, TestResult>);
    });
  });
}

interface ShimStart {
  test: string | null;
  dropped: string[];
  rewritten: string[];
}

function readShimLog(path: string): ShimStart[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as ShimStart);
}

/** Per-test results of every (server, file) run found in <out>/runs, with the shim's flag lists. */
function collect(opts: Options): { results: Results; seconds: Partial<Record<Target, number>> } {
  const results: Results = {};
  const seconds: Partial<Record<Target, number>> = {};
  for (const target of opts.targets) {
    for (const file of opts.files) {
      const dir = join(opts.out, 'runs', target);
      if (!existsSync(join(dir, `${file}.json`))) continue;
      const byTest = JSON.parse(readFileSync(join(dir, `${file}.json`), 'utf8')) as Record<string, TestResult>;
      for (const start of readShimLog(join(dir, `${file}.shim.jsonl`))) {
        const r = start.test ? byTest[start.test] : undefined;
        if (!r) continue;
        r.dropped = [...new Set([...(r.dropped ?? []), ...start.dropped])];
        r.rewritten = [...new Set([...(r.rewritten ?? []), ...start.rewritten])];
      }
      Object.assign((results[target] ??= {}), byTest);
      const timing = join(dir, `${file}.seconds`);
      if (existsSync(timing)) seconds[target] = (seconds[target] ?? 0) + Number(readFileSync(timing, 'utf8'));
    }
  }
  return { results, seconds };
}

/** Runs every (server, file) pair, `opts.jobs` at a time; each leaves <file>.json and <file>.seconds. */
async function runAll(setup: Setup, opts: Options): Promise<void> {
  const copies = new Map<Target, string>();
  for (const target of opts.targets) {
    mkdirSync(join(opts.out, 'runs', target), { recursive: true });
    copies.set(target, copySuite(VENDOR, join(opts.out, 'suite', target)));
  }
  mkdirSync(join(opts.out, 'logs'), { recursive: true });
  const queue: Task[] = opts.files.flatMap((file) => opts.targets.map((target) => ({ target, file })));
  const worker = async (slot: number): Promise<void> => {
    for (let task = queue.shift(); task; task = queue.shift()) {
      const started = Date.now();
      const byTest = Object.values(await runFile(task, slot, copies.get(task.target)!, setup, opts));
      const took = (Date.now() - started) / 1000;
      writeFileSync(join(opts.out, 'runs', task.target, `${task.file}.seconds`), took.toFixed(1));
      console.error(`[llama-suite] ${task.target.padEnd(12)} ${task.file.padEnd(20)} ${byTest.filter((r) => r.outcome === 'passed').length}/${byTest.length} passed in ${took.toFixed(0)} s`);
    }
  };
  await Promise.all(Array.from({ length: opts.jobs }, (_, slot) => worker(slot)));
}

function summarize(results: Results, seconds: Partial<Record<Target, number>>, stubbed: string[], opts: Options, wall: number): string {
  const rows = fileRows(results, opts.files);
  const out: string[] = [];
  out.push(formatTable(rows, opts.targets), '');
  out.push(`stubbed python modules: ${stubbed.join(', ') || 'none'} (openai clients skip their tests: "stub-skipped")`);
  if (wall > 0) out.push(`time: ${wall.toFixed(0)} s wall with ${opts.jobs} jobs`);
  out.push(`per server (sum of file runs): ${Object.entries(seconds).map(([t, s]) => `${t} ${s!.toFixed(0)} s`).join(', ')}`);
  for (const target of opts.targets.filter((t) => t !== 'llama-server')) {
    const groups = groupCauses(results, target);
    if (groups.length === 0) continue;
    out.push('', `## passing on llama-server, failing on ${target}: ${groups.reduce((s, g) => s + g.tests.length, 0)} tests, by cause`, formatCauses(groups));
  }
  if (opts.targets.includes('ours-lenient')) {
    const both = failingDifferently(results, 'ours-lenient');
    out.push('', `## failing on llama-server (stand-in models) and on ours-lenient, with different messages: ${both.length} tests`);
    for (const b of both) out.push(`- ${b.test}\n    llama-server: ${b.llama}\n    ours-lenient: ${b.ours}`);
  }
  if (opts.targets.includes('ours-lenient')) {
    const starts = opts.files.flatMap((f) => readShimLog(join(opts.out, 'runs', 'ours-lenient', `${f}.shim.jsonl`)));
    const counts = droppedFlagCounts(starts);
    out.push('', `## flags the lenient shim dropped (${counts.length} flags over ${starts.length} server starts)`);
    out.push(counts.map(([flag, n]) => `${flag} (${n})`).join(', '));
  }
  return out.join('\n');
}

async function main(): Promise<void> {
  const opts = parseOptions(process.argv.slice(2));
  const started = Date.now();
  let stubbed = missingPythonModules();
  if (!opts.reportOnly) {
    const setup = await prepare(opts);
    stubbed = setup.stubbed;
    try {
      await runAll(setup, opts);
    } finally {
      await setup.hub.close();
    }
  }
  const wall = opts.reportOnly ? 0 : (Date.now() - started) / 1000;
  const { results, seconds } = collect(opts);
  const text = summarize(results, seconds, stubbed, opts, wall);
  const ours = opts.targets.filter((t) => t !== 'llama-server');
  const causes = Object.fromEntries(ours.map((t) => [t, groupCauses(results, t)]));
  const differently = Object.fromEntries(ours.map((t) => [t, failingDifferently(results, t)]));
  writeFileSync(join(opts.out, 'results.json'), JSON.stringify({
    generatedAt: new Date().toISOString(), wallSeconds: wall, seconds, files: opts.files, stubbed,
    rows: fileRows(results, opts.files), causes, failingDifferently: differently, results,
  }, null, 1));
  writeFileSync(join(opts.out, 'report.md'), `${text}\n`);
  console.log(text);
  console.log(`\nper-test outcomes: ${join(opts.out, 'results.json')}; report: ${join(opts.out, 'report.md')}`);
}

await main();
