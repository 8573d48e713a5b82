/**
 * Manual processing, BullMQ's "manually fetching jobs" pattern: a Worker made without a processor
 * runs no loop of its own; the application takes jobs with worker.getNextJob(token) and ends each
 * with job.moveToCompleted / job.moveToFailed(..., token), and keeps a long one alive with
 * job.extendLock(token, duration). The Worker makes this part when it has no processor; as such a
 * worker never calls run(), its start-up (the connection settled, the library loaded) runs here,
 * once, on the first getNextJob or startStalledCheckTimer.
 *
 * The token is the claim's owner on the server: jobs are claimed with it as the consumer name
 * (glidemq_fetch, and glidemq_finish's next jobs), so only a call that names the same token (and
 * the claim's fence, which the job carries) may finish the job or extend its lock; any other token,
 * or a claim that stalled recovery already took back, is refused by the server and the call throws
 * a StaleClaimError naming the job and the operation. Each claim records the worker's lockDuration
 * and maxStalledCount as its terms (lua/activate.lua), so a manual job whose lock is not extended
 * is recovered by any worker's stalled check on its own lock's schedule. Nothing is prefetched: a
 * call claims at most the one job it returns. No heartbeat runs for these claims (as in BullMQ):
 * extendLock is the application's.
 *
 * A blocking getNextJob waits on the queue's streams without claiming (ChangeWaiter, on a
 * connection of its own made on first use) and fetches when something changed, for at most the
 * worker's blockTimeout; blocking calls take turns on that connection. A fetch that finds nothing
 * promotes the delayed jobs that are due (a manual worker runs no promotion timer) and tries again.
 *
 * Not covered here: a reply lost to a broken connection (a getNextJob, or a move that fetched the
 * next job) leaves its claim unknown to the application; stalled recovery takes it back once its
 * lock runs out (a processor worker takes such claims back at once: claim-recovery.ts).
 */
import type { Acquired, Client } from '../connecting/connection.js';
import { BlockingConnection } from '../connecting/blocking-connection.js';
import { ChangeWaiter } from './change-waiter.js';
import { invalid, isUnrecoverable, JobNotFoundError } from '../shared/errors.js';
import { extendClaimLock, staleTokenError, type ClaimReply, type ManualOutcome } from '../jobs/claims.js';
import { Job } from '../jobs/job.js';
import type { QueueKeys } from '../shared/keys.js';
import { callFunction } from '../connecting/library.js';
import { confirmedCall } from '../producing/confirm.js';
import { encodeRetention } from '../producing/options.js';
import { relayOutboxes } from '../producing/dead-letter-outbox.js';
import { RELAY_MARK } from './finish-batch.js';
import { planRetry, reasonWithProblem } from './backoff.js';
import { boundedStack } from '../shared/stacktrace.js';
import type { Settings } from './worker-options.js';
// (delayed jobs made waiting per glidemq_promote call when a fetch found none: as the Worker's)
import { PROMOTE_BATCH } from './worker-promoter.js';

/** What the Worker lends its manual part. */
export interface ManualContext {
  /** The worker's command connection. */
  client: () => Client;
  acquired: Acquired;
  keys: QueueKeys;
  settings: Settings;
  /** The worker's start-up (its connection settled, the library loaded): run once on first use. */
  settle(): Promise<void>;
  /** The worker's close() began. */
  closing(): boolean;
}

/** One fetch's answer: the job claimed, if any, and how long at most to wait before a retry. */
interface Take {
  job?: Job;
  /**
   * ms until a retry may find something the streams do not announce (a delayed job, the rate
   * window).
   */
  retryIn: number;
}

export class ManualFetch {
  private blocker: BlockingConnection | undefined;
  /** Blocking waits take turns on the one blocking connection. */
  private turns: Promise<unknown> = Promise.resolve();
  private closed = false;
  /** The worker's start-up, made on first use (a worker without a processor never runs run()). */
  private settled: Promise<void> | undefined;

  constructor(private readonly ctx: ManualContext) {}

  /**
   * Claims the next job for `token`, or undefined (also once the worker closes). With `block`,
   * waits up to the worker's blockTimeout (from this call) for one to arrive.
   */
  async next(token: string, block: boolean): Promise<Job | undefined> {
    if (this.ctx.closing()) return undefined;
    await this.ready();
    checkToken(token, 'getNextJob');
    if (this.closed) return undefined;
    if (!block) return (await this.take(token)).job;
    const deadline = performance.now() + this.ctx.settings.blockTimeout;
    const turn = this.turns.then(() => this.takeBlocking(token, deadline));
    this.turns = turn.catch(() => undefined);
    return turn;
  }

  /**
   * Stores `job`'s outcome under the claim `token` holds (glidemq_finish, as a processor's: a
   * failure is retried with the job's backoff while attempts are left) and, with `fetchNext`,
   * claims the next job for the same token and returns it. `op` names the call in errors.
   */
  async finish(job: Job, token: string, outcome: ManualOutcome, fetchNext: boolean, op: string): Promise<Job | undefined> {
    checkToken(token, op);
    const { settings, keys } = this.ctx;
    const fence = job.claim?.fence ?? '';
    let value: string;
    let retryDelay = -1;
    let stack: string | undefined;
    let error: Error | undefined;
    if (outcome.completed) {
      value = resultText(job.id, outcome.value, op);
    } else {
      error = outcome.error instanceof Error ? outcome.error : new Error(String(outcome.error));
      value = error.message || error.name || 'failed';
      if (!isUnrecoverable(error)) {
        const plan = await planRetry(job, error, settings.backoffStrategy, settings.lockDuration);
        retryDelay = plan.delay;
        if (plan.problem) value = reasonWithProblem(value, plan.problem);
      }
      stack = boundedStack(error);
    }
    const keep = encodeRetention(
      outcome.completed ? job.opts.removeOnComplete ?? settings.removeOnComplete : job.opts.removeOnFail ?? settings.removeOnFail,
    );
    const durationMs = Math.max(0, Math.round(Date.now() - (job.processedOn ?? Date.now())));
    const outcomeArg = outcome.completed ? 'completed' : stack === undefined ? 'failed' : `failed:${stack}`;
    // confirmed as the worker's own finishes are (its confirm option), one confirmation per call
    const what = () => ({ what: `finish of job ${job.id} (manual processing)` });
    const reply = (await confirmedCall(this.ctx.client(), 'glidemq_finish', keys.meta, [
      job.id, fence, token, outcomeArg, value, retryDelay, fetchNext ? 1 : 0, keep, durationMs, '0', ...this.terms,
    ], settings.confirm, what)) as unknown[];
    const status = String(reply[0]);
    // a finish that settled a parent in another queue reports its outbox record last: relayed here
    if (reply[reply.length - 1] === RELAY_MARK) {
      reply.pop();
      // (a relay that fails is left to maintenance, which relays records past their grace period)
      await relayOutboxes(this.ctx.client(), keys.meta, 0, settings.confirm).catch(() => undefined);
    }
    const next = reply.slice(1) as ClaimReply[];
    if (status === 'stale' || status === 'missing') {
      // nothing was stored: a next job the call claimed anyway goes back to the queue at once
      await this.giveBack(token, next);
      throw status === 'missing'
        ? new JobNotFoundError('ERR_JOB_NOT_FOUND', `job ${job.id}: ${op}: the job no longer exists (it was removed): nothing was stored`, true)
        : staleTokenError(job.id, op, token);
    }
    job.attemptsMade++;
    job.finishedOn = Date.now();
    if (status === 'completed') {
      job.state = 'completed';
      job.returnvalue = JSON.parse(value);
    } else {
      job.state = status === 'failed' ? 'failed' : status === 'delayed' ? 'delayed' : 'waiting';
      job.failedReason = value;
    }
    return next[0] ? this.jobOf(next[0], token) : undefined;
  }

  /**
   * Renews the lock of `job`'s claim held by `token` for `duration` ms from the server's now: the
   * claim's terms record the new duration (glidemq_extendLock). Resolves 1; a token that does not
   * hold the claim gets a StaleClaimError.
   */
  async extendLock(job: Job, token: string, duration: number): Promise<number> {
    checkToken(token, 'extendLock');
    const claimed = { id: job.id, fence: job.claim?.fence };
    return extendClaimLock(this.ctx.client(), this.ctx.keys, claimed, token, token, duration, this.ctx.settings.maxStalledCount);
  }

  /**
   * Runs `start` (the worker's stalled check) once the worker's start-up is done, unless the
   * worker closed meanwhile.
   */
  async whenReady(start: () => void): Promise<void> {
    await this.ready();
    if (!this.ctx.closing()) start();
  }

  /** The worker's start-up, once; a failed one is tried again on the next call. */
  private ready(): Promise<void> {
    this.settled ??= this.ctx.settle().catch((err) => {
      this.settled = undefined;
      throw err;
    });
    return this.settled;
  }

  /** Ends a blocking wait in progress and closes the blocking connection. */
  async close(): Promise<void> {
    this.closed = true;
    const blocker = this.blocker;
    this.blocker = undefined;
    if (!blocker) return;
    if (this.ctx.client().status === 'ready') await blocker.unblock(this.ctx.client()).catch(() => undefined);
    blocker.close();
  }

  /** The terms each claim records: the worker's lockDuration and maxStalledCount (activate.lua). */
  private get terms(): [number, number] {
    return [this.ctx.settings.lockDuration, this.ctx.settings.maxStalledCount];
  }

  private jobOf(reply: ClaimReply, token: string): Job {
    const { keys } = this.ctx;
    return Job.fromClaim(reply, { client: this.ctx.client(), keys, consumer: token, fence: '', manual: this }, Date.now());
  }

  /** One fetch of one job for `token`; when none waits, the due delayed jobs are promoted first. */
  private async take(token: string): Promise<Take> {
    let r = await this.fetch(token);
    if (r.job || r.paused) return r;
    const promoted = (await callFunction(this.ctx.client(), 'glidemq_promote', this.ctx.keys.meta, [PROMOTE_BATCH])) as number[];
    if (Number(promoted[0]) > 0) r = await this.fetch(token);
    const due = Number(promoted[1]);
    if (!r.job && due >= 0) r.retryIn = Math.min(r.retryIn, due);
    return r;
  }

  private async fetch(token: string): Promise<Take & { paused?: boolean }> {
    const { client, keys } = this.ctx;
    const r = (await callFunction(client(), 'glidemq_fetch', keys.meta, [token, 1, ...this.terms])) as unknown[];
    const status = String(r[0]);
    if (status === 'paused') return { paused: true, retryIn: Infinity };
    const rated = status === 'rated';
    const jobs = r.slice(rated ? 2 : 1) as ClaimReply[];
    return { job: jobs[0] ? this.jobOf(jobs[0], token) : undefined, retryIn: rated ? Math.max(1, Number(r[1]) || 1) : Infinity };
  }

  /**
   * Fetches until a job comes or `deadline` (performance.now) passes. The streams are marked before
   * each fetch, so a job added after the fetch wakes the wait (ChangeWaiter).
   */
  private async takeBlocking(token: string, deadline: number): Promise<Job | undefined> {
    const waiter = new ChangeWaiter(this.ctx.keys);
    for (;;) {
      await waiter.mark(this.ctx.client());
      const r = await this.take(token);
      if (r.job) return r.job;
      const untilDeadline = deadline - performance.now();
      if (untilDeadline < 1 || this.closed) return undefined;
      // (a wait of at least 1 ms: a retry due now, a delayed job or the rate window, never spins)
      const left = Math.max(1, Math.min(untilDeadline, r.retryIn));
      const blocker = await this.blocking();
      await blocker.block((c) => waiter.wait(c, Math.ceil(left), () => !this.closed));
    }
  }

  private async blocking(): Promise<BlockingConnection> {
    if (!this.blocker) {
      const b = new BlockingConnection(this.ctx.acquired, this.ctx.keys.stream, this.ctx.settings.blockTimeout);
      this.blocker = b;
      await b.start();
    }
    return this.blocker;
  }

  /**
   * Releases claims a refused finish made anyway (its next jobs), so they do not wait for a stall.
   */
  private async giveBack(token: string, replies: ClaimReply[]): Promise<void> {
    if (replies.length === 0) return;
    const pairs = replies.flatMap((r) => [String(r[0]), String(r[1])]);
    await callFunction(this.ctx.client(), 'glidemq_release', this.ctx.keys.meta, [token, ...pairs]).catch(() => undefined);
  }
}

/** A token names a claim's owner on the server: a non-empty string. */
function checkToken(token: unknown, op: string): asserts token is string {
  if (typeof token !== 'string' || token === '') {
    throw invalid(`${op}: the token must be a non-empty string (the same one for the job's fetch and its finish), got ${String(token)}`);
  }
}

/**
 * The stored return value (JSON text); a value JSON cannot hold is refused before anything is
 * stored.
 */
function resultText(id: string, result: unknown, op: string): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(result === undefined ? null : result);
  } catch (err) {
    throw invalid(`job ${id}: ${op}: the return value cannot be stored as JSON (${(err as Error).message})`);
  }
  if (text === undefined) throw invalid(`job ${id}: ${op}: a ${typeof result} cannot be stored as JSON`);
  return text;
}
