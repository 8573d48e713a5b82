/**
 * The Worker's finisher: stores each run's outcome (glidemq_finish, batched by FinishBatcher: the
 * results ready in one event-loop turn go in one call), asks with it for the next jobs, brings the
 * job object up to date from the reply, emits completed / failed / lost, and hands the next claims
 * back to the worker.
 */
import type { ClaimReply } from '../jobs/job.js';
import { encodeRetention } from '../producing/options.js';
import { appendStack, boundedStack } from '../shared/stacktrace.js';
import { FinishBatcher, FinishRefusedError, type FetchShaper, type FinishRequest, type FinishWaiter } from './finish-batch.js';
import type { WorkerPart } from './worker-part.js';
import { newerFence, type Finished, type Run, type RunDone, type RunFinisher } from './worker-runner.js';

/** The slot ledger as the finisher sees it (the prefetch buffer). */
export interface FinisherLedger {
  /** Starts prefetched jobs on the free slots. */
  startBuffered(): void;
  /** How many jobs a finish asks for. */
  nextFetchCount(): number;
  /** The prefetch wanted now (0: none). */
  prefetchNow(): number;
  /** Next jobs asked for by finishes whose replies have not come back yet. */
  inbound: number;
  /** Sizes the calls of finishes and their next jobs (finish-batch.ts); without it, two calls of up to MAX_BATCH. */
  shaper?: FetchShaper;
}

/** What the finisher needs from its worker. */
export interface FinisherHost extends WorkerPart {
  ledger: FinisherLedger;
  /** Runs a claim the reply brought, or keeps it for a free slot. */
  dispatch(claim: ClaimReply, ahead?: boolean): void;
  afterSlotFreed(): void;
  /** A finish reply reported a flow outbox record: relay it (flow-relay.ts). */
  onRelay?(): void;
}

export class Finisher implements RunFinisher {
  /** Jobs this worker finished, by outcome. */
  readonly finished = { completed: 0, failed: 0 };
  /** Results ready in the same event-loop turn are stored in one call. */
  private readonly batcher: FinishBatcher;

  constructor(private readonly host: FinisherHost) {
    this.batcher = new FinishBatcher(host.client, host.keys.meta, host.consumer, host.claimTerms, () => host.onRelay?.(), host.settings.confirm, host.ledger.shaper);
  }

  /** The round trip of a finish call, ms (0 until one returned). */
  get rttMs(): number {
    return this.batcher.rttMs;
  }

  /** A processor took the marked claim `fence` of job `id`: the next call tells the server. */
  report(id: string, fence: string): void {
    this.batcher.report(id, fence);
  }

  /**
   * The finish of `run`, whose processor is done (the runner marked it finishing): the slot runs
   * the next prefetched job while this result is on its way, and the next jobs it asks for count
   * as on their way until settle().
   */
  request(run: Run, outcome: 'completed' | 'failed', value: string, retryDelay: number, error: Error | undefined, durationMs: number): FinishRequest {
    const host = this.host;
    const ledger = host.ledger;
    const job = run.job;
    ledger.startBuffered();
    const fetchCount = ledger.nextFetchCount();
    const request: FinishRequest = {
      id: job.id,
      fence: '',
      outcome,
      value,
      retryDelay,
      fetchCount,
      keep: encodeRetention(outcome === 'completed' ? job.opts.removeOnComplete ?? host.settings.removeOnComplete : job.opts.removeOnFail ?? host.settings.removeOnFail),
      durationMs,
      ahead: fetchCount > 0 && ledger.prefetchNow() > 0,
    };
    // a failed attempt keeps its error's stack (bounded: stacktrace.ts); a completion sends none
    if (error && outcome === 'failed') request.stack = boundedStack(error);
    ledger.inbound += fetchCount;
    return request;
  }

  /** @internal an error of the finish path, as the worker's `error` event. */
  reportError(err: unknown): void {
    this.host.emitError(err);
  }

  settle(request: FinishRequest): void {
    this.host.ledger.inbound -= request.fetchCount;
  }

  /** The run is over: brings its job up to date from the finish's reply and emits the outcome. */
  apply(run: Run, request: FinishRequest, finished: Finished | undefined, error: Error | undefined, freesSlot = true): void {
    const host = this.host;
    const job = run.job;
    let value = request.value;
    const { retryDelay, durationMs } = request;
    // A newer claim of this job may reach the run after finishRun took `next` (a batch's replies
    // resolve in order, and an earlier request's share may hold this job's retry): it is
    // dispatched with the reply's next jobs, never left on the finished run.
    const late = run.next;
    run.next = undefined;
    if (!finished) {
      // The claim stays in Valkey: stalled recovery gives the job to a healthy worker.
      if (late) queueMicrotask(() => host.dispatch(late));
      if (freesSlot) host.afterSlotFreed();
      return;
    }
    if (late) finished.next.push(late);
    const { reply, next, refused } = finished;
    if (refused) {
      // the server refused to store this run's outcome: the job failed with the reason instead
      value = refused.value;
      error = new Error(refused.value);
      request.stack = undefined;
    }
    const status = String(reply[0]);
    if (status === 'failed' && !refused && request.retryDelay >= 0 && job.attemptsMade + 1 < job.opts.attempts) {
      // final though attempts were left and a retry asked for: the claim was revoked before this
      // worker heard of it, and the server stored the reason 'revoked' (lua/finish.lua)
      value = 'revoked';
      error = new Error('revoked', { cause: error });
    }
    if (status === 'completed' || status === 'failed' || status === 'retried' || status === 'delayed') {
      job.attemptsMade++;
      job.finishedOn = (job.processedOn ?? Date.now()) + durationMs;
    }
    if (status === 'completed') {
      this.finished.completed++;
      job.state = 'completed';
      job.returnvalue = value === undefined || value === 'null' ? null : JSON.parse(value);
      host.emit('completed', job, job.returnvalue, 'active');
    } else if (status === 'failed' || status === 'retried' || status === 'delayed') {
      if (status === 'failed') this.finished.failed++;
      job.state = status === 'failed' ? 'failed' : status === 'delayed' ? 'delayed' : 'waiting';
      // job.delay is live: as the server stored it
      if (status === 'delayed') job.delay = retryDelay;
      job.failedReason = value;
      // (the claim carried no earlier stacks: getJob shows every kept one)
      job.stacktrace = appendStack(job.stacktrace, request.stack);
      host.emit('failed', job, error, 'active');
    } else {
      host.emit('lost', job, status);
    }
    for (const claim of next) host.dispatch(claim, request.ahead);
    if (freesSlot) host.afterSlotFreed();
  }

  /**
   * The finishes of a batch's runs (batch-runner.ts), whose requests go in one call: `done(i,
   * finished)` is told of each as apply needs it, and the slots are freed once for the batch. A run
   * whose reply asks for more (a refusal, 'stale' with a newer claim, a newer claim that waited in
   * run.next) or whose finish failed goes on alone, as finishRun does it for a single run.
   */
  async finishRuns(runs: Run[], requests: FinishRequest[], done: (i: number, finished: Finished | undefined, freesSlot: boolean) => void): Promise<void> {
    for (let i = 0; i < runs.length; i++) requests[i].fence = runs[i].job.claim?.fence ?? '';
    let replies: (unknown[] | Error)[];
    try {
      replies = await this.batcher.finishAll(requests);
    } finally {
      // the next jobs they asked for came with the replies (a finish sent again asks for none)
      for (const request of requests) this.settle(request);
    }
    const alone: Promise<void>[] = [];
    for (let i = 0; i < runs.length; i++) {
      const run = runs[i];
      const reply = replies[i];
      if (reply instanceof Error || run.next !== undefined || String(reply[0]) === 'stale') {
        alone.push(this.finishRun(run, requests[i], reply).then((finished) => done(i, finished, true)));
        continue;
      }
      const next: ClaimReply[] = [];
      const newer = sortClaims(run, reply, next);
      if (newer) next.push(newer);
      done(i, { reply, next }, false);
    }
    this.host.afterSlotFreed();
    await Promise.all(alone);
  }

  /**
   * Stores a run's outcome under its current claim, as finishRun does, and tells `done` (with
   * `error`, the run's) once the reply came: the usual reply is read here, with no promise made
   * for the job; one that asks for more (a refusal, 'stale', a failed call) goes on in finishRun.
   */
  send(run: Run, request: FinishRequest, error: Error | undefined, done: RunDone): void {
    request.fence = run.job.claim?.fence ?? '';
    this.batcher.finishTo(new RunFinish(this, run, request, error, done));
  }

  /**
   * Stores a run's outcome under its current claim. Returns the reply's status (row 0) and the
   * claims to dispatch once the run is gone (the next jobs, and a newer claim of this job that
   * arrived after a finish that still counted: a retry), or undefined when the finish failed.
   */
  async finishRun(
    run: Run,
    request: FinishRequest,
    /** The reply (or error) of this request sent already, with a batch's (finishRuns). */
    first?: unknown[] | Error,
  ): Promise<Finished | undefined> {
    const next: ClaimReply[] = [];
    let refused: FinishRequest | undefined;
    for (;;) {
      const fence = run.job.claim?.fence ?? '';
      let reply: unknown[];
      try {
        const given = first;
        first = undefined;
        if (given instanceof Error) throw given;
        // (the request itself, not a copy: the batcher may move next jobs it asks for from one
        // request to another, and settle() takes back what this one asked in the end)
        request.fence = fence;
        reply = given ?? (await this.batcher.finish(request));
      } catch (err) {
        if (err instanceof FinishRefusedError && !refused) {
          // only this job's finish was refused (the others of its batch were stored): it fails
          // with the reason, so it neither stalls nor runs again with what the server refuses
          next.push(...(err.next as ClaimReply[]));
          request = refused = refusalFailure(run.job.id, request, err);
          continue;
        }
        this.host.emitError(err);
        if (run.next) next.push(run.next);
        next.forEach((c) => queueMicrotask(() => this.host.dispatch(c)));
        return undefined;
      }
      const newer = sortClaims(run, reply, next);
      if (String(reply[0]) === 'stale' && newer && run.job.claim) {
        // the finish went under the claim a reclaim replaced, and the job came back here: the
        // run's outcome is stored under the new claim (no next jobs: the first reply had them)
        run.job.claim.fence = String(newer[1]);
        request = { ...request, fetchCount: 0 };
        continue;
      }
      if (newer) next.push(newer);
      // a finish sent again after its reply was lost gets what its first run stored
      // (lua/finish.lua): 'stale' and 'missing' mean that this run's result was not stored
      return { reply, next, refused };
    }
  }
}

/**
 * A run's finish on its way (Finisher.send): the batcher hands it the reply, and it hands the run's
 * end to `done`. It never throws into the batcher (which tells every waiter of a call once): what
 * goes wrong here is reported as an `error` event.
 */
class RunFinish implements FinishWaiter {
  constructor(
    private readonly finisher: Finisher,
    private readonly run: Run,
    readonly req: FinishRequest,
    private readonly error: Error | undefined,
    private readonly done: RunDone,
  ) {}

  resolve(reply: unknown[]): void {
    let finished: Finished | undefined;
    try {
      // 'stale' may have a newer claim of this job to store the outcome under: finishRun does that
      if (String(reply[0]) === 'stale') return this.alone(reply);
      const next: ClaimReply[] = [];
      const newer = sortClaims(this.run, reply, next);
      if (newer) next.push(newer);
      finished = { reply, next };
    } catch (err) {
      this.finisher.reportError(err);
    }
    this.end(finished);
  }

  reject(err: unknown): void {
    this.alone(err instanceof Error ? err : new Error(String(err)));
  }

  /** A reply or failure finishRun reads (it may send the finish again). */
  private alone(first: unknown[] | Error): void {
    this.finisher.finishRun(this.run, this.req, first).then(
      (finished) => this.end(finished),
      (err) => {
        this.finisher.reportError(err);
        this.end(undefined);
      },
    );
  }

  private end(finished: Finished | undefined): void {
    try {
      this.done(this.run, this.req, finished, this.error);
    } catch (err) {
      this.finisher.reportError(err);
    }
  }
}

/**
 * Sorts the claims a finish reply brought into `next`, but a newer claim of the run's own job (a
 * reclaim put it back while it ran, and the finish fetched it again), which it returns, with the
 * one that waited in run.next if that is newer.
 */
function sortClaims(run: Run, reply: unknown[], next: ClaimReply[]): ClaimReply | undefined {
  let newer = run.next;
  run.next = undefined;
  for (let i = 1; i < reply.length; i++) {
    const claim = reply[i] as ClaimReply;
    // the finish may fetch this very job again: a reclaim put it back while it ran
    if (String(claim[0]) === run.job.id && newerFence(String(claim[1]), newer ? String(newer[1]) : run.job.claim?.fence)) newer = claim;
    else next.push(claim);
  }
  return newer;
}

/**
 * The failure stored in place of a finish the server refused: the reason names the refusal and
 * what to change; kept whatever the job's retention says (its rule may be what was refused), and
 * not retried (a retry would meet the same refusal).
 */
function refusalFailure(id: string, request: FinishRequest, err: FinishRefusedError): FinishRequest {
  const value =
    `job ${id}: glidemq refused to store its ${request.outcome} outcome (${err.refusal.message}); ` +
    'the job is failed instead: correct what the refusal names (the job\'s options, or the key another program wrote) and add the job again';
  return { ...request, outcome: 'failed', value, stack: undefined, retryDelay: -1, keep: '', fetchCount: 0, ahead: false };
}
