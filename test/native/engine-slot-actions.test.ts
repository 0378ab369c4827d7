// Engine.slotAction on the raw native engine: what it refuses synchronously, what it refuses to
// save, and that a pending action is answered when the engine is disposed first.
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

t.test('a slot whose cache holds an image is not saved (NOT_SUPPORTED); it can still be erased', async (t) => {
  const { ids, queued } = engine.submit([{ prompt: new Int32Array(0), promptText: 'Look: <__media__> and say', media: [encodePng(32, 32, () => [0, 128, 255])], nPredict: 2, idSlot: 1 }]);
  const end = ended(ids[0]!);
  await queued;
  t.equal((await end).kind, 'done');
  await t.rejects(engine.slotAction({ action: 'save', slot: 1, dir, filename: 'image.bin' }), {
    code: 'NOT_SUPPORTED', message: 'Unable to save slot: saving a slot that holds images is not supported',
  });
  const erased = await engine.slotAction({ action: 'erase', slot: 1 });
  t.ok(erased.nTokens > 0);
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
