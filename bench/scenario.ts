// The comparison framework: a profile is one server configuration (model and flags) plus the
// scenarios measured against it; each scenario returns named metrics. Both servers run every
// scenario of a profile, one server after the other, and each metric becomes a table row with
// both figures and their ratio. Adding a scenario = adding a Scenario object to a profile (or a
// new profile when it needs other server flags, e.g. --embedding with an embedding model).

/**
 * throughput: higher is better, target ours/llama-server >= 1.00.
 * latency: lower is better, target ours/llama-server <= 1.00.
 * info: reported for context (e.g. server-reported timings), no target.
 */
export type MetricKind = 'throughput' | 'latency' | 'info';

export interface MetricDef {
  key: string;
  label: string;
  unit: string;
  kind: MetricKind;
  /** A target other than the kind's (1.00): ours / llama-server at most (latency) or at least (throughput) this. */
  targetRatio?: number;
  /** The server whose figure is the row's "ours" (default 'ours'; another: an id of the profile's oursVariants). */
  of?: string;
  /** The server the ratio is taken against (default 'llama-server'; another: an id of the profile's oursVariants). */
  versus?: string;
  /** A target on ours' own figure instead of a ratio: at most this (e.g. 0 answers that differ). */
  oursMax?: number;
}

export interface ScenarioContext {
  /** http://127.0.0.1:PORT */
  base: string;
  /** 'ours' | 'llama-server', or the id of one of the profile's oursVariants. */
  server: string;
  /** The harness's round (0-based): which run of the scenario this is, the same for every server of a round. */
  round: number;
  /**
   * Restarts the server as a user's restart does: SIGTERM, wait for it to exit (SIGKILL only past a
   * long grace, noted), then start it again with the same command line and wait until /health
   * answers 200. Returns the new base URL and the seconds from SIGTERM to ready.
   */
  restart(): Promise<{ base: string; seconds: number }>;
  /**
   * Starts one more server of this measurement's command line with `flags` appended (a replica),
   * waits until /health answers 200 and returns its base URL. It is stopped with the measurement's
   * server, and its CPU counts as the server's, not as other load.
   */
  startReplica(flags: string[]): Promise<{ base: string }>;
  /** Progress and anomaly notes (printed, and kept in the JSON). */
  note(message: string): void;
  progress(message: string): void;
}

export interface Scenario {
  id: string;
  title: string;
  /** One line saying exactly what is measured (printed under the table and kept in the JSON). */
  description: string;
  metrics: MetricDef[];
  /**
   * Bound on the whole scenario (warm-up included). Past it the scenario's figures are reported
   * as missing, the server is restarted, and the bench goes on.
   */
  timeoutSeconds: number;
  run(ctx: ScenarioContext): Promise<Record<string, number>>;
  /**
   * Figures that need several servers' runs (e.g. comparing their answers), computed once every
   * round has run: metric key -> server id -> one value per round. They take the place of what
   * run() returned for those keys.
   */
  across?(): Record<string, Record<string, number[]>>;
}

export interface Profile {
  id: string;
  /** Path of the model, generated on demand. */
  model(): Promise<string>;
  /** The flags that name the model (default: -m PATH); router mode names it in a preset instead. */
  modelArgs?(modelPath: string): string[];
  /** Flags given to both servers (model path excluded). */
  commonArgs(threads: number): string[];
  /** Extra flags for one server only, to make the two equivalent (with the reason). */
  oursExtra: string[];
  referenceExtra: Array<{ flags: string[]; why: string }>;
  /**
   * More servers measured in the same rounds beside ours and llama-server: ours' program with the
   * common flags, these flags and BENCH_OURS_EXTRA (not oursExtra), e.g. ours without a feature the
   * profile's ours has. A metric shows one with `of` or compares against one with `versus`.
   */
  oursVariants?: Array<{ id: string; label: string; flags: string[] }>;
  /**
   * Flags that differ for each measurement, by server id (e.g. a fresh directory): `shown` in the
   * printed command line; make() gives each measurement's flags (kept across the scenario's
   * restarts) and the cleanup run once that server has stopped for good.
   */
  perRun?: Record<string, { shown: string[]; make(): { flags: string[]; cleanup(): void } }>;
  /**
   * Each server starts afresh for every scenario, so that no scenario inherits the state another
   * left (llama-server keeps finished requests' tokens in idle slots of the unified KV cache,
   * which slows attention and forces purges for a later large prompt).
   */
  scenarios: Scenario[];
}

/**
 * llama-server's command line for a bench model's scenarios: `parallel` slots sharing one KV pool
 * of `ctx` cells (-np alone would split it into slices), flash attention as the build decides, no
 * web page. Without --cache-ram: the servers' default host-memory prompt cache.
 */
export const unifiedPoolArgs = (ctx: number, parallel: number, threads: number): string[] =>
  ['-c', String(ctx), '-np', String(parallel), '-t', String(threads), '-tb', String(threads), '-b', '2048', '-ub', '512', '-fa', 'auto', '--kv-unified', '--no-webui'];

export interface Row {
  scenario: string;
  metric: string;
  unit: string;
  kind: MetricKind | 'ceiling';
  ours: number;
  reference: number;
  ratio: number;
  target: string;
  pass: boolean | null;
  /** The target is on ours' own figure (MetricDef.oursMax), not on the ratio. */
  absolute?: boolean;
  /** CPUs used by other processes (not the bench client, not the server) while ours / llama-server ran it. */
  foreign: [number, number];
}

export function ratioTarget(kind: MetricKind, targetRatio = 1): { target: string; pass: (ratio: number) => boolean | null } {
  if (kind === 'throughput') return { target: `>= ${targetRatio.toFixed(2)}`, pass: (r) => r >= targetRatio };
  if (kind === 'latency') return { target: `<= ${targetRatio.toFixed(2)}`, pass: (r) => r <= targetRatio };
  return { target: '-', pass: () => null };
}
