/**
 * The delay before a failed job's next attempt, as the worker sends it to glidemq_finish: the
 * built-in backoffs (options.ts backoffDelay), or a custom type computed by the Worker's
 * `settings.backoffStrategy` (BullMQ's form). A strategy is user code: one that throws, answers
 * something that is not a delay, or never answers, fails the job with the reason and is reported
 * as the worker's `error`; it never holds the job.
 */
import { GlideMQError, invalid } from '../shared/errors.js';
import { backoffDelay, isCustomBackoff, type BackoffOptions } from '../producing/options.js';
import type { Job } from '../jobs/job.js';

/**
 * BullMQ's backoff strategy: the delay in ms before attempt `attemptsMade + 1` (`attemptsMade`
 * counts the attempt that just failed), given the job's backoff type, the error and the job.
 * -1 (any negative number): no retry, the job fails now; 0: retry at once.
 */
export type BackoffStrategy = (attemptsMade: number, type: string, err: Error, job: Job) => Promise<number> | number;

/** BullMQ's Worker `settings` (AdvancedOptions): what glidemq takes of it. */
export interface AdvancedSettings {
  backoffStrategy?: BackoffStrategy;
}

/** A backoff strategy that failed (threw, gave no delay, or did not answer); code ERR_BACKOFF. */
export class BackoffStrategyError extends GlideMQError {}

/** glidemq_finish's retryDelay meaning "do not retry". */
const NO_RETRY = -1;

export function checkAdvancedSettings(s: AdvancedSettings | undefined): BackoffStrategy | undefined {
  if (s === undefined) return undefined;
  if (typeof s !== 'object' || s === null) throw invalid(`settings must be an object {backoffStrategy?}, got ${String(s)}`);
  const strategy = s.backoffStrategy;
  if (strategy !== undefined && typeof strategy !== 'function') {
    throw invalid(`settings.backoffStrategy must be a function (attemptsMade, type, err, job) => delay in ms, got ${typeof strategy}`);
  }
  return strategy;
}

export interface RetryPlan {
  /** ms from the server's now until the retry (0 = at once), or -1: no retry. */
  delay: number;
  /** Set when the strategy failed: the job fails now, this in its reason; the worker emits it. */
  problem?: BackoffStrategyError;
}

/** A built-in backoff's delay, as glidemq_finish takes it: whole ms from 0 to 2^53 - 1. */
export function builtinRetryDelay(backoff: BackoffOptions | undefined, attempt: number): number {
  const d = backoffDelay(backoff, attempt);
  if (Number.isNaN(d)) return 0;
  return Math.min(Math.floor(d), Number.MAX_SAFE_INTEGER);
}

/**
 * The retry delay for `job`, whose attempt just failed with `err`. A custom type asks `strategy`
 * (only while attempts are left, as BullMQ does), waiting at most `timeoutMs` for its answer.
 */
export async function planRetry(job: Job, err: Error, strategy: BackoffStrategy | undefined, timeoutMs: number): Promise<RetryPlan> {
  const backoff = job.opts.backoff;
  const attempt = job.attemptsMade + 1;
  if (!isCustomBackoff(backoff)) return { delay: builtinRetryDelay(backoff, attempt) };
  if (attempt >= job.opts.attempts) return { delay: NO_RETRY };
  const fail = (why: string): RetryPlan => ({
    delay: NO_RETRY,
    problem: new BackoffStrategyError('ERR_BACKOFF', `job ${job.id}: not retried: ${why}`),
  });
  if (!strategy) {
    return fail(`its backoff type "${backoff.type}" is not fixed or exponential, and the worker has no settings.backoffStrategy to compute it (give the Worker one, or use a built-in type)`);
  }
  let answer: unknown;
  let timer: NodeJS.Timeout | undefined;
  try {
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`it did not answer within ${timeoutMs} ms`)), timeoutMs);
    });
    answer = await Promise.race([Promise.resolve().then(() => strategy(attempt, backoff.type, err, job)), late]);
  } catch (e) {
    return fail(`settings.backoffStrategy failed for backoff type "${backoff.type}": ${e instanceof Error ? e.message : String(e)}`);
  } finally {
    clearTimeout(timer);
  }
  if (typeof answer !== 'number' || Number.isNaN(answer)) {
    return fail(`settings.backoffStrategy returned ${typeof answer === 'number' ? 'NaN' : JSON.stringify(answer) ?? typeof answer} for backoff type "${backoff.type}", where a delay in ms is needed (-1: no retry, 0: at once)`);
  }
  if (answer < 0) return { delay: NO_RETRY };
  return { delay: Math.min(Math.floor(answer), Number.MAX_SAFE_INTEGER) };
}

/** The reason stored for a job whose strategy failed: the processor's, then why no retry. */
export function reasonWithProblem(reason: string, problem: BackoffStrategyError): string {
  return `${reason} (${problem.message.replace(/^job \S+: /, '')})`;
}
