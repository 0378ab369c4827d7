// Usage metered by the inference server (GET /admin/usage): for each app and tenant (by its name
// when the label is a tenant of the app), a bar chart of the tokens (prompt and completion) of
// each hour of the range, drawn as inline SVG under a token scale (a round top and its half,
// with grid lines) and over an axis of UTC hours, with the range's totals. Filters: app (id or
// slug), tenant, key, from and to.
import { adminApi, type UsageCounters, type UsageQuery, type UsageReport, type UsageRow } from './api.js';
import { byId, el, facts } from './dom.js';
import { notifyError } from './notice.js';

const SVG = 'http://www.w3.org/2000/svg';
const HOUR_MS = 3600 * 1000;
const CHART_WIDTH = 600;
const CHART_HEIGHT = 120;
/** The bars' full height: the scale's top line sits this far below the chart's top. */
const PLOT_HEIGHT = CHART_HEIGHT - 4;
/** Hours between two labels of the hour axis: the first that gives at most MAX_HOUR_LABELS. */
const HOUR_STEPS = [1, 2, 3, 6, 12, 24, 48, 72, 168, 336, 720];
const MAX_HOUR_LABELS = 6;

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string | number>, ...children: Array<Node | string>): SVGElementTagNameMap[K] {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  for (const child of children) node.append(child);
  return node;
}

const tokensOf = (row: UsageCounters): number => row.prompt_tokens + row.completion_tokens;
const number = (value: number): string => value.toLocaleString('en-US');

/** The smallest of 1, 2, 5 times a power of ten that is at least `value` (>= 1): the scale's top. */
export function scaleTop(value: number): number {
  const power = 10 ** Math.floor(Math.log10(Math.max(1, value)));
  return [1, 2, 5, 10].map((m) => m * power).find((top) => top >= value)!;
}

/** Sets a position through the CSSOM (the page's CSP allows no style attributes). */
function placed<T extends HTMLElement>(node: T, property: 'left' | 'top', percent: number): T {
  node.style.setProperty(property, `${percent.toFixed(3)}%`);
  return node;
}

function filters(): UsageQuery {
  const value = (id: string): string => byId<HTMLInputElement>(id).value.trim();
  return { app: value('usage-app'), tenant: value('usage-tenant'), key: value('usage-key'), from: value('usage-from'), to: value('usage-to') };
}

export async function loadUsage(): Promise<void> {
  show(await adminApi.getUsage(filters()));
}

interface UsageGroup {
  app: string;
  /** The tenant label as metered (an auth key's tenant id, or any label). */
  tenant: string;
  /** The tenant's name when the label is the id of a tenant of the app. */
  tenantName: string | null;
  rows: UsageRow[];
}

/** The rows grouped by app and tenant, in the order of their first row. */
function groups(rows: UsageRow[]): Map<string, UsageGroup> {
  const grouped = new Map<string, UsageGroup>();
  for (const row of rows) {
    const app = row.app_slug ?? '(no app)';
    const tenant = row.tenant === '' ? '(no tenant)' : row.tenant;
    const name = JSON.stringify([app, tenant]);
    if (!grouped.has(name)) grouped.set(name, { app, tenant, tenantName: row.tenant_name, rows: [] });
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

/**
 * One app and tenant: a bar per hour of the range (its tokens), each with a title giving its
 * numbers; the token scale's top (a round number at least the busiest hour) and its half as grid
 * lines labelled in tokens; under the chart, the UTC hours every few hours (a date at midnight).
 */
function chart(group: UsageGroup, report: UsageReport): HTMLLIElement {
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
  const top = scaleTop(max);
  const width = CHART_WIDTH / hours;
  const bars = [...perHour.entries()].sort(([a], [b]) => a - b).map(([index, sum]) => {
    const height = Math.max(1, (tokensOf(sum) / top) * PLOT_HEIGHT);
    const hour = new Date((first + index) * HOUR_MS).toISOString();
    return svg('rect', { class: 'bar', x: (index * width).toFixed(2), y: (CHART_HEIGHT - height).toFixed(2), width: Math.max(0.5, width * 0.85).toFixed(2), height: height.toFixed(2), 'data-hour': hour },
      svg('title', {}, `${hour.slice(0, 13).replace('T', ' ')}:00 UTC: ${number(tokensOf(sum))} tokens, ${number(sum.requests)} requests`));
  });
  const gridY = (fraction: number): number => CHART_HEIGHT - fraction * PLOT_HEIGHT;
  const grid = [1, 0.5].map((fraction) => svg('line', { class: 'grid', x1: 0, y1: gridY(fraction), x2: CHART_WIDTH, y2: gridY(fraction) }));
  const scale = el('div', { class: 'usage-scale', 'aria-hidden': 'true' },
    placed(el('span', { 'data-tokens': String(top) }, `${number(top)} tokens`), 'top', (gridY(1) / CHART_HEIGHT) * 100),
    placed(el('span', { 'data-tokens': String(top / 2) }, number(top / 2)), 'top', (gridY(0.5) / CHART_HEIGHT) * 100));
  const step = HOUR_STEPS.find((hoursPerLabel) => hours / hoursPerLabel <= MAX_HOUR_LABELS) ?? HOUR_STEPS[HOUR_STEPS.length - 1]!;
  const labels: HTMLSpanElement[] = [];
  for (let index = 0; index < hours; index++) {
    if ((first + index) % step !== 0) continue;
    const hour = new Date((first + index) * HOUR_MS).toISOString();
    const text = hour.slice(11, 13) === '00' ? hour.slice(5, 10) : `${hour.slice(11, 13)}:00`;
    const position = (index / hours) * 100;
    labels.push(placed(el('span', { 'data-hour': hour, class: position < 8 ? 'start' : position > 92 ? 'end' : '' }, text), 'left', position));
  }
  const total = group.rows.reduce((sum, row) => sum + tokensOf(row), 0);
  const requests = group.rows.reduce((sum, row) => sum + row.requests, 0);
  const tenant = group.tenantName ?? group.tenant;
  const label = `${group.app} / ${tenant}`;
  return el('li', { 'data-app': group.app, 'data-tenant': group.tenant },
    el('div', { class: 'item-head' }, el('strong', {}, group.app),
      el('span', group.tenantName === null ? { class: 'tag' } : { class: 'tag', title: `Tenant ${group.tenant}` }, tenant),
      el('span', { class: 'usage-sum' }, `${number(total)} tokens, ${number(requests)} requests`)),
    el('div', { class: 'usage-plot' },
      svg('svg', { class: 'usage-chart', viewBox: `0 0 ${CHART_WIDTH} ${CHART_HEIGHT}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': `Tokens per hour of ${label}: ${number(total)} in all, at most ${number(max)} in an hour` },
        ...grid, svg('line', { class: 'axis', x1: 0, y1: CHART_HEIGHT - 0.5, x2: CHART_WIDTH, y2: CHART_HEIGHT - 0.5 }), ...bars),
      scale),
    el('div', { class: 'usage-hours', 'aria-hidden': 'true' }, ...labels));
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
