// Background work of the primary service of a process: a task run at start and then every
// `intervalMs`, never two runs at once, stopped by close(). The timer does not keep the
// process alive.

export interface Periodic {
  /** Stops the timer and waits for a run in progress. */
  stop(): Promise<void>;
  /** Runs the task now (after the run in progress, if any); resolves when it is done. */
  runNow(): Promise<void>;
}

export function startPeriodic(intervalMs: number, task: () => Promise<void>, onError: (error: unknown) => void): Periodic {
  let running: Promise<void> = Promise.resolve();
  let stopped = false;
  const run = (): Promise<void> => {
    running = running.then(() => (stopped ? undefined : task().catch(onError)));
    return running;
  };
  const timer = setInterval(() => { void run(); }, intervalMs);
  timer.unref();
  void run();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
    runNow: run,
  };
}
