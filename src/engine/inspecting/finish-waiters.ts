/**
 * job.waitUntilFinished through a QueueEvents: the waits in progress, settled by the events the
 * reader delivers (completed, failed, removed) or by the job's stored state, and the catch-ups
 * that let a wait for a job that is gone end only once the reader has passed every event that
 * could still name its outcome. Apart from queue-events.ts because it is a machine of its own:
 * it reads the job and the stream's tail on the command connection, and learns from the
 * QueueEvents only through WaitSource where the reader is.
 */
import type { Client } from '../connecting/connection.js';
import { GlideMQError, JobNotFoundError, invalid } from '../shared/errors.js';
import type { QueueKeys } from '../shared/keys.js';
import { compareIds } from './event-stream.js';
import { parse } from './event-translation.js';

/** What the waits need to know of the QueueEvents that reads for them. */
export interface WaitSource {
  /** The queue's name, for the errors. */
  readonly name: string;
  readonly keys: QueueKeys;
  /** The command connection (read each time: it becomes a Cluster client once the server is one). */
  client(): Client;
  /** The id of the last event the reader delivered (or its start id). */
  position(): string;
  /** The number of the latest read to start. */
  reads(): number;
  /** Resolves once the reader reads (a new promise after a start that failed). */
  started(): Promise<void>;
  /** close() was called. */
  closing(): boolean;
}

/** A job.waitUntilFinished in progress. */
interface Waiter {
  jobId: string;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
  timer?: NodeJS.Timeout;
  done: boolean;
}

/** Something to run once the reader has delivered every event up to `tail`. */
interface CatchUp {
  tail: string;
  /** The number of the read that was the latest to start when this was registered. */
  read: number;
  run: () => void;
}

export class FinishWaiters {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private catchUps: CatchUp[] = [];

  constructor(private readonly source: WaitSource) {}

  /**
   * What job.waitUntilFinished(this, ttl) returns: the job's return value once it completed, or a
   * rejection with an Error whose message is its failedReason; a job that already finished answers
   * from its stored state. `ttl` (ms, optional) bounds the wait. A job that does not exist (or was
   * removed before it finished) rejects with a JobNotFoundError; close() rejects what still waits.
   */
  untilFinished(jobId: string, ttl?: number): Promise<unknown> {
    if (ttl !== undefined && ttl !== 0 && !(Number.isFinite(ttl) && ttl > 0)) {
      return Promise.reject(invalid(`waitUntilFinished: ttl must be a number of ms > 0, got ${String(ttl)}`));
    }
    if (this.source.closing()) return Promise.reject(closedError(this.source.name, jobId));
    return new Promise((resolve, reject) => {
      const w: Waiter = { jobId, resolve, reject, done: false };
      let set = this.waiters.get(jobId);
      if (!set) this.waiters.set(jobId, (set = new Set()));
      set.add(w);
      if (ttl) {
        w.timer = setTimeout(() => {
          this.settle(w, undefined, new GlideMQError('ERR_TIMEOUT', `job ${jobId} did not finish within ${ttl} ms (waitUntilFinished ttl)`));
        }, ttl);
      }
      // registered before the stored state is read, so an outcome is either stored by then or its
      // event comes after; a start that failed is waited out until the next run() starts
      const afterStart = (): void => {
        this.source.started().then(() => this.check(w), () => {
          if (!w.done && !this.source.closing()) afterStart();
        });
      };
      afterStart();
    });
  }

  /** A stream entry that finishes (or removes) a job some waiter waits for. */
  settleWaiters(f: Record<string, string>): void {
    if (this.waiters.size === 0 || !f.jobId) return;
    const set = this.waiters.get(f.jobId);
    if (!set) return;
    for (const w of [...set]) {
      if (f.event === 'completed') {
        if (f.returnvalue !== undefined) this.settle(w, parse(f.returnvalue));
        else void this.readReturnValue(w);
      } else if (f.event === 'failed') {
        this.settle(w, undefined, new Error(f.reason ?? f.failedReason ?? 'failed'));
      } else if (f.event === 'removed') {
        this.settle(w, undefined, missingError(w.jobId, 'was removed before it finished'));
      }
    }
  }

  /** Runs what waited for the reader to pass its tail; `timedOut`: the read of that number found nothing new. */
  caughtUp(timedOut: number | undefined): void {
    if (this.catchUps.length === 0) return;
    const due: CatchUp[] = [];
    const position = this.source.position();
    this.catchUps = this.catchUps.filter((c) => {
      const ok = (timedOut !== undefined && c.read < timedOut) || compareIds(position, c.tail) >= 0;
      if (ok) due.push(c);
      return !ok;
    });
    for (const c of due) c.run();
  }

  /** Every waiter re-reads its job's stored state (after a reconnect or a lapse of the presence). */
  recheckAll(): void {
    for (const set of this.waiters.values()) for (const w of set) void this.check(w);
  }

  /** close(): rejects every wait still in progress, and forgets the catch-ups. */
  closeAll(): void {
    for (const set of [...this.waiters.values()]) for (const w of [...set]) this.settle(w, undefined, closedError(this.source.name, w.jobId));
    this.catchUps = [];
  }

  private settle(w: Waiter, value: unknown, err?: unknown): void {
    if (w.done) return;
    w.done = true;
    clearTimeout(w.timer);
    const set = this.waiters.get(w.jobId);
    set?.delete(w);
    if (set && set.size === 0) this.waiters.delete(w.jobId);
    if (err !== undefined) w.reject(err);
    else w.resolve(value);
  }

  /**
   * Reads the job's stored outcome, then the newest event id, in one pipeline: a finished job
   * settles the wait; a missing one does once the reader has delivered every event up to that id
   * (the outcome of a job removed on completion was written before the hash was gone, so before
   * that id). No MULTI: the order is enough, and the documented ACL rules allow no MULTI/EXEC.
   */
  private async check(w: Waiter): Promise<void> {
    if (w.done) return;
    const { keys } = this.source;
    let res: [Error | null, unknown][] | null;
    try {
      res = await this.source
        .client()
        .pipeline()
        .hmget(keys.job(w.jobId), 'state', 'returnvalue', 'failedReason')
        .xrevrange(keys.events, '+', '-', 'COUNT', 1)
        .exec();
    } catch {
      return; // reconnecting: every waiter looks again once the connection is back
    }
    if (!res || w.done) return;
    const [[jobErr, fields], [, last]] = res as [[Error | null, (string | null)[]], [Error | null, [string, string[]][] | null]];
    if (jobErr) return this.settle(w, undefined, jobErr);
    const [state, returnvalue, failedReason] = fields;
    if (state === 'completed') return this.settle(w, returnvalue === null ? null : parse(returnvalue));
    if (state === 'failed') return this.settle(w, undefined, new Error(failedReason ?? 'failed'));
    if (state !== null) return; // not finished: its event will come
    const tail = last?.[0]?.[0] ?? '0-0';
    this.afterCaughtUp(tail, () => this.settle(w, undefined, missingError(w.jobId)));
  }

  private afterCaughtUp(tail: string, run: () => void): void {
    if (compareIds(this.source.position(), tail) >= 0) return run();
    this.catchUps.push({ tail, read: this.source.reads(), run });
  }

  /** A `completed` written without its value (no QueueEvents listened then): the stored one. */
  private async readReturnValue(w: Waiter): Promise<void> {
    try {
      const v = await this.source.client().hget(this.source.keys.job(w.jobId), 'returnvalue');
      this.settle(w, v === null ? null : parse(v));
    } catch {
      /* reconnecting: looked at again then */
    }
  }
}

function missingError(jobId: string, what = 'does not exist (removed, or removed on completion before its outcome could be read)'): JobNotFoundError {
  return new JobNotFoundError('ERR_JOB_NOT_FOUND', `job ${jobId} ${what}: waitUntilFinished cannot tell its outcome`);
}

function closedError(queue: string, jobId: string): GlideMQError {
  return new GlideMQError('ERR_CLOSED', `the QueueEvents of queue ${queue} was closed while job ${jobId} had not finished (waitUntilFinished)`);
}
