// Tenants' limits across replicas on one database: three replicas (a TenantLimiter with its
// FleetLimits each, exchanging counts with the same PostgreSQL) take one tenant's requests round
// robin; the fleet admits up to the limit and past it by at most the stated bound,
// limit x (1 + 0.1) (or 2 x (replicas - 1) for small limits), with far fewer database exchanges than
// requests. And the usage rows the replicas write add up exactly.
import t from 'tap';
import { setTimeout as delay } from 'node:timers/promises';
import { startAuthHarness } from '../../auth/fixtures/harness.js';
import { TenantLimiter } from '../../../src/inference/tenants/rate-limits.js';
import { FleetLimits, fleetOvershoot } from '../../../src/inference/tenants/fleet-limits.js';
import { appFleetStore, postgresFleetStore, type FleetStore } from '../../../src/inference/tenants/fleet-store.js';
import { UsageMeter } from '../../../src/inference/tenants/usage-meter.js';
import type { Tenant, TenantLimits } from '../../../src/inference/tenants/tenant.js';

const harness = await startAuthHarness();
t.teardown(() => harness.close());

const tenant = (id: string, limits: TenantLimits): Tenant => ({ id, key: id, appSlug: null, limits, weight: 1, priorityClass: 'interactive' } as Tenant);

interface Replica {
  limiter: TenantLimiter;
  fleet: FleetLimits;
}

/**
 * `n` replicas of a fleet of their own: their names start with `name-` and only those are counted
 * (the fleets of other tests on this database, alive or gone less than 10 s ago, would count as
 * live replicas and shrink each replica's budget); stopped when test `t` ends.
 */
async function fleetOf(t: Tap.Test, n: number, name: string): Promise<{ replicas: Replica[]; exchanges: () => number }> {
  let exchanges = 0;
  const store = postgresFleetStore(harness.sql, `${name}-`);
  const counting: FleetStore = { exchange: (...args) => { exchanges++; return store.exchange(...args); } };
  const replicas = Array.from({ length: n }, (_, i) => {
    const fleet = new FleetLimits(counting, `${name}-${i}`, { intervalMs: 20 });
    return { fleet, limiter: new TenantLimiter(Date.now, fleet) };
  });
  for (const r of replicas) await r.fleet.start();
  // Every replica has now heard of the others.
  for (const r of replicas) await r.fleet.exchange();
  t.teardown(async () => { for (const r of replicas) await r.fleet.stop(); });
  t.same(replicas.map((r) => r.fleet.fleetSize), Array(n).fill(n), `each replica counts the ${n} of its fleet`);
  return { replicas, exchanges: () => exchanges };
}

/**
 * Requests of `who` round robin over the replicas (1 ms apart) until each replica in turn refuses
 * one for the limit itself (`limitRefusal`), not while it waits for the others' counts: the fleet
 * then knows it has reached the limit; and at least `minAttempts` requests. `admitted` runs for
 * each admitted request. Returns the attempts made.
 */
async function untilFleetRefuses(replicas: Replica[], who: Tenant, limitRefusal: RegExp, admitted: (r: Replica) => void, minAttempts = 0): Promise<number> {
  const deadline = Date.now() + 30_000;
  let refusedInARow = 0;
  let attempts = 0;
  for (let i = 0; refusedInARow < replicas.length || attempts < minAttempts; i++) {
    if (Date.now() > deadline) throw new Error(`the fleet never refused ${who.id} for its limit on every replica (${attempts} attempts)`);
    const r = replicas[i % replicas.length]!;
    const decision = r.limiter.admit(who);
    attempts++;
    if (decision.ok) admitted(r);
    refusedInARow = !decision.ok && limitRefusal.test(decision.message) ? refusedInARow + 1 : 0;
    await delay(1);
  }
  return attempts;
}

const bound = (limit: number, replicas: number): number => limit + fleetOvershoot(limit, replicas);

// First in the file: no replica of another test is alive yet, so the counts are exact.
t.test('replicas of no app do not count an app\'s replicas, nor it theirs', async (t) => {
  const plain = new FleetLimits(postgresFleetStore(harness.sql), 'plain-0', { intervalMs: 1_000_000 });
  await plain.exchange();
  t.equal(plain.fleetSize, 1);
  const ofApp = new FleetLimits(appFleetStore(harness.sql, 'chat'), 'r0', { intervalMs: 1_000_000 });
  await ofApp.exchange();
  await plain.exchange();
  t.same([plain.fleetSize, ofApp.fleetSize], [1, 1], 'each counts itself alone');
});

t.test('requests per minute: 3 replicas round robin admit the limit, and past it at most limit x 1.1', async (t) => {
  const { replicas, exchanges } = await fleetOf(t, 3, 'rpm');
  const limit = 100;
  const who = tenant('rpm-tenant', { requestsPerMinute: limit });
  let admitted = 0;
  const attempts = await untilFleetRefuses(replicas, who, /^Rate limit reached for requests per minute/, (r) => {
    admitted++;
    r.limiter.end(who);
  }, 600);
  t.comment(`admitted ${admitted} of ${attempts} against a limit of ${limit} (overshoot ${((admitted / limit - 1) * 100).toFixed(1)}%), ${exchanges()} exchanges`);
  t.ok(admitted >= limit, `the fleet admits its limit (${admitted})`);
  t.ok(admitted <= bound(limit, 3), `and at most ${bound(limit, 3)} (${admitted})`);
  t.ok(exchanges() < attempts / 2, `batched: ${exchanges()} exchanges for ${attempts} requests`);
  // Each replica now sees the fleet's count in its headers.
  const refused = replicas[0]!.limiter.admit(who);
  t.equal(refused.ok, false);
  t.equal(refused.headers['x-ratelimit-remaining-requests'], '0');
});

t.test('requests in progress: held requests stay within limit + max(10%, 2 x (replicas - 1)) across the fleet', async (t) => {
  const { replicas } = await fleetOf(t, 3, 'conc');
  const limit = 6;
  const who = tenant('conc-tenant', { concurrentRequests: limit });
  const held: Replica[] = [];
  await untilFleetRefuses(replicas, who, /^Concurrent request limit reached/, (r) => held.push(r));
  t.ok(held.length >= limit && held.length <= bound(limit, 3), `${held.length} in progress at once, limit ${limit}, bound ${bound(limit, 3)}`);
  for (const r of held) r.limiter.end(who);
  for (const r of replicas) await r.fleet.exchange();
  for (const r of replicas) await r.fleet.exchange();
  t.ok(replicas[1]!.limiter.admit(who).ok, 'ended requests free the fleet\'s places');
});

t.test('tokens per minute: admissions stop once the fleet\'s tokens reach the limit, within the bound', async (t) => {
  const { replicas } = await fleetOf(t, 3, 'tpm');
  const limit = 1000;
  const perRequest = 10;
  const who = tenant('tpm-tenant', { tokensPerMinute: limit });
  let tokens = 0;
  await untilFleetRefuses(replicas, who, /^Rate limit reached for tokens per minute/, (r) => {
    r.limiter.addTokens(who, perRequest);
    tokens += perRequest;
    r.limiter.end(who);
  });
  // A request admitted below the limit counts its tokens after: one request's worth past the bound.
  t.ok(tokens >= limit && tokens <= bound(limit, 3) + perRequest, `${tokens} tokens admitted, limit ${limit}`);
});

t.test('a replica that cannot reach the database keeps its counts for the next exchange', async (t) => {
  let fail = true;
  const store = postgresFleetStore(harness.sql);
  const flaky: FleetStore = { exchange: (...args) => (fail ? Promise.reject(new Error('connection refused')) : store.exchange(...args)) };
  const lines: string[] = [];
  const lonely = new FleetLimits(flaky, 'flaky-0', { intervalMs: 1_000_000, log: (l) => lines.push(l) });
  const limiter = new TenantLimiter(Date.now, lonely);
  const who = tenant('flaky-tenant', { requestsPerMinute: 50 });
  t.ok(limiter.admit(who).ok);
  await lonely.exchange();
  t.equal(lonely.failures, 1);
  t.match(lines[0], /exchanging counts with the fleet failed \(sent again with the next exchange\): connection refused/);
  fail = false;
  await lonely.exchange();
  const other = new FleetLimits(store, 'flaky-1', { intervalMs: 1_000_000 });
  new TenantLimiter(Date.now, other).admit(who);
  await other.exchange();
  t.same(other.of('flaky-tenant'), { requests: 1, tokens: 0, inFlight: 1 }, 'the kept count arrived');
});

t.test('an exchange whose answer is lost after the store applied it is sent again and counts nothing twice', async (t) => {
  const store = postgresFleetStore(harness.sql, 'lost-');
  let lose = 0;
  // Applies the exchange, then fails as a timeout after the commit would.
  const lossy: FleetStore = {
    exchange: async (...args) => {
      const view = await store.exchange(...args);
      if (lose > 0) {
        lose--;
        throw new Error('the answer was lost');
      }
      return view;
    },
  };
  const fleet = new FleetLimits(lossy, 'lost-0', { intervalMs: 1_000_000 });
  const limiter = new TenantLimiter(Date.now, fleet);
  const who = tenant('lost-tenant', { requestsPerMinute: 10_000, tokensPerMinute: 1_000_000 });
  let requests = 0;
  let tokens = 0;
  for (let round = 0; round < 5; round++) {
    for (let i = 0; i < 7; i++) {
      t.ok(limiter.admit(who).ok);
      limiter.addTokens(who, 11);
      limiter.end(who);
      requests++;
      tokens += 11;
    }
    lose = round % 2 === 0 ? 2 : 1;
    await fleet.exchange();
    if (round % 2 === 0) await fleet.exchange();
    await fleet.exchange();
  }
  t.equal(fleet.failures, 8, 'eight answers lost');
  const [stored] = await harness.sql<Array<{ requests: string; tokens: string }>>`
    select coalesce(sum(requests), 0) as requests, coalesce(sum(tokens), 0) as tokens from tenant_rate_counts where replica = 'lost-0' and tenant = 'lost-tenant'
  `;
  t.same([Number(stored!.requests), Number(stored!.tokens)], [requests, tokens], `the store holds ${requests} requests and ${tokens} tokens, each once`);
  const other = new FleetLimits(store, 'lost-1', { intervalMs: 1_000_000 });
  new TenantLimiter(Date.now, other).admit(who);
  await other.exchange();
  t.same(other.of('lost-tenant'), { requests, tokens, inFlight: 0 }, 'and another replica sees exactly them');
});

t.test('usage rows written by three replicas add up exactly', async (t) => {
  const meters = [0, 1, 2].map(() => new UsageMeter());
  let expected = { requests: 0, promptTokens: 0, completionTokens: 0 };
  for (let round = 0; round < 5; round++) {
    meters.forEach((m, i) => {
      const e = { appSlug: null, tenant: 'usage-tenant', key: 'k', model: 'm', requests: 1 + i, promptTokens: 37 + round, completionTokens: 5 * i + round };
      m.add(e);
      expected = { requests: expected.requests + e.requests, promptTokens: expected.promptTokens + e.promptTokens, completionTokens: expected.completionTokens + e.completionTokens };
    });
    await Promise.all(meters.map((m) => harness.service.usage.record(m.drain())));
  }
  const [row] = await harness.sql<Array<{ requests: string; prompt_tokens: string; completion_tokens: string }>>`
    select sum(requests) as requests, sum(prompt_tokens) as prompt_tokens, sum(completion_tokens) as completion_tokens
    from usage_hourly where tenant = 'usage-tenant'
  `;
  t.same({ requests: Number(row!.requests), promptTokens: Number(row!.prompt_tokens), completionTokens: Number(row!.completion_tokens) }, expected);
});
