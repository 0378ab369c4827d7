// --kv-events and its settings on the command line: parsed into the publisher's options, the
// block-key rule and the pod's name; a bad endpoint or a setting without --kv-events is a usage error.
import t from 'tap';
import { kvEventsOption, splitCommandLine } from '../../../src/inference/server-config.js';

const parse = (args: string[], env: Record<string, string> = {}) => kvEventsOption(splitCommandLine(args).own, env);

t.test('off unless asked', async (t) => {
  t.same(parse([]), {});
});

t.test('an endpoint, replay, block size, seed, algorithm and pod', async (t) => {
  const { kvEvents } = parse(['--kv-events', 'tcp://epp:5557', '--kv-events-replay', 'tcp://*:5558', '--kv-events-block-size', '32', '--kv-events-hash-seed', '42', '--kv-events-hash-algo', 'sha256_cbor_64bit', '--kv-events-pod', 'pod-7']);
  t.match(kvEvents, { publisher: { endpoint: 'tcp://epp:5557', replayEndpoint: 'tcp://*:5558', bufferSteps: 10000 }, rule: { blockSize: 32, hashSeed: '42', algo: 'sha256_cbor_64bit' }, pod: 'pod-7' });
});

t.test('defaults: vLLM\'s rule with block size 16 and seed "", the pod from POD_NAME', async (t) => {
  const { kvEvents } = parse(['--kv-events', 'tcp://*:5557'], { POD_NAME: 'inference-server-0' });
  t.same(kvEvents!.rule, { blockSize: 16, hashSeed: '', algo: 'sha256_cbor' });
  t.equal(kvEvents!.pod, 'inference-server-0');
  t.equal(kvEvents!.publisher.replayEndpoint, null);
});

t.test('usage errors', async (t) => {
  t.throws(() => parse(['--kv-events', 'http://epp:5557']), { message: '--kv-events: not a ZMQ endpoint (tcp://HOST:PORT, tcp://*:PORT, ipc://PATH): http://epp:5557' });
  t.throws(() => parse(['--kv-events', 'tcp://*:5557', '--kv-events-replay', 'tcp://nohost']), { message: /^--kv-events-replay: not a ZMQ endpoint/ });
  t.throws(() => parse(['--kv-events-block-size', '32']), { message: '--kv-events-block-size needs --kv-events ENDPOINT' });
  t.throws(() => parse(['--kv-events', 'tcp://*:5557', '--kv-events-block-size', '0']), { message: '--kv-events-block-size: must be 1 to 4096, got 0' });
  t.throws(() => parse(['--kv-events', 'tcp://*:5557', '--kv-events-hash-algo', 'md5']), { message: /md5/ });
});
