// UsageMeter (hourly rows and /metrics' per-tenant series) and the usage flush to the auth service.
import t from 'tap';
import { METRICS_TENANTS, UsageMeter, type UsageHourRow } from '../../../src/inference/tenants/usage-meter.js';
import { startUsageFlush, UsageBatchRefused } from '../../../src/inference/tenants/usage-flush.js';
import { mountedUsageRecord } from '../../../src/inference/access/auth-bridge.js';

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
});

t.test('a key that alternates models or tenants, and a drain between two uses, keep their rows apart (the meter remembers each key\'s last row)', async (t) => {
  const meter = new UsageMeter(() => T0);
  const who = { appSlug: 'app', tenant: 'acme', key: 'key-1' };
  meter.add({ ...who, model: 'a', requests: 1, promptTokens: 1 });
  meter.add({ ...who, model: 'b', requests: 1, promptTokens: 2 });
  meter.add({ ...who, model: 'a', requests: 1, promptTokens: 4 });
  meter.add({ ...who, tenant: 'other', model: 'a', requests: 1, promptTokens: 8 });
  meter.add({ ...who, appSlug: null, model: 'a', requests: 1, promptTokens: 16 });
  const summary = (rows: UsageHourRow[]): string[] => rows.map((r) => `${r.appSlug}/${r.tenant}/${r.model}: ${r.requests} ${r.promptTokens}`);
  t.same(summary(meter.drain()), ['app/acme/a: 2 5', 'app/acme/b: 1 2', 'app/other/a: 1 8', 'null/acme/a: 1 16']);
  meter.add({ ...who, model: 'a', requests: 1, promptTokens: 32 });
  t.same(summary(meter.drain()), ['app/acme/a: 1 32'], 'a use after a drain is in the next batch only');
  t.match(meter.metricsText(), /llamacpp:tenant_prompt_tokens_total\{tenant="acme"\} 55\n/, 'the tenant\'s total counts every use once');
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

t.test('the flush writes pending rows at stop; a failed batch is written again first, with its id, and new rows wait in the meter', async (t) => {
  const meter = new UsageMeter(() => T0);
  const written: Array<{ id: string; rows: Array<[number, number]> }> = [];
  const tried: string[] = [];
  let fail = true;
  const flush = startUsageFlush(meter, {
    record: async (rows, id) => {
      tried.push(id);
      if (fail) throw new Error('timeout (the service may have applied it)');
      written.push({ id, rows: rows.map((r) => [r.requests, r.promptTokens]) });
    },
  }, { intervalMs: 3_600_000 });
  meter.add({ appSlug: 'app', tenant: 'acme', key: 'key:1', model: 'm', requests: 1, promptTokens: 3 });
  await flush.flush();
  t.same(written, [], 'the failed write wrote nothing');
  meter.add({ appSlug: 'app', tenant: 'acme', key: 'key:1', model: 'm', requests: 1 });
  await flush.flush();
  t.equal(tried.length, 2, 'only the failed batch was tried again: the new rows stayed in the meter');
  t.equal(tried[1], tried[0], 'with the same id');
  fail = false;
  meter.add({ appSlug: 'app', tenant: 'acme', key: 'key:1', model: 'm', requests: 1 });
  await flush.stop();
  t.same(written, [{ id: tried[0], rows: [[1, 3]] }, { id: written[1]?.id, rows: [[2, 0]] }], 'at stop: the kept batch unchanged under its id, then the meter\'s rows as a new batch');
  t.not(written[1]!.id, tried[0]);
  await flush.flush();
  t.equal(written.length, 2, 'nothing left: no empty write');
});

t.test('the flush drops a batch its service refuses for good, and goes on with the next', async (t) => {
  const meter = new UsageMeter(() => T0);
  const lines: string[] = [];
  const written: number[][] = [];
  const flush = startUsageFlush(meter, {
    split: (rows) => rows.map((row) => [row]),
    record: async (rows, id) => {
      if (rows[0]!.requests === 1) throw new UsageBatchRefused(`400 malformed ${id}`);
      written.push(rows.map((r) => r.requests));
    },
  }, { intervalMs: 3_600_000, log: (line) => lines.push(line) });
  meter.add({ appSlug: null, tenant: 'a', key: 'k', model: 'm', requests: 1 });
  meter.add({ appSlug: null, tenant: 'b', key: 'k', model: 'm', requests: 2 });
  await flush.stop();
  t.same(written, [[2]], 'each part a batch of its own: the refused one dropped, the other written');
  t.equal(lines.length, 1);
  t.match(lines[0], /^usage: the auth service refused batch [0-9a-f-]{36} of 1 rows for good, dropped: 400 malformed/);
  await flush.flush();
  t.same(written, [[2]], 'the refused batch is not tried again');
});

t.test('rows stay apart whatever their names hold: no two (app, tenant, key, model) share one', async (t) => {
  const meter = new UsageMeter(() => 0);
  meter.add({ appSlug: null, tenant: 'a', key: 'b|c', model: 'm', requests: 1 });
  meter.add({ appSlug: null, tenant: 'a|b', key: 'c', model: 'm', requests: 2 });
  meter.add({ appSlug: '-', tenant: 'a', key: 'b|c', model: 'm', requests: 4 });
  meter.add({ appSlug: null, tenant: 'a', key: 'b|c', model: 'm', requests: 8 });
  t.same(meter.drain().map((r) => [r.appSlug, r.tenant, r.key, r.requests]), [[null, 'a', 'b|c', 9], [null, 'a|b', 'c', 2], ['-', 'a', 'b|c', 4]]);
});

t.test('the mounted service\'s refusal of a malformed row drops its batch for good; any other failure keeps it', async (t) => {
  const failing = (err: Error) => ({ usage: { record: async () => { throw err; } } }) as unknown as Parameters<typeof mountedUsageRecord>[0];
  const refused = await mountedUsageRecord(failing(new RangeError('usage row 0: requests must be a non-negative integer, got -1')), []).then(() => null, (err: unknown) => err);
  t.ok(refused instanceof UsageBatchRefused, 'refused for good');
  t.equal((refused as Error).message, 'usage row 0: requests must be a non-negative integer, got -1');
  const down = new Error('connection refused');
  await t.rejects(mountedUsageRecord(failing(down), []), down, 'a passing failure is not a refusal');
});
