/**
 * What `glidemq worker` does around any worker (queue or broadcast): one line per finished job,
 * --max-jobs and --fail-fast stop it, SIGINT/SIGTERM close it gracefully and a second signal exits
 * at once; --exit-when-idle polls an idleness check and closes the worker when it holds true; the
 * command returns its exit code once the worker has closed.
 */
import type { EventEmitter } from 'node:events';
import { colour, notice, plural, print, printError, printJsonLine } from './output.js';

interface Closable extends EventEmitter {
  close(): Promise<void>;
  readonly activeCount: number;
}

interface Runnable extends Closable {
  run(): Promise<void>;
  /**
   * Stops taking jobs at once (Worker.pause(true)): claims that arrive or wait unstarted go back to
   * the queue, no attempt and no stall counted. A worker without it just closes.
   */
  pause?(doNotWaitActive: boolean): Promise<void>;
}

export interface RunLimits {
  maxJobs?: number;
  exitWhenIdle: boolean;
  failFast: boolean;
}

/** How one finished job (or message) is shown: `<id> <label>`, and the JSON fields that follow `id`. */
export interface Finished {
  id: string;
  label: string;
  fields: Record<string, unknown>;
  /** Attempts made, this one included. */
  attemptsMade: number;
  failedReason?: string | null;
  /** How long this run took (ms). */
  durationMs: number;
  /** After a failure: whether it runs again. */
  willRetry?: boolean;
}

export interface RunSpec<T> {
  json: boolean;
  limits: RunLimits;
  /** What the 'completed'/'failed' event's item shows (`err` only on 'failed'), read after the event. */
  describe(item: T, err?: Error): Finished;
  /** Opened only with --exit-when-idle, after the worker has started: the check, and what closes it. */
  idleCheck(): { nothingLeft: () => Promise<boolean>; release: () => Promise<void> };
}

/** Runs the worker until something stops it; resolves to the exit code (1 only for --fail-fast with a job failed for good). */
export async function runUntilStopped<T>(worker: Runnable, spec: RunSpec<T>): Promise<number> {
  const { limits } = spec;
  let finished = 0;
  let failedForGood = 0;
  const life = manageLifecycle(worker);
  const counted = () => {
    finished++;
    if (limits.maxJobs !== undefined && finished >= limits.maxJobs) void life.stop();
  };
  worker.on('completed', (item: T) => {
    report(spec.json, spec.describe(item), 'completed');
    counted();
  });
  worker.on('failed', (item: T, err: Error) => {
    const f = spec.describe(item, err);
    report(spec.json, f, 'failed');
    if (f.willRetry) return;
    failedForGood++;
    if (limits.failFast && !life.stopping) {
      // Pause first, in this very event: the claims the failed job's finish brought in are
      // dispatched right after it, and must be kept and handed back, not started.
      void worker.pause?.(true).catch(() => undefined);
      const running = worker.activeCount;
      notice(
        `stopping (--fail-fast): ${f.id} ${f.label} failed for good${f.failedReason ? `: ${f.failedReason}` : ''}; ` +
          `no more jobs are taken${running > 0 ? `, ${plural(running, 'running job')} may finish` : ''}`,
      );
      void life.stop();
    }
    counted();
  });
  worker.on('error', (err: Error) => printError(`worker: ${err.message}`));

  await worker.run();
  if (limits.exitWhenIdle) {
    const { nothingLeft, release } = spec.idleCheck();
    exitWhenIdle(worker, life, nothingLeft, release);
  }
  await whenClosed(worker);
  return limits.failFast && failedForGood > 0 ? 1 : 0;
}

function report(json: boolean, f: Finished, status: 'completed' | 'failed'): void {
  const { durationMs } = f;
  const willRetry = f.willRetry ?? false;
  if (json) {
    printJsonLine({ id: f.id, ...f.fields, status, durationMs, attemptsMade: f.attemptsMade, ...(status === 'failed' ? { failedReason: f.failedReason, willRetry } : {}) });
  } else if (status === 'completed') {
    print(`${colour.green('✓')} ${f.id} ${f.label} ${colour.dim(`${durationMs} ms`)}`);
  } else {
    print(`${colour.red('✗')} ${f.id} ${f.label} ${colour.dim(`${durationMs} ms`)} ${f.failedReason ?? ''}${willRetry ? colour.dim(' (will retry)') : ''}`);
  }
}

interface Lifecycle {
  /** Starts a graceful close (once). */
  stop(): Promise<void>;
  /** True once a close has started. */
  readonly stopping: boolean;
}

function manageLifecycle(worker: Closable): Lifecycle {
  let closing: Promise<void> | undefined;
  const life: Lifecycle = {
    stop: () => (closing ??= worker.close()),
    get stopping() {
      return closing !== undefined;
    },
  };
  let signals = 0;
  const onSignal = () => {
    signals++;
    if (signals > 1) process.exit(130);
    void life.stop();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  return life;
}

/**
 * Closes the worker once it runs nothing and `nothingLeft` says so; `release` runs when the
 * worker has closed (to close the connection the check used).
 */
function exitWhenIdle(worker: Closable, life: Lifecycle, nothingLeft: () => Promise<boolean>, release: () => Promise<void>): void {
  let timer: NodeJS.Timeout | undefined;
  const check = async () => {
    if (life.stopping) return;
    if (worker.activeCount === 0 && (await nothingLeft().catch(() => false)) && worker.activeCount === 0) {
      void life.stop();
      return;
    }
    timer = setTimeout(() => void check(), 200);
  };
  timer = setTimeout(() => void check(), 100);
  worker.once('closed', () => {
    clearTimeout(timer);
    void release();
  });
}

function whenClosed(worker: EventEmitter): Promise<void> {
  return new Promise((resolve) => worker.once('closed', () => resolve()));
}
