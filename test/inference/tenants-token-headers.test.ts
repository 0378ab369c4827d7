// x-ratelimit-remaining-tokens and x-ratelimit-reset-tokens describe the window after the request:
// an answer counts the tokens it used (its usage), a stream's headers (sent before its tokens)
// count its prompt. A key limited to 150 tokens a minute: 150 - u1 after the first request,
// 150 - u1 - u2 after the second.
import t from 'tap';
import { ensureTestModels } from '../fixtures/models.js';
import { parseSse, postJson, startTestServer } from '../helpers/inference-server.js';

const models = await ensureTestModels();
const server = await startTestServer(models.chat, {
  ctxSize: 1024, parallel: 1, apiKeys: ['sk-one'],
  tenants: { file: { keys: { 'key-1': { limits: { tokensPerMinute: 150 } } } } },
});
t.teardown(() => server.close());
const auth = { authorization: 'Bearer sk-one' };
const chat = (content: string, extra: Record<string, unknown> = {}) => ({ messages: [{ role: 'user', content }], max_tokens: 5, ignore_eos: true, ...extra });

t.test('each answer\'s remaining tokens are the limit less what it and the window\'s earlier requests used', async (t) => {
  const first = await postJson(`${server.base}/v1/chat/completions`, chat('Hi'), auth);
  t.equal(first.status, 200);
  const u1 = first.body.usage.total_tokens as number;
  t.equal(first.headers.get('x-ratelimit-remaining-tokens'), String(150 - u1));
  t.match(first.headers.get('x-ratelimit-reset-tokens'), /^(59\.\d+s|1m0s)$/);
  const second = await postJson(`${server.base}/v1/chat/completions`, chat('Hi again'), auth);
  const u2 = second.body.usage.total_tokens as number;
  t.equal(second.headers.get('x-ratelimit-remaining-tokens'), String(150 - u1 - u2));

  const res = await fetch(`${server.base}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json', ...auth }, body: JSON.stringify(chat('A stream', { stream: true, stream_options: { include_usage: true } })),
  });
  const remaining = res.headers.get('x-ratelimit-remaining-tokens');
  const events = parseSse(await res.text()) as Array<{ usage?: { prompt_tokens: number } | null }>;
  const usage = events.find((e) => e.usage)!.usage!;
  t.equal(remaining, String(150 - u1 - u2 - usage.prompt_tokens), 'a stream\'s headers count its prompt, not its completion');
});
