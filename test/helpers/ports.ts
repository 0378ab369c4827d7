// A free TCP port on the loopback interface, for a server or socket a test starts itself.
import { createServer } from 'node:net';

/** A port nothing listened on a moment ago (the OS picked it); bind it soon. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}
