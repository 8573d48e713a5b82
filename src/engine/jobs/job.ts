/** A job as a processor and an inspector see it: its stored fields (job-record.ts), and what it may do: its claim, its queue, the calls that change it. */
import type { Client } from '../connecting/connection.js';
import { invalid, StaleClaimError } from '../shared/errors.js';
import * as edits from './job-edits.js';
import type { EditTarget, RetryOptions } from './job-edits.js';
import { callFunction } from '../connecting/library.js';
import type { QueueKeys } from '../shared/keys.js';
import { DEFAULT_MAX_PAYLOAD } from '../producing/options.js';
import { readJobState, type JobStateName } from '../inspecting/job-queries.js';
import { JobRecord } from './job-record.js';
import { claimLostError, decodeClaim, notManualError, extendClaimLock, staleTokenError, type ClaimReply, type ManualOutcome } from './claims.js';
import { removeJob } from './job-removal.js';
import {
  childrenValues,
  dependencies,
  dependenciesCount,
  failedChildrenValues,
  ignoredChildrenFailures,
  parentsOfJob,
  unlinkFromParents,
  waitForChildren,
  type Dependencies,
  type DependenciesCount,
  type DependenciesOptions,
  type DependencyTarget,
} from './job-dependencies.js';

// Claim replies and their helpers live in claims.ts; their importers still find them here.
export { decodeClaim, extendClaimLock, staleTokenError, type ClaimReply, type ManualOutcome } from './claims.js';

export type { JobState } from '../inspecting/job-queries.js';

/** The claim a running job holds: only its holder may change the job. */
export interface Claim {
  client: Client;
  keys: QueueKeys;
  consumer: string;
  fence: string;
  /** Told once a progress value is stored (the worker emits its `progress` event from here). */
  onProgress?: (job: Job, progress: unknown) => void;
  /** Set on a claim made by worker.getNextJob: `consumer` is then the application's token (manual-fetch.ts). */
  manual?: ManualClaims;
  /** The run's AbortSignal, made on first ask (the worker's runner: job.abortSignal). */
  signalOf?: (job: Job) => AbortSignal | undefined;
  /** Came marked not started (lua/activate.lua), its start reported when it runs (a field: a WeakSet cost ~300 ns a job). */
  ahead?: boolean;
}

/** How a job fetched by hand (worker.getNextJob) is finished and kept alive (src/engine/consuming/manual-fetch.ts). */
export interface ManualClaims {
  finish(job: Job, token: string, outcome: ManualOutcome, fetchNext: boolean, op: string): Promise<Job | undefined>;
  extendLock(job: Job, token: string, duration: number): Promise<number>;
}

/** What a job fetched by id needs of its queue to change itself without a claim (a Queue is one). */
export interface JobQueueHandle {
  readonly client: Client;
  readonly keys: QueueKeys;
  readonly maxPayloadBytes?: number;
  waitUntilReady(): Promise<void>;
  emit(event: string, ...args: unknown[]): boolean;
}

/** What Job.fromId and Job.addJobLog need of a queue (a Queue is one; job.ts does not import it). */
export interface JobSource extends JobQueueHandle {
  getJob(id: string): Promise<Job | undefined>;
  addJobLog(id: string, line: string, keepLogs?: number): Promise<number>;
}

export class Job<D = any, R = any> extends JobRecord<D, R> {
  /** @internal the claim, set while a worker runs this job */
  claim: Claim | undefined;

  /**
   * The running claim's token (BullMQ's lock token: the processor's second argument), or undefined
   * on a job no worker runs here. It names the claim: the worker's consumer and the claim's fence.
   */
  get token(): string | undefined {
    const c = this.claim;
    if (!c) return undefined;
    // a job fetched by hand: the token the application fetched it with owns the claim
    return c.manual ? c.consumer : `${c.consumer}:${c.fence}`;
  }

  /**
   * While a worker runs this job, the run's AbortSignal (glide-mq's job.abortSignal: the signal
   * the processor's third parameter gets): it aborts on a timeout ("timed out after N ms"), a
   * revoke ('revoked'), cancelJob, or a lost claim. Made on first read; undefined on a job no
   * worker runs here.
   */
  get abortSignal(): AbortSignal | undefined {
    return this.claim?.signalOf?.(this);
  }

  /** The name of the job's queue (BullMQ's job.queueName), when this handle knows its queue. */
  get queueName(): string | undefined {
    return (this.claim?.keys ?? this.queue?.keys)?.queue;
  }

  /**
   * The job's queue key, `<prefix>:{<queue>}` (BullMQ's job.queueQualifiedName, `<prefix>:<queue>`):
   * what a child's `parent: { id, queue }` option names.
   */
  get queueQualifiedName(): string | undefined {
    return (this.claim?.keys ?? this.queue?.keys)?.base;
  }

  /** Activations so far, this one included (each claim takes the next fence). */
  get attemptsStarted(): number {
    // startsBase: the fence when a retry asked to count from 0 again (lua/job-edit.lua)
    return Math.max(0, (Number(this.claim?.fence ?? this.raw.fence ?? 0) || 0) - (Number(this.raw.startsBase ?? 0) || 0));
  }

  /**
   * A job claimed for a worker from the claim reply (decodeClaim), active since `claimedAt`, the
   * worker's reading of the claim's start (getJob shows the server's, processedOn). `claim`, a new
   * object per job, becomes the job's own (its fence set from the reply).
   */
  static fromClaim(reply: ClaimReply, claim: Claim, claimedAt: number): Job {
    const job = Job.fromFields(decodeClaim(reply));
    claim.fence = job.raw.fence;
    job.claim = claim;
    job.state = 'active';
    job.processedOn = claimedAt;
    return job;
  }

  /** A job from its hash fields (a flat name/value list or a record). */
  static fromFields(fields: string[] | Record<string, string>): Job {
    return new Job().assign(fields);
  }

  // ---- Changing the job from any handle (BullMQ's Job API; src/engine/jobs/job-edits.ts) ----
  // From the worker that runs the job, progress, logs and data are written under its claim: once
  // that claim is stale (the job was reclaimed, or it finished) they change nothing. From a handle
  // without a claim (a job fetched with Job.fromId, or the Queue's own calls) they are written to
  // any job that exists. No handle finishes a job; retry, promote and changeDelay move only jobs no
  // worker holds.

  /** @internal the queue a handle job came from (Job.fromId, queue.getJob, getJobs, add): its client and keys. */
  queue: JobQueueHandle | undefined;

  /** The job `id` of `queue`, able to change itself without a claim; undefined when there is none. */
  static async fromId<D = any, R = any>(queue: JobSource, id: string): Promise<Job<D, R> | undefined> {
    const job = await queue.getJob(id);
    if (job) job.queue = queue;
    return job as Job<D, R> | undefined;
  }

  /** BullMQ's Job.addJobLog: queue.addJobLog(id, line, keepLogs). */
  static addJobLog(queue: JobSource, id: string, line: string, keepLogs?: number): Promise<number> {
    return queue.addJobLog(id, line, keepLogs);
  }

  /**
   * Where a change of this job goes: under the running claim when a worker runs it here, else
   * through the queue it was fetched from (once that queue is ready: its client may be a Cluster).
   */
  private async editTarget(op: string): Promise<EditTarget> {
    const c = this.claim;
    if (c) {
      // a claim always has its fence: '' would make the worker's write a handle's (unfenced) one
      if (!/^\d+$/.test(c.fence)) throw new StaleClaimError('ERR_STALE_CLAIM', `job ${this.id}: ${op}: the claim has no fence`);
      return { client: c.client, keys: c.keys, fence: c.fence };
    }
    if (!this.queue) {
      throw invalid(`job ${this.id}: ${op} needs the job's queue: get the job with Job.fromId(queue, id), or use the Queue's call`);
    }
    await this.queue.waitUntilReady();
    return { client: this.queue.client, keys: this.queue.keys, fence: '' };
  }

  /**
   * Stores progress (any JSON value) and emits `progress`. From the worker that runs the job: false
   * (nothing changed) once its claim is stale. From a handle: on any job that exists.
   */
  async updateProgress(progress: unknown): Promise<boolean> {
    const t = await this.editTarget('updateProgress');
    if (!(await edits.updateProgress(t, this.id, progress))) return false;
    this.progress = progress;
    this.claim?.onProgress?.(this, progress);
    return true;
  }

  /**
   * Appends a line to the job's log, keeping the newest `keep` lines (default: the job's `keepLogs`
   * option, else all). Returns how many lines the log holds (0 from a worker whose claim is stale).
   */
  async log(line: string, keep?: number): Promise<number> {
    const t = await this.editTarget('log');
    return edits.addLog(t, this.id, line, keep ?? this.opts.keepLogs ?? 0);
  }

  /** Keeps the newest `keepLogs` lines of the job's log (none or 0: deletes it). */
  async clearLogs(keepLogs?: number): Promise<void> {
    const t = await this.editTarget('clearLogs');
    await edits.clearLogs(t, this.id, keepLogs ?? 0);
  }

  /** Replaces the job's data (as updateProgress: fenced from the worker that runs it). */
  async updateData(data: D): Promise<boolean> {
    const t = await this.editTarget('updateData');
    if (!(await edits.updateData(t, this.id, data, this.queue?.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD))) return false;
    this.data = data;
    return true;
  }

  /**
   * Removes the job, unless a worker is running it (JobActiveError: BullMQ refuses a locked job
   * too). A job already gone is no error. A parent goes with its unfinished children in every
   * queue and theirs (refused whole while one of them runs); with `removeChildren: false` its
   * children stay and no longer name it (job-removal.ts).
   */
  async remove(opts: { removeChildren?: boolean } = {}): Promise<void> {
    const t = await this.editTarget('remove');
    const removed = await removeJob(t.client, t.keys, this.id, { removeChildren: opts.removeChildren !== false });
    if (removed) this.queue?.emit('removed', this);
  }

  /**
   * Forgets the job's deduplication id if it still deduplicates adds for this job, so that the
   * next add with it creates a job (BullMQ's job.removeDeduplicationKey()). True when it did;
   * false when the id points at another job, its window is over, or the job has none.
   */
  async removeDeduplicationKey(): Promise<boolean> {
    const dedupId = this.deduplicationId;
    if (dedupId === undefined) return false;
    const t = await this.editTarget('removeDeduplicationKey');
    return (await callFunction(t.client, 'glidemq_removeDedupKeyOf', t.keys.meta, [dedupId, this.id])) === 1;
  }

  /**
   * Puts a completed or failed job (`state`, default 'failed') back to waiting, its outcome cleared;
   * attemptsMade is kept unless `resetAttemptsMade`. JobStateError when the job is in another state.
   */
  async retry(state: 'completed' | 'failed' = 'failed', opts: RetryOptions = {}): Promise<void> {
    const t = await this.editTarget('retry');
    this.state = await edits.retryJob(t, this.id, state, opts);
    this.failedReason = undefined;
    this.returnvalue = null;
    this.finishedOn = undefined;
    this.processedOn = undefined;
    if (opts.resetAttemptsMade) this.attemptsMade = 0;
    if (opts.resetAttemptsStarted) this.raw.startsBase = String(this.claim?.fence ?? this.raw.fence ?? 0);
  }

  /** Moves a delayed job to waiting now (JobStateError when it is not delayed). */
  async promote(): Promise<void> {
    const t = await this.editTarget('promote');
    this.state = await edits.promoteJob(t, this.id);
    this.opts.delay = this.delay = 0;
  }

  /** Makes a delayed job due `delay` ms from now, by the server's clock (JobStateError when it is not delayed). */
  async changeDelay(delay: number): Promise<void> {
    const t = await this.editTarget('changeDelay');
    this.opts.delay = this.delay = await edits.changeDelay(t, this.id, delay);
  }

  /**
   * Changes the job's priority (0: none) or LIFO option. A job waiting in the queue moves to where
   * they put it; an active, delayed or finished one keeps its place and uses them when next queued.
   */
  async changePriority(opts: { priority?: number; lifo?: boolean }): Promise<void> {
    const t = await this.editTarget('changePriority');
    this.state = await edits.changePriority(t, this.id, opts);
    this.opts.priority = opts.priority ?? 0;
    this.opts.lifo = !!opts.lifo;
  }
  // ---- end of the changes from any handle ----

  // ---- The job's state, read from the server (BullMQ's Job API; src/engine/inspecting/job-queries.ts) ----
  // From any job that knows its queue: one a worker runs (its claim's connection), or one from
  // queue.add, queue.getJob, getJobs or Job.fromId. `job.state` is what was read with the job;
  // these read it now.

  /** The job's state now, as BullMQ names it ('waiting' also in a paused queue), or 'unknown' once removed. */
  async getState(): Promise<JobStateName | 'unknown'> {
    const c = this.claim;
    if (c) return readJobState(c.client, c.keys, this.id);
    if (!this.queue) {
      throw invalid(`job ${this.id}: getState needs the job's queue: get the job with Job.fromId(queue, id), or call queue.getJobState(id)`);
    }
    await this.queue.waitUntilReady();
    return readJobState(this.queue.client, this.queue.keys, this.id);
  }

  async isCompleted(): Promise<boolean> {
    return (await this.getState()) === 'completed';
  }

  async isFailed(): Promise<boolean> {
    return (await this.getState()) === 'failed';
  }

  async isDelayed(): Promise<boolean> {
    return (await this.getState()) === 'delayed';
  }

  async isActive(): Promise<boolean> {
    return (await this.getState()) === 'active';
  }

  /** Whether the job waits, the queue paused or not (a prioritized job is not 'waiting', as in BullMQ). */
  async isWaiting(): Promise<boolean> {
    return (await this.getState()) === 'waiting';
  }

  /** Whether the job is a parent waiting for its children. */
  async isWaitingChildren(): Promise<boolean> {
    return (await this.getState()) === 'waiting-children';
  }
  // ---- end of the job's state ----

  // ---- A parent's children (BullMQ's flows; src/engine/jobs/job-dependencies.ts) ----

  /** Where this job's dependencies are read: the claim's connection, else the queue's. */
  private async readTarget(op: string): Promise<DependencyTarget> {
    const c = this.claim;
    if (c) return { client: c.client, keys: c.keys };
    if (!this.queue) throw invalid(`job ${this.id}: ${op} needs the job's queue: get the job with Job.fromId(queue, id)`);
    await this.queue.waitUntilReady();
    return { client: this.queue.client, keys: this.queue.keys };
  }

  /** The return values of the completed children: child job key → value. */
  async getChildrenValues<T = any>(): Promise<Record<string, T>> {
    return childrenValues(await this.readTarget('getChildrenValues'), this.id) as Promise<Record<string, T>>;
  }

  /** The children that failed with failParentOnFailure or continueParentOnFailure: child job key → failed reason. */
  async getFailedChildrenValues(): Promise<Record<string, string>> {
    return failedChildrenValues(await this.readTarget('getFailedChildrenValues'), this.id);
  }

  /** The children that failed with ignoreDependencyOnFailure: child job key → failed reason. */
  async getIgnoredChildrenFailures(): Promise<Record<string, string>> {
    return ignoredChildrenFailures(await this.readTarget('getIgnoredChildrenFailures'), this.id);
  }

  /** BullMQ's getDependencies: processed, unprocessed, ignored and failed children (pages with options). */
  async getDependencies(opts: DependenciesOptions = {}): Promise<Dependencies> {
    return dependencies(await this.readTarget('getDependencies'), this.id, opts);
  }

  /** BullMQ's getDependenciesCount: how many children of each kind named (none named: every kind). */
  async getDependenciesCount(opts: { processed?: boolean; unprocessed?: boolean; ignored?: boolean; failed?: boolean } = {}): Promise<DependenciesCount> {
    return dependenciesCount(await this.readTarget('getDependenciesCount'), this.id, opts);
  }

  /**
   * Takes this child out of its parents' dependencies (BullMQ's removeChildDependency): a parent
   * whose last dependency it was goes on. True when it had a parent, false when it had none.
   */
  async removeChildDependency(): Promise<boolean> {
    const t = await this.readTarget('removeChildDependency');
    if (!(await unlinkFromParents(t, this.id))) return false;
    this.parent = undefined;
    this.parentKey = undefined;
    return true;
  }

  /**
   * Every parent of this job (glide-mq's getParents: a DAG node may have several), each as
   * { queue: its queue's name, id }; [] for a job without parents. Read from the server.
   */
  async getParents(): Promise<{ queue: string; id: string }[]> {
    const t = await this.readTarget('getParents');
    return parentsOfJob(t, this.id);
  }

  /**
   * A running parent waits for the children it has not seen settle (BullMQ's moveToWaitingChildren):
   * true when it now waits (its claim is given up: the processor should then throw
   * WaitingChildrenError, and the job runs again once they settled); false when none is left to
   * wait for (it keeps running). With `opts.child` ({ id, queue }: the queue key as the `parent`
   * option takes it), as BullMQ's: it waits only while that child is unsettled (and then for all
   * of them), else it runs on. `token` is the claim's (the processor's second argument). A child
   * with failParentOnFailure that failed while this job was not waiting makes it throw an
   * UnrecoverableError naming the child: the processor lets it through, and the job fails.
   */
  async moveToWaitingChildren(token?: string, opts: { child?: { id: string; queue: string } } = {}): Promise<boolean> {
    const c = this.requireClaim('moveToWaitingChildren');
    if (token !== undefined && token !== this.token) throw staleTokenError(this.id, 'moveToWaitingChildren', String(token));
    if (!(await waitForChildren(c, this.id, opts.child))) return false;
    this.moved = true;
    this.state = 'waiting-children';
    return true;
  }
  // ---- end of a parent's children ----

  /**
   * Parks the running job until `timestamp` (ms since the epoch, this process's clock: the time the
   * caller wishes) and, when `nextStep` is given, stores it as `data.step` in the same server call.
   * The processor should return right after; the worker stores no outcome for this run, and the
   * job runs again from the start once it is due, with the step in `job.data.step`. A worker that
   * lost the claim gets a StaleClaimError and changes nothing. To run again after a delay, use
   * moveToDelayedIn: the server then counts the delay on its own clock.
   */
  async moveToDelayed(timestamp: number, nextStep?: unknown): Promise<void> {
    // BullMQ's form moveToDelayed(timestamp, token): a second argument that is this claim's token
    // is not a step
    if (nextStep !== undefined && nextStep === this.token) nextStep = undefined;
    if (!Number.isFinite(timestamp)) throw invalid(`job ${this.id}: moveToDelayed needs a timestamp in ms, got ${String(timestamp)}`);
    await this.park('at', Math.min(Math.max(0, Math.floor(timestamp)), Number.MAX_SAFE_INTEGER), nextStep, 'moveToDelayed');
  }

  /**
   * Parks the running job for `delayMs` ms, counted by the server's clock from the moment it
   * parks it (0: re-queued at once), storing `nextStep` as for moveToDelayed. The step helper to
   * use for "run the next step in N ms": no clock of this process is involved.
   */
  async moveToDelayedIn(delayMs: number, nextStep?: unknown): Promise<void> {
    if (!Number.isFinite(delayMs) || delayMs < 0) {
      throw invalid(`job ${this.id}: moveToDelayedIn needs a delay in ms >= 0, got ${String(delayMs)}`);
    }
    await this.park('in', Math.min(Math.floor(delayMs), Number.MAX_SAFE_INTEGER), nextStep, 'moveToDelayedIn');
  }

  /** glidemq_moveToDelayed with a run time `ms` that is absolute ('at') or from the server's now ('in'). */
  private async park(timing: 'at' | 'in', ms: number, nextStep: unknown, op: string): Promise<void> {
    const c = this.requireClaim(op);
    let stepJson = '';
    if (nextStep !== undefined) {
      stepJson = JSON.stringify(nextStep) ?? '';
      if (stepJson === '') throw invalid(`job ${this.id}: the step must be a JSON value, got a ${typeof nextStep}`);
    }
    const r = await callFunction(c.client, 'glidemq_moveToDelayed', c.keys.meta, [this.id, c.fence, c.consumer, timing, ms, stepJson]);
    if (r === 'stale') throw claimLostError(this.id);
    this.moved = true;
    this.state = r === 'waiting' ? 'waiting' : 'delayed';
    // the server stored the exact delay from its own now; this handle's is as near as its clock says
    this.delay = r === 'waiting' ? 0 : timing === 'in' ? ms : Math.max(0, ms - Date.now());
    if (nextStep !== undefined && this.data !== null && typeof this.data === 'object') (this.data as Record<string, unknown>).step = nextStep;
  }

  // ---- Manual processing (BullMQ's "manually fetching jobs"; src/engine/consuming/manual-fetch.ts) ----
  // For a job from worker.getNextJob (or a previous moveToCompleted / moveToFailed), with the
  // token it was fetched with. A token that does not hold the job's claim (another token, or a
  // claim stalled recovery took back) is refused with a StaleClaimError and nothing is stored.

  /**
   * Stores the job completed with `returnValue` and, with `fetchNext` (the default, as BullMQ's),
   * claims the next job for the same token: resolves to that Job, or undefined when none waits
   * (BullMQ resolves to the raw [jobData, jobId] instead).
   */
  async moveToCompleted(returnValue: R, token: string, fetchNext = true): Promise<Job<D, R> | undefined> {
    return this.manualClaims('moveToCompleted').finish(this, token, { completed: true, value: returnValue }, fetchNext, 'moveToCompleted') as Promise<
      Job<D, R> | undefined
    >;
  }

  /**
   * Stores the attempt failed with `err` (retried with the job's backoff while attempts are left,
   * as a processor's failure; an UnrecoverableError is not) and, with `fetchNext`, claims the next
   * job for the same token as moveToCompleted does.
   */
  async moveToFailed(err: Error, token: string, fetchNext = false): Promise<Job<D, R> | undefined> {
    return this.manualClaims('moveToFailed').finish(this, token, { completed: false, error: err }, fetchNext, 'moveToFailed') as Promise<
      Job<D, R> | undefined
    >;
  }

  /**
   * Keeps the claim `token` holds for `duration` ms more from the server's now (stalled recovery
   * judges it by that duration from then on). Resolves 1. A processor may call it too, with its
   * token (its worker renews the lock anyway, by the worker's lockDuration).
   */
  async extendLock(token: string, duration: number): Promise<number> {
    const c = this.claim;
    if (c?.manual) return c.manual.extendLock(this, token, duration);
    if (!c) throw invalid(`job ${this.id}: extendLock is for a job a worker holds (from getNextJob, or a processor's job)`);
    if (token !== this.token) throw staleTokenError(this.id, 'extendLock', String(token));
    // (the claim's terms were recorded when it was made: this maxStalledCount is used by no claim of this version)
    return extendClaimLock(c.client, c.keys, { id: this.id, fence: c.fence }, c.consumer, token, duration, 1);
  }

  private manualClaims(op: string): ManualClaims {
    const m = this.claim?.manual;
    if (!m) throw notManualError(this.id, op);
    return m;
  }
  // ---- end of manual processing ----

  /**
   * BullMQ's waitUntilFinished: resolves to the job's return value once it completed, rejects with
   * an Error whose message is its failedReason once it failed for good (a failed attempt that will
   * be retried is not the end). A job that finished before the call answers from its stored state;
   * `ttl` (ms) bounds the wait (then an ERR_TIMEOUT error). The QueueEvents must be of the job's
   * queue and running (src/engine/inspecting/queue-events.ts untilFinished).
   */
  waitUntilFinished(queueEvents: import('../inspecting/queue-events.js').QueueEvents, ttl?: number): Promise<R> {
    return queueEvents.untilFinished(this.id, ttl) as Promise<R>;
  }

  protected requireClaim(op: string): Claim {
    if (!this.claim) throw new Error(`job ${this.id}: ${op} is only possible from the worker that runs the job`);
    return this.claim;
  }
}
