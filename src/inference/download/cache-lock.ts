// One writer per cache file across processes: a lock file created exclusively (O_EXCL) beside the
// file, holding the writer's pid. llama.cpp takes no lock (two llama-servers starting at once on
// one cache append to the same partial file); this server's processes wait for each other instead,
// and take over a lock whose process is gone.
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { setTimeout as delay } from 'node:timers/promises';

/** How often a waiting process looks at the lock again. */
const POLL_MS = 100;

function holderAlive(lockPath: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(lockPath, 'utf8'));
  } catch {
    // Gone between our open and this read: free now.
    return false;
  }
  if (!Number.isInteger(pid) || pid <= 0) return true; // being written: its holder is alive
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Runs `fn` holding `lockPath`; waits while another process (or another call in this one) holds
 * it, calling `onWait` once. A lock left by a process that died is removed and taken.
 */
export async function withFileLock<T>(lockPath: string, fn: () => Promise<T>, onWait?: () => void, signal?: AbortSignal): Promise<T> {
  let waited = false;
  for (;;) {
    signal?.throwIfAborted();
    try {
      writeFileSync(lockPath, String(process.pid), { flag: 'wx' });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    if (!holderAlive(lockPath)) {
      rmSync(lockPath, { force: true });
      continue;
    }
    if (!waited) onWait?.();
    waited = true;
    await delay(POLL_MS, undefined, signal ? { signal } : undefined);
  }
  try {
    return await fn();
  } finally {
    rmSync(lockPath, { force: true });
  }
}
