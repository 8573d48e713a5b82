/**
 * What `glidemq worker` does around any worker (queue or broadcast): SIGINT/SIGTERM close it
 * gracefully and a second signal exits at once; --exit-when-idle polls an idleness check and
 * closes the worker when it holds true; the command returns once the worker has closed.
 */
import type { EventEmitter } from 'node:events';

interface Closable extends EventEmitter {
  close(): Promise<void>;
  readonly activeCount: number;
}

export interface Lifecycle {
  /** Starts a graceful close (once). */
  stop(): Promise<void>;
  /** True once a close has started. */
  readonly stopping: boolean;
}

export function manageLifecycle(worker: Closable): Lifecycle {
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
export function exitWhenIdle(worker: Closable, life: Lifecycle, nothingLeft: () => Promise<boolean>, release: () => Promise<void>): void {
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

export function whenClosed(worker: EventEmitter): Promise<void> {
  return new Promise((resolve) => worker.once('closed', () => resolve()));
}
