/**
 * The Worker's runner: runs the processor over each job it is given, one run per job id, with the
 * job's AbortSignal (cancelJob, cancelAllJobs, a lost claim), and hands each outcome to the
 * finisher. A processor that throws is a failed job (its retry planned here), never a wedged
 * worker.
 */
import { isUnrecoverable, RateLimitError, UnrecoverableError } from '../shared/errors.js';
import { Job, type Claim, type ClaimReply } from '../jobs/job.js';
import { callFunction } from '../connecting/library.js';
import { planRetry, reasonWithProblem } from './backoff.js';
import type { FinishRequest } from './finish-batch.js';
import type { WorkerPart } from './worker-part.js';
import { RunTimer } from './run-timer.js';
import { takesSignal } from './processor-signal.js';

/**
 * Runs one job. `token` names the claim (job.token: BullMQ's lock token); `signal` aborts when the
 * run is cancelled (cancelJob, cancelAllJobs) or its claim was lost (lockLost).
 */
export type Processor<D = any, R = any> = (job: Job<D, R>, token?: string, signal?: AbortSignal) => Promise<R> | R;

/**
 * A processor that also hears each abort of its runs by a call (`onAbort`, with the run's job and
 * the reason) rather than only through an AbortSignal, which with its listener costs a few µs per
 * job: the sandbox's (sandbox-processor.ts), which declares no signal parameter and so gets none.
 */
export interface HearsAborts {
  onAbort?: (job: Job, reason: Error) => void;
}

/**
 * One run of a job on this worker. The claim it runs under can change while it runs: when a
 * reclaim gives the job back to this same worker (after an outage, or an event loop blocked for
 * longer than the lock), the run goes on under the new claim (see claimAgain), so a job never has
 * two runs here and a stale finish never touches the current claim.
 */
export interface Run<D = any, R = any> {
  job: Job<D, R>;
  /** Its finish is with the batcher: heartbeats leave it out, and a newer claim waits in `next`. */
  finishing: boolean;
  /** A newer claim of the job that arrived while the finish was on its way. */
  next?: ClaimReply;
  /**
   * Aborts the processor's signal; made only for a processor that takes one (an AbortSignal costs
   * a few µs per job, as much as the rest of a job's client work: see takesSignal).
   */
  abort?: AbortController;
  /** The fence of a claim the server said was lost while the run goes on (its processor may ignore the abort). */
  lostFence?: string;
  /** The run's time limit (run-timer.ts): only for a job that has one. */
  timer?: RunTimer;
  /** Revoked (queue.revoke): a failure now fails the job for good as 'revoked'; a completion stands. */
  revoked?: boolean;
  /** Why the run was aborted before anything asked for its signal (job.abortSignal makes it then, aborted). */
  aborted?: Error;
}

/**
 * What a finish brought back: the reply (status first), the claims to dispatch, the failure stored
 * in place of a refused outcome.
 */
export interface Finished {
  reply: unknown[];
  next: ClaimReply[];
  refused?: FinishRequest;
}

/** A run's finish came back (`finished`) or failed (undefined); `error` is the run's. */
export type RunDone = (run: Run, request: FinishRequest, finished: Finished | undefined, error: Error | undefined) => void;

/**
 * The finisher as the runner sees it: a run's finish in steps (request, send, then settle and apply
 * once `done` is told), so the per-job path makes no promise beyond the run's own and no closure.
 */
export interface RunFinisher {
  /** Tells the server, with the next call, that the marked claim `fence` of job `id` started. */
  report(id: string, fence: string): void;
  /**
   * The finish request of a run whose processor is done (its slot runs the next job while it is on
   * its way).
   */
  request(run: Run, outcome: 'completed' | 'failed', value: string, retryDelay: number, error: Error | undefined, durationMs: number): FinishRequest;
  /** Stores the outcome under the run's current claim; undefined when the finish failed. */
  finishRun(run: Run, request: FinishRequest): Promise<Finished | undefined>;
  /**
   * finishRun without a promise per job: `done` is told once the finish came back or failed, with
   * the run's `error`.
   */
  send(run: Run, request: FinishRequest, error: Error | undefined, done: RunDone): void;
  /** The finish came back or failed: the next jobs it asked for are no longer on their way. */
  settle(request: FinishRequest): void;
  /**
   * Brings the job up to date from the reply, emits its outcome, hands the next claims on, and
   * frees its slot (unless `freesSlot` is false: a batch's slots are freed once for the batch).
   */
  apply(run: Run, request: FinishRequest, finished: Finished | undefined, error: Error | undefined, freesSlot?: boolean): void;
  /**
   * A batch's finishes in one call (batch-runner.ts): each run's settled finish is told to `done`,
   * and the batch's slots are freed once (`freesSlot`: whether apply frees this run's own slot).
   */
  finishRuns(runs: Run[], requests: FinishRequest[], done: (i: number, finished: Finished | undefined, freesSlot: boolean) => void): Promise<void>;
}

/** What the runner needs from its worker. */
export interface RunnerHost extends WorkerPart {
  /** The claim came marked not started (lua/activate.lua): its start is reported when it runs. */
  wasMarked(job: Job): boolean;
  /** A processor run took `ms` (sizes the prefetch). */
  noteRun(ms: number): void;
  finisher: RunFinisher;
  /** Takes one job in place of a run that parked itself (moveToDelayed). */
  fetchOne(): Promise<void>;
  afterSlotFreed(): void;
}

/** Whether claim fence `a` came after `b` (fences count up per job; a missing one is oldest). */
export function newerFence(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || a === '') return false;
  if (b === undefined || b === '') return true;
  return Number(a) > Number(b);
}

export class Runner<D = any, R = any> {
  /** The runs in progress, one per job id. */
  readonly active = new Map<string, Run<D, R>>();
  /** Runs in `active` whose finish is on its way: their slot already runs the next job. */
  private finishingRuns = 0;
  /**
   * Processors that outlived their time limit and its grace period (run-timer.ts): their jobs are
   * failed and gone from `active`, but each keeps its slot until it returns.
   */
  private stuckRuns = 0;
  /** Prefetched claims revoked before they started (see revokeAhead): each fails at its start, unrun. */
  private readonly revokedAhead = new Set<Job<D, R>>();
  /**
   * The processor declares a third parameter (job, token, signal), or may read its arguments
   * without naming them (a rest parameter, `arguments`, a bound or native function): only then
   * is an AbortSignal made for each run. A processor that reads it through a default parameter
   * (`signal = undefined`) is not seen; give it a plain one.
   */
  private readonly takesSignal: boolean;
  /** The processor's own abort hook (HearsAborts), told of every abort of a run. */
  private readonly onAbort: HearsAborts['onAbort'];

  constructor(
    private readonly host: RunnerHost,
    private readonly processor: Processor<D, R> | null | undefined,
  ) {
    this.takesSignal = typeof processor === 'function' && takesSignal(processor);
    this.onAbort = typeof processor === 'function' ? (processor as HearsAborts).onAbort : undefined;
  }

  /** Runs whose processor runs now (a run whose result is on its way to the server is done). */
  processing(): number {
    return this.active.size - this.finishingRuns + this.stuckRuns;
  }

  /**
   * The job a claim this worker took hands it; its processedOn is when this process saw the claim
   * start (the stored one is the server's time).
   */
  jobOf(reply: ClaimReply): Job<D, R> {
    const host = this.host;
    const claim: Claim = { client: host.client(), keys: host.keys, consumer: host.consumer, fence: '', onProgress: this.onProgress, signalOf: this.signalOf, ahead: false };
    return Job.fromClaim(reply, claim, Date.now()) as Job<D, R>;
  }

  /** job.updateProgress, as the processor calls it, emits `progress` once the value is stored. */
  private readonly onProgress = (job: Job, progress: unknown): void => {
    this.host.emit('progress', job, progress);
  };

  /**
   * Whether this claim (job id and fence) runs here, or waits as the newer claim of a finishing
   * run; undefined when the job does not run here.
   */
  holds(id: string, fence: string): boolean | undefined {
    const run = this.active.get(id);
    if (!run) return undefined;
    return run.job.claim?.fence === fence || (run.next !== undefined && String(run.next[1]) === fence);
  }

  /**
   * Aborts the signal of job `id`'s run here; false when no such run. The processor decides what an
   * abort means.
   */
  cancel(id: string, reason: string): boolean {
    const run = this.active.get(id);
    if (!run) return false;
    this.abortRun(run, new Error(reason));
    return true;
  }

  /** Aborts the signal of every run here. */
  cancelAll(reason: string): void {
    for (const run of this.active.values()) this.abortRun(run, new Error(reason));
  }

  /**
   * job.abortSignal of a job that runs here: the run's signal, made now when its processor took
   * none (aborted at once when the run was aborted already); undefined for a run that is over.
   */
  private readonly signalOf = (job: Job): AbortSignal | undefined => {
    const run = this.active.get(job.id);
    if (!run || run.job !== job) return undefined;
    if (!run.abort) {
      run.abort = new AbortController();
      if (run.aborted) run.abort.abort(run.aborted);
    }
    return run.abort.signal;
  };

  /**
   * The server says claim `fence` of job `id` was revoked (queue.revoke, reported by the
   * heartbeat): its signal aborts with reason 'revoked'. True when that is news for a run here,
   * false when not (already told, finishing, another claim), undefined when the job does not run here.
   */
  revoke(id: string, fence: string): boolean | undefined {
    const run = this.active.get(id);
    if (!run) return undefined;
    if (run.finishing || run.revoked || run.job.claim?.fence !== fence) return false;
    run.revoked = true;
    this.abortRun(run, new Error('revoked'));
    return true;
  }

  /** A prefetched claim (`job`, claim `fence`) was revoked: it fails as revoked when it starts, unrun. */
  revokeAhead(job: Job<D, R> | undefined, fence: string): boolean {
    if (!job || job.claim?.fence !== fence || this.revokedAhead.has(job)) return false;
    this.revokedAhead.add(job);
    return true;
  }

  /**
   * Adds to `held` the jobs whose locks the heartbeat renews: a run whose finish is on its way is
   * left out (the finish may land first, and the lock it ends is not lost).
   */
  collectHeld(held: Job[]): void {
    for (const run of this.active.values()) {
      // a claim the server said was lost is renewed no more (nor told lost again at each heartbeat)
      if (!run.finishing && !run.job.moved && run.lostFence !== run.job.claim?.fence) held.push(run.job);
    }
  }

  /**
   * A claim the server says was lost: true while job `id` runs under it (its signal is aborted),
   * false when it runs under another claim or its finish is on its way, undefined when it does not
   * run here.
   */
  lose(id: string, fence: string): boolean | undefined {
    const run = this.active.get(id);
    if (!run) return undefined;
    if (run.finishing || run.job.claim?.fence !== fence || run.lostFence === fence) return false;
    run.lostFence = fence;
    this.abortRun(run, new Error(`job ${id}: the claim was lost (another worker may run it)`));
    return true;
  }

  /**
   * A claim of a job that runs here already. The same claim again (ClaimRecovery took it back and
   * the reply of a re-sent call carries it too) is dropped. A newer one means a reclaim gave the
   * job back to this worker while it ran: the run goes on under the new claim, whose lock the
   * heartbeat then keeps; if its finish is already on its way, under the old fence, the new claim
   * waits for that reply (see finishRun). Never a second run beside the first.
   */
  claimAgain(run: Run<D, R>, reply: ClaimReply): void {
    const fence = String(reply[1]);
    const claim = run.job.claim;
    if (!claim || !newerFence(fence, run.next ? String(run.next[1]) : claim.fence)) return;
    if (run.finishing) run.next = reply;
    else claim.fence = fence;
  }

  start(job: Job<D, R>): void {
    const run: Run<D, R> = { job, finishing: false, abort: this.takesSignal ? new AbortController() : undefined };
    // a time limit (the job's, else the worker's) needs a signal and a timer; a job without one gets neither
    const limit = job.opts.timeout ?? this.host.settings.timeout;
    if (limit !== undefined) this.timeRun(run, limit);
    // revoked while prefetched here, or on an earlier claim (given back, or redispatched after a
    // stall: the claim reply carries the server's flag, lua/revoke.lua): it fails unrun
    if ((this.revokedAhead.size > 0 && this.revokedAhead.delete(job)) || job.raw.revoked !== undefined) run.revoked = true;
    this.active.set(job.id, run);
    // a claim handed out marked not started: the server hears of its start with the next call
    if (this.host.wasMarked(job)) this.host.finisher.report(job.id, job.claim?.fence ?? '');
    void this.execute(run);
  }

  private async execute(run: Run<D, R>): Promise<void> {
    const job = run.job;
    const host = this.host;
    const started = performance.now(); // monotonic: a clock step cannot make a duration negative
    host.emit('active', job, 'waiting');
    let outcome: 'completed' | 'failed' = 'completed';
    let value: string;
    let retryDelay = -1;
    let error: Error | undefined;
    try {
      // A corrupt or foreign job fails at once with the reason; the processor never sees it.
      if (job.unusable) throw new UnrecoverableError(`job ${job.id} cannot run: ${job.unusable}`);
      // revoked before it started here (see start): it never runs
      if (run.revoked) throw new UnrecoverableError('revoked');
      const work = this.processor!(job, job.token, run.abort?.signal);
      const result = await (run.timer ? run.timer.guard(work) : work);
      // returned after its time ran out: it fails with the timeout's reason all the same
      if (run.timer?.reason) throw run.timer.reason;
      value = serialiseResult(result);
    } catch (err) {
      error = err instanceof Error ? err : new Error(String(err));
      // a run stopped by its time limit or a revoke fails with that reason, whatever the processor
      // threw; a revoked one is not retried (the server decides so too: lua/finish.lua)
      if (run.timer?.reason) error = run.timer.reason;
      if (run.revoked) error = new UnrecoverableError('revoked');
      if (error instanceof RateLimitError && !job.moved) return this.afterRateLimited(run);
      outcome = 'failed';
      value = error.message || error.name || 'processor failed';
      // a delay relative to the server's now: the server adds it to its own clock (lua/finish.lua)
      if (!isUnrecoverable(error)) {
        // a custom backoff type asks settings.backoffStrategy; one that fails fails the job
        // (backoff.ts)
        const plan = await planRetry(job, error, host.settings.backoffStrategy, host.settings.lockDuration);
        retryDelay = plan.delay;
        if (plan.problem) {
          value = reasonWithProblem(value, plan.problem);
          host.emitError(plan.problem);
        }
      }
    }
    if (job.moved) return this.afterMoved(job);
    const ranMs = performance.now() - started;
    host.noteRun(ranMs);
    const durationMs = Math.max(0, Math.round(ranMs));
    // the slot runs the next prefetched job while this result is on its way
    run.finishing = true;
    this.finishingRuns++;
    const finisher = host.finisher;
    finisher.send(run, finisher.request(run, outcome, value, retryDelay, error, durationMs), error, this.afterFinish);
  }

  /** A run's finish came back or failed: the run is over. */
  private readonly afterFinish: RunDone = (run, request, finished, error) => {
    const finisher = this.host.finisher;
    finisher.settle(request);
    this.finishingRuns--;
    this.active.delete(run.job.id);
    finisher.apply(run, request, finished, error);
  };

  /**
   * Aborts a run's signal, or records why for a signal made later (job.abortSignal); the processor's
   * abort hook hears it either way.
   */
  private abortRun(run: Run<D, R>, reason: Error): void {
    if (run.abort) run.abort.abort(reason);
    else run.aborted ??= reason;
    this.onAbort?.(run.job, reason);
  }

  /** Gives `run` its time limit of `ms` (run-timer.ts) and the signal it aborts. */
  private timeRun(run: Run<D, R>, ms: number): void {
    run.abort ??= new AbortController();
    const grace = this.host.settings.timeoutGraceMs;
    run.timer = new RunTimer(ms, grace, (reason) => this.abortRun(run, reason), (returned) => {
      // the job is failed now (guard rejected); its processor keeps the slot until it returns
      this.stuckRuns++;
      this.host.emitError(new Error(`job ${run.job.id}: its processor did not stop within ${grace} ms after it timed out ` +
        `(timeout ${ms} ms); the job is failed, and its slot stays taken until the processor returns (make the processor honour its AbortSignal)`));
      void returned.then(() => {
        this.stuckRuns--;
        this.host.afterSlotFreed();
      });
    });
  }

  /**
   * The processor threw RateLimitError (after worker.rateLimit): the job goes back to the queue
   * with no attempt counted (glidemq_release, as a prefetched job is given back).
   */
  private async afterRateLimited(run: Run<D, R>): Promise<void> {
    const job = run.job;
    const host = this.host;
    await callFunction(host.client(), 'glidemq_release', host.keys.meta, [host.consumer, job.id, job.claim?.fence ?? ''])
      .catch((err) => host.emitError(err));
    this.active.delete(job.id);
    host.afterSlotFreed();
  }

  /** A step job parked itself (moveToDelayed): nothing to store; take the next job in its place. */
  private async afterMoved(job: Job<D, R>): Promise<void> {
    const host = this.host;
    this.active.delete(job.id);
    host.emit('moved', job);
    if (host.live()) {
      try {
        await host.fetchOne();
      } catch (err) {
        host.emitError(err);
      }
    }
    host.afterSlotFreed();
  }
}

export { readsArgumentsFreely } from './processor-signal.js';

/** The stored return value: JSON text. A value JSON cannot hold fails the job with that reason. */
export function serialiseResult(result: unknown): string {
  // the usual no-op result, without a call
  if (result === undefined || result === null) return 'null';
  let text: string | undefined;
  try {
    text = JSON.stringify(result === undefined ? null : result);
  } catch (err) {
    throw new UnrecoverableError(`the processor returned a value that cannot be stored as JSON: ${(err as Error).message}`);
  }
  if (text === undefined) throw new UnrecoverableError(`the processor returned a ${typeof result}, which cannot be stored as JSON`);
  return text;
}
