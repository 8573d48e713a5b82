/**
 * Who waits for a worker to run nothing (close() and pause() of Worker and BroadcastWorker): each
 * gets a promise that resolves once the count of running jobs, read through `running`, is 0.
 */
export class IdleWaiters {
  private waiters: (() => void)[] = [];

  constructor(private readonly running: () => number) {}

  /** Resolves at once when nothing runs, else at the first settle() that finds nothing running. */
  wait(): Promise<void> {
    if (this.running() === 0) return Promise.resolve();
    return new Promise((r) => this.waiters.push(r));
  }

  /** Called after a run ended: wakes every waiter when nothing runs any more. */
  settle(): void {
    if (this.running() > 0 || this.waiters.length === 0) return;
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
