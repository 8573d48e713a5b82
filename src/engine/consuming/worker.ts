/**
 * The consumer side: runs a processor over a queue's jobs with a fixed concurrency. The Worker is a
 * coordinator of parts, each in its own file (whose header says what it does) and given a small
 * view of it (worker-part.ts), never the Worker itself: the read loop (worker-read-loop.ts), the
 * prefetch buffer and slot ledger (worker-prefetch.ts), the runner (worker-runner.ts), the finisher
 * (worker-finisher.ts: one function call per job in steady state), the lock keeper
 * (worker-lock-keeper.ts) and the promoter (worker-promoter.ts). The Worker wires them, routes each
 * claim (dispatch) and emits every public event.
 *
 * Events, with BullMQ's arguments: ready, active (job, 'waiting'), progress (job, progress: after
 * job.updateProgress stored it), completed (job, result, 'active'), failed (job, error, 'active'),
 * stalled (id, 'active', 'failed' | 'redispatched'), drained (the queue had no job for a free
 * slot), paused, resumed, closing (message), closed, error. glidemq's own: lost (job, status: the
 * finish found the claim gone), moved (job: parked by moveToDelayed), lockLost (id), connectionLost
 * (why) and connectionRestored (ms down): the command connection closed while running and is back
 * (connection-watch.ts), queuePaused and queueResumed: a fetch found the queue paused (Queue.pause
 * wakes an idle worker, which hears of it at once) or running again, quietRequested and
 * stopRequested: an operator asked this worker from afar to take no new jobs (it pauses) or to
 * finish and close (it closes; worker-remote.ts). After `completed` and `failed`
 * the job is up to date: attemptsMade counts the attempt just made, finishedOn - processedOn is its
 * run time (this process's clock), and after a failure `state` says whether it runs again
 * ('waiting' or 'delayed') or not ('failed'). A listener that throws never stops the worker: the
 * throw arrives as an `error` event (see SafeEmitter).
 *
 * A worker made without a processor runs none of this: the application takes jobs by hand with
 * getNextJob(token) (BullMQ's manual processing, src/engine/consuming/manual-fetch.ts).
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { acquireClient, closeClient, settleTopology, type Acquired, type Client } from '../connecting/connection.js';
import { ClaimRecovery } from './claim-recovery.js';
import { invalid, RateLimitError } from '../shared/errors.js';
import type { ClaimReply, Job } from '../jobs/job.js';
import { QueueKeys, DEFAULT_PREFIX } from '../shared/keys.js';
import { ensureLibrary } from '../connecting/library.js';
import { Maintenance } from '../administering/maintenance.js';
import { resolveSettings, type Settings, type WorkerOptions } from './worker-options.js';
import { Upkeep } from '../administering/upkeep.js';
import { holdQueue, storeWorkerLimits } from '../administering/rate-limits.js';
import { IdleWaiters } from '../shared/idle-waiters.js';
import { CLOSE_CALL_MS, within } from '../shared/waiting.js';
import { SafeEmitter } from '../shared/safe-emitter.js';
import { refreshInterval, WorkerRegistration } from './worker-registry.js';
import { RemoteRequests } from './worker-remote.js';
import { watchConnection } from '../connecting/connection-watch.js';
import { ManualFetch } from './manual-fetch.js';
import { Promoter } from './worker-promoter.js';
import { LockKeeper } from './worker-lock-keeper.js';
import { type Processor } from './worker-runner.js';
import { makeRunner, type BatchProcessor, type JobRunner } from './batch-runner.js';
import type { BatchOptions } from './batch-options.js';
import { Finisher } from './worker-finisher.js';
import { FlowRelay } from './flow-relay.js';
import { relayOutboxes } from '../producing/dead-letter-outbox.js';
import { refuseUnconfirmable } from '../producing/confirm.js';
import { checkDeadLetterQueue, storeDeadLetterQueue } from '../administering/dead-letters.js';
import { PrefetchBuffer } from './worker-prefetch.js';
import { ReadLoop } from './worker-read-loop.js';
import type { WorkerPart } from './worker-part.js';
import { isProcessorFile, resolveSandbox } from './sandbox-options.js';
import { Sandbox } from './sandbox-processor.js';
import { Telemetry } from '../shared/telemetry.js';
import { traceBatchProcessor, traceProcessor } from './traced-processor.js';

export type { WorkerOptions } from './worker-options.js';
export type { Processor } from './worker-runner.js';
export type { BatchProcessor } from './batch-runner.js';

export class Worker<D = any, R = any> extends SafeEmitter {
  readonly keys: QueueKeys;
  readonly consumer: string;
  readonly settings: Settings;
  private readonly acquired: Acquired;
  private running = false;
  /** run()'s start-up, once run() was called. */
  private startup: Promise<void> | undefined;
  /** pause() on this worker alone: it takes no job until resume(). */
  private localPaused = false;
  private closing: Promise<void> | undefined;
  /** This worker's entry in the queue's worker registry (worker-registry.ts). */
  private readonly registration: WorkerRegistration;
  /** Ends the connectionLost/connectionRestored watch. */
  private unwatchConnection: (() => void) | undefined;
  private readonly idle = new IdleWaiters(() => this.runner.active.size);
  maintenance: Maintenance;
  private readonly runner: JobRunner<D, R>;
  private readonly finisher: Finisher;
  private readonly buffer: PrefetchBuffer<Job<D, R>>;
  private readonly readLoop: ReadLoop;
  private readonly flowRelay: FlowRelay;
  private readonly promoter: Promoter;
  private readonly lockKeeper: LockKeeper;
  /** Takes back claims whose reply a broken connection lost (see claim-recovery.ts). */
  readonly recovery: ClaimRecovery;
  /** A worker without a processor's: getNextJob and the jobs it hands out (manual-fetch.ts). */
  private readonly manual: ManualFetch | undefined;
  /** A processor given as a file runs in this pool of children (sandbox-processor.ts). */
  readonly sandbox: Sandbox | undefined;
  private readonly processor: Processor<D, R> | BatchProcessor<D, R> | null | undefined;
  /** The telemetry option checked: each run is a span (traced-processor.ts); loaded at run(). */
  private readonly telemetry: Telemetry | undefined;

  /**
   * A worker without a processor (`null` or none, as BullMQ's) runs no loop: the application takes
   * jobs with getNextJob(token) and finishes them itself (BullMQ's manual processing). A processor
   * given as a file (a path or a file URL: BullMQ's sandboxed processor) runs in child processes,
   * or worker threads with `useWorkerThreads`, one per slot (sandbox-processor.ts).
   */
  constructor(name: string, processor?: Processor<D, R> | string | URL | null, opts?: WorkerOptions & { batch?: undefined });
  /** A batch worker (the `batch` option): its processor takes the jobs of a batch (batch-runner.ts). */
  constructor(name: string, processor: BatchProcessor<D, R>, opts: WorkerOptions & { batch: BatchOptions });
  /** Options not known until run time: the processor takes a job, or a batch's jobs with `batch`. */
  constructor(name: string, processor?: Processor<D, R> | BatchProcessor<D, R> | string | URL | null, opts?: WorkerOptions);
  constructor(
    readonly name: string,
    processor?: Processor<D, R> | BatchProcessor<D, R> | string | URL | null,
    opts: WorkerOptions = {},
  ) {
    super();
    this.keys = new QueueKeys(name, opts.prefix ?? DEFAULT_PREFIX);
    this.settings = resolveSettings(opts);
    checkDeadLetterQueue(opts.deadLetterQueue, name); // (a queue cannot be its own)
    if (isProcessorFile(processor)) {
      if (this.settings.batch) throw invalid(`batch: a batch worker runs a processor function (jobs) => results in its own process; a sandboxed processor file (${String(processor)}) runs one job per call`);
      this.sandbox = new Sandbox(resolveSandbox(processor, opts, this.settings.concurrency));
      this.processor = this.sandbox.processor as Processor<D, R>;
    } else this.processor = processor;
    this.consumer = `${hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
    this.telemetry = Telemetry.of(opts.telemetry, `the worker of queue ${name}`);
    if (this.telemetry && typeof this.processor === 'function') {
      const site = { telemetry: this.telemetry, queue: name, consumer: this.consumer };
      this.processor = this.settings.batch
        ? traceBatchProcessor(site, this.processor as BatchProcessor<D, R>)
        : traceProcessor(site, this.processor as Processor<D, R>);
    }
    this.acquired = acquireClient(opts.connection, { maxRetriesPerRequest: null });
    this.maintenance = new Maintenance(this.client, this.keys, this.settings);
    const part: WorkerPart = {
      client: () => this.client,
      keys: this.keys,
      consumer: this.consumer,
      settings: this.settings,
      claimTerms: [this.settings.lockDuration, this.settings.maxStalledCount],
      live: this.live,
      emit: this.emit.bind(this),
      emitError: (err) => this.emitError(err),
    };
    this.buffer = new PrefetchBuffer<Job<D, R>>({
      ...part,
      processing: () => this.runner.processing(),
      reserved: () => this.readLoop.reserved,
      limited: () => this.readLoop.limited,
      rttMs: () => this.finisher.rttMs,
      paused: () => this.localPaused,
      closing: () => this.closing !== undefined,
      start: (job) => this.runner.start(job as Job<D, R>),
    });
    this.readLoop = new ReadLoop({
      ...part,
      acquired: this.acquired,
      room: () => this.buffer.readerRoom(),
      dispatch: (reply) => this.dispatch(reply),
      idle: () => this.runner.active.size === 0 && this.buffer.jobs.size === 0,
      promoteBy: (ms) => this.promoter.promoteBy(ms),
    });
    this.finisher = new Finisher({
      ...part,
      ledger: this.buffer,
      dispatch: (claim, ahead) => this.dispatch(claim, ahead),
      afterSlotFreed: () => this.afterSlotFreed(),
      onRelay: () => this.flowRelay.kick(),
    });
    this.runner = makeRunner<D, R>({
      ...part,
      wasMarked: (job) => job.claim?.ahead === true,
      noteRun: (ms) => this.buffer.noteRun(ms),
      finisher: this.finisher,
      fetchOne: () => this.readLoop.fetchOne(),
      afterSlotFreed: () => this.afterSlotFreed(),
    }, this.processor, this.settings.batch);
    // a '{relay}' mark asks for both outboxes: flow settlements and dead letters (dead-letter-outbox.ts)
    this.flowRelay = new FlowRelay(part, (client, meta, minAge) => relayOutboxes(client, meta, minAge, this.settings.confirm));
    const upkeep = new Upkeep(part.client, this.keys, part.emitError);
    this.promoter = new Promoter({ ...part, maintenance: () => this.maintenance, upkeep });
    this.lockKeeper = new LockKeeper({
      ...part,
      maintenance: () => this.maintenance,
      held: (into) => [this.runner, this.buffer].forEach((holder) => holder.collectHeld(into)),
      lose: (id, fence) => this.runner.lose(id, fence) ?? this.buffer.lose(id, fence),
      revoke: (id, fence) => this.runner.revoke(id, fence) ?? this.runner.revokeAhead(this.buffer.jobs.get(id), fence),
    });
    const load = () => ({ concurrency: this.settings.concurrency, running: this.runner.processing(), jobs: this.runner.active.keys() });
    // requests from afar are heard at a refresh: one at least every lock renewal (lockDuration / 2)
    const remote = new RemoteRequests({ ...part, quiet: () => this.pause(true), stop: () => this.close() });
    const every = Math.min(refreshInterval(this.settings.registryTtl), Math.max(50, Math.floor(this.settings.lockDuration / 2)));
    this.registration = new WorkerRegistration(part.client, this.keys, this.consumer, this.settings.registryTtl, load, (r) => remote.hear(r), every);
    this.recovery = new ClaimRecovery({
      ...part,
      // whether this claim is running, finishing or prefetched here
      knows: (id, fence) => this.runner.holds(id, fence) ?? this.buffer.holds(id, fence),
      dispatch: (replies) => replies.forEach((r) => this.dispatch(r)),
      activate: (pairs) => this.readLoop.claiming(async () => void (await this.readLoop.activateDelivered(pairs, []))),
      running: this.live,
    });
    if (typeof this.processor !== 'function') {
      this.manual = new ManualFetch({ ...part, acquired: this.acquired, settle: () => this.settle(), closing: () => this.closing !== undefined });
    } else if (opts.autorun !== false) void this.run().catch((err) => this.emitError(err));
  }

  /** The worker runs and is not closing. */
  private readonly live = (): boolean => this.running && !this.closing;

  /** A Cluster client once run() found the server is a cluster node. */
  private get client(): Client {
    return this.acquired.client;
  }

  /** Jobs whose processor runs now (a run whose result is on its way to the server is done). */
  get activeCount(): number {
    return this.runner.processing();
  }

  /** Jobs this worker finished, by outcome. */
  get finished(): { completed: number; failed: number } {
    return this.finisher.finished;
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
   * throws Worker.RateLimitError() gives its job back with no attempt counted; it runs after the
   * hold.
   */
  rateLimit(ms: number): Promise<void> {
    return holdQueue(this.client, this.keys, ms);
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
    // a sandbox's children start while the worker connects; jobs are taken once they are up
    const filling = this.sandbox?.fill();
    await this.telemetry?.load(); // a missing @opentelemetry/api stops the start, saying so
    await this.settle();
    await refuseUnconfirmable(this.client, this.keys.meta, this.settings.confirm);
    await storeWorkerLimits(this.client, this.keys, this.settings.globalConcurrency, this.settings.limiter);
    await storeDeadLetterQueue(this.client, this.keys, this.settings.deadLetterQueue);
    await filling;
    const readerClient = await this.readLoop.open();
    if (this.closing) {
      // close() ran while this start-up waited: it found no reader and no timers to end, so none
      // may be made now (they would keep the process alive after its close)
      this.readLoop.closeReader();
      return;
    }
    this.recovery.watch(this.client);
    this.recovery.watch(readerClient);
    this.unwatchConnection = watchConnection(this.client, this, this.live);
    this.promoter.schedule(0);
    this.lockKeeper.start();
    // the registry: listed once run() resolved, then refreshed on a timer (worker-registry.ts)
    await this.registration.start((err) => void (this.live() && this.emitError(err)));
    this.emit('ready');
    await this.readLoop.begin();
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
      await within(this.readLoop.unblock(), CLOSE_CALL_MS);
      await within(this.buffer.release(), CLOSE_CALL_MS);
    }
    if (!doNotWaitActive) await this.idle.wait();
    this.emit('paused');
  }

  /** Takes jobs again after pause(). */
  resume(): void {
    if (!this.localPaused) return;
    this.localPaused = false;
    this.emit('resumed');
    this.buffer.startBuffered();
    this.readLoop.kick();
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
    if (!this.manual) throw invalid(`getNextJob is for a worker made without a processor; the worker of queue ${this.name} runs its processor`);
    return (await this.manual.next(token, opts.block ?? true)) as Job<D, R> | undefined;
  }

  /**
   * Runs stalled recovery every stalledInterval (BullMQ's call for a worker without a processor; a
   * worker with one does it from run(), so this changes nothing for it). Each claim is judged by
   * its own lock, whoever made it.
   */
  async startStalledCheckTimer(): Promise<void> {
    if (!this.manual || this.lockKeeper.checking || this.closing) return;
    await this.manual.whenReady(() => this.lockKeeper.startStalledCheck());
  }

  /** Settles the connection (a cluster node: a Cluster client and its maintenance), loads Lua. */
  private async settle(): Promise<void> {
    const standalone = this.client;
    if ((await settleTopology(this.acquired)) !== standalone) {
      this.maintenance = new Maintenance(this.client, this.keys, this.settings);
    }
    await ensureLibrary(this.client);
  }

  /** Aborts the signal of job `id`'s run here (false: none); the processor says what it means. */
  cancelJob(id: string, reason = 'cancelled'): boolean {
    return this.runner.cancel(id, reason);
  }

  /** Aborts the signal of every run here. */
  cancelAllJobs(reason = 'cancelled'): void {
    this.runner.cancelAll(reason);
  }

  /**
   * Runs a claim, or keeps it for a free slot. (On the per-job path: a lookup in the runs, and one
   * in the prefetch buffer when the claim waits there.)
   */
  private dispatch(reply: ClaimReply, marked = false): void {
    const runner = this.runner;
    const buffer = this.buffer;
    const run = runner.active.get(String(reply[0]));
    if (run) return runner.claimAgain(run, reply);
    const job = runner.jobOf(reply);
    if (marked) job.claim!.ahead = true;
    const data = reply[3];
    buffer.noteBytes(typeof data === 'string' ? data.length : 0);
    this.readLoop.hadWork = true;
    // (a claim of a job that waits here already: the buffer is not empty, and it keeps the newest)
    const free = buffer.jobs.size === 0 && runner.processing() < this.settings.concurrency;
    if (free && !this.localPaused && !this.closing) runner.start(job);
    else buffer.keep(job);
  }

  private afterSlotFreed(): void {
    this.buffer.startBuffered();
    this.idle.settle();
    this.readLoop.kick();
  }

  /**
   * Graceful stop: take no more jobs, let running ones finish (up to the grace period), remove this
   * worker's consumer from the group when it holds nothing, and close the connections it opened.
   */
  close(force = false): Promise<void> {
    this.closing ??= (async () => {
      this.emit('closing', 'closing the worker');
      this.promoter.stop();
      this.readLoop.endRateWait();
      this.lockKeeper.stopStalledCheck();
      await this.manual?.close();
      // A server that is gone must not hold the close: a call is made only on a live connection,
      // and waited for a short while (what it would have done is left to recovery: a prefetched
      // claim not given back is a stall, a consumer not removed is removed as stale).
      const live = () => this.client.status === 'ready';
      // what a read, fetch or activation on its way brings is kept, and goes back with the rest
      await this.readLoop.stopForClose();
      this.runner.flush?.(); // a batch still filling goes now
      if (live()) await within(this.buffer.release(), CLOSE_CALL_MS);
      if (!force && this.runner.active.size > 0) await within(this.idle.wait(), this.settings.closeGracePeriod);
      // a finish sent before the close began may have brought claims after the release above
      // (kept, not started, while paused or closing): they go back too, not to stalled recovery
      if (live()) await within(this.buffer.release(), CLOSE_CALL_MS);
      // a flow relay in flight finishes (what it leaves, maintenance relays after its grace period)
      if (live()) await within(this.flowRelay.settled(), CLOSE_CALL_MS);
      this.lockKeeper.stopHeartbeat();
      await this.registration.leave(live());
      this.recovery.stop();
      this.unwatchConnection?.();
      this.running = false;
      if (this.runner.active.size === 0 && live()) {
        await within(this.maintenance.removeOwnConsumer(this.consumer).catch(() => undefined), CLOSE_CALL_MS);
      }
      this.readLoop.closeReader();
      if (this.acquired.owned) await closeClient(this.client);
      // after the connection: a job whose child this ends is left to stalled recovery, as a job
      // still running in-process is
      await this.sandbox?.close();
      this.emit('closed');
    })();
    return this.closing;
  }

  private emitError(err: unknown): void {
    if (this.listenerCount('error') > 0) this.emit('error', err);
  }
}
