// tap's `before` program (package.json): starts the run's shared PostgreSQL holder
// (shared-postgres.ts) as a detached process and returns once its state file is written. Its
// parent is the tap runner, whose PID names the state file.
import { spawn } from 'node:child_process';
import { openSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const loader = join(here, '..', '..', 'scripts', 'ts-loader.mjs');
const logFile = join(tmpdir(), `test-postgres-${process.ppid}.log`);
const holder = spawn(process.execPath, ['--import', loader, join(here, 'shared-postgres.ts'), String(process.ppid)], {
  detached: true,
  stdio: ['ignore', 'pipe', openSync(logFile, 'w')],
});
const exited = new Promise<string>((resolve) => holder.once('exit', (code, signal) => resolve(`exited (${signal ?? code})`)));
const ready = (async () => {
  for await (const line of createInterface({ input: holder.stdout! })) if (line === 'ready') return 'ready';
  return 'closed its output';
})();
const outcome = await Promise.race([ready, exited]);
if (outcome !== 'ready') {
  process.stderr.write(`the tests' shared PostgreSQL did not start: it ${outcome}; its log: ${logFile}\n`);
  process.exit(1);
}
holder.stdout!.destroy();
holder.unref();
