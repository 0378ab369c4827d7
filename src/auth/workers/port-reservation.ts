// The port of `--port 0` for auth-server's workers: the primary holds it (a listening probe) while
// it starts the service, then lets it go and the workers bind it. In that gap (the workers' start,
// a few hundred milliseconds) an outgoing connection of any process on the machine may be given the
// same number as its local port, and the workers' bind then fails (CI saw it once under load).
// Outgoing connections draw their local ports from the kernel's ephemeral range, so on Linux the
// port is chosen below it (/proc/sys/net/ipv4/ip_local_port_range; the OS's own pick for port 0 is
// inside it); elsewhere, or when no free port is found there in a few tries, the OS picks.
import { readFile } from 'node:fs/promises';
import net from 'node:net';

/** The lowest port chosen below the ephemeral range (the registered ports above 10,000 are few). */
const LOWEST = 10_000;
const TRIES = 20;

/** A listening probe on a free port of `host`, below the ephemeral range where the system says where that is. */
export async function reservePort(host: string): Promise<net.Server> {
  const ephemeralStart = await ephemeralRangeStart();
  if (ephemeralStart !== null && ephemeralStart - LOWEST >= 1000) {
    for (let i = 0; i < TRIES; i++) {
      const probe = await listenOn(LOWEST + Math.floor(Math.random() * (ephemeralStart - LOWEST)), host).catch(() => null);
      if (probe) return probe;
    }
  }
  return listenOn(0, host);
}

/** The first port of Linux's ephemeral range; null where it cannot be read. */
export async function ephemeralRangeStart(): Promise<number | null> {
  try {
    const first = Number((await readFile('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')).trim().split(/\s+/)[0]);
    return Number.isInteger(first) && first > 0 ? first : null;
  } catch {
    return null;
  }
}

function listenOn(port: number, host: string): Promise<net.Server> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once('error', reject);
    probe.listen(port, host, () => resolve(probe));
  });
}
