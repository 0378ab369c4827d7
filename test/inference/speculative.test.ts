// Speculative decoding with llama-server's flags (-md, --spec-type, --spec-draft-*): greedy output
// is the output without speculation (plain, streamed, two slots at once), the acceptance counts
// in `timings` and /metrics agree, and a draft model of another vocabulary is refused at start-up.
import t, { type Test } from 'tap';
import { native } from '../../src/native/binding.js';
import { serverOptions } from '../../src/inference/server-config.js';
import { startInferenceServer } from '../../src/inference/server.js';
import { ensureDraftModels, ensureTemplateModels, ensureTestModels } from '../fixtures/models.js';
import { completionTokens, idsOnly, sameGreedyAnswer } from '../helpers/greedy.js';
import { parseSse, postJson } from '../helpers/inference-server.js';

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

async function streamed(base: string, r: Request): Promise<{ content: string; tokens: number[]; final: any }> {
  const res = await fetch(`${base}/completion`, { method: 'POST', body: JSON.stringify({ ...r, temperature: 0, stream: true }) });
  const events = parseSse(await res.text()) as any[];
  return { content: events.map((e) => e.content).join(''), tokens: events.flatMap((e) => e.tokens ?? []), final: events.at(-1) };
}

/**
 * The answer without speculation, with the top two log-probabilities of each token (n_probs turns
 * speculation off, so only the reference asks for them). Drafts are verified in batches of
 * several rows, which round otherwise than one row: speculative output is compared with it up
 * to where a near tie went (test/helpers/greedy.ts).
 */
async function referenceAnswer(base: string, r: Request): Promise<any> {
  const body = await (await postJson(`${base}/completion`, { ...r, temperature: 0, return_tokens: true, n_probs: 2 })).body;
  return { ...body, greedy: completionTokens(body) };
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
    for (const r of reqs) expected.push(await referenceAnswer(plainBase, r)); // one at a time
    const [a, b, sa, sb] = await Promise.all([complete(base, reqs[0]!), complete(base, reqs[1]!), streamed(base, reqs[0]!), streamed(base, reqs[1]!)]);
    sameGreedyAnswer(t, idsOnly(a.tokens), expected[0].greedy, 'first prompt', 3);
    sameGreedyAnswer(t, idsOnly(b.tokens), expected[1].greedy, 'second prompt', 3);
    sameGreedyAnswer(t, idsOnly(sa.tokens), expected[0].greedy, 'first prompt, streamed', 3);
    sameGreedyAnswer(t, idsOnly(sb.tokens), expected[1].greedy, 'second prompt, streamed', 3);
    t.equal(sa.content, (await postJson(`${base}/detokenize`, { tokens: sa.tokens })).body.content, 'the streamed text is its tokens\'');

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
  const expected = await referenceAnswer(`http://127.0.0.1:${reference.port}`, request);
  const actual = await complete(base, request);
  t.equal(expected.truncated, true, 'the context shifted');
  sameGreedyAnswer(t, idsOnly(actual.tokens), expected.greedy, 'with drafts', 3);
  t.equal(actual.truncated, true);
  t.ok(actual.timings.draft_n > 0);
});

t.test('speculative.* fields of a request are ignored, as by the vendored llama-server (its per-request overrides are compiled out)', async (t) => {
  const base = await start(t, ['-md', drafts.chat, '--spec-type', 'draft-simple']);
  const request = { prompt: 'Hello world, this is', n_predict: 16 };
  const expected = await referenceAnswer(base, request);
  const res = await postJson(`${base}/completion`, { ...request, temperature: 0, return_tokens: true, 'speculative.n_max': 'abc', 'speculative.p_min': 5, 'speculative.n_min': -1 });
  t.equal(res.status, 200);
  sameGreedyAnswer(t, idsOnly(res.body.tokens), expected.greedy, 'with the fields', 3);
});

/**
 * The start of inference-server on llama-server's command line `args`, in this process, as
 * server-main runs it: `refused` when the model load fails, which server-main prints as `line`
 * (`inference-server: <message>`) before it exits 1; else `line` is its "model ready".
 */
async function startOutcome(t: Test, args: string[]): Promise<{ refused: boolean; line: string }> {
  const params = native.ServerParams.parse(['llama-server', '--no-webui', '--port', '0', ...args]);
  const server = await startInferenceServer({ ...serverOptions(params.values(), {}, false), serverParams: params, host: '127.0.0.1', port: 0 });
  t.teardown(() => server.close());
  return server.ready.then(
    () => ({ refused: false, line: 'inference-server: model ready' }),
    (err: unknown) => ({ refused: true, line: `inference-server: ${(err as Error).message}` }),
  );
}

t.test('a draft model with another vocabulary is refused at start-up: exit 1 and why', async (t) => {
  // BERT's WordPiece vocabulary; and the chat vocabulary with other control tokens (another EOS).
  const commandR = (await ensureTemplateModels(['commandR7b'])).commandR7b;
  for (const draft of [models.embedding, commandR]) {
    const out = await startOutcome(t, ['-m', models.chat, '-md', draft, '--spec-type', 'draft-simple']);
    t.equal(out.refused, true, 'the load fails: exit 1');
    t.match(out.line, `inference-server: the draft model '${draft}' cannot draft for this model (it must share the model's vocabulary)`);
    t.notMatch(out.line, /model ready/);
  }
});

t.test('draft-simple without a draft model, and the head-based drafters, are refused at start-up', async (t) => {
  const noDraft = await startOutcome(t, ['-m', models.chat, '--spec-type', 'draft-simple']);
  t.equal(noDraft.refused, true, 'the load fails: exit 1');
  t.match(noDraft.line, 'inference-server: --spec-type draft-simple needs a draft model (-md FNAME)');
  const mtp = await startOutcome(t, ['-m', models.chat, '--spec-type', 'draft-mtp']);
  t.equal(mtp.refused, true, 'the load fails: exit 1');
  t.match(mtp.line, 'inference-server: --spec-type draft-mtp is not supported by this server');
});
