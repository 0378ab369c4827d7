// The signing-key ring on its own: background reloads, and what they do when the database fails.
import postgres from 'postgres';
import t from 'tap';
import { SigningKeyRing } from '../../src/auth/tokens/signing-key-ring.js';
import { startAuthHarness } from './fixtures/harness.js';

const h = await startAuthHarness();
t.teardown(() => h.close());

/** A pool of its own on the harness's database, so a test can break it without touching the service. */
function ownPool(): postgres.Sql {
  const { host, port, user, pass, database } = h.sql.options;
  return postgres({ host: host[0], port: port[0], user, pass: pass as string, database, max: 1, onnotice: () => {} });
}

async function until(condition: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (!condition() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  return condition();
}

t.test('a failed background reload is logged, keeps the loaded keys, and does not crash the process', async (t) => {
  const sql = ownPool();
  const logs: string[] = [];
  const ring = new SigningKeyRing(sql, h.clock, (await h.masterKey()).derive('signing-key-encryption'), { log: (line) => logs.push(line), reloadIntervalMs: 20 });
  await ring.start();
  t.teardown(() => ring.stop());
  const kid = ring.signingKey().kid;
  await sql.end();
  t.ok(await until(() => logs.length >= 2, 5000), 'each failed reload logs a line');
  t.match(logs[0], /^signing keys: background reload failed, keeping the keys loaded before: .+/);
  t.equal(ring.signingKey().kid, kid, 'the ring still signs with the key it had');
  t.same(ring.publishedJwks().map((key) => key.kid), (await h.get('/.well-known/jwks.json')).body.keys.map((key: { kid: string }) => key.kid), 'and still publishes the keys it had');
});

t.test('a background reload picks up a rotation made by another instance', async (t) => {
  const logs: string[] = [];
  const ring = new SigningKeyRing(h.sql, h.clock, (await h.masterKey()).derive('signing-key-encryption'), { log: (line) => logs.push(line), reloadIntervalMs: 20 });
  await ring.start();
  t.teardown(() => ring.stop());
  const rotated = await h.admin('POST', '/admin/signing-keys/rotate');
  t.equal(rotated.status, 200);
  t.ok(await until(() => ring.signingKey().kid === rotated.body.kid, 5000), 'the ring signs with the new key');
  t.same(logs, []);
});

t.test('unknown kids trigger at most one reload per second, also while reloads fail, and a failure is logged', async (t) => {
  const pool = ownPool();
  let queries = 0;
  const counted = new Proxy(pool, { apply: (target, self, args) => { queries++; return Reflect.apply(target, self, args); } });
  const logs: string[] = [];
  const ring = new SigningKeyRing(counted, h.clock, (await h.masterKey()).derive('signing-key-encryption'), { log: (line) => logs.push(line) });
  await ring.start();
  t.teardown(() => ring.stop());
  await pool.end();
  h.clock.advance(2000);
  queries = 0;
  for (let i = 0; i < 20; i++) t.equal(await ring.verificationKey(`forged-kid-${i}`), undefined);
  t.equal(queries, 1, 'one reload was tried for twenty unknown kids');
  t.equal(logs.length, 1);
  t.match(logs[0], /^signing keys: reload for an unknown kid failed, keeping the keys loaded before: /);
  h.clock.advance(1000);
  t.equal(await ring.verificationKey('forged-kid-late'), undefined);
  t.equal(queries, 2, 'a second later, another one');
  t.ok(await ring.verificationKey(ring.signingKey().kid), 'known kids still verify');
});
