// Speculative decoding with llama-server's flags (-md, --spec-type, --spec-draft-*): greedy output
// is the output without speculation (plain, streamed, two slots at once), the acceptance counts
// in `timings` and /metrics agree, and a draft model of another vocabulary is refused at start-up.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { native } from '../../src/native/binding.js';
import { serverOptions } from '../../src/inference/server-config.js';
import { startInferenceServer } from '../../src/inference/server.js';
import { ensureDraftModels, ensureTemplateModels, ensureTestModels } from '../fixtures/models.js';
import { parseSse, postJson } from '../helpers/inference-server.js';
import { REPO_ROOT } from '../helpers/reference.js';

const models = await ensureTestModels();
const drafts = await ensureDraftModels();

/** An inference server on llama-server's command line (`context`, then `argv`), in this process. */
async function start(t: Test, argv: string[], context = ['-c', '2048', '-np', '2']): Promise<string> {
  const params = native.ServerParams.parse(['llama-server', '--no-webui', '-m', models.chat, ...context, '--metrics', ...argv]);
  const server = await startInferenceServer({ ...serverOptions(params.values(), {}, false), serverParams: params, host: '127.0.0.1', port: 0 });
  t.teardown(() => server.close());
  await server.ready;
  return `http://127.0.0.1:${server.port}`;
}

const PROMPTS = ['Hello world, this is', 'The quick brown fox'];
const REPEATED = 'one two three four five six seven eight nine ten '.repeat(8);

interface Request {
  prompt: string;
  n_predict: number;
  grammar?: string;
}

/** The requests each case runs: free text, or (for n-gram drafting, which needs text that repeats) text a grammar repeats. */
function requests(repeat: boolean): Request[] {
  if (!repeat) return PROMPTS.map((prompt) => ({ prompt, n_predict: 48 }));
  const grammar = 'root ::= ("one two three four five six seven eight nine ten ")+';
  return [{ prompt: REPEATED, n_predict: 48, grammar }, { prompt: `Count: ${REPEATED}`, n_predict: 40, grammar }];
}

async function complete(base: string, r: Request): Promise<any> {
  const res = await postJson(`${base}/completion`, { ...r, temperature: 0, return_tokens: true });
  if (res.status !== 200) throw new Error(`status ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body;
}

async function streamed(base: string, r: Request): Promise<{ content: string; final: any }> {
  const res = await fetch(`${base}/completion`, { method: 'POST', body: JSON.stringify({ ...r, temperature: 0, stream: true }) });
  const events = parseSse(await res.text()) as any[];
  return { content: events.map((e) => e.content).join(''), final: events.at(-1) };
}

const CASES = [
  { name: 'a smaller draft model sharing the vocabulary', argv: ['-md', drafts.chat, '--spec-type', 'draft-simple', '--spec-draft-n-max', '6'], repeat: false, allAccepted: false },
  { name: 'the model as its own draft', argv: ['-md', models.chat, '--spec-type', 'draft-simple', '--spec-draft-n-max', '4'], repeat: false, allAccepted: true },
  { name: 'n-gram drafting on a repetitive prompt', argv: ['--spec-type', 'ngram-simple,ngram-map-k,ngram-mod', '--spec-ngram-simple-size-n', '3', '--spec-ngram-simple-size-m', '8', '--spec-ngram-mod-n-match', '4', '--spec-ngram-mod-n-min', '2', '--spec-ngram-mod-n-max', '8'], repeat: true, allAccepted: false },
];

const plain = await (async () => {
  const params = native.ServerParams.parse(['llama-server', '--no-webui', '-m', models.chat, '-c', '2048', '-np', '2']);
  const server = await startInferenceServer({ ...serverOptions(params.values(), {}, false), serverParams: params, host: '127.0.0.1', port: 0 });
  await server.ready;
  return server;
})();
t.teardown(() => plain.close());
const plainBase = `http://127.0.0.1:${plain.port}`;

for (const c of CASES) {
  t.test(`${c.name}: greedy output equals the output without speculation, two slots at once, plain and streamed`, async (t) => {
    const base = await start(t, c.argv);
    const reqs = requests(c.repeat);
    const expected = [];
    for (const r of reqs) expected.push(await complete(plainBase, r)); // one at a time
    const [a, b, sa, sb] = await Promise.all([complete(base, reqs[0]!), complete(base, reqs[1]!), streamed(base, reqs[0]!), streamed(base, reqs[1]!)]);
    t.same(a.tokens, expected[0].tokens);
    t.same(b.tokens, expected[1].tokens);
    t.equal(a.content, expected[0].content);
    t.equal(sa.content, expected[0].content, 'streamed');
    t.equal(sb.content, expected[1].content, 'streamed');

    let drafted = 0;
    let accepted = 0;
    for (const timings of [a.timings, b.timings, sa.final.timings, sb.final.timings]) {
      t.ok(timings.draft_n > 0, 'tokens were drafted');
      t.ok(timings.draft_n_accepted >= 0 && timings.draft_n_accepted <= timings.draft_n, 'accepted <= drafted');
      if (c.allAccepted) t.equal(timings.draft_n_accepted, timings.draft_n, 'its own draft is always accepted');
      drafted += timings.draft_n;
      accepted += timings.draft_n_accepted;
    }
    t.equal(expected[0].timings.draft_n, undefined, 'no draft counts without speculation');
    const metrics = await (await fetch(`${base}/metrics`)).text();
    t.match(metrics, new RegExp(`^llamacpp:spec_decode_num_draft_tokens_total ${drafted}$`, 'm'));
    t.match(metrics, new RegExp(`^llamacpp:spec_decode_num_accepted_tokens_total ${accepted}$`, 'm'));
    t.match(metrics, /^llamacpp:spec_decode_num_drafts_total [1-9]\d*$/m);
    const props = await (await fetch(`${base}/props`)).json();
    t.equal(props.default_generation_settings.speculative, true);
  });
}

t.test('without speculation, timings carry no draft counts and /props says speculative false', async (t) => {
  const body = await complete(plainBase, { prompt: 'Hi', n_predict: 4 });
  t.equal(body.timings.draft_n, undefined);
  t.equal(body.timings.draft_n_accepted, undefined);
  const props = await (await fetch(`${plainBase}/props`)).json();
  t.equal(props.default_generation_settings.speculative, false);
});

t.test('a full context shifts with drafts in flight and gives the output without speculation', async (t) => {
  const argv = ['-c', '256', '-np', '1', '--context-shift'];
  const params = native.ServerParams.parse(['llama-server', '--no-webui', '-m', models.chat, ...argv]);
  const reference = await startInferenceServer({ ...serverOptions(params.values(), {}, false), serverParams: params, host: '127.0.0.1', port: 0 });
  t.teardown(() => reference.close());
  await reference.ready;
  const base = await start(t, ['-md', models.chat, '--spec-type', 'draft-simple'], argv);
  const request = { prompt: 'Hello '.repeat(200), n_predict: 160 };
  const expected = await complete(`http://127.0.0.1:${reference.port}`, request);
  const actual = await complete(base, request);
  t.equal(expected.truncated, true, 'the context shifted');
  t.same(actual.tokens, expected.tokens);
  t.equal(actual.truncated, true);
  t.ok(actual.timings.draft_n > 0);
});

t.test('speculative.* fields of a request are ignored, as by the vendored llama-server (its per-request overrides are compiled out)', async (t) => {
  const base = await start(t, ['-md', drafts.chat, '--spec-type', 'draft-simple']);
  const request = { prompt: 'Hello world, this is', n_predict: 16 };
  const expected = await complete(base, request);
  const res = await postJson(`${base}/completion`, { ...request, temperature: 0, return_tokens: true, 'speculative.n_max': 'abc', 'speculative.p_min': 5, 'speculative.n_min': -1 });
  t.equal(res.status, 200);
  t.same(res.body.tokens, expected.tokens);
});

/** Runs inference-server until it exits. */
async function runServer(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, ['--import', join(REPO_ROOT, 'scripts', 'ts-loader.mjs'), join(REPO_ROOT, 'src', 'inference', 'server-main.ts'), '--no-webui', '--port', '0', ...args], { cwd: REPO_ROOT });
  let stderr = '';
  child.stderr.on('data', (d) => { stderr += d; });
  const [code] = await once(child, 'exit');
  return { code: code as number | null, stderr };
}

t.test('a draft model with another vocabulary is refused at start-up: exit 1 and why', async (t) => {
  // BERT's WordPiece vocabulary; and the chat vocabulary with other control tokens (another EOS).
  const commandR = (await ensureTemplateModels(['commandR7b'])).commandR7b;
  for (const draft of [models.embedding, commandR]) {
    const out = await runServer(['-m', models.chat, '-md', draft, '--spec-type', 'draft-simple']);
    t.equal(out.code, 1);
    t.match(out.stderr, `inference-server: the draft model '${draft}' cannot draft for this model (it must share the model's vocabulary)`);
    t.notMatch(out.stderr, /model ready/);
  }
});

t.test('draft-simple without a draft model, and the head-based drafters, are refused at start-up', async (t) => {
  const noDraft = await runServer(['-m', models.chat, '--spec-type', 'draft-simple']);
  t.equal(noDraft.code, 1);
  t.match(noDraft.stderr, 'inference-server: --spec-type draft-simple needs a draft model (-md FNAME)');
  const mtp = await runServer(['-m', models.chat, '--spec-type', 'draft-mtp']);
  t.equal(mtp.code, 1);
  t.match(mtp.stderr, 'inference-server: --spec-type draft-mtp is not supported by this server');
});
