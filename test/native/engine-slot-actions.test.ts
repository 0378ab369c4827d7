// Engine.slotAction on the raw native engine: what it refuses synchronously, slots holding images,
// names the addon refuses on its own, and a pending action answered when the engine is disposed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { native, type EngineEvent, type NativeEngine } from '../../src/native/binding.js';
import { ensureTestModels } from '../fixtures/models.js';
import { encodePng } from '../helpers/png.js';

const models = await ensureTestModels();
const model = await native.Model.load(models.chat, {}).promise;
const vision = await native.Vision.load(model, models.mmproj, {});
const dir = mkdtempSync(join(tmpdir(), 'engine-slot-actions-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

type Listener = (event: EngineEvent) => void;
async function createEngine(): Promise<{ engine: NativeEngine; on: (l: Listener) => void }> {
  const listeners: Listener[] = [];
  const engine = await native.Engine.create(model, { nCtx: 1024, nParallel: 2, vision }, (batch) => {
    for (const e of batch) for (const l of listeners) l(e);
  });
  return { engine, on: (l) => listeners.push(l) };
}
const { engine, on } = await createEngine();
t.teardown(async () => {
  await engine.dispose();
  vision.dispose();
  model.dispose();
});

function ended(id: number): Promise<EngineEvent> {
  return new Promise((resolve) => on((e) => { if (e.task === id && e.kind !== 'token') resolve(e); }));
}

t.test('wrong shapes and slots out of range throw INVALID_ARGUMENT synchronously', async (t) => {
  const call = (spec: unknown) => () => engine.slotAction(spec as never);
  t.throws(call({ action: 'erase', slot: 2 }), { code: 'INVALID_ARGUMENT', message: 'slotAction: no slot 2' });
  t.throws(call({ action: 'erase', slot: -1 }), { code: 'INVALID_ARGUMENT' });
  t.throws(call({ action: 'erase', slot: 0.5 }), { code: 'INVALID_ARGUMENT' });
  t.throws(call({ action: 'drop', slot: 0 }), { code: 'INVALID_ARGUMENT', message: 'slotAction: action must be save, restore or erase' });
  t.throws(call({ action: 'save', slot: 0, dir }), { code: 'INVALID_ARGUMENT', message: 'slotAction: save and restore need dir and filename (strings)' });
  t.throws(call(undefined), { code: 'INVALID_ARGUMENT' });
});

t.test('a slot whose cache holds an image is saved with it: after restore the same image is reused, another is not', async (t) => {
  const look = (png: Uint8Array, slot: number) => ({ prompt: new Int32Array(0), promptText: 'Look: <__media__> and say', media: [png], nPredict: 2, idSlot: slot, sampling: { temperature: 0 } });
  const run = async (spec: ReturnType<typeof look>) => {
    const { ids, queued } = engine.submit([spec]);
    const end = ended(ids[0]!);
    await queued;
    return (await end) as Extract<EngineEvent, { kind: 'done' }>;
  };
  const blue = encodePng(32, 32, () => [0, 128, 255]);
  const first = await run(look(blue, 1));
  t.equal(first.kind, 'done');
  const saved = await engine.slotAction({ action: 'save', slot: 1, dir, filename: 'image.bin' });
  t.equal(saved.nTokens, first.nPrompt + first.nPredicted - 1);
  const restored = await engine.slotAction({ action: 'restore', slot: 0, dir, filename: 'image.bin' });
  t.equal(restored.nTokens, saved.nTokens);
  t.equal(restored.nBytes, saved.nBytes);
  const same = await run(look(blue, 0));
  t.equal(same.nCached, first.nPrompt - 1, 'text and image come from the restored cache');

  await engine.slotAction({ action: 'restore', slot: 0, dir, filename: 'image.bin' });
  const other = await run(look(encodePng(32, 32, () => [255, 255, 0]), 0));
  t.ok(other.nCached < 4, 'only the text before another image is reused');
});

t.test('an engine without a projector refuses a file with images, and its slot stays usable', async (t) => {
  const plain = await native.Engine.create(model, { nCtx: 512, nParallel: 1 }, () => {});
  t.teardown(() => plain.dispose());
  await t.rejects(plain.slotAction({ action: 'restore', slot: 0, dir, filename: 'image.bin' }), {
    code: 'BAD_SLOT_FILE', message: 'Unable to restore slot: Cannot restore media tokens without an mmproj',
  });
  t.equal((await plain.slotAction({ action: 'erase', slot: 0 })).nTokens, 0, 'the failed restore left the slot empty');
});

t.test('a name that is a path is refused by the addon itself (BAD_SLOT_FILE), whatever TypeScript checked', async (t) => {
  for (const filename of ['../x.bin', 'a/b', '..', '.', '']) {
    await t.rejects(engine.slotAction({ action: 'save', slot: 0, dir, filename }), { code: 'BAD_SLOT_FILE', message: 'Unable to save slot: Invalid filename' }, filename);
  }
  await t.rejects(engine.slotAction({ action: 'save', slot: 0, dir: join(dir, 'missing'), filename: 'x.bin' }), { code: 'SAVE_FAILED' }, 'a directory that is gone');
});

t.test('an action waiting for its busy slot rejects with DISPOSED when the engine is disposed first', async (t) => {
  const other = await createEngine();
  const { ids, queued } = other.engine.submit([{ prompt: model.tokenize('Once upon a time', true, true), nPredict: 400, idSlot: 0, sampling: { ignoreEos: true } }]);
  const first = new Promise<void>((resolve) => other.on((e) => { if (e.task === ids[0]) resolve(); }));
  await queued;
  await first;
  const pending = other.engine.slotAction({ action: 'erase', slot: 0 });
  await other.engine.dispose();
  await t.rejects(pending, { code: 'DISPOSED' });
  t.throws(() => other.engine.slotAction({ action: 'erase', slot: 0 }), { code: 'DISPOSED' });
});
