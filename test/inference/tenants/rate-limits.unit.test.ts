// TenantLimiter on a fake clock: the sliding 60 s windows, the refusals' Retry-After, and OpenAI's headers.
import t from 'tap';
import { formatReset, TenantLimiter } from '../../../src/inference/tenants/rate-limits.js';
import type { Tenant, TenantLimits } from '../../../src/inference/tenants/tenant.js';

const tenant = (limits: TenantLimits, id = 'acme'): Tenant => ({ id, key: id, appSlug: null, weight: 1, priorityClass: 'interactive', limits });

function clock(start = 1_000_000): { now: () => number; advance(ms: number): void } {
  let ms = start;
  return { now: () => ms, advance: (d) => { ms += d; } };
}

t.test('requestsPerMinute: the n+1-th request in 60 s is refused, with when to retry; refusals are not counted', async (t) => {
  const c = clock();
  const limiter = new TenantLimiter(c.now);
  const acme = tenant({ requestsPerMinute: 2 });
  const first = limiter.admit(acme);
  t.same(first, { ok: true, headers: { 'x-ratelimit-limit-requests': '2', 'x-ratelimit-remaining-requests': '1', 'x-ratelimit-reset-requests': '1m0s' } });
  c.advance(15_000);
  t.same(limiter.admit(acme), { ok: true, headers: { 'x-ratelimit-limit-requests': '2', 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '1m0s' } });
  c.advance(5_000);
  t.same(limiter.admit(acme), {
    ok: false,
    headers: { 'x-ratelimit-limit-requests': '2', 'x-ratelimit-remaining-requests': '0', 'x-ratelimit-reset-requests': '55s' },
    retryAfterSeconds: 40,
    message: 'Rate limit reached for requests per minute (limit 2) of tenant acme',
  }, 'the third: refused until the first leaves the window, 40 s on');
  c.advance(40_000);
  t.equal(limiter.admit(acme).ok, true, '60 s after the first: admitted');
  t.equal(limiter.admit(acme).ok, false, 'and the next refused again (the second and third are in the window)');
});

t.test('tokensPerMinute: checked at admission against the tokens of the last 60 s; a request admitted below it may go past', async (t) => {
  const c = clock();
  const limiter = new TenantLimiter(c.now);
  const acme = tenant({ tokensPerMinute: 100 });
  t.same(limiter.admit(acme), { ok: true, headers: { 'x-ratelimit-limit-tokens': '100', 'x-ratelimit-remaining-tokens': '100', 'x-ratelimit-reset-tokens': '0ms' } });
  limiter.addTokens(acme, 60);
  c.advance(10_000);
  limiter.addTokens(acme, 70);
  const refused = limiter.admit(acme);
  t.same(refused, {
    ok: false,
    headers: { 'x-ratelimit-limit-tokens': '100', 'x-ratelimit-remaining-tokens': '0', 'x-ratelimit-reset-tokens': '1m0s' },
    retryAfterSeconds: 50,
    message: 'Rate limit reached for tokens per minute (limit 100, used 130) of tenant acme',
  }, '130 used: refused until the first 60 leave the window');
  c.advance(50_000);
  t.same(limiter.admit(acme), { ok: true, headers: { 'x-ratelimit-limit-tokens': '100', 'x-ratelimit-remaining-tokens': '30', 'x-ratelimit-reset-tokens': '10s' } }, '70 left in the window');
});

t.test('concurrentRequests: refused while that many are in progress, admitted once one ends', async (t) => {
  const limiter = new TenantLimiter(clock().now);
  const acme = tenant({ concurrentRequests: 1 });
  t.equal(limiter.admit(acme).ok, true);
  t.same(limiter.admit(acme), { ok: false, headers: {}, retryAfterSeconds: 1, message: 'Concurrent request limit reached (limit 1) of tenant acme' });
  limiter.end(acme);
  t.equal(limiter.admit(acme).ok, true);
});

t.test('tenants are counted apart', async (t) => {
  const limiter = new TenantLimiter(clock().now);
  t.equal(limiter.admit(tenant({ requestsPerMinute: 1 }, 'a')).ok, true);
  t.equal(limiter.admit(tenant({ requestsPerMinute: 1 }, 'b')).ok, true);
  t.equal(limiter.admit(tenant({ requestsPerMinute: 1 }, 'a')).ok, false);
});

t.test('current(): the headers without counting a request', async (t) => {
  const limiter = new TenantLimiter(clock().now);
  const acme = tenant({ requestsPerMinute: 3 });
  limiter.admit(acme);
  t.same(limiter.current(acme), { 'x-ratelimit-limit-requests': '3', 'x-ratelimit-remaining-requests': '2', 'x-ratelimit-reset-requests': '1m0s' });
  t.same(limiter.current(acme), { 'x-ratelimit-limit-requests': '3', 'x-ratelimit-remaining-requests': '2', 'x-ratelimit-reset-requests': '1m0s' });
});

t.test('reset durations in OpenAI\'s format', async (t) => {
  t.equal(formatReset(0), '0ms');
  t.equal(formatReset(20), '20ms');
  t.equal(formatReset(6_500), '6.5s');
  t.equal(formatReset(60_000), '1m0s');
  t.equal(formatReset(62_250), '1m2.25s');
});
