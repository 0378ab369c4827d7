// The pieces of `npm run test:llama-suite` that decide what the report says: the flag tables read
// from --help, the lenient shim's rewriting, and the classification of failures.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { REPO_ROOT } from '../helpers/reference.js';
import { parseLlamaHelp, parseOurHelp, type FlagTable } from './flags.js';
import { classify, groupCauses, type TestResult } from './report.js';

const LLAMA_HELP = [
  '----- common params -----',
  '',
  '-c,    --ctx-size N                     size of the prompt context (default: 0, 0 = loaded from model)',
  '                                        (env: LLAMA_ARG_CTX_SIZE)',
  '--context-shift, --no-context-shift     whether to use context shift on infinite text generation (default:',
  '-bs,   --backend-sampling               enable backend sampling (experimental) (default: disabled)',
  '--temp, --temperature N                 temperature (default: 0.80)',
  '-fa,   --flash-attn [on|off|auto]       set Flash Attention use',
].join('\n');

const OUR_HELP = [
  'usage: inference-server [options]',
  '',
  'options:',
  '  -c, --ctx-size <int>               context size in tokens',
  '  --context-shift                    when a slot\'s context is full, drop old tokens',
  '  -h, --help                         show this help',
].join('\n');

t.test('llama-server --help: spellings, values, and no aliasing across --x / --no-x', async (t) => {
  const table = parseLlamaHelp(LLAMA_HELP);
  t.same(table['-c'], { takesValue: true, aliases: ['--ctx-size'] });
  t.same(table['--ctx-size'], { takesValue: true, aliases: ['-c'] });
  t.same(table['--context-shift'], { takesValue: false, aliases: [] });
  t.same(table['--no-context-shift'], { takesValue: false, aliases: [] });
  t.same(table['-bs'], { takesValue: false, aliases: ['--backend-sampling'] });
  t.same(table['--temperature'], { takesValue: true, aliases: ['--temp'] });
  t.same(table['-fa'], { takesValue: true, aliases: ['--flash-attn'] });
  t.equal(table['-----'], undefined);
});

t.test('inference-server --help: each spelling and whether it takes a value', async (t) => {
  t.same(parseOurHelp(OUR_HELP), {
    '-c': { takesValue: true }, '--ctx-size': { takesValue: true }, '--context-shift': { takesValue: false },
    '-h': { takesValue: false }, '--help': { takesValue: false },
  });
});

t.test('the lenient shim drops unknown llama-server flags with their values and logs them', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'llama-suite-shim-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const table: FlagTable = { llama: parseLlamaHelp(LLAMA_HELP), ours: parseOurHelp(OUR_HELP) };
  writeFileSync(join(dir, 'flags.json'), JSON.stringify(table));
  const log = join(dir, 'shim.jsonl');
  const out = execFileSync(process.execPath, [join(REPO_ROOT, 'test', 'llama-suite', 'server-shim.mjs'),
    '--temp', '0.8', '-c', '512', '--no-context-shift', '--backend_sampling', '--help'], {
    encoding: 'utf8',
    env: { ...process.env, LLAMA_SUITE_MODE: 'lenient', LLAMA_SUITE_FLAGS: join(dir, 'flags.json'), LLAMA_SUITE_SHIM_LOG: log, LLAMA_SUITE_TEST_ID: 'unit/x.py::y' },
  });
  t.match(out, /^usage: inference-server/);
  const [start] = readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l));
  t.same(start, {
    test: 'unit/x.py::y', mode: 'lenient',
    argv: ['--temp', '0.8', '-c', '512', '--no-context-shift', '--backend_sampling', '--help'],
    passed: ['-c', '512', '--help'],
    rewritten: [],
    dropped: ['--temp 0.8', '--no-context-shift', '--backend_sampling'],
  });
});

function failed(fields: Partial<TestResult>): TestResult {
  return { outcome: 'failed', duration: 0, ...fields };
}

t.test('failures are classified by what the server did', async (t) => {
  t.same(classify(failed({ message: 'RuntimeError: Server process died with return code 2', server: ['inference-server: unknown option: --temp (see --help)'] })).cause,
    'unknown flag --temp');
  t.same(classify(failed({ message: 'assert 404 == 200', exchanges: [{ method: 'POST', path: '/slots/1?action=save', sent: '{}', status: 404, answer: '{}' }] })).cause,
    'missing route POST /slots/{id}');
  t.same(classify(failed({ message: 'assert 400 == 200', exchanges: [{ method: 'POST', path: '/embeddings', sent: '{}', status: 400, answer: '{}' }] })).cause,
    'different status on POST /embeddings: expected 200, got 400');
  t.same(classify(failed({ message: "KeyError: 'aliases'", exchanges: [{ method: 'GET', path: '/models', sent: null, status: 200, answer: '{}' }] })).cause,
    "missing field 'aliases' in the answer to GET /models");
});

t.test('only tests passing on llama-server count as regressions', async (t) => {
  const ok: TestResult = { outcome: 'passed', duration: 0 };
  const died = failed({ message: 'RuntimeError: Server process died with return code 2', server: ['inference-server: unknown option: --temp'] });
  const groups = groupCauses({ 'llama-server': { a: ok, b: failed({ message: 'assert 8 == 18' }) }, ours: { a: died, b: died } }, 'ours');
  t.same(groups.map((g) => [g.cause, g.tests]), [['unknown flag --temp', ['a']]]);
});
