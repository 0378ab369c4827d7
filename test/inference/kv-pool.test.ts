// A shared KV pool (--kv-unified) that runs out: the slot holding the most tokens fails with
// llama-server's error, the others finish with every token they asked for.
import t from 'tap';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';

const models = await ensureTestModels();

t.test('4 x 71 tokens in a 256-token pool: one request fails with "Context size has been exceeded.", three get all their tokens', async (t) => {
  const { base, close } = await startTestServer(models.chat, { parallel: 4, ctxSize: 256 });
  t.teardown(close);
  const results = await Promise.all([0, 1, 2, 3].map(() => postJson(`${base}/completion`, { prompt: 'A', n_predict: 70, ignore_eos: true, temperature: 0 })));
  const failed = results.filter((r) => r.status === 500);
  const served = results.filter((r) => r.status === 200);
  t.equal(failed.length + served.length, 4, 'each answer is a 200 or a 500');
  t.equal(failed.length, 1, 'only the largest slot fails');
  for (const f of failed) t.match(f.body, { error: { code: 500, type: 'server_error', message: 'Context size has been exceeded.' } });
  for (const s of served) {
    t.equal(s.body.tokens_predicted, 70, 'a served request gets every token it asked for');
    t.equal(s.body.truncated, false);
  }
  const after = await postJson(`${base}/completion`, { prompt: 'A', n_predict: 8, temperature: 0 });
  t.equal(after.status, 200, 'the server keeps serving');
});
