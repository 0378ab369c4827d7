// Router mode (issue 13): the time from a request naming an unloaded model to its first token, on
// both servers started without -m and with a preset naming the bench model. Each cold start
// spawns the model's child process, loads the weights (from the page cache after the first
// round) and answers; the model is then unloaded through POST /models/unload before the next.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ensureBenchModel } from '../test/fixtures/models.js';
import { REPO_ROOT } from '../test/helpers/reference.js';
import { BenchError, httpJson, median, streamCompletion } from './load.js';
import type { Profile, Scenario, ScenarioContext } from './scenario.js';

/** thinkMs: the pause after an unload before the next cold start (a user switching models). */
const ROUTER = { model: 'bench', reps: 4, predict: 8, unloadLimitMs: 30_000, thinkMs: 1500 };

/** Resolves once GET /models lists the model as unloaded (bounded). */
async function unloaded(ctx: ScenarioContext): Promise<void> {
  const res = await httpJson(ctx.base, 'POST', '/models/unload', { model: ROUTER.model });
  if (res.status !== 200) throw new BenchError(`${ctx.server}: POST /models/unload answered ${res.status}`, res.text.slice(0, 2000));
  const deadline = Date.now() + ROUTER.unloadLimitMs;
  for (;;) {
    const list = await httpJson(ctx.base, 'GET', '/models');
    const entry = (list.body as { data?: Array<{ id: string; status?: { value?: string } }> }).data?.find((m) => m.id === ROUTER.model);
    if (entry?.status?.value === 'unloaded') return;
    if (Date.now() > deadline) throw new BenchError(`${ctx.server}: model not unloaded ${ROUTER.unloadLimitMs / 1000} s after POST /models/unload`, list.text.slice(0, 2000));
    await new Promise((r) => setTimeout(r, 20));
  }
}

const coldStart: Scenario = {
  id: 'router-cold',
  title: 'router: first token from an unloaded model',
  timeoutSeconds: 300,
  description: `router mode (no -m; --models-preset naming the bench model as "${ROUTER.model}"), 1 client: POST /completion naming the unloaded model, ${ROUTER.predict} tokens streamed; time to the first token, client-side (child process start, model load, prompt, first token); then POST /models/unload, wait until GET /models says unloaded, and pause ${ROUTER.thinkMs / 1000} s; median of ${ROUTER.reps} cold starts. Warm TTFT: the same request once the model is loaded (info).`,
  metrics: [
    { key: 'cold', label: 'cold-start time to first token', unit: 'ms', kind: 'latency' },
    { key: 'warm', label: 'time to first token, model loaded', unit: 'ms', kind: 'info' },
  ],
  async run(ctx) {
    const body = { model: ROUTER.model, prompt: 'Once upon a time', n_predict: ROUTER.predict, temperature: 0, ignore_eos: true, cache_prompt: false };
    const cold: number[] = [];
    const warm: number[] = [];
    for (let i = 0; i < ROUTER.reps; i++) {
      cold.push((await streamCompletion(ctx.base, '/completion', body)).firstTokenMs);
      warm.push((await streamCompletion(ctx.base, '/completion', body)).firstTokenMs);
      await unloaded(ctx);
      await new Promise((r) => setTimeout(r, ROUTER.thinkMs));
    }
    return { cold: median(cold), warm: median(warm) };
  },
};

export const ROUTER_PROFILE: Profile = {
  id: 'router',
  model: () => ensureBenchModel(),
  modelArgs(model) {
    const dir = join(REPO_ROOT, 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    const preset = join(dir, 'router-preset.ini');
    writeFileSync(preset, `[${ROUTER.model}]\nmodel = ${model}\n`);
    return ['--models-preset', preset];
  },
  // --models-max 1: one model at a time, as a router on a small machine runs.
  commonArgs: (t) => ['-c', '4096', '-np', '1', '-t', String(t), '-tb', String(t), '--models-max', '1', '--no-webui'],
  oursExtra: [],
  referenceExtra: [],
  scenarios: [coldStart],
};
