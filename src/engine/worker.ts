/**
 * The consumer side: runs a processor over a queue's jobs with a fixed concurrency.
 *
 * Steady state costs one function call per job: glidemq_finish stores the outcome and hands back
 * the next job. A slot that finds nothing waits on one blocking XREADGROUP (over the job stream and
 * the wake stream that priority/LIFO adds write to), whose deliveries glidemq_activate turns into
 * claims. On a queue with a globalConcurrency limit a free slot instead waits on the queue's
 * streams without claiming (ChangeWaiter) and takes jobs only through glidemq_fetch, which checks the
 * limit in the same call. Timers promote delayed jobs, heartbeat the running ones, and run stalled recovery.
 * A queue with a rate limiter (the `limiter` option) is worked the same way; when a reply says its
 * window is full or the queue is held (rateLimit), the worker waits the ms the server computed on
 * a timer, then fetches.
 *
 * Events, with BullMQ's arguments: ready, active (job, 'waiting'), progress (job, progress: after
 * job.updateProgress stored it), completed (job, result, 'active'), failed (job, error, 'active'),
 * stalled (id, 'active', 'failed' | 'redispatched'), drained (the queue had no job for a free
 * slot), paused, resumed, closing (message), closed, error. glidemq's own: lost (job, status: the
 * finish found the claim gone), moved (job: parked by moveToDelayed), lockLost (id),
 * connectionLost (why) and connectionRestored (ms down): the command connection closed while running
 * and is back (connection-watch.ts), queuePaused and queueResumed: a fetch found the queue paused
 * (Queue.pause wakes an idle worker, which hears of it at once) or running again. After
 * `completed` and `failed` the job is up to date: attemptsMade counts the attempt just made,
 * finishedOn - processedOn is its run time (this process's clock), and after a failure `state` says
 * whether it runs again ('waiting' or 'delayed') or not ('failed'). A listener that throws never
 * stops the worker: the throw arrives as an `error` event (see SafeEmitter).
 *
 * A worker made without a processor runs none of this: the application takes jobs by hand with
 * getNextJob(token) (BullMQ's manual processing, src/engine/manual-fetch.ts).
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { acquireClient, closeClient, settleTopology, type Acquired, type Client } from './connection.js';
import { ClaimRecovery } from './claim-recovery.js';
import { invalid, isUnrecoverable, RateLimitError, UnrecoverableError } from './errors.js';
import { Job, type Claim, type ClaimReply } from './job.js';
import { QueueKeys, DEFAULT_PREFIX } from './keys.js';
import { callFunction, ensureLibrary, nameWrongTypeKey } from './library.js';
import { encodeRetention } from './options.js';
import { planRetry, reasonWithProblem } from './backoff.js';
import { Maintenance } from './maintenance.js';
import { resolveSettings, type Settings, type WorkerOptions } from './worker-options.js';
import { FinishBatcher, FinishRefusedError, type FinishRequest } from './finish-batch.js';
import { Upkeep } from './upkeep.js';
import { ChangeWaiter } from './change-waiter.js';
import { BlockingReader } from './blocking-reader.js';
import { IdleWaiters } from './idle-waiters.js';
import { CLOSE_CALL_MS, delay, within } from './waiting.js';
import { SafeEmitter } from './safe-emitter.js';
import { refreshInterval, WorkerRegistration } from './worker-registry.js';
import { appendStack, boundedStack } from './stacktrace.js';
import { watchConnection } from './connection-watch.js';
import { ManualFetch } from './manual-fetch.js';
import { Promoter } from './worker-promoter.js';
import { LockKeeper } from './worker-lock-keeper.js';

export type { WorkerOptions } from './worker-options.js';

/**
 * Runs one job. `token` names the claim (job.token: BullMQ's lock token); `signal` aborts when the
 * run is cancelled (cancelJob, cancelAllJobs) or its claim was lost (lockLost).
 */
export type Processor<D = any, R = any> = (job: Job<D, R>, token?: string, signal?: AbortSignal) => Promise<R> | R;

/**
 * One run of a job on this worker. The claim it runs under can change while it runs: when a
 * reclaim gives the job back to this same worker (after an outage, or an event loop blocked for
 * longer than the lock), the run goes on under the new claim (see claimAgain), so a job never has
 * two runs here and a stale finish never touches the current claim.
 */
interface Run<D, R> {
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
}

/**
 * The adaptive prefetch holds at most this many jobs per slot. A slot's next job starts when its
 * result leaves, and the claims in a worker then circulate once per round trip: to be k times
 * faster than a worker that keeps one call in flight per slot, k slots' worth must circulate. The
 * round trip measured grows with the batch a call carries, so for jobs much shorter than a round
 * trip the cap is what decides; it is also what sizes the batches, and a batch of ~40 jobs costs
 * the server ~10% less per job than one of ~15 and the worker about as much less (make bench:
 * 8 per slot against 2 at concurrency 10 gave 14% more jobs/s on loopback).
 */
const PREFETCH_CAP = 8;

/**
 * ...and at most this many bytes of job data (an average job's times the jobs held ahead). A large
 * job costs its worker more outside the processor (its reply read, its data decoded) than the run
 * time that sizes the prefetch shows, and held ahead it only makes replies larger (make bench,
 * scale rows at 100 KiB per job: ~1.0x BullMQ's rate with 10 held ahead, 1.3-1.6x with none).
 */
const PREFETCH_BYTES = 64 * 1024;

/** A function of length 0 that may still read arguments: a rest parameter, `arguments`, or code we cannot see. */
function readsArgumentsFreely(fn: Function): boolean {
  return /\.\.\.|\barguments\b|\[native code\]/.test(Function.prototype.toString.call(fn));
}

export class Worker<D = any, R = any> extends SafeEmitter {
  readonly keys: QueueKeys;
  readonly consumer: string;
  readonly settings: Settings;
  private readonly acquired: Acquired;
  private reader: BlockingReader | undefined;
  /** The runs in progress, one per job id. */
  private readonly active = new Map<string, Run<D, R>>();
  private readerReserved = 0;
  /**
   * Prefetched claims waiting for a slot, by job id in the order they came (heartbeated like
   * running jobs, given back at close). A Map: hundreds may wait, and every claim looks itself up.
   */
  private readonly buffered = new Map<string, Job<D, R>>();
  /** Claims that came marked not started (lua/activate.lua): their start is reported when it runs. */
  private readonly marked = new WeakSet<Job<D, R>>();
  /** Runs in `active` whose finish is on its way: their slot already runs the next job. */
  private finishingRuns = 0;
  /** Next jobs asked for by finishes whose replies have not come back yet. */
  private inbound = 0;
  /** How long a processor run takes, ms (an average weighted to the recent; sizes the prefetch). */
  private runMs = 0;
  /** Bytes of data a claimed job carries (an average weighted to the recent; bounds the prefetch). */
  private jobBytes = 0;
  private readerRunning = false;
  private running = false;
  /** run()'s start-up, once run() was called. */
  private startup: Promise<void> | undefined;
  /** pause() on this worker alone: it takes no job until resume(). */
  private localPaused = false;
  /** A job arrived since the last `drained`. */
  private hadWork = false;
  private closing: Promise<void> | undefined;
  /** Refreshes this worker's entry in the queue's worker registry (worker-registry.ts). */
  private registryTimer: NodeJS.Timeout | undefined;
  private readonly registration: WorkerRegistration;
  private pausedSince = '$';
  /** The queue has a globalConcurrency limit or a rate limiter: take jobs only through glidemq_fetch/finish (see limitedStep). */
  private limited = false;
  /**
   * The rate limiter (or a hold, rateLimit) lets no job start before this time of this process's
   * monotonic clock (performance.now; 0: none): set from the relative wait a 'rated' reply carries
   * (the server computed it with its own clock), waited out by the read loop (waitOutRate).
   */
  private rateWaitUntil = 0;
  /** The timer of that wait, and how to end it early (close). */
  private rateTimer: { timer: NodeJS.Timeout; end: () => void } | undefined;
  private readonly changes: ChangeWaiter;
  /** Ends the connectionLost/connectionRestored watch. */
  private unwatchConnection: (() => void) | undefined;
  /** The last fetch found the queue paused (queuePaused/queueResumed are told on a change). */
  private queuePaused = false;
  /** Times the command connection closed: a finish sent before a close may have been applied twice. */
  private closes = 0;
  private readonly onClientClose = () => {
    this.closes++;
  };
  /** Consecutive failed rounds of the read loop (the backoff grows with it). */
  private readFailures = 0;
  private readonly idle = new IdleWaiters(() => this.active.size);
  maintenance: Maintenance;
  /** Jobs this worker finished, by outcome. */
  readonly finished = { completed: 0, failed: 0 };
  /** Results ready in the same event-loop turn are stored in one call. */
  private readonly finisher: FinishBatcher;
  private readonly upkeep: Upkeep;
  private readonly promoter: Promoter;
  private readonly lockKeeper: LockKeeper;
  /** Takes back claims whose reply a broken connection lost (see claim-recovery.ts). */
  readonly recovery: ClaimRecovery;
  /**
   * The processor declares a third parameter (job, token, signal), or may read its arguments
   * without naming them (a rest parameter, `arguments`, a bound or native function): only then
   * is an AbortSignal made for each run. A processor that reads it through a default parameter
   * (`signal = undefined`) is not seen; give it a plain one.
   */
  private readonly takesSignal: boolean;
  /** Made for a worker without a processor: getNextJob and the jobs it hands out (manual-fetch.ts). */
  private manual: ManualFetch | undefined;
  /** Such a worker's connection settled (a cluster found) and the library loaded: once, on first use. */
  private manualReady: Promise<void> | undefined;

  /**
   * A worker without a processor (`null` or none, as BullMQ's) runs no loop: the application takes
   * jobs with getNextJob(token) and finishes them itself (BullMQ's manual processing).
   */
  constructor(
    readonly name: string,
    private readonly processor?: Processor<D, R> | null,
    opts: WorkerOptions = {},
  ) {
    super();
    this.takesSignal = typeof processor === 'function' && (processor.length >= 3 || (processor.length === 0 && readsArgumentsFreely(processor)));
    this.keys = new QueueKeys(name, opts.prefix ?? DEFAULT_PREFIX);
    this.settings = resolveSettings(opts);
    this.consumer = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    this.acquired = acquireClient(opts.connection, { maxRetriesPerRequest: null });
    this.maintenance = new Maintenance(this.client, this.keys, this.settings);
    this.finisher = new FinishBatcher(() => this.client, this.keys.meta, this.consumer, this.claimTerms);
    this.upkeep = new Upkeep(() => this.client, this.keys, (err) => this.emitError(err));
    this.changes = new ChangeWaiter(this.keys);
    this.promoter = new Promoter({
      client: () => this.client,
      keys: this.keys,
      promotionInterval: this.settings.promotionInterval,
      maintenance: () => this.maintenance,
      upkeep: this.upkeep,
      live: this.live,
      emitError: (err) => this.emitError(err),
    });
    this.lockKeeper = new LockKeeper({
      client: () => this.client,
      keys: this.keys,
      consumer: this.consumer,
      lockDuration: this.settings.lockDuration,
      stalledInterval: this.settings.stalledInterval,
      maintenance: () => this.maintenance,
      live: this.live,
      held: () => this.held(),
      lose: (id, fence) => this.lose(id, fence),
      emit: (event, ...args) => void this.emit(event, ...args),
      emitError: (err) => this.emitError(err),
    });
    this.registration = new WorkerRegistration(() => this.client, this.keys, this.consumer, this.settings.registryTtl, () => ({
      concurrency: this.settings.concurrency,
      running: this.processing(),
    }));
    this.recovery = new ClaimRecovery({
      client: () => this.client,
      keys: this.keys,
      consumer: this.consumer,
      knows: (id, fence) => this.holds(id, fence),
      dispatch: (replies) => replies.forEach((r) => this.dispatch(r)),
      activate: async (pairs) => void (await this.activateDelivered(pairs, [])),
      running: () => this.running && !this.closing,
      emitError: (err) => this.emitError(err),
    });
    if (typeof processor === 'function' && opts.autorun !== false) void this.run().catch((err) => this.emitError(err));
  }

  /** The worker runs and is not closing. */
  private readonly live = (): boolean => this.running && !this.closing;

  /** A Cluster client once run() found the server is a cluster node. */
  private get client(): Client {
    return this.acquired.client;
  }

  /** Jobs whose processor runs now (a run whose result is on its way to the server is done here). */
  get activeCount(): number {
    return this.processing();
  }

  private processing(): number {
    return this.active.size - this.finishingRuns;
  }

  /** Runs and takes jobs: false before run(), after close() and while paused (as BullMQ's). */
  isRunning(): boolean {
    return this.running && !this.localPaused;
  }

  /** BullMQ's static form of `new RateLimitError()`. */
  static RateLimitError(): RateLimitError {
    return new RateLimitError();
  }

  /**
   * Holds the whole queue: no worker of it starts a job for `ms` from the server's now (BullMQ's
   * worker.rateLimit). A hold never shortens one already in place. A processor that calls it then
   * throws Worker.RateLimitError() gives its job back with no attempt counted; it runs after the hold.
   */
  async rateLimit(ms: number): Promise<void> {
    if (typeof ms !== 'number' || !Number.isFinite(ms) || ms < 0) {
      throw invalid(`worker.rateLimit(ms): ms must be a number of ms >= 0, got ${String(ms)}`);
    }
    const whole = Math.min(Math.ceil(ms), Number.MAX_SAFE_INTEGER);
    await callFunction(this.client, 'glidemq_rateLimit', this.keys.meta, [whole]);
  }

  /**
   * Resolves once the worker can work: with autorun (the default) once it runs, else once its
   * connection is up and the library is loaded. Rejects with what stopped it.
   */
  waitUntilReady(): Promise<void> {
    return this.startup ?? ensureLibrary(this.client);
  }

  /**
   * Starts processing and resolves once the worker has closed, as BullMQ's run() does (rejects with
   * what stopped its start-up; waitUntilReady() resolves once it works). A worker runs once: a
   * second call rejects, as BullMQ's does (autorun already called it).
   */
  run(): Promise<void> {
    if (typeof this.processor !== 'function') {
      return Promise.reject(invalid(`the worker of queue ${this.name} has no processor to run: take its jobs with getNextJob(token), or give the Worker a processor`));
    }
    if (this.startup) return Promise.reject(new Error(`the worker of queue ${this.name} is already running (run() starts a worker once; autorun calls it in the constructor)`));
    this.startup = this.start();
    // close() sets `closing` at once and emits `closed` at its end: one of the two is always ahead
    return this.startup.then(() => this.closing ?? new Promise<void>((resolve) => this.once('closed', () => resolve())));
  }

  private async start(): Promise<void> {
    this.running = true;
    const standalone = this.client;
    if ((await settleTopology(this.acquired)) !== standalone) {
      this.maintenance = new Maintenance(this.client, this.keys, this.settings);
    }
    await ensureLibrary(this.client);
    if (this.settings.globalConcurrency > 0) {
      await this.client.hset(this.keys.meta, 'globalConcurrency', String(this.settings.globalConcurrency));
    }
    const limiter = this.settings.limiter;
    if (limiter) {
      // queue-wide, as BullMQ's: every worker's claims count against it (lua/rate-window.lua)
      await this.client.hset(this.keys.meta, 'rateMax', String(limiter.max), 'rateDuration', String(limiter.duration));
    }
    this.reader = new BlockingReader(this.acquired, this.keys, this.consumer, this.settings.blockTimeout);
    await this.reader.start();
    if (this.closing) {
      // close() ran while this start-up waited: it found no reader and no timers to end, so none
      // may be made now (they would keep the process alive after its close)
      this.reader.close();
      return;
    }
    this.recovery.watch(this.client);
    this.recovery.watch(this.reader.client);
    this.client.on('close', this.onClientClose);
    this.unwatchConnection = watchConnection(this.client, this, () => this.running && !this.closing);
    this.promoter.schedule(0);
    this.lockKeeper.start();
    // the registry: once now (so getWorkers lists it once run() resolved), then on its own timer
    // (one call per refresh, never per job); a failure is reported and the next refresh tries again
    const register = () => this.registration.refresh().catch((err) => {
      if (this.running && !this.closing) this.emitError(err);
    });
    this.registryTimer = setInterval(() => void register(), refreshInterval(this.settings.registryTtl));
    await register();
    this.emit('ready');
    let first: { status: string; jobs: ClaimReply[] };
    try {
      first = await this.fetch(this.readerRoom());
    } catch (err) {
      // A queue the worker cannot read yet (a key of the wrong type...) is retried by the read loop
      // with backoff; the worker stays up and reports the error.
      this.emitError(err);
      first = { status: 'ok', jobs: [] };
    }
    this.limited = first.status === 'limited';
    if (first.status === 'paused') void this.readLoop(true);
    else {
      first.jobs.forEach((f) => this.dispatch(f));
      this.kickReader();
    }
  }

  /**
   * Stops taking jobs on this worker alone (Queue.pause() pauses every worker): a blocking read is
   * ended and prefetched jobs go back to the queue. Resolves once the running jobs have finished,
   * or at once with `doNotWaitActive`.
   */
  async pause(doNotWaitActive = false): Promise<void> {
    if (this.localPaused) return;
    this.localPaused = true;
    if (this.client.status === 'ready') {
      await within(this.reader?.unblock(this.client), CLOSE_CALL_MS);
      await within(this.releaseBuffered(), CLOSE_CALL_MS);
    }
    if (!doNotWaitActive) await this.idle.wait();
    this.emit('paused');
  }

  /** Takes jobs again after pause(). */
  resume(): void {
    if (!this.localPaused) return;
    this.localPaused = false;
    this.emit('resumed');
    this.startBuffered();
    this.kickReader();
  }

  isPaused(): boolean {
    return this.localPaused;
  }

  /**
   * BullMQ's manual processing: claims the next job for `token` (the claim's owner: the same token
   * finishes it, job.moveToCompleted / moveToFailed, and extends its lock, job.extendLock), or
   * resolves undefined. `block` (default true, as BullMQ's) waits up to blockTimeout for a job;
   * false answers at once. Only for a worker made without a processor; nothing is prefetched.
   */
  async getNextJob(token: string, opts: { block?: boolean } = {}): Promise<Job<D, R> | undefined> {
    if (typeof this.processor === 'function') {
      throw invalid(`getNextJob is for a worker made without a processor; the worker of queue ${this.name} runs its processor`);
    }
    if (this.closing) return undefined;
    await this.prepareManual();
    this.manual ??= new ManualFetch({ client: () => this.client, acquired: this.acquired, keys: this.keys, settings: this.settings });
    return (await this.manual.next(token, opts.block ?? true)) as Job<D, R> | undefined;
  }

  /**
   * Runs stalled recovery every stalledInterval (BullMQ's call for a worker without a processor; a
   * worker with one does it from run(), so this changes nothing for it). Each claim is judged by
   * its own lock, whoever made it.
   */
  async startStalledCheckTimer(): Promise<void> {
    if (typeof this.processor === 'function' || this.lockKeeper.checking || this.closing) return;
    await this.prepareManual();
    if (this.closing) return;
    this.lockKeeper.startStalledCheck();
  }

  /** What start() does first, for a worker without a processor (which never starts): once, retried after a failure. */
  private prepareManual(): Promise<void> {
    this.manualReady ??= (async () => {
      const standalone = this.client;
      if ((await settleTopology(this.acquired)) !== standalone) {
        this.maintenance = new Maintenance(this.client, this.keys, this.settings);
      }
      await ensureLibrary(this.client);
    })().catch((err) => {
      this.manualReady = undefined;
      throw err;
    });
    return this.manualReady;
  }

  /** Aborts the signal of job `id`'s run here; false when no such run. The processor decides what an abort means. */
  cancelJob(id: string, reason = 'cancelled'): boolean {
    const run = this.active.get(id);
    if (!run) return false;
    run.abort?.abort(new Error(reason));
    return true;
  }

  /** Aborts the signal of every run here. */
  cancelAllJobs(reason = 'cancelled'): void {
    for (const run of this.active.values()) run.abort?.abort(new Error(reason));
  }

  private claimFor(): Claim {
    return { client: this.client, keys: this.keys, consumer: this.consumer, fence: '', onProgress: this.onProgress };
  }

  /** job.updateProgress, as the processor calls it, also emits `progress` once the value is stored. */
  private readonly onProgress = (job: Job, progress: unknown): void => {
    this.emit('progress', job, progress);
  };

  /**
   * Splits a fetch/activate reply; a paused reply carries the newest event id to block after. A
   * 'rated' one carries the ms until the rate limiter lets a job start: the read loop waits that
   * long, then fetches (the status becomes 'limited': fetches, not blocking reads, take the jobs).
   */
  private parseDelivery(r: unknown[]): { status: string; jobs: ClaimReply[] } {
    const status = String(r[0]);
    if ((status === 'paused') !== this.queuePaused) {
      this.queuePaused = !this.queuePaused;
      this.emit(this.queuePaused ? 'queuePaused' : 'queueResumed');
    }
    if (status === 'paused') {
      this.pausedSince = String(r[1] ?? '$');
      return { status, jobs: [] };
    }
    if (status === 'rated') {
      this.rateWaitUntil = performance.now() + Math.max(1, Number(r[1]) || 1);
      return { status: 'limited', jobs: r.slice(2) as ClaimReply[] };
    }
    return { status, jobs: r.slice(1) as ClaimReply[] };
  }

  private async fetch(count: number): Promise<{ status: string; jobs: ClaimReply[] }> {
    const r = (await callFunction(this.client, 'glidemq_fetch', this.keys.meta, [this.consumer, count, ...this.claimTerms])) as unknown[];
    return this.parseDelivery(r);
  }

  /** Whether this claim (job id and fence) is running, finishing or prefetched here. */
  private holds(id: string, fence: string): boolean {
    const run = this.active.get(id);
    if (run) return run.job.claim?.fence === fence || (run.next !== undefined && String(run.next[1]) === fence);
    return this.buffered.get(id)?.claim?.fence === fence;
  }

  /**
   * Runs a claim, or keeps it for a free slot. (On the per-job path: a lookup in `active` and
   * one in `buffered`.)
   */
  private dispatch(reply: ClaimReply, marked = false): void {
    const id = String(reply[0]);
    const run = this.active.get(id);
    if (run) return this.claimAgain(run, reply);
    const waiting = this.buffered.get(id);
    // processedOn as this process saw the claim start (the stored one is the server's time)
    const job = Job.fromClaim(reply, this.claimFor(), Date.now()) as Job<D, R>;
    if (marked) this.marked.add(job);
    const data = reply[3];
    const bytes = typeof data === 'string' ? data.length : 0;
    this.jobBytes = this.jobBytes === 0 ? bytes : this.jobBytes + 0.1 * (bytes - this.jobBytes);
    this.hadWork = true;
    if (waiting) {
      // a prefetched job claimed again has not started: it waits under its newest claim (in its place)
      if (newerFence(job.claim?.fence, waiting.claim?.fence)) this.buffered.set(id, job);
    } else if (this.buffered.size === 0 && this.processing() < this.settings.concurrency && !this.localPaused) this.startRun(job);
    else this.buffered.set(id, job);
  }

  /**
   * A claim of a job that runs here already. The same claim again (ClaimRecovery took it back and
   * the reply of a re-sent call carries it too) is dropped. A newer one means a reclaim gave the
   * job back to this worker while it ran: the run goes on under the new claim, whose lock the
   * heartbeat then keeps; if its finish is already on its way, under the old fence, the new claim
   * waits for that reply (see finishRun). Never a second run beside the first.
   */
  private claimAgain(run: Run<D, R>, reply: ClaimReply): void {
    const fence = String(reply[1]);
    const claim = run.job.claim;
    if (!claim || !newerFence(fence, run.next ? String(run.next[1]) : claim.fence)) return;
    if (run.finishing) run.next = reply;
    else claim.fence = fence;
  }

  private startRun(job: Job<D, R>): void {
    const run: Run<D, R> = { job, finishing: false, abort: this.takesSignal ? new AbortController() : undefined };
    this.active.set(job.id, run);
    // a claim handed out marked not started: the server hears of its start with the next call
    if (this.marked.has(job)) this.finisher.report(job.id, job.claim?.fence ?? '');
    void this.execute(run);
  }

  private startBuffered(): void {
    for (const [id, job] of this.buffered) {
      if (this.processing() >= this.settings.concurrency || this.closing || this.localPaused) break;
      this.buffered.delete(id);
      this.startRun(job);
    }
  }

  /**
   * Jobs claimed ahead of the slots. The `prefetch` option fixes it; by default it is as many as
   * the slots run during one round trip of a finish call (concurrency x round trip / run time),
   * at most PREFETCH_CAP x concurrency: across a network a slot then starts its next job when its
   * result leaves, not when the reply comes back. Jobs that run longer than a round trip per slot get none, so
   * nothing is held back from other workers, and neither does a queue with a global limit or a
   * rate limiter (a claim held ahead would count against them).
   */
  private prefetchNow(): number {
    if (this.settings.prefetch !== undefined) return this.settings.prefetch;
    const rtt = this.finisher.rttMs;
    if (rtt === 0 || this.limited) return 0;
    const c = this.settings.concurrency;
    const bySize = Math.floor(PREFETCH_BYTES / Math.max(this.jobBytes, 1));
    return Math.min(PREFETCH_CAP * c, bySize, Math.floor((c * rtt) / Math.max(this.runMs, 0.05)));
  }

  /** Claims this worker can still take: running slots plus the prefetch allowance. */
  private freeSlots(): number {
    return this.room(this.prefetchNow());
  }

  /**
   * Claims the blocking read and fetches may take: the free slots, and the prefetch room only
   * when a fixed prefetch was asked for. An adaptive prefetch is filled by finishes alone, whose
   * next jobs come in queue order (priority first): a read of the job stream that filled it
   * would take FIFO jobs ahead of priority ones that arrive meanwhile.
   */
  private readerRoom(): number {
    return this.room(this.settings.prefetch ?? 0);
  }

  /** Claims that fill the slots and `ahead` more, less those held, running or on their way. */
  private room(ahead: number): number {
    if (this.localPaused) return 0;
    return this.settings.concurrency + ahead - this.processing() - this.buffered.size - this.inbound - this.readerReserved;
  }

  /** How many jobs a finish asks for: what fills the slots and the prefetch room, less what is on its way. */
  private nextFetchCount(): number {
    if (this.closing || !this.running || this.localPaused) return 0;
    return Math.max(0, this.freeSlots());
  }

  private async execute(run: Run<D, R>): Promise<void> {
    const job = run.job;
    const started = performance.now(); // monotonic: a clock step cannot make a duration negative
    this.emit('active', job, 'waiting');
    let outcome: 'completed' | 'failed' = 'completed';
    let value: string;
    let retryDelay = -1;
    let error: Error | undefined;
    try {
      // A corrupt or foreign job fails at once with the reason; the processor never sees it.
      if (job.unusable) throw new UnrecoverableError(`job ${job.id} cannot run: ${job.unusable}`);
      const result = await this.processor!(job, job.token, run.abort?.signal);
      value = serialiseResult(result);
    } catch (err) {
      error = err instanceof Error ? err : new Error(String(err));
      if (error instanceof RateLimitError && !job.moved) return this.afterRateLimited(run);
      outcome = 'failed';
      value = error.message || error.name || 'processor failed';
      // a delay relative to the server's now: the server adds it to its own clock (lua/finish.lua)
      if (!isUnrecoverable(error)) {
        // a custom backoff type asks settings.backoffStrategy; one that fails fails the job (backoff.ts)
        const plan = await planRetry(job, error, this.settings.backoffStrategy, this.settings.lockDuration);
        retryDelay = plan.delay;
        if (plan.problem) {
          value = reasonWithProblem(value, plan.problem);
          this.emitError(plan.problem);
        }
      }
    }
    if (job.moved) return this.afterMoved(job);
    const ranMs = performance.now() - started;
    this.runMs = this.runMs === 0 ? ranMs : this.runMs + 0.1 * (ranMs - this.runMs);
    const durationMs = Math.max(0, Math.round(ranMs));
    // the slot runs the next prefetched job while this result is on its way
    run.finishing = true;
    this.finishingRuns++;
    this.startBuffered();
    const fetchCount = this.nextFetchCount();
    const request: FinishRequest = {
      id: job.id,
      fence: '',
      outcome,
      value,
      retryDelay,
      fetchCount,
      keep: encodeRetention(outcome === 'completed' ? job.opts.removeOnComplete ?? this.settings.removeOnComplete : job.opts.removeOnFail ?? this.settings.removeOnFail),
      durationMs,
      ahead: fetchCount > 0 && this.prefetchNow() > 0,
    };
    // a failed attempt keeps its error's stack (bounded: stacktrace.ts); a completion sends none
    if (error && outcome === 'failed') request.stack = boundedStack(error);
    this.inbound += fetchCount;
    let finished;
    try {
      finished = await this.finishRun(run, request);
    } finally {
      this.inbound -= fetchCount;
      this.finishingRuns--;
    }
    this.active.delete(job.id);
    if (!finished) {
      // The claim stays in Valkey: stalled recovery gives the job to a healthy worker.
      this.afterSlotFreed();
      return;
    }
    const { reply, next, refused } = finished;
    if (refused) {
      // the server refused to store this run's outcome: the job failed with the reason instead
      outcome = 'failed';
      value = refused.value;
      error = new Error(refused.value);
      request.stack = undefined;
    }
    const status = String(reply[0]);
    if (status === 'completed' || status === 'failed' || status === 'retried' || status === 'delayed') {
      job.attemptsMade++;
      job.finishedOn = (job.processedOn ?? Date.now()) + durationMs;
    }
    if (status === 'completed') {
      this.finished.completed++;
      job.state = 'completed';
      job.returnvalue = value === undefined ? null : JSON.parse(value);
      this.emit('completed', job, job.returnvalue, 'active');
    } else if (status === 'failed' || status === 'retried' || status === 'delayed') {
      if (status === 'failed') this.finished.failed++;
      job.state = status === 'failed' ? 'failed' : status === 'delayed' ? 'delayed' : 'waiting';
      if (status === 'delayed') job.delay = retryDelay; // as the server stored it (job.delay is live)
      job.failedReason = value;
      // (the claim carried no earlier stacks: getJob shows every kept one)
      job.stacktrace = appendStack(job.stacktrace, request.stack);
      this.emit('failed', job, error, 'active');
    } else {
      this.emit('lost', job, status);
    }
    for (const claim of next) this.dispatch(claim, request.ahead);
    this.afterSlotFreed();
  }

  /**
   * Stores a run's outcome under its current claim. Returns the reply's status (row 0) and the
   * claims to dispatch once the run is gone (the next jobs, and a newer claim of this job that
   * arrived after a finish that still counted: a retry), or undefined when the finish failed.
   */
  private async finishRun(
    run: Run<D, R>,
    request: FinishRequest,
  ): Promise<{ reply: unknown[]; next: ClaimReply[]; refused?: FinishRequest } | undefined> {
    const next: ClaimReply[] = [];
    let refused: FinishRequest | undefined;
    for (;;) {
      const fence = run.job.claim?.fence ?? '';
      const closes = this.closes;
      let reply: unknown[];
      try {
        reply = await this.finisher.finish({ ...request, fence });
      } catch (err) {
        if (err instanceof FinishRefusedError && !refused) {
          // only this job's finish was refused (the others of its batch were stored): it fails
          // with the reason, so it neither stalls nor runs again with what the server refuses
          next.push(...(err.next as ClaimReply[]));
          request = refused = refusalFailure(run.job.id, request, err);
          continue;
        }
        this.emitError(err);
        if (run.next) next.push(run.next);
        next.forEach((c) => queueMicrotask(() => this.dispatch(c)));
        return undefined;
      }
      let newer = run.next;
      run.next = undefined;
      for (const claim of reply.slice(1) as ClaimReply[]) {
        // the finish may fetch this very job again: a reclaim put it back while it ran
        if (String(claim[0]) === run.job.id && newerFence(String(claim[1]), newer ? String(newer[1]) : run.job.claim?.fence)) newer = claim;
        else next.push(claim);
      }
      if (String(reply[0]) === 'stale' && newer && run.job.claim) {
        // the finish went under the claim a reclaim replaced, and the job came back here: the
        // run's outcome is stored under the new claim (no next jobs: the first reply had them)
        run.job.claim.fence = String(newer[1]);
        request = { ...request, fetchCount: 0 };
        continue;
      }
      if (newer) next.push(newer);
      return { reply: [this.repeatedStatus(reply[0], request, closes), ...reply.slice(1)], next, refused };
    }
  }

  /**
   * A finish sent before the connection closed may have been applied, and then sent again by the
   * client: the repeat finds the job finished. glidemq_finish answers a repeat with the stored
   * outcome while the job is kept (and the retry a failure asked for, lua/finish.lua); a job removed
   * at once on completion or failure (keep '0') is gone, and its repeat says 'missing': the outcome
   * was stored and the job is gone, as it would have been. Only a result that was not stored is lost.
   */
  private repeatedStatus(status: unknown, request: FinishRequest, closesAtSend: number): unknown {
    const repeated = this.closes !== closesAtSend && status === 'missing';
    if (!repeated || request.keep !== '0') return status;
    // keep '0' removes a job only when its outcome is final: a failure with a retry left keeps it
    return request.outcome === 'completed' ? 'completed' : 'failed';
  }

  /**
   * The processor threw RateLimitError (after worker.rateLimit): the job goes back to the queue
   * with no attempt counted (glidemq_release, as a prefetched job is given back).
   */
  private async afterRateLimited(run: Run<D, R>): Promise<void> {
    const job = run.job;
    await callFunction(this.client, 'glidemq_release', this.keys.meta, [this.consumer, job.id, job.claim?.fence ?? ''])
      .catch((err) => this.emitError(err));
    this.active.delete(job.id);
    this.afterSlotFreed();
  }

  /** A step job parked itself (moveToDelayed): nothing to store; take the next job in its place. */
  private async afterMoved(job: Job<D, R>): Promise<void> {
    this.active.delete(job.id);
    this.emit('moved', job);
    if (!this.closing && this.running) {
      try {
        (await this.fetch(1)).jobs.forEach((f) => this.dispatch(f));
      } catch (err) {
        this.emitError(err);
      }
    }
    this.afterSlotFreed();
  }

  private afterSlotFreed(): void {
    this.startBuffered();
    this.idle.settle();
    this.kickReader();
  }

  private kickReader(): void {
    if (!this.closing && this.running && !this.readerRunning && this.readerRoom() > 0) void this.readLoop(false);
  }

  /**
   * Turns what a blocking read delivered into claims (glidemq_activate), at most `want`, and runs
   * them; the rest goes back to the queue. Pairs: (entry id, job id).
   */
  private async activateDelivered(streamPairs: string[], wakeIds: string[], want = Math.max(0, this.readerRoom())) {
    const args: (string | number)[] = [this.consumer, want, ...this.claimTerms, wakeIds.join(','), streamPairs.length / 2, ...streamPairs];
    const r = this.parseDelivery((await callFunction(this.client, 'glidemq_activate', this.keys.meta, args)) as unknown[]);
    this.limited = r.status === 'limited';
    r.jobs.forEach((f) => this.dispatch(f));
    return r;
  }

  /** The one blocking read: waits for jobs while slots are free; waits out a pause. */
  private async readLoop(startPaused: boolean): Promise<void> {
    if (this.readerRunning) return;
    this.readerRunning = true;
    let paused = startPaused;
    let failed = false;
    try {
      while (this.running && !this.closing) {
        if (this.rateWaitUntil > 0) {
          // the rate window is full or the queue held: no job may start before then, so no read
          await this.waitOutRate();
          continue;
        }
        if (paused) {
          await this.reader!.waitForEvent(this.settings.blockTimeout, this.pausedSince);
          if (this.closing || !this.running) break;
          const r = await this.fetch(Math.max(0, this.readerRoom()));
          paused = r.status === 'paused';
          this.limited = r.status === 'limited';
          r.jobs.forEach((f) => this.dispatch(f));
          this.readFailures = 0;
          continue;
        }
        const want = this.readerRoom();
        if (want <= 0) break;
        if (this.limited) {
          paused = (await this.limitedStep(want)) === 'paused';
          continue;
        }
        if (this.hadWork && this.active.size === 0 && this.buffered.size === 0) {
          // every job this worker had is done and nothing waits for it: the queue is drained
          this.hadWork = false;
          this.emit('drained');
        }
        this.readerReserved = want;
        let delivered;
        try {
          delivered = await this.reader!.read(want);
        } finally {
          this.readerReserved = 0;
        }
        if (!delivered) {
          this.readFailures = 0;
          continue;
        }
        // A delayed job became the earliest due: promote when it is due, not on the next tick.
        if (delivered.dueIn !== undefined) this.promoter.promoteBy(delivered.dueIn);
        const r = await this.activateDelivered(delivered.streamPairs, delivered.wakeIds, want);
        this.readFailures = 0;
        paused = r.status === 'paused';
      }
    } catch (err) {
      if (this.running && !this.closing) {
        failed = true;
        this.readFailures++;
        // NOGROUP: the stream or its group was deleted under us; glidemq_fetch recreates both.
        if (/NOGROUP/.test(String(err))) await this.fetch(0).catch(() => undefined);
        else this.emitError(await nameWrongTypeKey(this.client, this.keys.meta, err));
        // A lasting fault (a key of the wrong type, a refused command) must not become a busy loop.
        await delay(Math.min(5000, 50 * 2 ** Math.min(this.readFailures, 7)));
      }
    } finally {
      this.readerRunning = false;
      this.changes.reset();
    }
    if (this.running && !this.closing && (failed || (this.readerRoom() > 0 && !paused))) this.kickReader();
  }

  /**
   * One step of a worker on a queue with a globalConcurrency limit. Its deliveries happen only
   * inside glidemq_fetch (and glidemq_finish), which check the limit in the same call, so it never
   * holds a claim while waiting for a slot: the stream claims a worker could hold that way (from a
   * blocking XREADGROUP that raced the limit) are handed back by glidemq_activate at once, well
   * within half of min(lockDuration, stalledInterval). With nothing to take it does not spin: it
   * blocks until the queue's streams show something that can free a slot or bring a job.
   */
  private async limitedStep(want: number): Promise<string> {
    await this.changes.mark(this.client);
    const r = await this.fetch(want);
    r.jobs.forEach((f) => this.dispatch(f));
    if (r.status !== 'limited') {
      this.limited = false;
      this.changes.reset();
    } else if (r.jobs.length < want && this.rateWaitUntil === 0) {
      await this.changes.wait(this.reader!.client, this.settings.blockTimeout, () => this.running && !this.closing);
    }
    return r.status;
  }

  /** Sits out the wait a 'rated' reply asked for, on a timer close() ends. */
  private waitOutRate(): Promise<void> {
    // (a timer holds at most 2^31 - 1 ms: a longer hold is waited out in parts)
    const ms = Math.min(this.rateWaitUntil - performance.now(), 2 ** 31 - 1);
    this.rateWaitUntil = 0;
    if (ms <= 0 || this.closing) return Promise.resolve();
    return new Promise((resolve) => {
      const end = () => {
        clearTimeout(timer);
        this.rateTimer = undefined;
        resolve();
      };
      const timer = setTimeout(end, Math.ceil(ms));
      this.rateTimer = { timer, end };
    });
  }

  /**
   * Graceful stop: take no more jobs, let running ones finish (up to the grace period), remove this
   * worker's consumer from the group when it holds nothing, and close the connections it opened.
   */
  close(force = false): Promise<void> {
    this.closing ??= (async () => {
      this.emit('closing', 'closing the worker');
      this.promoter.stop();
      this.rateTimer?.end();
      this.lockKeeper.stopStalledCheck();
      await this.manual?.close();
      // A server that is gone must not hold the close: a call is made only on a live connection,
      // and waited for a short while (what it would have done is left to recovery: a prefetched
      // claim not given back is a stall, a consumer not removed is removed as stale).
      const live = () => this.client.status === 'ready';
      if (live()) await within(this.reader?.unblock(this.client), CLOSE_CALL_MS);
      if (live()) await within(this.releaseBuffered(), CLOSE_CALL_MS);
      if (!force && this.active.size > 0) await within(this.idle.wait(), this.settings.closeGracePeriod);
      // a finish sent before the close began may have brought claims after the release above
      // (kept, not started, while paused or closing): they go back too, not to stalled recovery
      if (live()) await within(this.releaseBuffered(), CLOSE_CALL_MS);
      this.lockKeeper.stopHeartbeat();
      clearInterval(this.registryTimer);
      // out of the registry (unreachable server: the entry expires by itself after registryTtl)
      if (live()) await within(this.registration.unregister().catch(() => undefined), CLOSE_CALL_MS);
      else this.registration.stop();
      this.recovery.stop();
      this.client.off('close', this.onClientClose);
      this.unwatchConnection?.();
      this.running = false;
      if (this.active.size === 0 && live()) {
        await within(this.maintenance.removeOwnConsumer(this.consumer).catch(() => undefined), CLOSE_CALL_MS);
      }
      this.reader?.close();
      if (this.acquired.owned) await closeClient(this.client);
      this.emit('closed');
    })();
    return this.closing;
  }

  /** The claims whose locks the heartbeat renews (a run whose finish is on its way is left out: the finish may land first, and the lock it ends is not lost). */
  private held(): Job<D, R>[] {
    const held: Job<D, R>[] = [];
    for (const run of this.active.values()) if (!run.finishing && !run.job.moved) held.push(run.job);
    for (const job of this.buffered.values()) held.push(job);
    return held;
  }

  /** A claim the server says was lost: news only while the run it belongs to still runs under it, or while it waits prefetched. */
  private lose(id: string, fence: string): boolean {
    const run = this.active.get(id);
    if (run) {
      if (run.finishing || run.job.claim?.fence !== fence) return false;
      run.abort?.abort(new Error(`job ${id}: the claim was lost (another worker may run it)`));
      return true;
    }
    // a prefetched job whose claim was lost never starts here: it may run elsewhere already
    if (!this.holds(id, fence)) return false;
    this.dropBuffered(id, fence);
    return true;
  }

  private dropBuffered(id: string, fence: string): void {
    if (this.buffered.get(id)?.claim?.fence === fence) this.buffered.delete(id);
  }

  /** Prefetched jobs that will not run here go back to the queue for other workers. */
  private async releaseBuffered(): Promise<void> {
    const jobs = [...this.buffered.values()];
    this.buffered.clear();
    if (jobs.length === 0) return;
    const pairs = jobs.flatMap((j) => [j.id, j.claim?.fence ?? '']);
    await callFunction(this.client, 'glidemq_release', this.keys.meta, [this.consumer, ...pairs]).catch((err) => this.emitError(err));
  }

  /**
   * The terms every claim this worker makes records on the server (lua/activate.lua): stalled
   * recovery, whichever worker runs it, judges the claim by this worker's lock and maxStalledCount.
   */
  private get claimTerms(): [number, number] {
    return [this.settings.lockDuration, this.settings.maxStalledCount];
  }

  private emitError(err: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }
}

/** The stored return value: JSON text. A value JSON cannot hold fails the job with that reason. */
function serialiseResult(result: unknown): string {
  let text: string | undefined;
  try {
    text = JSON.stringify(result === undefined ? null : result);
  } catch (err) {
    throw new UnrecoverableError(`the processor returned a value that cannot be stored as JSON: ${(err as Error).message}`);
  }
  if (text === undefined) throw new UnrecoverableError(`the processor returned a ${typeof result}, which cannot be stored as JSON`);
  return text;
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

/** Whether claim fence `a` came after `b` (fences count up per job; a missing one is oldest). */
function newerFence(a: string | undefined, b: string | undefined): boolean {
  if (a === undefined || a === '') return false;
  if (b === undefined || b === '') return true;
  return Number(a) > Number(b);
}
