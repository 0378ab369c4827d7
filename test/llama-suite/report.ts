// Outcomes of llama.cpp's server tests per server, the per-file comparison table, and the causes
// of the tests that pass on llama-server but fail on ours, grouped.

export type Outcome = 'passed' | 'failed' | 'error' | 'skipped';

export interface Exchange {
  method: string;
  path: string;
  sent: string | null;
  status?: number;
  answer?: string;
  error?: string;
  stream?: boolean;
  events?: number;
}

/** One test on one server, as llama_suite_plugin.py records it (plus the shim's flag lists). */
export interface TestResult {
  outcome: Outcome;
  duration: number;
  reason?: string;
  phase?: string;
  message?: string;
  line?: number | null;
  exchanges?: Exchange[];
  server?: string[];
  starts?: string[];
  dropped?: string[];
  rewritten?: string[];
}

export type Target = 'llama-server' | 'ours' | 'ours-lenient';
export type Results = Partial<Record<Target, Record<string, TestResult>>>;

export const STUB_SKIP = 'skipped-by-stub';

export function fileOf(nodeid: string): string {
  return nodeid.split('::')[0]!.replace(/^unit\//, '').replace(/\.py$/, '');
}

function passed(r: TestResult | undefined): boolean {
  return r?.outcome === 'passed';
}

export interface Cause {
  cause: string;
  detail: string;
}

function route(x: Exchange | undefined): string {
  return x ? `${x.method} ${x.path.split('?')[0]!.replace(/\/\d+(?=\/|$)/g, '/{id}')}` : '(no request)';
}

/** A failure message's first line with its quoted values, numbers and dumps elided, so that like failures group. */
function messageShape(message: string): string {
  return message.split('\n')[0]!
    .replace(/^AssertionError: /, '')
    .replace(/'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"/g, '…')
    .replace(/'[^']*$|"[^"]*$/, '…')
    .replace(/\{.*$/, '{…}')
    .replace(/\(.*?\)/g, '(…)')
    .replace(/\d+(\.\d+)?/g, 'N')
    .slice(0, 120);
}

/** Why a test failed on one of our runs, from its message, server lines and last HTTP exchange. */
export function classify(r: TestResult): Cause {
  const message = r.message ?? r.reason ?? '';
  const last = r.exchanges?.at(-1);
  if (r.outcome === 'skipped') return { cause: `skipped on ours: ${r.reason ?? ''}`, detail: '' };
  if (/Server process died|Server did not start/.test(message)) {
    const lines = r.server ?? [];
    const unknown = lines.map((l) => /unknown option: (\S+)/.exec(l)?.[1]).find(Boolean);
    if (unknown) return { cause: `unknown flag ${unknown}`, detail: r.starts?.[0] ?? '' };
    const refusal = lines.find((l) => l.includes('inference-server:'));
    return { cause: refusal ? `refused to start: ${refusal.replace(/^.*inference-server: /, '')}` : 'server died at start', detail: r.starts?.[0] ?? '' };
  }
  if (/TimeoutError|ReadTimeout/.test(message)) return { cause: 'timeout', detail: message.split('\n')[0]! };
  if (/ConnectionError|Connection refused|RemoteDisconnected/.test(message)) return { cause: 'connection refused or dropped', detail: message.split('\n')[0]! };
  if (last?.status === 404) return { cause: `missing route ${route(last)}`, detail: last.answer ?? '' };
  const key = /KeyError: '([^']+)'|KeyError: (\S+)/.exec(message);
  if (key) return { cause: `missing field '${key[1] ?? key[2]}' in the answer to ${route(last)}`, detail: last?.answer ?? '' };
  const status = /assert (\d{3}) ([!=]=) (\d{3})/.exec(message) ?? /Server returned error: (\d{3})/.exec(message);
  if (status) {
    const expected = status[3] ? `${status[2] === '!=' ? 'not ' : ''}${status[3]}` : '200';
    return { cause: `different status on ${route(last)}: expected ${expected}, got ${status[1]}`, detail: last?.answer ?? '' };
  }
  if (last?.status !== undefined && last.status >= 400) {
    return { cause: `error answer ${last.status} on ${route(last)}`, detail: last.answer ?? '' };
  }
  return { cause: `different answer on ${route(last)}: ${messageShape(message)}`, detail: last?.answer ?? '' };
}

interface FileRow {
  file: string;
  tests: number;
  stub: number;
  llama: number;
  counts: Partial<Record<Target, { pass: number; regress: number }>>;
}

/** Per-file rows: tests, skipped by the openai stub, passing on each server, and regressions. */
export function fileRows(results: Results, files: readonly string[]): FileRow[] {
  const llama = results['llama-server'] ?? {};
  const ids = new Set<string>();
  for (const byTest of Object.values(results)) for (const id of Object.keys(byTest ?? {})) ids.add(id);
  return files.map((file) => {
    const mine = [...ids].filter((id) => fileOf(id) === file);
    const row: FileRow = {
      file,
      tests: mine.length,
      stub: mine.filter((id) => llama[id]?.reason?.startsWith(STUB_SKIP)).length,
      llama: mine.filter((id) => passed(llama[id])).length,
      counts: {},
    };
    for (const target of ['ours', 'ours-lenient'] as const) {
      const r = results[target];
      if (!r) continue;
      row.counts[target] = {
        pass: mine.filter((id) => passed(r[id])).length,
        regress: mine.filter((id) => passed(llama[id]) && !passed(r[id])).length,
      };
    }
    return row;
  });
}

export function formatTable(rows: FileRow[], targets: readonly Target[]): string {
  const ours = targets.filter((t) => t !== 'llama-server');
  const header = ['file', 'tests', 'stub-skipped', 'pass llama-server', ...ours.flatMap((t) => [`pass ${t}`, `llama ok, ${t} not`])];
  const body = rows.map((r) => [r.file, r.tests, r.stub, r.llama, ...ours.flatMap((t) => [r.counts[t]?.pass ?? '-', r.counts[t]?.regress ?? '-'])]);
  const total = ['total', ...header.slice(1).map((_, i) => body.reduce((s, row) => s + (Number(row[i + 1]) || 0), 0))];
  const all = [header, ...body, total].map((row) => row.map(String));
  const widths = header.map((_, i) => Math.max(...all.map((row) => row[i]!.length)));
  const line = (row: string[]): string => `| ${row.map((c, i) => (i === 0 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join(' | ')} |`;
  return [line(all[0]!), `|${widths.map((w, i) => (i === 0 ? ` ${'-'.repeat(w)} ` : ` ${'-'.repeat(w - 1)}: `)).join('|')}|`, ...all.slice(1).map(line)].join('\n');
}

export interface CauseGroup {
  cause: string;
  tests: string[];
  /** The first test of the group; `dropped`: the flags the lenient shim left out of its server's command line. */
  example: { test: string; detail: string; exchange?: Exchange; message?: string; dropped?: string[] };
}

/** Tests passing on llama-server and failing on `target`, grouped by cause, largest group first. */
export function groupCauses(results: Results, target: Target): CauseGroup[] {
  const llama = results['llama-server'] ?? {};
  const ours = results[target] ?? {};
  const groups = new Map<string, CauseGroup>();
  for (const [id, r] of Object.entries(ours)) {
    if (!passed(llama[id]) || passed(r)) continue;
    const { cause, detail } = classify(r);
    let group = groups.get(cause);
    if (!group) {
      group = { cause, tests: [], example: { test: id, detail, exchange: r.exchanges?.at(-1), message: r.message, dropped: r.dropped } };
      groups.set(cause, group);
    }
    group.tests.push(id);
  }
  return [...groups.values()].sort((a, b) => b.tests.length - a.tests.length || a.cause.localeCompare(b.cause));
}

export function formatCauses(groups: CauseGroup[]): string {
  const out: string[] = [];
  for (const g of groups) {
    out.push(`- ${g.cause} (${g.tests.length}): e.g. ${g.example.test}`);
    const x = g.example.exchange;
    if (x) out.push(`    sent ${x.method} ${x.path} ${x.sent ?? ''}`.trimEnd().slice(0, 300));
    if (g.example.message) out.push(`    expected: ${g.example.message.split('\n')[0]!.slice(0, 200)}`);
    if (x) out.push(`    answered: ${x.status ?? ''} ${x.answer ?? x.error ?? ''}`.slice(0, 300));
    if (g.example.dropped?.length) out.push(`    flags dropped for this test: ${g.example.dropped.join(' ')}`);
  }
  return out.join('\n');
}

export interface BothFailing {
  test: string;
  llama: string;
  ours: string;
}

/**
 * Tests failing on llama-server and on `target` with different messages. On llama-server these
 * fail because of the stand-in models (words, token counts); a different message on ours may hide
 * a real difference, e.g. a context split differently between slots.
 */
export function failingDifferently(results: Results, target: Target): BothFailing[] {
  const llama = results['llama-server'] ?? {};
  const out: BothFailing[] = [];
  for (const [id, r] of Object.entries(results[target] ?? {})) {
    const l = llama[id];
    if (!l || passed(l) || passed(r) || l.outcome === 'skipped' || r.outcome === 'skipped') continue;
    const lm = (l.message ?? '').split('\n')[0]!;
    const om = (r.message ?? '').split('\n')[0]!;
    if (messageShape(lm) !== messageShape(om) || (/^assert -?\d+ [=!]= /.test(lm) && lm !== om)) out.push({ test: id, llama: lm.slice(0, 200), ours: om.slice(0, 200) });
  }
  return out;
}

/** How often each flag was dropped by the lenient shim, over all server starts. */
export function droppedFlagCounts(starts: Array<{ dropped: string[] }>): Array<[string, number]> {
  const counts = new Map<string, number>();
  for (const s of starts) for (const d of s.dropped) {
    const flag = d.split(' ')[0]!;
    counts.set(flag, (counts.get(flag) ?? 0) + 1);
  }
  return [...counts.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
}
