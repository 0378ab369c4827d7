// auth-server's port for --port 0: held by a probe, and on Linux below the ephemeral range that
// outgoing connections draw their local ports from (so none can take it before the workers bind it).
import net from 'node:net';
import t from 'tap';
import { ephemeralRangeStart, reservePort } from '../../src/auth/workers/port-reservation.js';

t.test('the reserved port is held, and below the ephemeral range where the system says where that is', async (t) => {
  const probe = await reservePort('127.0.0.1');
  t.teardown(() => new Promise<void>((resolve) => probe.close(() => resolve())));
  const { port } = probe.address() as net.AddressInfo;
  const start = await ephemeralRangeStart();
  if (process.platform === 'linux') t.ok(start !== null, 'Linux says where its ephemeral range starts');
  if (start !== null) t.ok(port >= 10_000 && port < start, `port ${port} is below the ephemeral range (from ${start})`);
  const second = net.createServer();
  const refused = await new Promise<string>((resolve) => {
    second.once('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? 'error'));
    second.listen(port, '127.0.0.1', () => second.close(() => resolve('bound')));
  });
  t.equal(refused, 'EADDRINUSE', 'nothing else can bind it while it is held');
});
