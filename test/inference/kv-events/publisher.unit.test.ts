// The KV-event library on its own: block keys by vLLM's and llm-d's rules, the EventBatch bytes,
// and the ZMQ publisher (three frames, sequence numbers, replay, bind or connect) as a router's
// own sockets see it.
import t from 'tap';
import { decode as msgpackDecode, encode as msgpackEncode } from '@msgpack/msgpack';
import { DEFAULT_BLOCK_KEY_RULE, extraKeysFor, rootChain, sequenceBlocks, type BlockKeyRule } from '../../../src/inference/kv-events/block-keys.js';
import { encodeEventBatch, type BlockStored } from '../../../src/inference/kv-events/event-batch.js';
import { endpointMode, isEndpoint } from '../../../src/inference/kv-events/endpoint.js';
import { DEFAULT_PUBLISHER_OPTIONS, eventTopic, KvEventPublisher } from '../../../src/inference/kv-events/zmq-publisher.js';
import { cbor, llmdKeys, vllmKeys } from './reference-keys.js';
import { LlmdIndex } from './llmd-index.js';
import { keys, replay, TestSubscriber, type DecodedBatch } from './subscriber.js';
import { createHash } from 'node:crypto';
import { freePort } from '../../helpers/ports.js';

const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

function stored(rule: BlockKeyRule, tokens: number[], adapter: string | null = null): BlockStored {
  const blocks = sequenceBlocks(rule, tokens, extraKeysFor(adapter));
  return {
    type: 'BlockStored', blockHashes: blocks.map((b) => b.key), parentBlockHash: null, tokenIds: blocks.flatMap((b) => b.tokens),
    blockSize: rule.blockSize, loraId: adapter === null ? null : 1, medium: 'GPU', loraName: adapter,
    extraKeys: blocks.map(() => (adapter === null ? null : [adapter])),
  };
}

t.test('the first block key is sha256 over canonical CBOR of [sha256(cbor(seed)), tokens, null], low 64 bits', async (t) => {
  const tokens = range(1, 16);
  // Written out byte by byte: array(3), bytes(32) root, array(16) of small ints, null.
  const root = createHash('sha256').update(Buffer.from([0x60])).digest(); // cbor('') is 0x60
  const bytes = Buffer.concat([Buffer.from([0x83, 0x58, 0x20]), root, Buffer.from([0x90, ...tokens]), Buffer.from([0xf6])]);
  const expected = createHash('sha256').update(bytes).digest().readBigUInt64BE(24);
  const [block] = sequenceBlocks(DEFAULT_BLOCK_KEY_RULE, tokens, null);
  t.equal(block!.key, expected);
  t.same(rootChain(DEFAULT_BLOCK_KEY_RULE), root);
});

t.test('keys follow vLLM\'s rule over full blocks only, with seed, block size and adapter extra keys', async (t) => {
  const tokens = [...range(100, 40), 70000, 2 ** 31, ...range(5, 30)]; // 72 tokens: ints of 1, 2, 3 and 5 bytes in CBOR
  for (const rule of [DEFAULT_BLOCK_KEY_RULE, { ...DEFAULT_BLOCK_KEY_RULE, blockSize: 8, hashSeed: '42' }]) {
    const blocks = sequenceBlocks(rule, tokens, null);
    t.equal(blocks.length, Math.floor(72 / rule.blockSize), 'a partial last block has no key');
    t.same(blocks.map((b) => b.key), vllmKeys(tokens, rule.blockSize, rule.hashSeed));
    t.same(sequenceBlocks(rule, tokens, ['ada']).map((b) => b.key), vllmKeys(tokens, rule.blockSize, rule.hashSeed, ['ada']));
  }
  const base = sequenceBlocks(DEFAULT_BLOCK_KEY_RULE, tokens, null).map((b) => b.key);
  const seeded = sequenceBlocks({ ...DEFAULT_BLOCK_KEY_RULE, hashSeed: '1' }, tokens, null).map((b) => b.key);
  const adapter = sequenceBlocks(DEFAULT_BLOCK_KEY_RULE, tokens, ['ada']).map((b) => b.key);
  t.ok(base.every((k, i) => k !== seeded[i] && k !== adapter[i]), 'the seed and the adapter change every key');
});

t.test('a sequence continued from its last block chains on as one computed whole', async (t) => {
  const tokens = range(7, 64);
  const whole = sequenceBlocks(DEFAULT_BLOCK_KEY_RULE, tokens, null);
  const head = sequenceBlocks(DEFAULT_BLOCK_KEY_RULE, tokens.slice(0, 32), null);
  const tail = sequenceBlocks(DEFAULT_BLOCK_KEY_RULE, tokens.slice(32), null, head.at(-1)!.chain);
  t.same([...head, ...tail].map((b) => b.key), whole.map((b) => b.key));
});

t.test('the 64-bit rule publishes llm-d\'s own request keys', async (t) => {
  const tokens = range(3, 50);
  const rule: BlockKeyRule = { blockSize: 16, hashSeed: '7', algo: 'sha256_cbor_64bit' };
  t.same(sequenceBlocks(rule, tokens, null).map((b) => b.key), llmdKeys(tokens, 16, '7'));
  t.notSame(sequenceBlocks(DEFAULT_BLOCK_KEY_RULE, tokens, null).map((b) => b.key), llmdKeys(tokens, 16, ''), 'the current rule chains on full digests');
});

t.test('an EventBatch is vLLM\'s array encoding: float64 ts, tagged event arrays, shortest ints, the rank', async (t) => {
  const event: BlockStored = {
    type: 'BlockStored', blockHashes: [5n, 0xffff_ffff_ffff_fff0n], parentBlockHash: 300n, tokenIds: [1, 200, 70000], blockSize: 16,
    loraId: null, medium: 'GPU', loraName: null, extraKeys: [null, null],
  };
  const bytes = Buffer.from(encodeEventBatch(1700000000, [event, { type: 'BlockRemoved', blockHashes: [5n], medium: 'CPU' }, { type: 'AllBlocksCleared' }]));
  const ts = Buffer.alloc(9);
  ts[0] = 0xcb;
  ts.writeDoubleBE(1700000000, 1);
  const expected = Buffer.concat([
    Buffer.from([0x93]), ts, Buffer.from([0x93]),
    Buffer.from([0x99]), Buffer.from(msgpackEncode('BlockStored')), Buffer.from([0x92, 0x05, 0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xf0]),
    Buffer.from([0xcd, 0x01, 0x2c]), Buffer.from([0x93, 0x01, 0xcc, 0xc8, 0xce, 0x00, 0x01, 0x11, 0x70]), Buffer.from([0x10, 0xc0, 0xa3]), Buffer.from('GPU'), Buffer.from([0xc0]),
    Buffer.from([0x92, 0xc0, 0xc0]),
    Buffer.from([0x93]), Buffer.from(msgpackEncode('BlockRemoved')), Buffer.from([0x91, 0x05, 0xa3]), Buffer.from('CPU'),
    Buffer.from([0x91]), Buffer.from(msgpackEncode('AllBlocksCleared')),
    Buffer.from([0x00]),
  ]);
  t.equal(bytes.toString('hex'), expected.toString('hex'));
  t.equal(Buffer.from(encodeEventBatch(1.5, [], 2)).toString('hex'), '93' + 'cb3ff8000000000000' + '90' + '02', 'a data-parallel rank given is the third element');
  // llm-d decodes these arrays into fixed structs whose field count the element count must equal
  // (its msgpack library refuses any other): a batch of 3, a BlockStored of 9, a BlockRemoved of 3.
  const decoded = msgpackDecode(bytes) as unknown[][];
  t.same([decoded.length, ...(decoded[1] as unknown[][]).map((e) => e.length)], [3, 9, 3, 1], 'element counts: batch, BlockStored, BlockRemoved, AllBlocksCleared');
});

t.test('endpoints: bound when they name no host, connected to when they do', async (t) => {
  t.equal(endpointMode('tcp://*:5557'), 'bind');
  t.equal(endpointMode('tcp://0.0.0.0:5557'), 'bind');
  t.equal(endpointMode('tcp://[::]:5557'), 'bind');
  t.equal(endpointMode('ipc:///tmp/kv'), 'bind');
  t.equal(endpointMode('tcp://epp.default.svc:5557'), 'connect');
  t.equal(endpointMode('tcp://127.0.0.1:5557'), 'connect');
  t.ok(isEndpoint('tcp://epp.default.svc:5557'));
  t.notOk(isEndpoint('http://x:1'));
  t.notOk(isEndpoint('tcp://host'));
});

/** Publishes a probe batch until the subscriber has one: the subscription is then live. */
async function untilLive(publisher: KvEventPublisher, sub: TestSubscriber, topic: string): Promise<DecodedBatch> {
  let first: DecodedBatch | null = null;
  const received = sub.next().then((b) => (first = b));
  while (first === null) {
    publisher.publish(topic, [{ type: 'AllBlocksCleared' }]);
    await Promise.race([received, new Promise((resolve) => setTimeout(resolve, 20))]);
  }
  return first;
}

t.test('a subscriber that binds gets three frames per batch from a publisher that connects, and a lost stretch by replay', async (t) => {
  const rule = DEFAULT_BLOCK_KEY_RULE;
  const [subPort, replayPort] = [await freePort(), await freePort()];
  const sub = new TestSubscriber();
  await sub.sub.bind(`tcp://127.0.0.1:${subPort}`);
  const publisher = await KvEventPublisher.open({ ...DEFAULT_PUBLISHER_OPTIONS, endpoint: `tcp://127.0.0.1:${subPort}`, replayEndpoint: `tcp://127.0.0.1:${replayPort}` });
  t.teardown(() => { publisher.close(); sub.close(); });
  const topic = eventTopic('pod-a', 'tiny-chat');
  const first = await untilLive(publisher, sub, topic);
  t.equal(first.topic, 'kv@pod-a@tiny-chat');

  // Probes published before the subscription was live are the lost batches: replay fills them.
  const before = await replay(`tcp://127.0.0.1:${replayPort}`, 0n);
  t.same(before.map((b) => b.seq), Array.from({ length: Number(first.seq) + 1 }, (_, i) => BigInt(i)), 'replay answers every kept batch from 0, in order');
  t.same(before.at(-1)!.payload, first.payload, 'a replayed batch is the published bytes');

  const prompt = range(1000, 40);
  const seq = publisher.publish(topic, [stored(rule, prompt)]);
  const adapterSeq = publisher.publish(eventTopic('pod-a', 'ada'), [stored(rule, prompt, 'ada')]);
  // Skip any probe still in flight.
  let live = await sub.next();
  while (live.seq < seq) live = await sub.next();
  t.equal(live.seq, seq);
  const [tag, hashes, parent, tokenIds, blockSize, loraId, medium, loraName, ...rest] = live.events[0]!;
  t.same([tag, parent, blockSize, loraId, medium, loraName, rest], ['BlockStored', null, 16, null, 'GPU', null, [[null, null]]], 'extra_keys: one nil per block');
  t.same(tokenIds, prompt.slice(0, 32), 'full blocks only');
  t.same(keys(hashes), vllmKeys(prompt, 16, ''));
  const adapter = await sub.next();
  t.equal(adapter.seq, adapterSeq);
  t.equal(adapter.topic, 'kv@pod-a@ada', 'an adapter\'s blocks go under its name');
  t.same(keys(adapter.events[0]![1]), vllmKeys(prompt, 16, '', ['ada']));
  t.same(adapter.events[0]!.slice(5), [1, 'GPU', 'ada', [['ada'], ['ada']]]);

  // llm-d's index maps the engine keys to its request keys recomputed from the tokens.
  const index = new LlmdIndex(16, '');
  for (const b of [live, adapter]) for (const e of b.events) index.apply(e);
  t.same([...index.held].sort(), [...llmdKeys(prompt, 16, ''), ...llmdKeys(prompt, 16, '', ['ada'])].sort());

});

t.test('a publisher that binds serves a subscriber that connects; replay keeps only the last bufferSteps batches', async (t) => {
  const port = await freePort();
  const replayPort = await freePort();
  const publisher = await KvEventPublisher.open({ ...DEFAULT_PUBLISHER_OPTIONS, endpoint: `tcp://*:${port}`, replayEndpoint: `tcp://*:${replayPort}`, bufferSteps: 3 });
  const sub = new TestSubscriber();
  sub.sub.connect(`tcp://127.0.0.1:${port}`);
  t.teardown(() => { publisher.close(); sub.close(); });
  const first = await untilLive(publisher, sub, eventTopic('p', 'm'));
  t.equal(first.topic, 'kv@p@m');
  for (let i = 0; i < 5; i++) publisher.publish(eventTopic('p', 'm'), [{ type: 'AllBlocksCleared' }]);
  await publisher.flush();
  const kept = await replay(`tcp://127.0.0.1:${replayPort}`, 0n);
  const last = first.seq + 5n;
  t.same(kept.map((b) => b.seq), [last - 2n, last - 1n, last]);
  t.same(kept[0]!.events, [['AllBlocksCleared']]);
});

t.test('batches published while no subscriber is there are lost to it, and replay fills the gap', async (t) => {
  const port = await freePort();
  const replayPort = await freePort();
  const publisher = await KvEventPublisher.open({ ...DEFAULT_PUBLISHER_OPTIONS, endpoint: `tcp://*:${port}`, replayEndpoint: `tcp://*:${replayPort}` });
  t.teardown(() => publisher.close());
  const topic = eventTopic('p', 'm');
  const sub = new TestSubscriber();
  sub.sub.connect(`tcp://127.0.0.1:${port}`);
  const seen = await untilLive(publisher, sub, topic);
  sub.close();
  const blocks = sequenceBlocks(DEFAULT_BLOCK_KEY_RULE, range(1, 32), null).map((b) => b.key);
  const missed = publisher.publish(topic, [{ type: 'BlockRemoved', blockHashes: blocks, medium: 'GPU' }]);
  await publisher.flush();
  const again = new TestSubscriber();
  t.teardown(() => again.close());
  again.sub.connect(`tcp://127.0.0.1:${port}`);
  const resumed = await untilLive(publisher, again, topic);
  t.ok(resumed.seq > missed, 'the stream resumes past the gap');
  const filled = await replay(`tcp://127.0.0.1:${replayPort}`, seen.seq + 1n);
  t.same(filled.map((b) => b.seq), Array.from({ length: Number(resumed.seq - seen.seq) }, (_, i) => seen.seq + 1n + BigInt(i)), 'every batch of the gap, in order');
  const gap = filled.find((b) => b.seq === missed)!;
  const [tag, removed, medium] = gap.events[0]!;
  t.same([tag, keys(removed), medium], ['BlockRemoved', blocks, 'GPU']);
});

t.test('an endpoint already bound by another publisher fails open()', async (t) => {
  const port = await freePort();
  const holder = await KvEventPublisher.open({ ...DEFAULT_PUBLISHER_OPTIONS, endpoint: `tcp://*:${port}` });
  t.teardown(() => holder.close());
  await t.rejects(KvEventPublisher.open({ ...DEFAULT_PUBLISHER_OPTIONS, endpoint: `tcp://*:${port}` }), /in use/i);
});

t.test('the reference CBOR writer writes the shortest form', async (t) => {
  t.equal(cbor([23, 24, 256, 65536, 2n ** 32n]).toString('hex'), '85' + '17' + '1818' + '190100' + '1a00010000' + '1b0000000100000000');
});
