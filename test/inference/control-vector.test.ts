// --control-vector, --control-vector-scaled, --control-vector-layer-range: applied to the context
// by llama.cpp as in llama-server.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import { native } from '../../src/native/binding.js';
import { serverOptions } from '../../src/inference/server-config.js';
import { startInferenceServer } from '../../src/inference/server.js';
import { GgmlType, metadataValue, readGguf } from '../fixtures/gguf-reader.js';
import { GgufWriter } from '../fixtures/gguf-writer.js';
import { ensureTestModels } from '../fixtures/models.js';
import { postJson } from '../helpers/inference-server.js';
import { startLlamaServer } from '../helpers/llama-server.js';

const models = await ensureTestModels();
const scratch = mkdtempSync(join(tmpdir(), 'cvec-'));
t.teardown(() => rmSync(scratch, { recursive: true, force: true }));
const gguf = readGguf(models.chat);
const nEmbd = Number(metadataValue(gguf, 'llama.embedding_length'));
const nLayer = Number(metadataValue(gguf, 'llama.block_count'));

/** A control vector file: one direction per layer, every element `value`. */
async function controlVector(name: string, width: number, value: number): Promise<string> {
  const w = new GgufWriter();
  w.string('general.architecture', 'controlvector');
  for (let layer = 1; layer <= nLayer; layer++) {
    w.addTensor({ name: `direction.${layer}`, shape: [width], type: GgmlType.F32, fill: (out) => out.fill(value) });
  }
  const path = join(scratch, name);
  await w.write(path);
  return path;
}

/** Starts ours with llama-server's command line `args` (after -m); returns its greedy answer. */
async function oursAnswer(t: Test, args: string[]): Promise<string> {
  const params = native.ServerParams.parse(['llama-server', '-m', models.chat, '-c', '512', '-np', '1', ...args]);
  const options = serverOptions(params.values(), {}, false);
  const server = await startInferenceServer({ ...options, serverParams: params, host: '127.0.0.1', port: 0 });
  t.teardown(() => server.close());
  await server.ready;
  return (await postJson(`http://127.0.0.1:${server.port}/completion`, { prompt: 'Once upon a time', n_predict: 12, temperature: 0 })).body.content;
}

t.test('a control vector steers the output exactly as in llama-server; at scale 0 it does nothing', async (t) => {
  const cvec = await controlVector('steer.gguf', nEmbd, 0.8);
  const plain = await oursAnswer(t, []);
  const steered = await oursAnswer(t, ['--control-vector', cvec]);
  t.not(steered, plain, 'the vector changes the greedy output');
  const reference = await startLlamaServer(['-m', models.chat, '-c', '512', '-np', '1', '--control-vector', cvec]);
  t.teardown(reference.close);
  const theirs = (await postJson(`${reference.base}/completion`, { prompt: 'Once upon a time', n_predict: 12, temperature: 0 })).body.content;
  t.equal(steered, theirs, 'same text as llama-server with the same vector');
  t.equal(await oursAnswer(t, ['--control-vector-scaled', `${cvec}:0`]), plain, 'scale 0 leaves the model as it was');
  t.equal(await oursAnswer(t, ['--control-vector', cvec, '--control-vector-layer-range', String(nLayer + 1), String(nLayer + 2)]), plain, 'layers outside the model are not steered');
});

t.test('a control vector of the wrong width fails the start with a clear error', async (t) => {
  const bad = await controlVector('bad.gguf', nEmbd + 1, 0.5);
  const params = native.ServerParams.parse(['llama-server', '-m', models.chat, '-c', '512', '--control-vector', bad]);
  const server = await startInferenceServer({ ...serverOptions(params.values(), {}, false), serverParams: params, host: '127.0.0.1', port: 0 });
  t.teardown(() => server.close());
  await t.rejects(server.ready, /failed to apply the control vector/);
});
