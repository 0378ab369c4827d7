// The outbox survives a crash: a change commits its webhook delivery, the process is killed
// with SIGKILL before sending it, and the auth-server started after it delivers the message
// exactly once. The first process runs with --webhook-dispatch 0 so that "killed after the
// commit, before the send" is certain rather than a race against its dispatcher; this test's
// own service (the harness) does not dispatch either.
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { ADMIN_KEY, startAuthHarness } from './fixtures/harness.js';
import { hasValidSignature, startWebhookReceiver, until } from './fixtures/webhook-receiver.js';

const h = await startAuthHarness({ webhookDispatch: false });
t.teardown(() => h.close());
const receiver = await startWebhookReceiver();
t.teardown(() => receiver.close());
const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'auth-crash-'));
t.teardown(() => fs.rm(dataDir, { recursive: true, force: true }));

interface Server { child: ChildProcessWithoutNullStreams; base: string; exited: Promise<number | null> }

/** auth-server on the harness's database and key directory; resolves once it listens. */
async function startServer(env: Record<string, string>): Promise<Server> {
  const child = spawn(process.execPath, ['--import', './scripts/ts-loader.mjs', 'src/auth/server-main.ts', '--port', '0', '--workers', '1'], {
    env: {
      ...process.env, NODE_ENV: 'test', DATABASE_URL: h.service.databaseUrl, AUTH_DATA_DIR: dataDir,
      AUTH_KEY_DIR: path.join(h.dataDir, 'keys'), AUTH_ADMIN_KEY: ADMIN_KEY, AUTH_ISSUER: 'http://auth.test', ...env,
    },
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  let stderr = '';
  const base = await new Promise<string>((resolve, reject) => {
    child.stderr.on('data', (chunk) => {
      stderr += chunk;
      const match = /listening on (http:\/\/[\d.]+:\d+)/.exec(stderr);
      if (match) resolve(match[1]!);
    });
    void exited.then((code) => reject(new Error(`auth-server exited with ${code}: ${stderr}`)));
  });
  return { child, base, exited };
}

t.test('a delivery committed before a kill -9 is sent once by the next process', async (t) => {
  const { app, tokens } = await h.startFresh({ session: true });
  const endpoint = await h.admin('POST', `/admin/apps/${app.id}/webhooks`, { url: receiver.url, event_types: ['session.revoked'] });
  t.equal(endpoint.status, 201);

  const first = await startServer({ AUTH_WEBHOOK_DISPATCH: '0' });
  const revoked = await fetch(`${first.base}/auth/revoke`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ ...h.credentials(app), refresh_token: tokens.refresh_token }),
  });
  t.equal(revoked.status, 200, 'the change committed');
  const [pending] = await h.sql<{ id: string; state: string }[]>`select id, state from webhook_deliveries`;
  t.equal(pending!.state, 'pending', 'its delivery committed with it, not sent');
  first.child.kill('SIGKILL');
  t.equal(await first.exited, null, 'killed by the signal');
  t.equal(receiver.received.length, 0);

  const second = await startServer({});
  t.teardown(async () => { second.child.kill('SIGTERM'); await second.exited; });
  t.ok(await until(async () => (await h.sql`select 1 from webhook_deliveries where state = 'delivered'`).length === 1, 30_000), 'delivered after the restart');
  t.equal(receiver.received.length, 1, 'exactly once');
  const [message] = receiver.received;
  t.equal(message!.headers['webhook-id'], `msg_${pending!.id}`);
  t.equal(message!.json.type, 'session.revoked');
  t.ok(hasValidSignature(endpoint.body.secret, message!), 'signed with the secret sealed by the harness\'s service');
  const [row] = await h.sql`select attempts from webhook_deliveries`;
  t.equal(row!.attempts, 1);
  second.child.kill('SIGTERM');
  t.equal(await second.exited, 0, 'the second process stops cleanly');
  t.equal(receiver.received.length, 1, 'and sent nothing more');
});
