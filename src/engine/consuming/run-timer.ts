/**
 * The time limit of one run (job option `timeout`, else the Worker's `timeout`), used by the
 * runner (worker-runner.ts). At the limit the run's AbortSignal aborts with "timed out after N ms"
 * and the job is to fail with that reason, whatever the processor then throws or returns (its
 * retry rules apply). A processor that has not settled `graceMs` later is stuck: guard() rejects
 * with the same reason, so the job is failed at that point anyway, and the runner keeps the slot
 * taken until the processor finally settles (its late result is dropped). A sandbox kills its child
 * on the abort after its own grace: nothing more is needed here for it.
 *
 * Made only for a run whose job has a time limit: a job without one costs no timer.
 */
import { MAX_TIMEOUT_MS } from '../producing/options.js';

export class RunTimer {
  /** The reason the run failed with, once its time ran out. */
  reason: Error | undefined;
  /** The processor did not settle within the grace period: its result will be dropped. */
  stuck = false;
  private timer: NodeJS.Timeout | undefined;

  /**
   * `onTimeout` aborts the run's signal with the reason; `onStuck` is told once the grace period
   * ran out with the processor still running, with a promise that resolves when it finally settles.
   */
  constructor(
    readonly ms: number,
    private readonly graceMs: number,
    private readonly onTimeout: (reason: Error) => void,
    private readonly onStuck: (returned: Promise<void>) => void,
  ) {}

  /**
   * Settles as the processor's `work` does, or rejects with the timeout's reason once the grace
   * period after the limit ran out while `work` still runs. Starts the clock.
   */
  guard<T>(work: T | Promise<T>): Promise<T> {
    const running = Promise.resolve(work);
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const end = () => {
        settled = true;
        clearTimeout(this.timer);
      };
      this.timer = setTimeout(() => {
        this.reason = new Error(`timed out after ${this.ms} ms`);
        this.onTimeout(this.reason);
        this.timer = setTimeout(() => {
          if (settled) return;
          settled = true;
          this.stuck = true;
          this.onStuck(running.then(() => undefined, () => undefined));
          reject(this.reason);
        }, Math.min(this.graceMs, MAX_TIMEOUT_MS));
      }, this.ms);
      running.then(
        (value) => {
          if (settled) return;
          end();
          resolve(value);
        },
        (err) => {
          if (settled) return;
          end();
          reject(err);
        },
      );
    });
  }
}
