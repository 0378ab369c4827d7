// auth-server's worker threads (src/auth/workers): two workers on one port, whatever
// AUTH_TEST_WORKERS says. Each test makes its requests on fresh connections, so the kernel
// spreads them over the workers (SO_REUSEPORT), and holds a row lock until both workers have
// requests waiting on it: then the test knows that both took part.
import http from 'node:http';
import t, { type Test } from 'tap';
import { startAuthHarness, statusCounts, type Reply, type Tokens } from './fixtures/harness.js';
import { headerOf } from './fixtures/tokens.js';

const WORKERS = 2;
const h = await startAuthHarness({}, { workers: WORKERS });
t.teardown(() => h.close());

/** A JSON request on a connection of its own (no keep-alive pool: each may reach another worker). */
function freshRequest(method: string, route: string, json?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const body = json === undefined ? undefined : JSON.stringify(json);
  return new Promise((resolve, reject) => {
    const request = http.request(`${h.base}${route}`, { method, agent: false, headers: { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) } }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => { text += chunk; });
      response.on('end', () => resolve({ status: response.statusCode!, headers: new Headers(response.headers as Record<string, string>), body: text ? JSON.parse(text) : undefined }));
    });
    request.on('error', reject);
    request.end(body);
  });
}

/** The workers (by application_name) with a database session waiting for a lock. */
async function workersWaiting(): Promise<string[]> {
  const rows = await h.sql`
    select distinct application_name from pg_stat_activity
    where wait_event_type = 'Lock' and datname = current_database() and application_name like 'auth-server worker %'
    order by application_name
  `;
  return rows.map((row) => row.application_name as string);
}

/** Polls until `condition` holds or `timeoutMs` passes; returns whether it held. */
async function until(condition: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return condition();
}

/**
 * Runs `requests` while a transaction holds the row locks `lock` takes, releases them once every
 * worker has a request waiting, and returns the answers (and asserts that both workers had requests waiting).
 */
async function whileLocked(lock: (sql: typeof h.sql) => Promise<unknown>, requests: () => Promise<Reply>[], t: Test): Promise<Reply[]> {
  const blocker = await h.sql.reserve();
  let replies: Promise<Reply[]>;
  try {
    await blocker`begin`;
    await lock(blocker as unknown as typeof h.sql);
    replies = Promise.all(requests());
    const both = await until(async () => (await workersWaiting()).length === WORKERS, 10_000);
    t.ok(both, `requests wait in both workers: ${(await workersWaiting()).join(', ')}`);
  } finally {
    await blocker`commit`;
    blocker.release();
  }
  return replies;
}

t.test('50 concurrent refreshes of one token split across the workers: exactly one 200, 49 TOKEN_REUSE', async (t) => {
  const { app, tokens } = await h.startFresh({ session: true });
  const refresh = () => freshRequest('POST', '/auth/refresh', { ...h.credentials(app), refresh_token: tokens.refresh_token });
  const replies = await whileLocked(
    (sql) => sql`select 1 from refresh_families where user_id = ${tokens.user_id} for update`,
    () => Array.from({ length: 50 }, refresh),
    t,
  );
  t.same(statusCounts(replies), { '200': 1, '401 TOKEN_REUSE': 49 });
  const [family] = await h.sql`select revoked_at is not null as revoked, revoked_reason from refresh_families`;
  t.same({ ...family }, { revoked: true, revoked_reason: 'reuse' });
});

t.test('a signing-key rotation answered by one worker is used by every worker at once', async (t) => {
  const { app } = await h.startFresh();
  const sessions: Tokens[] = [];
  for (let i = 0; i < 20; i++) sessions.push(await h.login(app, `user${i}@example.com`));
  const rotated = await freshRequest('POST', '/admin/signing-keys/rotate', undefined, { 'x-admin-key': 'test-admin-key-0123456789abcdef' });
  t.equal(rotated.status, 200);
  const replies = await whileLocked(
    (sql) => sql`select 1 from refresh_families for update`,
    () => sessions.map((session) => freshRequest('POST', '/auth/refresh', { ...h.credentials(app), refresh_token: session.refresh_token })),
    t,
  );
  t.same(statusCounts(replies), { '200': 20 });
  t.same([...new Set(replies.map((reply) => headerOf(reply.body.access_token).kid))], [rotated.body.kid], 'every worker signs with the new key');
  const me = await Promise.all(replies.map((reply) => freshRequest('GET', '/auth/me', undefined, { authorization: `Bearer ${reply.body.access_token}` })));
  t.same(statusCounts(me), { '200': 20 }, 'and every worker verifies its tokens');
});

t.test('the workers log through the primary and relay one-time codes to its delivery', async (t) => {
  const { app } = await h.startFresh();
  const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => freshRequest('POST', '/auth/otp/request', { ...h.credentials(app), email: `otp${i}@example.com` })));
  t.same(statusCounts(replies), { '200': 10 });
  t.same(h.outbox.messages.map((m) => m.to).sort(), Array.from({ length: 10 }, (_, i) => `otp${i}@example.com`).sort());
});

t.test('close() stops every worker: the port refuses connections, and closing again is a no-op', async (t) => {
  const base = h.base;
  await h.close();
  await t.rejects(fetch(`${base}/.well-known/jwks.json`), { cause: { code: 'ECONNREFUSED' } });
  await h.close();
});
