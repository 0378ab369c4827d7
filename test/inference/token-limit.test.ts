// One token-limit rule on every generating route, llama-server's (params_from_json reads the
// n_predict field, then its aliases in order): n_predict, else max_completion_tokens, else
// max_tokens; null counts as absent; none of them: the server's -n.
import t from 'tap';
import { requestedNPredict } from '../../src/inference/service/generation.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';

t.test('n_predict wins over max_completion_tokens, which wins over max_tokens; null is absent', async (t) => {
  t.equal(requestedNPredict({ n_predict: 2, max_completion_tokens: 3, max_tokens: 5 }), 2);
  t.equal(requestedNPredict({ max_completion_tokens: 3, max_tokens: 5 }), 3);
  t.equal(requestedNPredict({ max_tokens: 5 }), 5);
  t.equal(requestedNPredict({ n_predict: null, max_completion_tokens: null, max_tokens: 5 }), 5);
  t.equal(requestedNPredict({ n_predict: 0, max_tokens: 5 }), 0, 'zero is a limit, not an absence');
  t.equal(requestedNPredict({}), undefined, 'none: the server\'s -n applies');
});

const models = await ensureTestModels();
const server = await startTestServer(models.chat, { ctxSize: 1024, parallel: 1 });
t.teardown(() => server.close());
const limits = { n_predict: 2, max_completion_tokens: 3, max_tokens: 5, ignore_eos: true };
const chat = { messages: [{ role: 'user', content: 'Hi' }] };

t.test('every route generates the tokens the rule gives', async (t) => {
  const completion = await postJson(`${server.base}/completion`, { prompt: 'Hello', ...limits });
  t.equal(completion.body.tokens_predicted, 2, '/completion: n_predict');
  const text = await postJson(`${server.base}/v1/completions`, { prompt: 'Hello', n_predict: 2, max_tokens: 5, ignore_eos: true });
  t.equal(text.body.usage.completion_tokens, 2, '/v1/completions: n_predict over max_tokens');
  const both = await postJson(`${server.base}/v1/chat/completions`, { ...chat, ...limits });
  t.equal(both.body.usage.completion_tokens, 2, '/v1/chat/completions: n_predict over both aliases');
  const aliases = await postJson(`${server.base}/v1/chat/completions`, { ...chat, max_completion_tokens: 3, max_tokens: 5, ignore_eos: true });
  t.equal(aliases.body.usage.completion_tokens, 3, '/v1/chat/completions: max_completion_tokens over max_tokens');
  const responses = await postJson(`${server.base}/v1/responses`, { input: 'Hi', max_output_tokens: 4, ignore_eos: true });
  t.equal(responses.body.usage.output_tokens, 4, '/v1/responses: max_output_tokens (its max_tokens)');
});
