// UsageMeter (hourly rows and /metrics' per-tenant series) and the usage flush to the auth service.
import t from 'tap';
import { METRICS_TENANTS, UsageMeter, type UsageHourRow } from '../../../src/inference/tenants/usage-meter.js';
import { startUsageFlush } from '../../../src/inference/tenants/usage-flush.js';

const HOUR = 3_600_000;
const T0 = Date.UTC(2026, 10, 27, 10, 0, 0);

t.test('rows by tenant, key, model and UTC hour, summed; drain starts anew', async (t) => {
  let now = T0 + 59 * 60_000;
  const meter = new UsageMeter(() => now);
  const who = { appSlug: null, tenant: 'acme', key: 'key-1', model: 'm' };
  meter.add({ ...who, requests: 1, promptTokens: 10, cachedPromptTokens: 4, completionTokens: 5, queueMs: 2, computeMs: 30 });
  meter.add({ ...who, requests: 1, promptTokens: 1, completionTokens: 1 });
  meter.add({ ...who, key: 'key-2', requests: 1 });
  now = T0 + HOUR;
  meter.add({ ...who, requests: 1, promptTokens: 7 });
  const rows = meter.drain();
  const row = (hour: number, key: string, amounts: Partial<UsageHourRow>): UsageHourRow => ({
    appSlug: null, tenant: 'acme', key, model: 'm', hour: new Date(hour).toISOString(),
    requests: 0, promptTokens: 0, cachedPromptTokens: 0, completionTokens: 0, queueMs: 0, computeMs: 0, ...amounts,
  });
  t.same(rows, [
    row(T0, 'key-1', { requests: 2, promptTokens: 11, cachedPromptTokens: 4, completionTokens: 6, queueMs: 2, computeMs: 30 }),
    row(T0, 'key-2', { requests: 1 }),
    row(T0 + HOUR, 'key-1', { requests: 1, promptTokens: 7 }),
  ]);
  t.same(meter.drain(), [], 'nothing since');
  meter.restore(rows.slice(0, 1));
  meter.add({ ...who, requests: 1 });
  t.same(meter.drain().map((r) => [r.hour, r.requests]), [[new Date(T0).toISOString(), 2], [new Date(T0 + HOUR).toISOString(), 1]], 'restored rows go with the next drain');
});

t.test('/metrics: cumulative per tenant; the 20 that used the most tokens by name, the rest as tenant="other"', async (t) => {
  const meter = new UsageMeter(() => T0);
  t.equal(meter.metricsText(), '', 'nothing before any use');
  for (let i = 0; i < METRICS_TENANTS + 2; i++) meter.add({ appSlug: null, tenant: `t${i}`, key: 'k', model: 'm', requests: 1, promptTokens: 100 + i, completionTokens: 1 });
  meter.drain();
  const text = meter.metricsText();
  const series = text.split('\n').filter((l) => l.startsWith('llamacpp:tenant_prompt_tokens_total{'));
  t.equal(series.length, METRICS_TENANTS + 1);
  t.equal(series[0], 'llamacpp:tenant_prompt_tokens_total{tenant="t21"} 121', 'the most tokens first');
  t.equal(series[METRICS_TENANTS], 'llamacpp:tenant_prompt_tokens_total{tenant="other"} 201', 't0 and t1 summed');
  t.match(text, /llamacpp:tenant_requests_total\{tenant="other"\} 2\n/);
});

t.test('the flush writes pending rows on its timer and at stop, keeps them when a write fails', async (t) => {
  const meter = new UsageMeter(() => T0);
  const written: UsageHourRow[][] = [];
  let fail = true;
  const flush = startUsageFlush(meter, { record: async (rows) => { if (fail) throw new Error('database down'); written.push(rows); } }, { intervalMs: 3_600_000 });
  meter.add({ appSlug: 'app', tenant: 'acme', key: 'key:1', model: 'm', requests: 1, promptTokens: 3 });
  await flush.flush();
  t.same(written, [], 'the failed write wrote nothing');
  fail = false;
  meter.add({ appSlug: 'app', tenant: 'acme', key: 'key:1', model: 'm', requests: 1 });
  await flush.stop();
  t.equal(written.length, 1, 'one write at stop');
  t.same(written[0]!.map((r) => [r.requests, r.promptTokens]), [[2, 3]], 'with the rows kept from the failed one');
  await flush.flush();
  t.equal(written.length, 1, 'nothing left: no empty write');
});

t.test('rows stay apart whatever their names hold: no two (app, tenant, key, model) share one', async (t) => {
  const meter = new UsageMeter(() => 0);
  meter.add({ appSlug: null, tenant: 'a', key: 'b|c', model: 'm', requests: 1 });
  meter.add({ appSlug: null, tenant: 'a|b', key: 'c', model: 'm', requests: 2 });
  meter.add({ appSlug: '-', tenant: 'a', key: 'b|c', model: 'm', requests: 4 });
  meter.add({ appSlug: null, tenant: 'a', key: 'b|c', model: 'm', requests: 8 });
  t.same(meter.drain().map((r) => [r.appSlug, r.tenant, r.key, r.requests]), [[null, 'a', 'b|c', 9], [null, 'a|b', 'c', 2], ['-', 'a', 'b|c', 4]]);
});
