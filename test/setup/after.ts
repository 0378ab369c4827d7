// tap's `after` program (package.json): stops the run's shared PostgreSQL (shared-postgres.ts
// removes its cluster and state file at SIGTERM) and waits until it is gone.
import { setTimeout as sleep } from 'node:timers/promises';
import { sharedPostgres } from './shared-postgres-state.js';

const STOP_TIMEOUT_MS = 30_000;
const shared = sharedPostgres();
if (shared) {
  process.kill(shared.pid, 'SIGTERM');
  const deadline = Date.now() + STOP_TIMEOUT_MS;
  // The holder is not our child: nothing to await but its PID disappearing.
  for (;;) {
    try {
      process.kill(shared.pid, 0);
    } catch {
      break;
    }
    if (Date.now() > deadline) {
      process.stderr.write(`the tests' shared PostgreSQL (PID ${shared.pid}) did not stop within ${STOP_TIMEOUT_MS} ms\n`);
      process.exit(1);
    }
    await sleep(50);
  }
}
