// Usage metered by the inference server (GET /admin/usage): for each app and tenant, a bar
// chart of the tokens (prompt and completion) of each hour of the range, drawn as inline SVG,
// with the range's totals. Filters: app (id or slug), tenant, key, from and to.
import { adminApi, type UsageCounters, type UsageQuery, type UsageReport, type UsageRow } from './api.js';
import { byId, el, facts } from './dom.js';
import { notifyError } from './notice.js';

const SVG = 'http://www.w3.org/2000/svg';
const HOUR_MS = 3600 * 1000;
const CHART_WIDTH = 600;
const CHART_HEIGHT = 120;

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, ...children: Array<Node | string>): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  for (const child of children) node.append(child);
  return node;
}

const tokensOf = (row: UsageCounters): number => row.prompt_tokens + row.completion_tokens;
const number = (value: number): string => value.toLocaleString('en-US');

function filters(): UsageQuery {
  const value = (id: string): string => byId<HTMLInputElement>(id).value.trim();
  return { app: value('usage-app'), tenant: value('usage-tenant'), key: value('usage-key'), from: value('usage-from'), to: value('usage-to') };
}

export async function loadUsage(): Promise<void> {
  show(await adminApi.getUsage(filters()));
}

/** The rows grouped by app and tenant, in the order of their first row. */
function groups(rows: UsageRow[]): Map<string, { app: string; tenant: string; rows: UsageRow[] }> {
  const grouped = new Map<string, { app: string; tenant: string; rows: UsageRow[] }>();
  for (const row of rows) {
    const app = row.app_slug ?? '(no app)';
    const tenant = row.tenant === '' ? '(no tenant)' : row.tenant;
    const name = JSON.stringify([app, tenant]);
    if (!grouped.has(name)) grouped.set(name, { app, tenant, rows: [] });
    grouped.get(name)!.rows.push(row);
  }
  return grouped;
}

function show(report: UsageReport): void {
  const totals = report.totals;
  byId('usage-range').textContent = `From ${report.from.slice(0, 16).replace('T', ' ')} to ${report.to.slice(0, 16).replace('T', ' ')} UTC${report.truncated ? ' (the first rows only; the totals count all)' : ''}.`;
  byId('usage-totals').replaceChildren(facts([
    ['Requests', number(totals.requests)],
    ['Prompt tokens', `${number(totals.prompt_tokens)} (${number(totals.cached_prompt_tokens)} cached)`],
    ['Completion tokens', number(totals.completion_tokens)],
    ['Queue time', `${number(totals.queue_ms)} ms`],
    ['Compute time', `${number(totals.compute_ms)} ms`],
  ]));
  const charts = [...groups(report.rows).values()].map((group) => chart(group, report));
  byId('usage-charts').replaceChildren(...(charts.length ? charts : [el('li', { class: 'empty' }, 'No usage in this range.')]));
}

/** One app and tenant: a bar per hour of the range (its tokens), each with a title giving its numbers. */
function chart(group: { app: string; tenant: string; rows: UsageRow[] }, report: UsageReport): HTMLLIElement {
  const first = Math.floor(Date.parse(report.from) / HOUR_MS);
  const hours = Math.max(1, Math.ceil(Date.parse(report.to) / HOUR_MS) - first);
  const perHour = new Map<number, UsageCounters>();
  for (const row of group.rows) {
    const index = Date.parse(row.hour) / HOUR_MS - first;
    const sum = perHour.get(index) ?? { requests: 0, prompt_tokens: 0, cached_prompt_tokens: 0, completion_tokens: 0, queue_ms: 0, compute_ms: 0 };
    for (const name of Object.keys(sum) as Array<keyof UsageCounters>) sum[name] += row[name];
    perHour.set(index, sum);
  }
  const max = Math.max(1, ...[...perHour.values()].map(tokensOf));
  const width = CHART_WIDTH / hours;
  const bars = [...perHour.entries()].sort(([a], [b]) => a - b).map(([index, sum]) => {
    const height = Math.max(1, (tokensOf(sum) / max) * (CHART_HEIGHT - 4));
    const hour = new Date((first + index) * HOUR_MS).toISOString();
    return svg('rect', { class: 'bar', x: (index * width).toFixed(2), y: (CHART_HEIGHT - height).toFixed(2), width: Math.max(0.5, width * 0.85).toFixed(2), height: height.toFixed(2), 'data-hour': hour },
      svg('title', {}, `${hour.slice(0, 13).replace('T', ' ')}:00 UTC: ${number(tokensOf(sum))} tokens, ${number(sum.requests)} requests`));
  });
  const total = group.rows.reduce((sum, row) => sum + tokensOf(row), 0);
  const requests = group.rows.reduce((sum, row) => sum + row.requests, 0);
  const label = `${group.app} / ${group.tenant}`;
  return el('li', { 'data-app': group.app, 'data-tenant': group.tenant },
    el('div', { class: 'item-head' }, el('strong', {}, group.app), el('span', { class: 'tag' }, group.tenant),
      el('span', { class: 'usage-sum' }, `${number(total)} tokens, ${number(requests)} requests`)),
    svg('svg', { class: 'usage-chart', viewBox: `0 0 ${CHART_WIDTH} ${CHART_HEIGHT}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': `Tokens per hour of ${label}: ${number(total)} in all, at most ${number(max)} in an hour` },
      svg('line', { class: 'axis', x1: 0, y1: CHART_HEIGHT - 0.5, x2: CHART_WIDTH, y2: CHART_HEIGHT - 0.5 }), ...bars));
}

export function wireUsage(): void {
  byId<HTMLFormElement>('usage-filter').addEventListener('submit', (event) => {
    event.preventDefault();
    loadUsage().catch(notifyError);
  });
}

export function clearUsage(): void {
  byId<HTMLFormElement>('usage-filter').reset();
  byId('usage-range').textContent = '';
  byId('usage-totals').replaceChildren();
  byId('usage-charts').replaceChildren();
}
