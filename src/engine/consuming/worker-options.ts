/**
 * Worker options as users give them, and the settings the worker runs with (defaults applied,
 * checked).
 */
import type { ConnectionInput } from '../connecting/connection.js';
import type { MaintenanceSettings } from '../administering/maintenance.js';
import { checkRetention, checkTimeout, type Retention } from '../producing/options.js';
import { checkConfirm, type Confirm, type ConfirmOptions } from '../producing/confirm.js';
import { checkAdvancedSettings, type AdvancedSettings, type BackoffStrategy } from './backoff.js';
import { nonNegative, positive, wholeCount } from '../shared/numbers.js';
import { invalid } from '../shared/errors.js';
import { checkRegistryTtl } from './worker-registry.js';
import { checkBatch, type BatchOptions } from './batch-options.js';
import { checkDeadLetterQueue, type DeadLetterQueueOptions } from '../administering/dead-letters.js';
import type { SandboxWorkerOptions } from './sandbox-options.js';
import type { TelemetryOption } from '../shared/telemetry.js';

/** useWorkerThreads, workerForkOptions, workerThreadsOptions and sandbox apply to a processor file (sandbox-options.ts). */
export interface WorkerOptions extends SandboxWorkerOptions {
  connection?: ConnectionInput;
  /**
   * Confirmed finishes (README "Confirmed writes"): a job's outcome counts as stored only once
   * WAITAOF / WAIT confirm it; one confirmation per finish call (a batch of finishes shares one).
   */
  confirm?: ConfirmOptions;
  prefix?: string;
  concurrency?: number;
  /**
   * Jobs claimed ahead beyond concurrency, so a free slot starts one at once. By default the worker
   * sizes it itself (see Worker): as many as run during one round trip to the server, at most
   * concurrency, none for jobs that run longer than a round trip per slot.
   */
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
  /**
   * BullMQ's queue-wide rate limiter: at most `max` jobs start in any `duration` ms, across all
   * workers of the queue (stored in the queue's meta when the worker starts; lua/rate-window.lua).
   */
  limiter?: RateLimiterOptions;
  /** Longest gap between two promotion ticks (ms). */
  promotionInterval?: number;
  /** Start processing in the constructor (default true). */
  autorun?: boolean;
  /** How long close() lets running jobs finish before giving up on them (ms). */
  closeGracePeriod?: number;
  /**
   * How long the worker's entry in the queue's worker registry (Queue.getWorkers, `glidemq
   * workers`) lives unless refreshed, in ms (default 30000, refreshed every third of it): a worker
   * that dies without closing disappears from the registry this long after its last refresh.
   */
  registryTtl?: number;
  /** The retention of a completed job that names none itself (as the job option). */
  removeOnComplete?: Retention;
  /** The retention of a job failed for good that names none itself (as the job option). */
  removeOnFail?: Retention;
  /** BullMQ's advanced settings: `backoffStrategy` computes the delay of a custom backoff type. */
  settings?: AdvancedSettings;
  /**
   * The time limit of a run, in ms, for a job that names none itself (job option `timeout`): its
   * AbortSignal then aborts and the job fails with "timed out after N ms" (run-timer.ts). None by default.
   */
  timeout?: number;
  /**
   * How long a timed-out processor has to stop before its job is failed anyway, in ms (default
   * 2000): a stuck processor is reported (`error`) and keeps its slot until it returns.
   */
  timeoutGraceMs?: number;
  /**
   * Hands the processor the jobs in batches: `(jobs) => results`, one result per job in order
   * (batch-runner.ts). `concurrency` then counts batches that run at once.
   */
  batch?: BatchOptions;
  /**
   * OpenTelemetry tracing (README "Tracing"): true (the global tracer provider) or { tracer }; each
   * run of a job is a consumer span, the child of its add's span (traced-processor.ts).
   */
  telemetry?: TelemetryOption;
  /**
   * glide-mq's dead-letter queue: a job that fails for good is copied there (README "Dead letters").
   * Stored in the queue's meta when the worker starts, so every client's failures follow it.
   */
  deadLetterQueue?: DeadLetterQueueOptions;
}

export interface Settings extends MaintenanceSettings {
  concurrency: number;
  /** A fixed prefetch, or undefined: adaptive (Worker.prefetchNow). */
  prefetch: number | undefined;
  blockTimeout: number;
  globalConcurrency: number;
  limiter: RateLimiterOptions | undefined;
  promotionInterval: number;
  closeGracePeriod: number;
  registryTtl: number;
  removeOnComplete: Retention | undefined;
  removeOnFail: Retention | undefined;
  backoffStrategy: BackoffStrategy | undefined;
  /** The default run time limit (ms), or undefined: none. */
  timeout: number | undefined;
  timeoutGraceMs: number;
  /** The batch option checked, or undefined: one job per processor call. */
  batch: Required<BatchOptions> | undefined;
  /** The dead-letter queue's name to store at start, or undefined (the stored one, if any, stays). */
  deadLetterQueue: string | undefined;
  /** Finishes confirmed (one WAITAOF / WAIT per finish call), or undefined: not confirmed. */
  confirm: Confirm | undefined;
}

export function resolveSettings(o: WorkerOptions): Settings {
  const lockDuration = o.lockDuration ?? 30_000;
  const stalledInterval = o.stalledInterval ?? 30_000;
  const blockTimeout = o.blockTimeout ?? 5_000;
  return {
    // a batch worker's slots are jobs: `concurrency` batches of up to batch.size each
    concurrency: positive(o.concurrency ?? 1, 'concurrency') * (checkBatch(o.batch)?.size ?? 1),
    prefetch: o.prefetch === undefined ? undefined : wholeCount(o.prefetch, 'prefetch'),
    lockDuration: positive(lockDuration, 'lockDuration'),
    stalledInterval: positive(stalledInterval, 'stalledInterval'),
    maxStalledCount: wholeCount(o.maxStalledCount ?? 1, 'maxStalledCount'),
    blockTimeout: positive(blockTimeout, 'blockTimeout'),
    globalConcurrency: wholeCount(o.globalConcurrency ?? 0, 'globalConcurrency'),
    limiter: checkLimiter(o.limiter),
    promotionInterval: positive(o.promotionInterval ?? 1_000, 'promotionInterval'),
    closeGracePeriod: nonNegative(o.closeGracePeriod ?? Math.max(lockDuration, 5_000), 'closeGracePeriod'),
    registryTtl: checkRegistryTtl(o.registryTtl),
    removeOnComplete: checkRetention(o.removeOnComplete, 'removeOnComplete'),
    removeOnFail: checkRetention(o.removeOnFail, 'removeOnFail'),
    backoffStrategy: checkAdvancedSettings(o.settings),
    timeout: o.timeout === undefined ? undefined : checkTimeout(o.timeout, 'timeout'),
    timeoutGraceMs: nonNegative(o.timeoutGraceMs ?? 2_000, 'timeoutGraceMs'),
    batch: checkBatch(o.batch),
    deadLetterQueue: checkDeadLetterQueue(o.deadLetterQueue, ''),
    confirm: checkConfirm(o.confirm),
  };
}

/** BullMQ's RateLimiterOptions. */
export interface RateLimiterOptions {
  /** Jobs that may start within `duration`: a whole number >= 1. */
  max: number;
  /** The window, in ms: a whole number >= 1. */
  duration: number;
}

/** The limiter option checked: both fields whole numbers from 1 (the Lua reads them as such). */
function checkLimiter(l: RateLimiterOptions | undefined): RateLimiterOptions | undefined {
  if (l === undefined) return undefined;
  if (typeof l !== 'object' || l === null) throw invalid(`limiter must be an object { max, duration }, got ${String(l)}`);
  const whole = (n: unknown, what: string) => {
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1) {
      throw invalid(`limiter.${what} must be a whole number >= 1${what === 'duration' ? ' (ms)' : ''}, got ${String(n)}`);
    }
    return n;
  };
  return { max: whole(l.max, 'max'), duration: whole(l.duration, 'duration') };
}
