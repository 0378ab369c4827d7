// Rate limits held in PostgreSQL: per address and per IP on code requests and verifications,
// per app and per session on /auth/refresh, per IP on wrong admin keys; 429 RATE_LIMITED with
// Retry-After; shared by two instances on one database; exact under 1000 concurrent requests.
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t, { type Test } from 'tap';
import { startHttpServer } from '../../src/http/server.js';
import { formatAuthError } from '../../src/auth/errors.js';
import { MAX_BODY_BYTES } from '../../src/auth/limits.js';
import { createAuthService } from '../../src/auth/mount.js';
import { parseRateLimits, RATE_LIMIT_RULES } from '../../src/auth/rate-limit-rules.js';
import { ADMIN_KEY, startAuthHarness, statusCounts, type Reply, type TestApp, type Tokens } from './fixtures/harness.js';

const LIMITS = {
  otp_request_address: { maxHits: 5, windowSeconds: 3600 },
  otp_request_ip: { maxHits: 8, windowSeconds: 3600 },
  otp_verify_address: { maxHits: 4, windowSeconds: 3600 },
  otp_verify_ip: { maxHits: 6, windowSeconds: 1800 },
  refresh_app: { maxHits: 6, windowSeconds: 60 },
  refresh_family: { maxHits: 3, windowSeconds: 60 },
  admin_key_failure_ip: { maxHits: 3, windowSeconds: 900 },
};
// The OTP resend interval is off, so that only the rules above refuse.
const h = await startAuthHarness({ rateLimits: LIMITS, otpLimits: { resendIntervalMs: 0 } });
t.teardown(() => h.close());

let app: TestApp;
t.beforeEach(async () => { ({ app } = await h.startFresh()); });

const requestCode = (email: string) => h.post('/auth/otp/request', { ...h.credentials(app), email });
const verifyCode = (email: string, code = '000000') => h.post('/auth/otp/verify', { ...h.credentials(app), email, code });

function assertLimited(t: Test, reply: Reply, retryAfter: number, name?: string): void {
  t.equal(reply.status, 429, name);
  t.same(reply.body, { error: { code: 'RATE_LIMITED', message: 'Too many requests; retry later' } }, name);
  t.equal(reply.headers.get('retry-after'), String(retryAfter), name);
}

t.test('code requests per address: the limit, then 429 with Retry-After until the window ends', async (t) => {
  for (let i = 0; i < 5; i++) t.equal((await requestCode('ann@example.com')).status, 200);
  h.clock.advance(600_000);
  assertLimited(t, await requestCode('ANN@example.com'), 3000, 'the address is normalised first');
  t.equal(h.outbox.messages.length, 5);
  t.equal((await requestCode('bob@example.com')).status, 200, 'another address has its own count');
  h.clock.advance(3000_000);
  t.equal((await requestCode('ann@example.com')).status, 200, 'a new window');
});

t.test('code requests per IP, across addresses', async (t) => {
  for (let i = 0; i < 8; i++) t.equal((await requestCode(`user${i}@example.com`)).status, 200);
  assertLimited(t, await requestCode('user9@example.com'), 3600);
});

t.test('verifications per address and per IP', async (t) => {
  await requestCode('ann@example.com');
  const code = h.outbox.codeFor('ann@example.com');
  const wrong = code === '000000' ? '111111' : '000000';
  for (let i = 0; i < 4; i++) t.equal((await verifyCode('ann@example.com', wrong)).status, 401);
  assertLimited(t, await verifyCode('ann@example.com', code), 3600, 'even the right code, once the address is limited');
  t.equal((await verifyCode('bob@example.com')).status, 401, 'the 6th verification from this IP is still counted');
  assertLimited(t, await verifyCode('cid@example.com'), 1800, 'the 7th is over the IP limit');
});

t.test('refreshes per session: over the limit is 429 and the presented token stays the live one', async (t) => {
  const tokens = await h.login(app, 'ann@example.com');
  let token = tokens.refresh_token;
  for (let i = 0; i < 3; i++) {
    const reply = await h.refresh(app, token);
    t.equal(reply.status, 200);
    token = reply.body.refresh_token;
  }
  h.clock.advance(20_000);
  assertLimited(t, await h.refresh(app, token), 40);
  const other = await h.login(app, 'bob@example.com');
  t.equal((await h.refresh(app, other.refresh_token)).status, 200, 'another session has its own count');
  h.clock.advance(40_000);
  const after = await h.refresh(app, token);
  t.equal(after.status, 200, 'the refused token rotates once the window ends (no reuse was recorded)');
});

t.test('refreshes per app count only with the right secret', async (t) => {
  const sessions: Tokens[] = [];
  for (const who of ['a', 'b', 'c']) sessions.push(await h.login(app, `${who}@example.com`));
  for (let i = 0; i < 10; i++) {
    const wrong = await h.post('/auth/refresh', { app_id: app.id, app_secret: 'as_wrong', refresh_token: sessions[0]!.refresh_token });
    t.equal(wrong.status, 401);
  }
  const replies: Reply[] = [];
  for (let i = 0; i < 7; i++) {
    const session = sessions[i % 3]!;
    const reply = await h.refresh(app, session.refresh_token);
    if (reply.status === 200) session.refresh_token = reply.body.refresh_token;
    replies.push(reply);
  }
  t.same(statusCounts(replies), { 200: 6, '429 RATE_LIMITED': 1 }, 'six per minute for the app, whichever session');
  t.equal(replies[6]!.headers.get('retry-after'), '60');
});

t.test('wrong admin keys per IP: after the limit even the right key is 429, until the block is lifted or ends', async (t) => {
  for (let i = 0; i < 3; i++) {
    const reply = await h.request('GET', '/admin/apps', { headers: { 'x-admin-key': `wrong-${i}-0123456789abcdef` } });
    t.equal(reply.status, 401);
    t.equal(reply.body.error.code, 'ADMIN_KEY_INVALID');
  }
  assertLimited(t, await h.admin('GET', '/admin/apps'), 900);
  const [blocked] = await h.sql`select hits, max_hits from rate_limit_counters where rule = 'admin_key_failure_ip' and subject = '127.0.0.1'`;
  t.same({ ...blocked }, { hits: 3, max_hits: 3 }, 'a refused right key is not counted as a failure');
  const rejected = await h.sql`select count(*)::int as n from audit_events where type = 'admin.key_rejected'`;
  t.equal(rejected[0]!.n, 3);
  h.clock.advance(900_000);
  t.equal((await h.admin('GET', '/admin/apps')).status, 200, 'the block ends with its window');
});

t.test('GET /admin/rate-limits lists the limits and the current blocks; DELETE lifts one', async (t) => {
  for (let i = 0; i < 5; i++) await requestCode('ann@example.com');
  const reply = await h.admin('GET', '/admin/rate-limits');
  t.equal(reply.status, 200);
  t.same(reply.body.rules.otp_request_address, { max_hits: 5, window_seconds: 3600 });
  t.same(reply.body.rules.refresh_family, { max_hits: 3, window_seconds: 60 });
  const subject = `${app.id}:email:ann@example.com`;
  t.same(reply.body.blocks, [{ rule: 'otp_request_address', subject, hits: 5, max_hits: 5, blocked_until: new Date(h.clock.now() + 3600_000).toISOString() }]);
  const lifted = await h.admin('DELETE', `/admin/rate-limits/blocks/otp_request_address/${encodeURIComponent(subject)}`);
  t.same(lifted.body, { rule: 'otp_request_address', subject, lifted: true });
  t.same((await h.admin('GET', '/admin/rate-limits')).body.blocks, []);
  t.equal((await requestCode('ann@example.com')).status, 200);
  const unknown = await h.admin('DELETE', '/admin/rate-limits/blocks/no_such_rule/x');
  t.equal(unknown.status, 400);
  t.equal(unknown.body.error.code, 'VALIDATION_ERROR');
});

t.test('two instances on one database share the counters', async (t) => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'auth-second-'));
  const second = await createAuthService({
    databaseUrl: h.service.databaseUrl, dataDir, keyDir: path.join(h.dataDir, 'keys'), issuer: 'http://auth.test', adminKey: ADMIN_KEY,
    otpDelivery: h.outbox, clock: h.clock, rateLimits: LIMITS, otpLimits: { resendIntervalMs: 0 }, log: () => {},
  });
  const server = await startHttpServer({ host: '127.0.0.1', port: 0, routes: second.routes, formatError: formatAuthError, maxBodyBytes: MAX_BODY_BYTES });
  t.teardown(async () => { server.close(); await second.close(); await fs.rm(dataDir, { recursive: true, force: true }); });
  const viaSecond = async (email: string): Promise<number> => (await fetch(`http://127.0.0.1:${server.port}/auth/otp/request`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...h.credentials(app), email }),
  })).status;
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) statuses.push(i % 2 === 0 ? (await requestCode('ann@example.com')).status : await viaSecond('ann@example.com'));
  t.same(statuses, [200, 200, 200, 200, 200, 429], 'five between the two instances, then 429 from either');
  t.equal(await viaSecond('ann@example.com'), 429);
  t.equal(h.outbox.messages.length, 5);
});

t.test('1000 concurrent code requests for one address send exactly the limit', async (t) => {
  const replies = await Promise.all(Array.from({ length: 1000 }, () => requestCode('ann@example.com')));
  t.same(statusCounts(replies), { 200: 5, '429 RATE_LIMITED': 995 });
  t.equal(h.outbox.messages.length, 5, 'five codes were sent');
  t.ok(replies.filter((r) => r.status === 429).every((r) => r.headers.get('retry-after') === '3600'));
});

t.test('AUTH_RATE_LIMITS parses rule=hits/seconds and refuses anything else', async (t) => {
  t.same(parseRateLimits('otp_request_ip=20/600, refresh_family=10/60'), {
    otp_request_ip: { maxHits: 20, windowSeconds: 600 }, refresh_family: { maxHits: 10, windowSeconds: 60 },
  });
  t.throws(() => parseRateLimits('nope=1/1'), /unknown rule "nope"/);
  t.throws(() => parseRateLimits('otp_request_ip=20'), /is not rule=hits\/seconds/);
  t.throws(() => parseRateLimits('otp_request_ip=0/60'), /at least 1 hit/);
  t.ok(Object.keys(RATE_LIMIT_RULES).length === 12, 'seven rules, passkey_ceremony_ip, api_key_introspect_ip, oauth_authorize_ip, oauth_register_ip and oauth_token_ip');
});
