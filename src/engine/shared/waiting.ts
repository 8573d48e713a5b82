/** Small waits a worker's own loops use (this process's timers only; nothing here is sent to the server). */

/** Waits `ms`. */
export function delay(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Waits for `p` (whose failure is not this wait's concern) at most `ms`; the timer never outlives it. */
export async function within(p: Promise<unknown> | undefined, ms: number): Promise<void> {
  if (!p) return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p.catch(() => undefined), new Promise((r) => (timer = setTimeout(r, ms)))]);
  clearTimeout(timer);
}

/** How long close() waits for each of its calls to the server (one that is gone must not hold it). */
export const CLOSE_CALL_MS = 2000;

/** This process's monotonic clock (ms): for a worker's own waiting only, never sent to the server. */
export function monotonic(): number {
  return performance.now();
}

/**
 * The wait of a reading loop between attempts while its server does not answer: 100 ms after the
 * first failure, doubling to at most 5 s; close() cuts it short with wake().
 */
export class RetryWait {
  private failures = 0;
  private wakeUp: (() => void) | undefined;

  /** Waits the next back-off (counting one more failure), or until wake(). */
  next(): Promise<void> {
    const ms = Math.min(100 * 2 ** this.failures++, 5000);
    return new Promise((resolve) => {
      const timer = setTimeout(done, ms);
      this.wakeUp = done;
      function done() {
        clearTimeout(timer);
        resolve();
      }
    });
  }

  /** The server answered: the next failure waits the shortest again. */
  reset(): void {
    this.failures = 0;
  }

  /** Ends the current wait at once (closing). */
  wake(): void {
    this.wakeUp?.();
  }
}
