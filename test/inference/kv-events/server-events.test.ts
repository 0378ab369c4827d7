// The server's KV-cache events (--kv-events) as a router reads them: a SUB socket that binds (as
// llm-d's subscriber does; the server connects), batches decoded with msgpack, every stored block's
// key recomputed from its token ids by vLLM's rule and mapped by llm-d's, and the blocks held
// checked against the slots: stored as prompts fill the slots, under the adapter's name for an
// adapter's blocks, removed when a slot's cells are erased, a batch missed by the subscriber
// filled by replay, and a restart announced by AllBlocksCleared.
import t from 'tap';
import { ensureTestModels } from '../../fixtures/models.js';
import { postJson, startTestServer, type TestServer } from '../../helpers/inference-server.js';
import { DEFAULT_BLOCK_KEY_RULE } from '../../../src/inference/kv-events/block-keys.js';
import { DEFAULT_PUBLISHER_OPTIONS } from '../../../src/inference/kv-events/publisher-options.js';
import { LlmdIndex } from './llmd-index.js';
import { vllmKeys } from './reference-keys.js';
import { keys, replay, TestSubscriber, type DecodedBatch } from './subscriber.js';
import { freePort } from '../../helpers/ports.js';

const models = await ensureTestModels();
const [subPort, replayPort] = [await freePort(), await freePort()];
const sub = new TestSubscriber();
await sub.sub.bind(`tcp://127.0.0.1:${subPort}`);
t.teardown(() => sub.close());
const ADAPTER = 'tiny-chat-lora';

async function start(): Promise<TestServer> {
  return startTestServer(models.chat, {
    parallel: 2, ctxSize: 1024, loras: [{ path: models.lora, scale: 0 }],
    kvEvents: {
      publisher: { ...DEFAULT_PUBLISHER_OPTIONS, endpoint: `tcp://127.0.0.1:${subPort}`, replayEndpoint: `tcp://127.0.0.1:${replayPort}` },
      rule: DEFAULT_BLOCK_KEY_RULE, pod: 'pod-a', pollMs: 10,
    },
  });
}

const range = (from: number, n: number): number[] => Array.from({ length: n }, (_, i) => from + i);

/** Replays the server's whole stream and applies it: the blocks held per model, and llm-d's index. */
async function heldNow(): Promise<{ batches: DecodedBatch[]; held: Map<bigint, string>; inHostMemory: Set<bigint>; index: LlmdIndex }> {
  const batches = await replay(`tcp://127.0.0.1:${replayPort}`, 0n);
  const held = new Map<bigint, string>();
  const inHostMemory = new Set<bigint>();
  const index = new LlmdIndex(16, '');
  for (const b of batches) {
    for (const e of b.events) {
      index.apply(e);
      if (e[0] === 'AllBlocksCleared') {
        held.clear();
        inHostMemory.clear();
      }
      // `held`: the slots' blocks (medium GPU); the host-memory cache's (medium CPU) apart, since
      // the same key may be held in both (the disk tier's, STORAGE: tier-events.test.ts).
      if (e[0] === 'BlockRemoved' && e[2] === 'GPU') for (const k of keys(e[1])) held.delete(k);
      if (e[0] === 'BlockStored' && e[6] === 'GPU') for (const k of keys(e[1])) held.set(k, (e[7] as string | null) ?? 'base');
      if (e[0] === 'BlockRemoved' && e[2] === 'CPU') for (const k of keys(e[1])) inHostMemory.delete(k);
      if (e[0] === 'BlockStored' && e[6] === 'CPU') for (const k of keys(e[1])) inHostMemory.add(k);
    }
  }
  return { batches, held, inHostMemory, index };
}

/** Waits until the stream shows `ready` (the service takes the engine's changes every 10 ms); fails after 30 s. */
async function until<T>(probe: () => Promise<T>, ready: (v: T) => boolean, describe: (v: T) => string = () => ''): Promise<T> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const v = await probe();
    if (ready(v)) return v;
    if (Date.now() > deadline) throw new Error(`the events never showed the state awaited${describe(v) ? ` (last seen: ${describe(v)})` : ''}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

let server = await start();
t.teardown(() => server.close());
const modelName = ((await (await fetch(`${server.base}/v1/models`)).json()) as { data: Array<{ id: string }> }).data[0]!.id;

t.test('a load starts with AllBlocksCleared under the model\'s name and each adapter\'s', async (t) => {
  const { batches } = await until(heldNow, (s) => s.batches.length >= 2);
  t.same(batches.slice(0, 2).map((b) => b.events), [[['AllBlocksCleared']], [['AllBlocksCleared']]]);
  t.same(batches.slice(0, 2).map((b) => b.seq), [0n, 1n], 'sequence numbers from 0');
});

const promptA = range(1000, 40);
const promptB = range(3000, 70);

t.test('prompts fill the slots: their full blocks are stored with vLLM\'s keys, and llm-d maps every one', async (t) => {
  const a = await postJson(`${server.base}/completion`, { prompt: promptA, n_predict: 2 });
  t.equal(a.status, 200);
  const baseKeys = vllmKeys(promptA, 16, '').slice(0, 2);
  const afterA = await until(heldNow, (s) => baseKeys.every((k) => s.held.has(k)));
  t.same(baseKeys.map((k) => afterA.held.get(k)), ['base', 'base'], 'the base model\'s blocks');
  // The adapter's request takes the other slot; the idle one moves to the host-memory cache (its cells are freed: removed).
  const b = await postJson(`${server.base}/v1/completions`, { model: ADAPTER, prompt: promptB, max_tokens: 2 });
  t.equal(b.status, 200);
  const adapterKeys = vllmKeys(promptB, 16, '', [ADAPTER]).slice(0, 4);
  const { held, index, batches } = await until(heldNow, (s) => adapterKeys.every((k) => s.held.has(k)));
  t.same(adapterKeys.map((k) => held.get(k)), [ADAPTER, ADAPTER, ADAPTER, ADAPTER], 'the adapter\'s blocks carry its name');
  t.equal(index.dropped, 0, 'llm-d drops no event: every parent was published before');
  const topics = new Set(batches.flatMap((x) => (x.events.some((e) => e[0] === 'BlockStored' && e[7] === ADAPTER) ? [ADAPTER] : [])));
  t.same([...topics], [ADAPTER]);
  // The blocks held are exactly the slots' full blocks.
  const slots = (await (await fetch(`${server.base}/slots`)).json()) as Array<{ n_cached_tokens: number }>;
  t.equal(held.size, slots.reduce((n, s) => n + Math.floor(s.n_cached_tokens / 16), 0), 'one block per 16 cached tokens of each slot');
});

t.test('live batches carry the topic kv@<pod>@<model>; one the subscriber missed comes back by replay', async (t) => {
  // The subscriber has read nothing so far: everything published since start is queued for it.
  const first = await sub.next();
  const again = await replay(`tcp://127.0.0.1:${replayPort}`, first.seq);
  t.same(again[0]!.payload, first.payload, 'a replayed batch is the bytes published');
  t.ok(first.topic === `kv@pod-a@${modelName}` || first.topic === `kv@pod-a@${ADAPTER}`, `topic ${first.topic}`);
  // Batches before the first one read were published before the subscription took: replay has them.
  const missed = await replay(`tcp://127.0.0.1:${replayPort}`, 0n);
  t.same(missed.slice(0, Number(first.seq) + 1).map((b) => b.seq), Array.from({ length: Number(first.seq) + 1 }, (_, i) => BigInt(i)));
  let stored: DecodedBatch = first;
  while (!stored.events.some((e) => e[0] === 'BlockStored' && e[7] === ADAPTER)) stored = await sub.next();
  t.equal(stored.topic, `kv@pod-a@${ADAPTER}`, 'an adapter\'s blocks are published under its name');
});

t.test('new prompts take both slots: the blocks they replace are removed, the held blocks are the slots\' again', async (t) => {
  const adapterKeys = vllmKeys(promptB, 16, '', [ADAPTER]).slice(0, 4);
  const before = await heldNow();
  t.ok(adapterKeys.every((k) => before.held.has(k)), 'the adapter\'s blocks are held');
  const answers = await Promise.all([range(5000, 48), range(7000, 33)].map((prompt) => postJson(`${server.base}/completion`, { prompt, n_predict: 2 })));
  t.same(answers.map((a) => a.status), [200, 200]);
  const after = await until(heldNow, (s) => adapterKeys.every((k) => !s.held.has(k)));
  const removed = after.batches.flatMap((b) => b.events.filter((e) => e[0] === 'BlockRemoved').flatMap((e) => keys(e[1])));
  t.ok(adapterKeys.every((k) => removed.includes(k)), 'a BlockRemoved names each of the adapter\'s blocks');
  const newKeys = [...vllmKeys(range(5000, 48), 16, '').slice(0, 3), ...vllmKeys(range(7000, 33), 16, '').slice(0, 2)];
  // The slots are read again with each look at the stream: after the answers an idle slot may
  // still move to host memory (its cells removed, its blocks stored there), so a count taken once
  // can go stale, and which prompt stays in a slot depends on which finished first. Both at once:
  // the count alone can match while a batch is on its way (the publisher collects every 50 ms).
  const slotBlocks = async (): Promise<number> => ((await (await fetch(`${server.base}/slots`)).json()) as Array<{ n_cached_tokens: number }>)
    .reduce((n, x) => n + Math.floor(x.n_cached_tokens / 16), 0);
  const where = (s: { held: Map<bigint, string>; inHostMemory: Set<bigint> }, k: bigint): string => (s.held.has(k) ? 'slot' : s.inHostMemory.has(k) ? 'host memory' : 'nowhere');
  const settled = await until(async () => ({ ...(await heldNow()), blocks: await slotBlocks() }),
    (s) => s.held.size === s.blocks && newKeys.every((k) => where(s, k) !== 'nowhere'),
    (s) => `${s.held.size} blocks held, the slots' ${s.blocks}; the new prompts' blocks: ${newKeys.map((k) => where(s, k)).join(', ')}`);
  t.equal(settled.held.size, settled.blocks, 'one block per 16 cached tokens of each slot');
  t.ok(newKeys.every((k) => where(settled, k) !== 'nowhere'), 'the new prompts\' blocks are held: in a slot, or in host memory once their slot went idle');
  const storedInSlots = new Set(settled.batches.flatMap((b) => b.events.filter((e) => e[0] === 'BlockStored' && e[6] === 'GPU').flatMap((e) => keys(e[1]))));
  t.ok(newKeys.every((k) => storedInSlots.has(k)), 'each was stored from a slot first');
});

t.test('a restart: the new process announces AllBlocksCleared, then stores again', async (t) => {
  await server.close();
  server = await start();
  const restarted = await until(heldNow, (s) => s.batches.length >= 2);
  t.same(restarted.batches.slice(0, 2).map((b) => b.events), [[['AllBlocksCleared']], [['AllBlocksCleared']]]);
  t.equal(restarted.held.size, 0);
  const a = await postJson(`${server.base}/completion`, { prompt: promptA, n_predict: 2 });
  t.equal(a.status, 200);
  await until(heldNow, (s) => vllmKeys(promptA, 16, '').slice(0, 2).every((k) => s.held.has(k)));
});
