/** Worker options as users give them, and the settings the worker runs with (defaults applied, checked). */
import type { ConnectionInput } from './connection.js';
import type { MaintenanceSettings } from './maintenance.js';
import { checkRetention, type Retention } from './options.js';
import { nonNegative, positive, wholeCount } from './numbers.js';

export interface WorkerOptions {
  connection?: ConnectionInput;
  prefix?: string;
  concurrency?: number;
  /** Jobs claimed ahead beyond concurrency, so a free slot starts at once (default 0). */
  prefetch?: number;
  /** A claim idle this long counts as stalled (ms). Running jobs heartbeat at half of it. */
  lockDuration?: number;
  /** How often stalled recovery runs (ms). */
  stalledInterval?: number;
  maxStalledCount?: number;
  /** How long one blocking read waits for new jobs (ms). */
  blockTimeout?: number;
  /** Limit on jobs active at once across all workers of the queue (stored in the queue's meta). */
  globalConcurrency?: number;
  /** Longest gap between two promotion ticks (ms). */
  promotionInterval?: number;
  /** Start processing in the constructor (default true). */
  autorun?: boolean;
  /** How long close() lets running jobs finish before giving up on them (ms). */
  closeGracePeriod?: number;
  /** The retention of a completed job that names none itself (as the job option). */
  removeOnComplete?: Retention;
  /** The retention of a job failed for good that names none itself (as the job option). */
  removeOnFail?: Retention;
}

export interface Settings extends MaintenanceSettings {
  concurrency: number;
  prefetch: number;
  blockTimeout: number;
  globalConcurrency: number;
  promotionInterval: number;
  closeGracePeriod: number;
  removeOnComplete: Retention | undefined;
  removeOnFail: Retention | undefined;
}

export function resolveSettings(o: WorkerOptions): Settings {
  const lockDuration = o.lockDuration ?? 30_000;
  const stalledInterval = o.stalledInterval ?? 30_000;
  const blockTimeout = o.blockTimeout ?? 5_000;
  return {
    concurrency: positive(o.concurrency ?? 1, 'concurrency'),
    prefetch: wholeCount(o.prefetch ?? 0, 'prefetch'),
    lockDuration: positive(lockDuration, 'lockDuration'),
    stalledInterval: positive(stalledInterval, 'stalledInterval'),
    maxStalledCount: wholeCount(o.maxStalledCount ?? 1, 'maxStalledCount'),
    blockTimeout: positive(blockTimeout, 'blockTimeout'),
    globalConcurrency: wholeCount(o.globalConcurrency ?? 0, 'globalConcurrency'),
    promotionInterval: positive(o.promotionInterval ?? 1_000, 'promotionInterval'),
    closeGracePeriod: nonNegative(o.closeGracePeriod ?? Math.max(lockDuration, 5_000), 'closeGracePeriod'),
    removeOnComplete: checkRetention(o.removeOnComplete, 'removeOnComplete'),
    removeOnFail: checkRetention(o.removeOnFail, 'removeOnFail'),
  };
}


