// The KV-cache events of the two tiers past the slots, as a router reads them (replay from 0,
// decoded with msgpack, keys recomputed by vLLM's rule and mapped by llm-d's): a prompt a slot
// gives up is stored in host memory (--cache-ram, medium CPU) as its cells are removed (GPU);
// host-memory eviction removes it there, and so does a restore out of it; a --cache-disk write
// is stored on disk (STORAGE); and a restart on the same directory publishes the files it
// adopts, one of which then serves its prompt from disk. Blocks of 32 tokens
// (--kv-events-block-size 32), which /metrics' cache_config_info tells the endpoint picker. One
// server of one slot, then its restart.
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureTestModels } from '../../fixtures/models.js';
import { postJson, startTestServer, type TestServer } from '../../helpers/inference-server.js';
import { DEFAULT_BLOCK_KEY_RULE } from '../../../src/inference/kv-events/block-keys.js';
import { DEFAULT_PUBLISHER_OPTIONS } from '../../../src/inference/kv-events/publisher-options.js';
import { LlmdIndex } from './llmd-index.js';
import { vllmKeys } from './reference-keys.js';
import { keys, replay, type DecodedBatch } from './subscriber.js';
import { parseMetrics } from '../../helpers/prometheus.js';
import { freePort } from '../../helpers/ports.js';

const models = await ensureTestModels();
const dir = mkdtempSync(join(tmpdir(), 'kv-tier-events-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const [pubPort, replayPort] = [await freePort(), await freePort()];

// --cache-ram 1 (MiB) holds two of these prompts' states (about 270 bytes a token on the test
// model) and evicts the oldest to take a third; each is long enough for the disk tier to write it.
const LENGTH = 1400;
const prompt = (seed: number): number[] => Array.from({ length: LENGTH }, (_, i) => 100 + ((seed * 7919 + i * 31) % 40_000));
const BLOCK = 32;
const blockKeys = (seed: number): bigint[] => vllmKeys(prompt(seed), BLOCK, '');

async function start(): Promise<TestServer> {
  return startTestServer(models.chat, {
    parallel: 1, ctxSize: 2048, engine: { promptCacheMib: 1, cacheDisk: dir },
    kvEvents: {
      publisher: { ...DEFAULT_PUBLISHER_OPTIONS, endpoint: `tcp://127.0.0.1:${pubPort}`, replayEndpoint: `tcp://127.0.0.1:${replayPort}` },
      rule: { ...DEFAULT_BLOCK_KEY_RULE, blockSize: BLOCK }, pod: 'pod-t', pollMs: 10,
    },
  });
}

type Medium = 'GPU' | 'CPU' | 'STORAGE';
interface Stream {
  batches: DecodedBatch[];
  /** Keys held per medium. */
  held: Record<Medium, Set<bigint>>;
  /** Keys named by a BlockRemoved, per medium. */
  removed: Record<Medium, Set<bigint>>;
  index: LlmdIndex;
}

/** Replays the server's whole stream and applies it. */
async function stream(): Promise<Stream> {
  const batches = await replay(`tcp://127.0.0.1:${replayPort}`, 0n);
  const held = { GPU: new Set<bigint>(), CPU: new Set<bigint>(), STORAGE: new Set<bigint>() };
  const removed = { GPU: new Set<bigint>(), CPU: new Set<bigint>(), STORAGE: new Set<bigint>() };
  const index = new LlmdIndex(BLOCK, '');
  for (const b of batches) {
    for (const e of b.events) {
      index.apply(e);
      if (e[0] === 'AllBlocksCleared') for (const m of Object.values(held)) m.clear();
      if (e[0] === 'BlockStored') for (const k of keys(e[1])) held[e[6] as Medium].add(k);
      if (e[0] === 'BlockRemoved') {
        for (const k of keys(e[1])) {
          held[e[2] as Medium].delete(k);
          removed[e[2] as Medium].add(k);
        }
      }
    }
  }
  return { batches, held, removed, index };
}

/** Waits until the stream shows `ready` (the service takes the engine's changes every 10 ms); fails after 30 s. */
async function until(ready: (s: Stream) => boolean): Promise<Stream> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const s = await stream();
    if (ready(s)) return s;
    if (Date.now() > deadline) throw new Error('the events never showed the state awaited');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

const holdsAll = (set: Set<bigint>, list: bigint[]): boolean => list.every((k) => set.has(k));
const holdsNone = (set: Set<bigint>, list: bigint[]): boolean => list.every((k) => !set.has(k));

async function complete(server: TestServer, seed: number) {
  const res = await postJson(`${server.base}/completion`, { prompt: prompt(seed), n_predict: 4, temperature: 0, cache_prompt: true });
  if (res.status !== 200) throw new Error(`completion: ${res.status} ${JSON.stringify(res.body)}`);
  return { cached: res.body.timings.cache_n as number, content: res.body.content as string };
}

let server = await start();
t.teardown(() => server.close());
const first = await complete(server, 1);

t.test('cache_config_info on /metrics gives the events\' block size, and the context in those blocks', async (t) => {
  const families = parseMetrics(await (await fetch(`${server.base}/metrics`)).text());
  t.same(families.get('llamacpp:cache_config_info')!.metrics[0]!.labels, { block_size: String(BLOCK), num_gpu_blocks: String(2048 / BLOCK) });
});

t.test('a prompt the slot gives up is stored in host memory (CPU) as its cells are removed (GPU)', async (t) => {
  await until((s) => holdsAll(s.held.GPU, blockKeys(1)));
  await complete(server, 2);
  const s = await until((s) => holdsAll(s.held.CPU, blockKeys(1)) && holdsAll(s.held.GPU, blockKeys(2)));
  t.ok(holdsAll(s.removed.GPU, blockKeys(1)), 'a BlockRemoved (GPU) names each of the first prompt\'s blocks');
  t.ok(holdsNone(s.held.GPU, blockKeys(1)), 'the slot holds none of them any more');
  t.same([...s.held.CPU].sort(), [...blockKeys(1)].sort(), 'host memory holds the first prompt\'s full blocks, nothing else');
  const stored = s.batches.flatMap((b) => b.events).filter((e) => e[0] === 'BlockStored' && e[6] === 'CPU');
  t.same(stored[0]!.slice(2, 6), [null, prompt(1).slice(0, blockKeys(1).length * BLOCK), BLOCK, null], 'stored from the root, with its tokens, block size and no adapter');
  t.equal(s.index.dropped, 0, 'llm-d drops no event');
});

t.test('host-memory eviction publishes the removal there', async (t) => {
  await complete(server, 3);
  await complete(server, 4);
  const s = await until((s) => holdsNone(s.held.CPU, blockKeys(1)) && holdsAll(s.held.CPU, blockKeys(3)));
  t.ok(holdsAll(s.removed.CPU, blockKeys(1)), 'a BlockRemoved (CPU) names each of the oldest entry\'s blocks');
  t.ok(holdsNone(s.held.CPU, blockKeys(4)), 'the prompt in the slot is not in host memory');
  t.ok(holdsAll(s.held.GPU, blockKeys(4)), 'it is in the slot');
});

t.test('a prompt restored from host memory leaves it (removed there) and fills the slot (stored there)', async (t) => {
  const before = await stream();
  t.ok(holdsAll(before.held.CPU, blockKeys(3)), 'the third prompt is in host memory');
  const again = await complete(server, 3);
  t.ok(again.cached >= blockKeys(3).length * BLOCK, `restored: ${again.cached} tokens cached`);
  const s = await until((s) => holdsNone(s.held.CPU, blockKeys(3)) && holdsAll(s.held.GPU, blockKeys(3)) && holdsAll(s.held.CPU, blockKeys(4)));
  t.ok(holdsNone(s.held.GPU, blockKeys(4)), 'the prompt it replaced left the slot for host memory');
});

t.test('the disk tier\'s writes are stored there (STORAGE)', async (t) => {
  const s = await until((s) => [1, 2, 3].every((seed) => holdsAll(s.held.STORAGE, blockKeys(seed))));
  t.equal(s.removed.STORAGE.size, 0, 'nothing removed from disk');
  t.equal(s.index.dropped, 0, 'llm-d drops no event');
});

t.test('a restart on the same --cache-disk publishes the files it adopted, and one of them serves its prompt', async (t) => {
  await server.close();
  server = await start();
  const s = await until((s) => [1, 2, 3].every((seed) => holdsAll(s.held.STORAGE, blockKeys(seed))));
  t.same(s.batches[0]!.events, [['AllBlocksCleared']], 'the new process starts with AllBlocksCleared');
  t.equal(s.held.GPU.size + s.held.CPU.size, 0, 'nothing in the slot or host memory yet');
  const again = await complete(server, 1);
  t.ok(again.cached >= blockKeys(1).length * BLOCK, `the first prompt is restored from disk: ${again.cached} tokens cached`);
  t.equal(again.content, first.content, 'the restored state gives the same greedy answer');
  const after = await until((s) => holdsAll(s.held.GPU, blockKeys(1)));
  t.ok(holdsAll(after.held.STORAGE, blockKeys(1)), 'its file stays on disk');
  t.equal(after.index.dropped, 0, 'llm-d drops no event');
});
