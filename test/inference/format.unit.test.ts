import t from 'tap';
import { logprob, tokenText } from '../../src/inference/dialects/timings.js';

t.test('logprob: log(p), and llama-server\'s lowest float for p = 0 (JSON has no -Infinity)', async (t) => {
  t.equal(logprob(1), 0);
  t.equal(logprob(0.5), Math.log(0.5));
  t.equal(logprob(0), -3.4028234663852886e38);
  t.equal(JSON.stringify({ logprob: logprob(0) }), '{"logprob":-3.4028234663852886e+38}', 'not null');
});

t.test('tokenText drops a multi-byte character cut off at the end, keeps complete ones', async (t) => {
  t.equal(tokenText(new Uint8Array([0x61, 0xe5, 0xaa])), 'a', 'half of a 3-byte character');
  t.equal(tokenText(new Uint8Array(Buffer.from('aé'))), 'aé');
  t.equal(tokenText(new Uint8Array([0xe5, 0xaa])), '');
});
