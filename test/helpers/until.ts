// A poll with a deadline: a test that waits for a condition fails with a message naming what
// never happened, instead of hanging until tap's timeout kills the file with no reason.

/** Default deadline of until(): well above what any of these waits takes on a loaded 2-core machine. */
export const UNTIL_DEADLINE_MS = 60_000;

/**
 * Calls `check` until it resolves true, `everyMs` apart; rejects with "<what> did not happen
 * within N s" once `deadlineMs` has passed.
 */
export async function until(what: string, check: () => Promise<boolean> | boolean, deadlineMs = UNTIL_DEADLINE_MS, everyMs = 10): Promise<void> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`${what} did not happen within ${deadlineMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
