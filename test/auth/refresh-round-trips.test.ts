// A refresh is one statement on the refresh tables: rotate_refresh_token answers the session's
// amr with the rotation (migration 0045 and its function file), so nothing reads the family again
// after it. Counted on the wire: the service talks to its database through a proxy that reads the
// PostgreSQL protocol's Parse, Bind and Execute messages and records the text of each statement
// executed while a refresh is answered. The app's refresh rate is a statement of its own by
// design (it names no refresh table: its rule is a parameter), so the refresh tables' statements
// of a refresh are exactly one.
import net, { type AddressInfo } from 'node:net';
import { decodeJwt } from 'jose';
import t from 'tap';
import { copyTemplateDatabase } from '../setup/template-database.js';
import { startAuthHarness } from './fixtures/harness.js';

const database = await copyTemplateDatabase();
if (!database) throw new Error('this test needs the run\'s shared PostgreSQL (tap\'s before script, test/setup/before.ts)');
const target = new URL(database.url);

/** Statement texts executed through the proxy while `recording` is on. */
const executed: string[] = [];
let recording = false;
const sockets = new Set<net.Socket>();

/** Reads the client's side of one connection: an untyped startup (or SSL request) first, then typed messages. */
function reader(): (chunk: Buffer) => void {
  let pending = Buffer.alloc(0);
  let started = false;
  const prepared = new Map<string, string>();
  let bound = '';
  return (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    for (;;) {
      if (!started) {
        if (pending.length < 8) return;
        const length = pending.readInt32BE(0);
        if (pending.length < length) return;
        started = pending.readInt32BE(4) !== 80877103; // an SSLRequest is followed by the real startup
        pending = pending.subarray(length);
        continue;
      }
      if (pending.length < 5) return;
      const total = 1 + pending.readInt32BE(1);
      if (pending.length < total) return;
      const type = String.fromCharCode(pending[0]!);
      const body = pending.subarray(5, total);
      const cstrings = (): string[] => body.toString('utf8').split('\0');
      if (type === 'P') { const [name = '', text = ''] = cstrings(); prepared.set(name, text); }
      if (type === 'B') bound = prepared.get(cstrings()[1] ?? '') ?? '';
      if (type === 'E' && recording) executed.push(bound);
      if (type === 'Q' && recording) executed.push(cstrings()[0] ?? '');
      pending = pending.subarray(total);
    }
  };
}

const proxy = net.createServer((client) => {
  const server = net.connect(Number(target.port), target.hostname);
  sockets.add(client).add(server);
  const read = reader();
  client.on('data', (chunk: Buffer) => { read(chunk); server.write(chunk); });
  server.pipe(client);
  client.on('error', () => server.destroy());
  server.on('error', () => client.destroy());
  client.on('close', () => server.destroy());
  server.on('close', () => client.destroy());
});
await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
const proxied = new URL(database.url);
proxied.hostname = '127.0.0.1';
proxied.port = String((proxy.address() as AddressInfo).port);

const h = await startAuthHarness({ databaseUrl: proxied.toString() });
t.teardown(async () => {
  await h.close();
  for (const socket of sockets) socket.destroy();
  proxy.close();
  await database.drop();
});

t.test('a refresh runs one statement on the refresh tables, rotate_refresh_token, and its token keeps the session\'s amr', async (t) => {
  const { app, tokens } = await h.startFresh({ session: true });
  const warm = await h.refresh(app, tokens.refresh_token); // statements prepared once, as in a running service
  t.equal(warm.status, 200);
  executed.length = 0;
  recording = true;
  const refreshed = await h.refresh(app, warm.body.refresh_token);
  recording = false;
  t.equal(refreshed.status, 200);
  t.same(decodeJwt(refreshed.body.access_token).amr, ['otp'], 'the amr came back with the rotation');
  t.ok(executed.length > 0, `the proxy saw the refresh's statements (${executed.length})`);
  const onRefreshTables = executed.filter((text) => /refresh_(tokens|families)|rotate_refresh_token/.test(text));
  t.equal(onRefreshTables.length, 1, onRefreshTables.join('\n---\n'));
  t.match(onRefreshTables[0], /from rotate_refresh_token\(/);
});
