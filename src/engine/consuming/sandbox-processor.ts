/**
 * A processor file run in a sandbox (`new Worker(name, file)`): the Processor the Worker's runner
 * calls for each job. It sends the job to a child of the pool (sandbox-pool.ts),
 * makes on the real Job, under the claim, each call the processor makes there (progress, logs,
 * data, moveToDelayed), and settles with the child's outcome. A child that dies, or whose module
 * does not load, fails the job with a reason that says so, and the next job gets a new child. An
 * abort of the run (the runner's onAbort) is passed on to the child; a child that has not settled
 * within sandbox.abortGraceMs is killed and replaced, and the job fails with the abort's reason.
 */
import type { Job } from '../jobs/job.js';
import { SandboxChild, SandboxPool, type ChildUser } from './sandbox-pool.js';
import type { SandboxSettings } from './sandbox-options.js';
import { errorFromWire, errorToWire, type SandboxCall, type ToParent, type WireJob } from './sandbox-protocol.js';
import type { HearsAborts, Processor } from './worker-runner.js';

/** How long a worker's start waits at most for its children to load their module (see fill). */
const START_WAIT_MS = 5000;

export class Sandbox {
  readonly pool: SandboxPool;

  constructor(readonly settings: SandboxSettings) {
    this.pool = new SandboxPool(settings);
  }

  /**
   * The runner's processor. It takes no signal (one per job costs a few µs): the runner tells it of
   * each abort by its onAbort (worker-runner.ts HearsAborts).
   */
  readonly processor: Processor & HearsAborts = Object.assign((job: Job) => this.run(job), {
    onAbort: (job: Job, reason: Error) => this.abort(job, reason),
  });

  /** The runs in progress, by job. */
  private readonly runs = new Map<Job, SandboxRun>();
  /** Aborts of jobs whose run has not started (or is over: they are dropped with the job). */
  private readonly early = new WeakMap<Job, Error>();

  /**
   * Resolves once a child has loaded the processor module (it then waits for the first job); rejects
   * with why it could not, naming the file ("... cannot be loaded: ...", "... exports no function").
   */
  warm(): Promise<void> {
    return this.pool.warm();
  }

  /**
   * Starts every child of the pool before the worker takes its first jobs (Worker.run): a claimed
   * job then does not wait, its lock running, for a child to boot, and the children's start-up
   * (tens of ms of CPU each) is over before jobs flow rather than slowing the first ones. Resolves
   * once each child has loaded the module (or failed to), or after START_WAIT_MS at most: jobs
   * sent to a child still loading run once it has.
   */
  fill(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, START_WAIT_MS)));
    // a child that cannot even be started (bad fork or thread options) fails the jobs it is asked
    // for, saying why, as before: the worker's start does not stop for it
    const filled = Promise.resolve().then(() => this.pool.fill()).catch(() => undefined);
    return Promise.race([filled, late]).finally(() => clearTimeout(timer));
  }

  /** Ends every child it started; resolves once all have ended. */
  close(): Promise<void> {
    return this.pool.close();
  }

  private run(job: Job): Promise<unknown> {
    const aborted = this.early.get(job);
    if (aborted) return Promise.reject(aborted);
    let child: SandboxChild | Promise<SandboxChild>;
    try {
      child = this.pool.acquire();
    } catch (err) {
      return Promise.reject(err);
    }
    if (child instanceof SandboxChild) return this.runOn(child, job);
    return child.then((c) => {
      // aborted while it waited for a child
      const reason = this.early.get(job);
      if (!reason) return this.runOn(c, job);
      this.pool.release(c);
      throw reason;
    });
  }

  private runOn(child: SandboxChild, job: Job): Promise<unknown> {
    return new Promise((resolve, reject) => {
      const run = new SandboxRun(this, child, job, resolve, reject);
      this.runs.set(job, run);
      run.start();
    });
  }

  /** A run ended: it hears no more aborts. */
  ended(run: SandboxRun): void {
    if (this.runs.get(run.job) === run) this.runs.delete(run.job);
  }

  private abort(job: Job, reason: Error): void {
    const run = this.runs.get(job);
    if (run) run.abort(reason);
    else this.early.set(job, reason);
  }
}

/** One job's run on one child. */
class SandboxRun implements ChildUser {
  /** The job calls the child made that are not answered yet: the outcome waits for them. */
  private calls: Set<Promise<void>> | undefined;
  private graceTimer: NodeJS.Timeout | undefined;
  private settled = false;
  /** Aborted: the child heard it, and its grace runs. */
  private aborted = false;
  /** This run's number on its child: a job call of another run is refused. */
  private readonly r: number;

  constructor(
    private readonly sandbox: Sandbox,
    private readonly child: SandboxChild,
    readonly job: Job,
    private readonly resolve: (value: unknown) => void,
    private readonly reject: (err: Error) => void,
  ) {
    this.r = ++child.runs;
  }

  start(): void {
    this.child.user = this;
    this.child.channel.send({ t: 'run', r: this.r, job: wireJob(this.job) });
  }

  message(msg: ToParent): void {
    if (msg.t === 'done') this.done(msg);
    else if (msg.t === 'call') {
      if (msg.r === this.r) this.call(msg.n, msg.op, msg.args);
      else this.child.refuse(msg.n, msg.op);
    }
    else if (msg.t === 'load') {
      this.sandbox.pool.discard(this.child);
      this.fail(new Error(`job ${this.job.id}: the sandboxed processor ${msg.e.message}`));
    }
  }

  ended(why: string): void {
    this.fail(new Error(`job ${this.job.id}: its sandbox ${this.child.channel.label} ${why} while running it`));
  }

  /**
   * The run was aborted (the first abort counts): the child hears it, and gets abortGraceMs to
   * settle before it is killed.
   */
  abort(reason: Error): void {
    if (this.aborted || this.settled) return;
    this.aborted = true;
    this.child.channel.send({ t: 'abort', r: this.r, reason: reason.message });
    this.graceTimer = setTimeout(() => {
      this.sandbox.pool.discard(this.child);
      this.fail(reason);
    }, this.sandbox.settings.abortGraceMs);
  }

  private done(msg: Extract<ToParent, { t: 'done' }>): void {
    // the child is free for the next job at once (an abort or its grace no longer concerns it);
    // this outcome waits for the calls it made
    this.detach();
    this.sandbox.pool.release(this.child);
    const settle = () => (msg.e ? this.fail(errorFromWire(msg.e)) : this.succeed(msg.v));
    if (this.calls?.size) void Promise.allSettled(this.calls).then(settle);
    else settle();
  }

  private call(n: number, op: SandboxCall, args: unknown[]): void {
    const child = this.child;
    const made = (async () => {
      try {
        const make = Object.hasOwn(CALLS, op) ? CALLS[op] : undefined;
        if (!make) throw new Error(`job ${this.job.id}: a sandboxed job has no call ${String(op)}`);
        child.channel.send({ t: 'reply', n, v: await make(this.job, args as never[]) });
      } catch (err) {
        child.channel.send({ t: 'reply', n, e: errorToWire(err) });
      }
    })();
    const calls = (this.calls ??= new Set());
    calls.add(made);
    void made.then(() => calls.delete(made));
  }

  private succeed(value: unknown): void {
    if (this.end()) this.resolve(value);
  }

  private fail(err: Error): void {
    if (this.end()) this.reject(err);
  }

  /** True the first time: the run is over. */
  private end(): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.detach();
    return true;
  }

  /** Aborts no longer reach the child. */
  private detach(): void {
    if (this.aborted) clearTimeout(this.graceTimer);
    this.sandbox.ended(this);
  }
}

/** What the child's job is made of (sandbox-job.ts gives it its calls). */
function wireJob(job: Job): WireJob {
  return {
    id: job.id,
    name: job.name,
    data: job.data,
    opts: job.opts,
    attemptsMade: job.attemptsMade,
    attemptsStarted: job.attemptsStarted,
    stalledCount: job.stalledCount,
    timestamp: job.timestamp,
    delay: job.delay,
    progress: job.progress,
    processedOn: job.processedOn,
    token: job.token,
    queueName: job.queueName,
    queueQualifiedName: job.queueQualifiedName,
    parent: job.parent,
    parentKey: job.parentKey,
  };
}

/** The job calls a sandboxed processor makes, made on the real Job under its claim. */
const CALLS: Record<SandboxCall, (job: Job, args: any[]) => Promise<unknown>> = {
  updateProgress: (job, [progress]) => job.updateProgress(progress),
  log: (job, [line, keep]) => job.log(String(line), keep),
  updateData: (job, [data]) => job.updateData(data),
  clearLogs: (job, [keep]) => job.clearLogs(keep),
  moveToDelayed: (job, [timestamp, step]) => job.moveToDelayed(timestamp, step),
  moveToDelayedIn: (job, [delayMs, step]) => job.moveToDelayedIn(delayMs, step),
  moveToWaitingChildren: (job, [token, opts]) => job.moveToWaitingChildren(token, opts),
  getChildrenValues: (job) => job.getChildrenValues(),
  getIgnoredChildrenFailures: (job) => job.getIgnoredChildrenFailures(),
  getDependenciesCount: (job, [opts]) => job.getDependenciesCount(opts),
};
