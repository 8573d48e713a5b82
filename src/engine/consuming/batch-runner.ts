/**
 * The Worker's batch runner (the `batch` option, batch-options.ts): the Worker uses it in place of
 * the per-job Runner. It takes the jobs the worker claims one by one, as the Runner does, gathers
 * them into batches of up to batch.size (a batch that has not filled goes batch.timeout ms after
 * its first job), runs the batch processor once per batch, `(jobs, signal) => results`, and
 * finishes each job by its own outcome: a result completes it, an Error (an entry of a BatchError,
 * or what the processor threw, for every job) fails it, and it then retries or fails for good by
 * its own rules.
 *
 * Claims stay per job: each job of a batch has its own claim, fence and lock (the heartbeat renews
 * each one), a lost claim drops only that job's finish, and stalled recovery takes back each job of
 * a batch whose worker died. A batch's finishes go to the server together (Finisher.finishRuns), in
 * one call that also claims the next jobs, so a batch costs about one call; the client's work for
 * them is per batch where it can be (one promise, one freeing of the slots). `concurrency` counts
 * batches: the worker's slots (settings.concurrency) are concurrency x batch.size jobs.
 *
 * A batch's time limit is the smallest of its jobs' (job option `timeout`, else the Worker's
 * `timeout`), timed as one run of the per-job runner (run-timer.ts): at the limit the batch's signal
 * aborts with "timed out after N ms" and every job of the batch fails with that reason, by its own
 * retry rules; a processor still running timeoutGraceMs later is stuck: its jobs are failed then,
 * and the batch keeps its slot until the processor returns. A batch without a limit costs no timer.
 */
import { invalid, isBatchError, isUnrecoverable, RateLimitError, UnrecoverableError } from '../shared/errors.js';
import type { ClaimReply, Job } from '../jobs/job.js';
import { callFunction } from '../connecting/library.js';
import { planRetry, reasonWithProblem } from './backoff.js';
import type { FinishRequest } from './finish-batch.js';
import type { BatchOptions } from './batch-options.js';
import { Runner, serialiseResult, type Processor, type Run, type RunnerHost } from './worker-runner.js';
import { RunTimer } from './run-timer.js';

/**
 * Runs one batch: returns one result per job, in order, or throws a BatchError(results) to fail
 * some of them. `signal` aborts when cancelJob names one of its jobs, or cancelAllJobs runs.
 */
export type BatchProcessor<D = any, R = any> = (jobs: Job<D, R>[], signal: AbortSignal) => Promise<R[]> | R[];

/** What the Worker needs of the part that runs its jobs (the per-job Runner, or a BatchRunner). */
export type JobRunner<D = any, R = any> = Pick<
  Runner<D, R>,
  'active' | 'processing' | 'jobOf' | 'holds' | 'cancel' | 'cancelAll' | 'collectHeld' | 'lose' | 'claimAgain' | 'start' | 'revoke' | 'revokeAhead'
> & {
  /** close() began: a batch still filling is handed over now (its jobs are claimed here). */
  flush?(): void;
};

/** The runner of a worker: the per-job Runner, or a BatchRunner when the `batch` option is set. */
export function makeRunner<D, R>(
  host: RunnerHost,
  processor: Processor<D, R> | BatchProcessor<D, R> | null | undefined,
  batch: Required<BatchOptions> | undefined,
): JobRunner<D, R> {
  if (!batch) return new Runner<D, R>(host, processor as Processor<D, R> | null | undefined);
  if (typeof processor !== 'function') {
    throw invalid(`batch: a batch worker needs a processor function (jobs) => results, one per job in order; got ${processor === null || processor === undefined ? 'none' : typeof processor}`);
  }
  return new BatchRunner<D, R>(host, processor as BatchProcessor<D, R>, batch);
}

/** A job's outcome in its batch: the stored value (JSON text), or why it failed. */
type Outcome = { value: string; error?: undefined } | { error: Error };

export class BatchRunner<D = any, R = any> implements JobRunner<D, R> {
  /**
   * The runs, kept as the per-job runner keeps them (one per job id): its bookkeeping of claims
   * (holds, claimAgain, collectHeld, jobOf, cancel) serves each job of a batch alike. It never
   * runs a processor.
   */
  private readonly runs: Runner<D, R>;
  /** The batch filling now: jobs claimed and started here, not handed to the processor yet. */
  private filling: Run<D, R>[] = [];
  /** The filling batch waited batch.timeout: it goes as soon as a batch may run. */
  private due = false;
  /** Counts fills, so that the timer of a batch that went already changes nothing. */
  private fillRound = 0;
  private fillTimer: NodeJS.Timeout | undefined;
  private runningBatches = 0;
  /**
   * Batches whose processor outlived its time limit and the grace period, and their jobs: the jobs
   * are failed, but each such batch keeps its slot until its processor returns.
   */
  private stuckBatches = 0;
  private stuckJobs = 0;
  /** Jobs filling, or in a batch whose processor runs (a job whose finish is on its way is done). */
  private busy = 0;
  /** Batches that may run at once (the user's `concurrency`). */
  private readonly maxBatches: number;

  constructor(
    private readonly host: RunnerHost,
    private readonly processor: BatchProcessor<D, R>,
    private readonly batch: Required<BatchOptions>,
  ) {
    this.runs = new Runner<D, R>(host, null);
    this.maxBatches = Math.max(1, Math.floor(host.settings.concurrency / batch.size));
  }

  get active(): Map<string, Run<D, R>> {
    return this.runs.active;
  }

  processing(): number {
    return this.busy + this.stuckJobs;
  }

  jobOf(reply: ClaimReply): Job<D, R> {
    return this.runs.jobOf(reply);
  }

  holds(id: string, fence: string): boolean | undefined {
    return this.runs.holds(id, fence);
  }

  /** Aborts the signal of the batch that holds job `id` (every job of a batch shares it). */
  cancel(id: string, reason: string): boolean {
    return this.runs.cancel(id, reason);
  }

  cancelAll(reason: string): void {
    this.runs.cancelAll(reason);
  }

  collectHeld(held: Job[]): void {
    this.runs.collectHeld(held);
  }

  claimAgain(run: Run<D, R>, reply: ClaimReply): void {
    this.runs.claimAgain(run, reply);
  }

  /** queue.revoke of a job here: its failure fails it for good as 'revoked' (the others of its batch run on). */
  revoke(id: string, fence: string): boolean | undefined {
    return this.runs.revoke(id, fence);
  }

  revokeAhead(job: Job<D, R> | undefined, fence: string): boolean {
    return this.runs.revokeAhead(job, fence);
  }

  /**
   * As the per-job runner's lose, but the batch's signal is not aborted: the other jobs of the
   * batch still hold their claims, and only this job's finish will be refused.
   */
  lose(id: string, fence: string): boolean | undefined {
    const run = this.active.get(id);
    if (!run) return undefined;
    if (run.finishing || run.job.claim?.fence !== fence || run.lostFence === fence) return false;
    run.lostFence = fence;
    return true;
  }

  /** A job for a free slot: it joins the filling batch, which goes once full or due. */
  start(job: Job<D, R>): void {
    const run: Run<D, R> = { job, finishing: false };
    this.active.set(job.id, run);
    this.filling.push(run);
    this.busy++;
    if (this.filling.length === 1) this.armFill();
    this.handOverReady();
  }

  flush(): void {
    this.due = true;
    this.handOverReady();
  }

  /**
   * The filling batch's first job came: it goes batch.timeout ms from now however full it is
   * (with 0, once this turn's claims have joined it).
   */
  private armFill(): void {
    const round = ++this.fillRound;
    this.due = false;
    clearTimeout(this.fillTimer);
    const fire = () => {
      if (round !== this.fillRound) return;
      this.fillTimer = undefined;
      this.due = true;
      this.handOverReady();
    };
    if (this.batch.timeout === 0) setImmediate(fire);
    else this.fillTimer = setTimeout(fire, this.batch.timeout);
  }

  /** Hands over every batch that is full or due while fewer than `concurrency` batches run. */
  private handOverReady(): void {
    while (this.filling.length > 0 && this.runningBatches + this.stuckBatches < this.maxBatches) {
      if (this.filling.length < this.batch.size && !this.due) return;
      const runs = this.filling.splice(0, this.batch.size);
      if (this.filling.length === 0) {
        // the next job starts a new fill (and its own timer)
        this.fillRound++;
        clearTimeout(this.fillTimer);
        this.due = false;
      }
      const held = this.dropLost(runs);
      if (held.length > 0) void this.run(held).catch((err) => this.host.emitError(err));
      else this.host.afterSlotFreed();
    }
  }

  /**
   * A job whose claim the server said was lost while its batch filled (lockLost) is not handed to
   * the processor: another worker may run it already. Its slot is free again.
   */
  private dropLost(runs: Run<D, R>[]): Run<D, R>[] {
    const held = runs.filter((run) => run.lostFence === undefined || run.lostFence !== run.job.claim?.fence);
    if (held.length === runs.length) return runs;
    for (const run of runs) if (!held.includes(run)) this.active.delete(run.job.id);
    this.busy -= runs.length - held.length;
    return held;
  }

  private async run(runs: Run<D, R>[]): Promise<void> {
    const host = this.host;
    this.runningBatches++;
    const abort = new AbortController();
    for (const run of runs) {
      run.abort = abort;
      // a claim handed out marked not started: the server hears of its start with the next call
      if (host.wasMarked(run.job)) host.finisher.report(run.job.id, run.job.claim?.fence ?? '');
      host.emit('active', run.job, 'waiting');
    }
    const started = performance.now(); // monotonic: a clock step cannot make a duration negative
    const outcomes = await this.outcomes(runs, abort.signal, this.timerOf(runs, abort));
    const retries = await this.retryDelays(runs, outcomes);
    const ranMs = performance.now() - started;
    host.noteRun(ranMs);
    const durationMs = Math.max(0, Math.round(ranMs));
    const finishing: Run<D, R>[] = [];
    const errors: (Error | undefined)[] = [];
    const released: Run<D, R>[] = [];
    const requests: FinishRequest[] = [];
    this.busy -= runs.length;
    this.runningBatches--;
    // the slots run the next batch while these results are on their way
    const finisher = host.finisher;
    for (let i = 0; i < runs.length; i++) {
      const run = runs[i];
      const outcome = outcomes[i];
      // a job that parked itself (moveToDelayed): nothing to store
      if (run.job.moved) {
        this.active.delete(run.job.id);
        host.emit('moved', run.job);
        continue;
      }
      if (outcome.error instanceof RateLimitError) {
        released.push(run);
        continue;
      }
      run.finishing = true;
      const retry = retries?.[i];
      const failed = outcome.error !== undefined;
      const value = failed ? retry?.reason ?? reasonOf(outcome.error) : outcome.value;
      finishing.push(run);
      errors.push(outcome.error);
      requests.push(finisher.request(run, failed ? 'failed' : 'completed', value, retry?.delay ?? -1, outcome.error, durationMs));
    }
    this.handOverReady();
    await Promise.all([
      this.release(released),
      // the batch's finishes go in one call (finishRuns), each job then applied by its own reply
      finishing.length === 0
        ? undefined
        : finisher.finishRuns(finishing, requests, (i, finished, freesSlot) => {
          const run = finishing[i];
          this.active.delete(run.job.id);
          finisher.apply(run, requests[i], finished, errors[i], freesSlot);
        }),
    ]);
    if (finishing.length === 0 && released.length === 0) host.afterSlotFreed();
  }

  /**
   * Each failed job's retry (retryDelay), in order; undefined when none failed (a completed job
   * needs none, and a batch of them costs no promise per job).
   */
  private async retryDelays(runs: Run<D, R>[], outcomes: Outcome[]): Promise<({ delay: number; reason?: string } | undefined)[] | undefined> {
    if (!outcomes.some((outcome) => outcome.error !== undefined)) return undefined;
    return Promise.all(runs.map((run, i) => (outcomes[i].error ? this.retryDelay(run.job, outcomes[i]) : undefined)));
  }

  /**
   * Each job's outcome: the processor runs over the jobs that can run (a corrupt or foreign job
   * fails at once with the reason; the processor never sees it) and its results are matched to them
   * in order.
   */
  private async outcomes(runs: Run<D, R>[], signal: AbortSignal, timer: RunTimer | undefined): Promise<Outcome[]> {
    const out: Outcome[] = new Array(runs.length);
    const usable: number[] = [];
    runs.forEach((run, i) => {
      if (run.job.unusable) out[i] = { error: new UnrecoverableError(`job ${run.job.id} cannot run: ${run.job.unusable}`) };
      else usable.push(i);
    });
    if (usable.length === 0) return out;
    let results: unknown;
    try {
      const work = this.processor(usable.map((i) => runs[i].job), signal);
      results = await (timer ? timer.guard(work) : work);
    } catch (err) {
      results = isBatchError(err) ? err.results : asError(err);
    }
    // a batch stopped by its time limit fails with that reason, whatever the processor threw or returned
    if (timer?.reason) results = timer.reason;
    const checked = results instanceof Error ? results : checkResults(results, usable.length);
    usable.forEach((index, k) => {
      out[index] = outcomeOf(checked instanceof Error ? checked : checked[k]);
    });
    return out;
  }

  /**
   * The time limit of a batch: the smallest of its jobs' (each job's `timeout`, else the worker's);
   * undefined when none has one. At the limit it aborts the batch's signal; once the grace period
   * after it ran out with the processor still running, the batch keeps its slot until it returns.
   */
  private timerOf(runs: Run<D, R>[], abort: AbortController): RunTimer | undefined {
    const host = this.host;
    let ms: number | undefined;
    for (const run of runs) {
      const limit = run.job.opts.timeout ?? host.settings.timeout;
      if (limit !== undefined && (ms === undefined || limit < ms)) ms = limit;
    }
    if (ms === undefined) return undefined;
    const limit = ms;
    const grace = host.settings.timeoutGraceMs;
    return new RunTimer(limit, grace, (reason) => abort.abort(reason), (returned) => {
      this.stuckBatches++;
      this.stuckJobs += runs.length;
      const named = runs.slice(0, 5).map((run) => `job ${run.job.id}`).join(', ') + (runs.length > 5 ? ` and ${runs.length - 5} more` : '');
      host.emitError(new Error(`batch of ${named}: its processor did not stop within ${grace} ms after it timed out (timeout ${limit} ms); ` +
        'its jobs are failed, and its slot stays taken until the processor returns (make the batch processor honour its AbortSignal)'));
      void returned.then(() => {
        this.stuckBatches--;
        this.stuckJobs -= runs.length;
        host.afterSlotFreed();
        this.handOverReady();
      });
    });
  }

  /**
   * The delay before a failed job's next attempt (-1: none), from the server's now, and a reason
   * that names a custom backoff that failed (backoff.ts); -1 for a completed job.
   */
  private async retryDelay(job: Job<D, R>, outcome: Outcome): Promise<{ delay: number; reason?: string }> {
    const error = outcome.error;
    if (!error || isUnrecoverable(error) || error instanceof RateLimitError || job.moved) return { delay: -1 };
    const host = this.host;
    const plan = await planRetry(job, error, host.settings.backoffStrategy, host.settings.lockDuration);
    if (!plan.problem) return { delay: plan.delay };
    host.emitError(plan.problem);
    return { delay: plan.delay, reason: reasonWithProblem(reasonOf(error), plan.problem) };
  }

  /**
   * The processor threw RateLimitError (after worker.rateLimit), or reported it for these jobs:
   * they go back to the queue with no attempt counted, in one glidemq_release.
   */
  private async release(runs: Run<D, R>[]): Promise<void> {
    if (runs.length === 0) return;
    const host = this.host;
    const pairs = runs.flatMap((run) => [run.job.id, run.job.claim?.fence ?? '']);
    await callFunction(host.client(), 'glidemq_release', host.keys.meta, [host.consumer, ...pairs]).catch((err) => host.emitError(err));
    for (const run of runs) this.active.delete(run.job.id);
    host.afterSlotFreed();
  }
}

function asError(err: unknown): Error {
  return err instanceof Error ? err : new Error(String(err));
}

/** A failure's stored reason. */
function reasonOf(error: Error): string {
  return error.message || error.name || 'processor failed';
}

/**
 * The processor's results, one per job; an Error (failing every job of the batch) when they are
 * not an array of that length.
 */
function checkResults(results: unknown, jobs: number): unknown[] | Error {
  if (!Array.isArray(results)) {
    return new Error(`the batch processor returned ${results === null ? 'null' : typeof results}, not an array of results, for a batch of ${jobs} jobs: return one result per job, in order, or throw BatchError(results)`);
  }
  if (results.length !== jobs) {
    return new Error(`the batch processor gave ${results.length} results for a batch of ${jobs} jobs: give one result per job, in order (in the array it returns, or in BatchError(results))`);
  }
  return results;
}

/** One job's result: an Error fails the job; any other value completes it (stored as JSON). */
function outcomeOf(result: unknown): Outcome {
  if (result instanceof Error) return { error: result };
  try {
    return { value: serialiseResult(result) };
  } catch (err) {
    return { error: asError(err) };
  }
}
