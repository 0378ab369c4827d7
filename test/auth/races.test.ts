// Correctness under concurrency: parallel refreshes of one token, refresh against revoke,
// parallel code guesses, parallel first logins, a login against a soft-delete.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import t from 'tap';
import { startAuthHarness, statusCounts, type Reply, type TestApp, type Tokens } from './fixtures/harness.js';

// The attempt budget of a code is what the guessing race tests; the per-address and per-IP
// verification limits (rate-limits.test.ts) are set above what it sends.
const h = await startAuthHarness({ rateLimits: { otp_verify_address: { maxHits: 100_000, windowSeconds: 3600 }, otp_verify_ip: { maxHits: 100_000, windowSeconds: 3600 } } });
t.teardown(() => h.close());

let app: TestApp;
let tokens: Tokens;
t.beforeEach(async () => { ({ app, tokens } = await h.startFresh({ session: true })); });

t.test('50 concurrent refreshes of one token: exactly one 200, 49 TOKEN_REUSE, the family ends revoked', async (t) => {
  const replies = await Promise.all(Array.from({ length: 50 }, () => h.refresh(app, tokens.refresh_token)));
  t.same(statusCounts(replies), { '200': 1, '401 TOKEN_REUSE': 49 });
  const [family] = await h.sql`select revoked_at is not null as revoked, revoked_reason from refresh_families`;
  t.same({ ...family }, { revoked: true, revoked_reason: 'reuse' });
  const states = await h.sql`select state, count(*)::int as n from refresh_tokens group by state order by state`;
  t.same(states.map((r) => ({ ...r })), [{ state: 'revoked', n: 1 }, { state: 'rotated', n: 1 }], 'one token was ever issued from the family');
  const winner = replies.find((r) => r.status === 200)!;
  const late = await h.refresh(app, winner.body.refresh_token);
  t.equal(late.status, 401);
  t.equal(late.body.error.code, 'TOKEN_REVOKED', 'the token issued before the revocation no longer works');
});

t.test('50 concurrent refreshes of one token, repeated: never a 500 and never two winners', async (t) => {
  for (let round = 0; round < 5; round++) {
    const session = await h.login(app, `user${round}@example.com`);
    const replies = await Promise.all(Array.from({ length: 50 }, () => h.refresh(app, session.refresh_token)));
    t.same(statusCounts(replies), { '200': 1, '401 TOKEN_REUSE': 49 }, `round ${round}`);
  }
});

t.test('concurrent refresh and revoke of one session never leave a usable refresh token', async (t) => {
  for (let round = 0; round < 10; round++) {
    const session = await h.login(app, `user${round}@example.com`);
    const [refreshed, revoked] = await Promise.all([
      h.refresh(app, session.refresh_token),
      h.post('/auth/revoke', { ...h.credentials(app), refresh_token: session.refresh_token }),
    ]);
    t.equal(revoked.status, 200);
    t.ok(refreshed.status === 200 || refreshed.body.error.code === 'TOKEN_REVOKED', `round ${round}: ${refreshed.status}`);
    if (refreshed.status === 200) {
      const next = await h.refresh(app, refreshed.body.refresh_token);
      t.equal(next.body.error.code, 'TOKEN_REVOKED', `round ${round}: the rotated child was revoked with its family`);
    }
    const [family] = await h.sql`
      select f.revoked_at is not null as revoked,
        (select count(*)::int from refresh_tokens t where t.family_id = f.id and t.state = 'active') as active
      from refresh_families f
      where f.user_id = ${session.user_id}
      order by f.created_at desc
      limit 1
    `;
    t.same({ ...family }, { revoked: true, active: 0 }, `round ${round}: the family is revoked with no active token`);
  }
});

t.test('concurrent refreshes and revoke-user leave every family of the user revoked', async (t) => {
  const sessions: Tokens[] = [tokens];
  for (let i = 0; i < 4; i++) {
    h.clock.advance(60_000);
    sessions.push(await h.login(app, 'ann@example.com'));
  }
  const [revoked, ...refreshed] = await Promise.all([
    h.post('/auth/revoke-user', { ...h.credentials(app), user_id: tokens.user_id }),
    ...sessions.map((s) => h.refresh(app, s.refresh_token)),
  ]);
  t.equal(revoked!.status, 200);
  for (const reply of refreshed) {
    if (reply.status === 200) t.equal((await h.refresh(app, reply.body.refresh_token)).body.error.code, 'TOKEN_REVOKED');
    else t.equal(reply.body.error.code, 'TOKEN_REVOKED');
  }
  const [live] = await h.sql`select count(*)::int as n from refresh_families where revoked_at is null`;
  t.equal(live!.n, 0);
  const [active] = await h.sql`select count(*)::int as n from refresh_tokens where state = 'active'`;
  t.equal(active!.n, 0, 'no token is left active in a revoked family');
});

t.test('50 parallel wrong guesses spend at most the 5 attempts of the code', async (t) => {
  h.clock.advance(60_000);
  await h.post('/auth/otp/request', { ...h.credentials(app), email: 'ann@example.com' });
  const right = h.outbox.codeFor('ann@example.com');
  const guesses = Array.from({ length: 50 }, (_, i) => String(i).padStart(6, '0')).filter((g) => g !== right).slice(0, 50);
  const replies = await Promise.all(guesses.map((code) => h.post('/auth/otp/verify', { ...h.credentials(app), email: 'ann@example.com', code })));
  t.same(statusCounts(replies), { [`401 OTP_INVALID`]: guesses.length });
  const [row] = await h.sql`select attempts from otp_codes`;
  t.equal(row!.attempts, 5);
  const late = await h.post('/auth/otp/verify', { ...h.credentials(app), email: 'ann@example.com', code: right });
  t.equal(late.status, 401);
  t.equal(late.body.error.code, 'OTP_INVALID', 'the right code is burned');
});

t.test('the right code sent twice in parallel logs in exactly once', async (t) => {
  h.clock.advance(60_000);
  await h.post('/auth/otp/request', { ...h.credentials(app), email: 'ann@example.com' });
  const code = h.outbox.codeFor('ann@example.com');
  const replies = await Promise.all(Array.from({ length: 10 }, () => h.post('/auth/otp/verify', { ...h.credentials(app), email: 'ann@example.com', code })));
  t.same(statusCounts(replies), { '200': 1, '401 OTP_INVALID': 9 });
});

t.test('first logins of one address in parallel create one user', async (t) => {
  const apps = [await h.createApp('app-b'), await h.createApp('app-c'), await h.createApp('app-d')];
  for (const target of apps) await h.post('/auth/otp/request', { ...h.credentials(target), email: 'new@example.com' });
  const codes = h.outbox.messages.filter((m) => m.to === 'new@example.com');
  const replies = await Promise.all(apps.map((target, i) => h.post('/auth/otp/verify', { ...h.credentials(target), email: 'new@example.com', code: codes[i]!.code })));
  t.same(statusCounts(replies), { '200': 3 });
  t.equal(new Set(replies.map((r) => r.body.user_id)).size, 1);
  const [users] = await h.sql`select count(*)::int as n from users where email = 'new@example.com'`;
  t.equal(users!.n, 1);
});

t.test('parallel code requests to one destination deliver one code', async (t) => {
  const replies = await Promise.all(Array.from({ length: 20 }, () => h.post('/auth/otp/request', { ...h.credentials(app), email: 'bob@example.com' })));
  t.same(statusCounts(replies), { '200': 1, '429 RATE_LIMITED': 19 });
  t.equal(h.outbox.messages.filter((m) => m.to === 'bob@example.com').length, 1);
});

/** How many backends of this database wait for a lock. */
async function lockWaiters(): Promise<number> {
  const [row] = await h.sql`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and datname = current_database()`;
  return row!.n as number;
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

t.test('a login that overlaps a soft-delete of its user never leaves a session alive', async (t) => {
  h.clock.advance(60_000);
  await h.post('/auth/otp/request', { ...h.credentials(app), email: 'ann@example.com' });
  const code = h.outbox.codeFor('ann@example.com');
  // Pause the login inside its transaction, after it has read the user: its membership upsert
  // waits for this row lock.
  const blocker = await h.sql.reserve();
  await blocker`begin`;
  await blocker`select 1 from app_memberships where user_id = ${tokens.user_id} for update`;
  let deleteDone = false;
  let login: Promise<Reply> | undefined;
  let deletion: Promise<Reply> | undefined;
  try {
    login = h.post('/auth/otp/verify', { ...h.credentials(app), email: 'ann@example.com', code });
    t.ok(await until(async () => (await lockWaiters()) >= 1, 5000), 'the login waits inside its transaction');
    deletion = h.admin('DELETE', `/admin/users/${tokens.user_id}`).finally(() => { deleteDone = true; });
    await until(async () => deleteDone || (await lockWaiters()) >= 2, 5000);
  } finally {
    await blocker`commit`;
    blocker.release();
  }
  const [loggedIn, deleted] = await Promise.all([login!, deletion!]);
  t.equal(deleted.status, 200);
  t.ok(loggedIn.status === 200 || loggedIn.body.error.code === 'USER_DELETED', `login: ${loggedIn.status}`);
  const [live] = await h.sql`select count(*)::int as n from refresh_families where user_id = ${tokens.user_id} and revoked_at is null`;
  t.equal(live!.n, 0, 'every session of the deleted user is revoked');
  t.equal((await h.admin('POST', `/admin/users/${tokens.user_id}/restore`)).status, 200);
  if (loggedIn.status === 200) {
    const refresh = await h.refresh(app, loggedIn.body.refresh_token);
    t.equal(refresh.body.error?.code, 'TOKEN_REVOKED', 'the overlapping login\'s session stays dead after a restore');
  }
});

t.test('parallel role assigns and revokes for one user and tenant: all 200, at most one role, and the next refresh shows it', async (t) => {
  const tenant = await h.createTenant(app, 'Acme');
  const roles = ['owner', 'admin', 'staff', 'viewer'];
  const replies = await Promise.all(Array.from({ length: 40 }, (_, i) => i % 5 === 4
    ? h.post('/auth/roles/revoke', { ...h.credentials(app), user_id: tokens.user_id, tenant_id: tenant })
    : h.assignRole(app, tokens.user_id, tenant, roles[i % 4]!)));
  t.same(statusCounts(replies), { '200': 40 });
  const rows = await h.sql`select role from roles where user_id = ${tokens.user_id} and tenant_id = ${tenant}`;
  t.ok(rows.length <= 1, 'one role per user and tenant');
  const refreshed = await h.refresh(app, tokens.refresh_token);
  t.equal(refreshed.status, 200);
  const claims = JSON.parse(Buffer.from(refreshed.body.access_token.split('.')[1], 'base64url').toString());
  t.same({ tenant_id: claims.tenant_id, roles: claims.roles }, rows.length === 1 ? { tenant_id: tenant, roles: [rows[0]!.role] } : { tenant_id: null, roles: [] });
});

t.test('revoke-user that waits for a rotation in progress revokes the rotated session and counts it', async (t) => {
  const sha256 = (text: string) => createHash('sha256').update(text).digest();
  const child = `rt_${randomBytes(32).toString('base64url')}`;
  // A refresh holding its family's lock: the same function /auth/refresh calls, not yet committed.
  const rotation = await h.sql.reserve();
  let revoking: Promise<Reply> | undefined;
  try {
    await rotation`begin`;
    const [rotated] = await rotation`
      select outcome from rotate_refresh_token(
        ${app.id}, ${sha256(app.secret)}, ${sha256(tokens.refresh_token)}, null,
        ${randomUUID()}, ${sha256(child)}, ${new Date(h.clock.now())}, make_interval(days => 30))
    `;
    t.equal(rotated!.outcome, 'rotated');
    revoking = h.post('/auth/revoke-user', { ...h.credentials(app), user_id: tokens.user_id });
    t.ok(await until(async () => (await lockWaiters()) >= 1, 5000), 'revoke-user waits for the family lock');
  } finally {
    await rotation`commit`;
    rotation.release();
  }
  const reply = await revoking!;
  t.equal(reply.status, 200);
  t.same(reply.body, { sessions_revoked: 1 });
  const refresh = await h.refresh(app, child);
  t.equal(refresh.status, 401);
  t.equal(refresh.body.error.code, 'TOKEN_REVOKED', 'the child the rotation issued is revoked with its family');
});
