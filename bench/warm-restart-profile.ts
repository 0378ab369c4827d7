// A restart in the middle of agent traffic (issue 39): the agent fleet, a graceful restart (SIGTERM,
// as a user's restart or rollout does), then a second fleet with new user turns. Ours with
// --cache-disk writes its slots' states to a directory and restores the prompts from it after the
// restart; llama-server (which has no disk tier) and ours without the flag recompute them.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AGENT_PROFILE, FLEET, fleetRequest } from './agent-profile.js';
import { BenchError, httpJson, median, percentile, streamChat } from './load.js';
import type { Profile, Scenario, ScenarioContext } from './scenario.js';

/** The id and label of ours without --cache-disk (measured beside ours with it and llama-server). */
const NO_DISK = { id: 'ours-nodisk', label: 'inference-server without --cache-disk' };

/** One fleet round (agent-fleet's requests of round `round`, all sent together). */
async function fleet(ctx: ScenarioContext, base: string, round: number) {
  const t0 = performance.now();
  const results = await Promise.all(Array.from({ length: FLEET.requests }, (_, i) => streamChat(base, fleetRequest(round, i))));
  const ttft = results.map((r) => r.firstTokenMs);
  const out = { wall: Math.max(...results.map((r) => r.endAt)) - t0, ttftP50: percentile(ttft, 50), ttftMax: Math.max(...ttft), answers: results.map((r) => r.text) };
  ctx.progress(`${ctx.server}: warm restart, fleet round ${round}: wall ${out.wall.toFixed(0)} ms, prompt tokens ${median(results.map((r) => r.promptTokens))} (median), cached ${results.map((r) => r.cachedTokens).join(',')}`);
  return out;
}

/** The disk tier's counters from /metrics (NaN where the server has none: llama-server). */
async function diskCounters(base: string): Promise<{ hits: number; bytesRead: number; adopted: number }> {
  const res = await httpJson(base, 'GET', '/metrics', undefined, 10_000);
  const value = (name: string): number => {
    const m = new RegExp(`^llamacpp:${name} (\\S+)$`, 'm').exec(res.text);
    return m ? Number(m[1]) : NaN;
  };
  return { hits: value('prompt_cache_disk_hits_total'), bytesRead: value('prompt_cache_disk_bytes_read_total'), adopted: value('prompt_cache_disk_adopted_total') };
}

/** The answers after the restart, by harness round and server id (compared once every server has run). */
const answersAfter = new Map<number, Map<string, string[]>>();

const warmRestart: Scenario = {
  id: 'warm-restart',
  title: 'warm restart',
  timeoutSeconds: 600,
  description: `agent-fleet's first round (${FLEET.requests} streamed /v1/chat/completions sent together, the shared system prompt with tool schemas and one-line user turns, max_tokens ${FLEET.maxTokens}, temperature 0, clients' defaults) on a fresh server; then a restart (SIGTERM, wait for the exit, start again with the same command line, wait for /health 200); then agent-fleet's second round (new user turns). Three servers, each with the agent-fleet command line plus --metrics: ours with --cache-disk on a fresh temporary directory (deleted after), llama-server, ours without the flag. First fleet = its wall time (ours with the disk tier writing); restart = SIGTERM -> ready; after restart = the second round's wall time and TTFT; disk hits and bytes read from ours' /metrics after it; answers = the second round's answers of ours with --cache-disk that differ in text from those of ours without it.`,
  metrics: [
    { key: 'firstWall', label: 'first fleet: wall time', unit: 'ms', kind: 'info' },
    { key: 'firstWall', label: `first fleet: wall time, ratio vs ${NO_DISK.label}`, unit: 'ms', kind: 'latency', targetRatio: 1.05, versus: NO_DISK.id },
    { key: 'restartSeconds', label: 'restart: SIGTERM -> ready', unit: 's', kind: 'info' },
    { key: 'secondWall', label: 'after restart: wall time', unit: 'ms', kind: 'latency', targetRatio: 0.2 },
    { key: 'secondTtftP50', label: 'after restart: TTFT p50', unit: 'ms', kind: 'info' },
    { key: 'secondTtftMax', label: 'after restart: TTFT max', unit: 'ms', kind: 'info' },
    { key: 'secondWall', label: `after restart: wall time, ${NO_DISK.label}`, unit: 'ms', kind: 'info', of: NO_DISK.id },
    { key: 'diskHits', label: 'after restart: prompt_cache_disk_hits_total', unit: 'count', kind: 'info' },
    { key: 'diskReadMiB', label: 'after restart: prompt_cache_disk_bytes_read_total', unit: 'MiB', kind: 'info' },
    { key: 'diskAdopted', label: 'after restart: prompt_cache_disk_adopted_total', unit: 'count', kind: 'info' },
    { key: 'answerMismatches', label: `after restart: answers differing from ${NO_DISK.label}`, unit: 'count', kind: 'info', oursMax: 0 },
  ],
  async run(ctx) {
    const first = await fleet(ctx, ctx.base, 0);
    const restarted = await ctx.restart();
    ctx.progress(`${ctx.server}: warm restart: SIGTERM -> ready in ${restarted.seconds.toFixed(1)} s`);
    const second = await fleet(ctx, restarted.base, 1);
    if (second.answers.length !== FLEET.requests) throw new BenchError(`${ctx.server}: warm restart: ${second.answers.length} answers, ${FLEET.requests} expected`);
    let byServer = answersAfter.get(ctx.round);
    if (!byServer) answersAfter.set(ctx.round, (byServer = new Map()));
    byServer.set(ctx.server, second.answers);
    const disk = await diskCounters(restarted.base);
    if (ctx.server === 'ours' && !(disk.hits > 0)) ctx.note(`${ctx.server}: warm restart: prompt_cache_disk_hits_total ${disk.hits} after the restart (the disk tier restored nothing)`);
    return {
      firstWall: first.wall,
      restartSeconds: restarted.seconds,
      secondWall: second.wall,
      secondTtftP50: second.ttftP50,
      secondTtftMax: second.ttftMax,
      diskHits: disk.hits,
      diskReadMiB: disk.bytesRead / 2 ** 20,
      diskAdopted: disk.adopted,
    };
  },
  across() {
    // Per round: ours with --cache-disk against ours without it, request by request (a round in
    // which either did not finish has no figure).
    const mismatches: number[] = [];
    for (const round of [...answersAfter.keys()].sort((a, b) => a - b)) {
      const withDisk = answersAfter.get(round)!.get('ours');
      const without = answersAfter.get(round)!.get(NO_DISK.id);
      mismatches.push(withDisk && without ? withDisk.filter((a, i) => a !== without[i]).length : NaN);
    }
    return { answerMismatches: { ours: mismatches } };
  },
};

export const WARM_RESTART_PROFILE: Profile = {
  id: 'warm-restart',
  model: AGENT_PROFILE.model,
  // agent-fleet's command line, plus --metrics on every server (the disk tier's counters; both
  // servers serve /metrics only with it).
  commonArgs: (t) => [...AGENT_PROFILE.commonArgs(t), '--metrics'],
  oursExtra: [],
  referenceExtra: [],
  oursVariants: [{ id: NO_DISK.id, label: NO_DISK.label, flags: [] }],
  perRun: {
    ours: {
      shown: ['--cache-disk', '<fresh temp dir>'],
      make() {
        const dir = mkdtempSync(join(tmpdir(), 'bench-cache-disk-'));
        return { flags: ['--cache-disk', dir], cleanup: () => rmSync(dir, { recursive: true, force: true }) };
      },
    },
  },
  scenarios: [warmRestart],
};
