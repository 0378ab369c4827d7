// -sp / --special: generated special tokens keep their text, as llama-server's --special.
import t from 'tap';
import { native } from '../../src/native/binding.js';
import { serverOptions } from '../../src/inference/server-config.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson, startTestServer } from '../helpers/inference-server.js';
import { startLlamaServer } from '../helpers/llama-server.js';

const models = await ensureTestModels();

t.test('with -sp an end-of-generation token is written out; without it, it is not', async (t) => {
  const flags = serverOptions(native.ServerParams.parse(['llama-server', '-m', models.chat, '-sp']).values(), {}, false);
  t.equal(flags.engine!.special, true);
  const special = await startTestServer(models.chat, { parallel: 1, ctxSize: 512, engine: { special: flags.engine!.special! } });
  t.teardown(special.close);
  const plain = await startTestServer(models.chat, { parallel: 1, ctxSize: 512 });
  t.teardown(plain.close);
  const reference = await startLlamaServer(['-m', models.chat, '-c', '512', '-np', '1', '-sp']);
  t.teardown(reference.close);
  const eos = special.server.host.ready().metadata.eogTokens[0]!;
  const body = { prompt: 'Hello', n_predict: 4, temperature: 0, logit_bias: [[eos, 100]] };
  const mine = await postJson(`${special.base}/completion`, body);
  const theirs = await postJson(`${reference.base}/completion`, body);
  const without = await postJson(`${plain.base}/completion`, body);
  t.equal(mine.body.stop_type, 'eos');
  t.not(mine.body.content, '', 'the token\'s text is in the answer');
  t.equal(mine.body.content, theirs.body.content, 'as llama-server writes it');
  t.equal(without.body.content, '', 'without -sp the end token has no text');
});
