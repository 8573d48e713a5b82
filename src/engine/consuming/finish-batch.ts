/**
 * Stores a worker's job results in as few server calls as possible: the results that are ready in
 * the same turn of the event loop go to Valkey together (glidemq_finishMany), one alone goes as a
 * glidemq_finish. Each caller gets the reply glidemq_finish would have given it: its status and
 * its share of the next jobs. Nothing waits for a batch to fill: a flush runs as soon as the
 * current turn's callbacks are done.
 *
 * Two batches are kept in flight so that the worker and the server work at the same time: while
 * the server runs one batch (and fetches its next jobs), the worker runs the jobs of the other.
 * With one batch only they take turns, each idle while the other works. So when many results are
 * ready and nothing is in flight, half of them go now and the other half as soon as that call's
 * reply arrives (before its jobs run); with one batch in flight everything ready goes at once;
 * with two, results wait for the next reply. (Both halves at once would not overlap: the server
 * reads them together and answers both together.)
 *
 * Prefetched claims come marked not started (`ahead`, lua/activate.lua): the worker reports each
 * one its processors took (report), and the report rides with the next results sent; a report
 * whose job's own result is sent first is dropped (the finish clears the mark). A report is held
 * back REPORT_WAIT_MS first, so a short job's is dropped; only when no result is waiting then
 * does a report go alone, in a glidemq_finishMany of no jobs. The batcher also
 * keeps the round trip of its calls (rttMs), which sizes the worker's prefetch.
 */
import type { Client } from '../connecting/connection.js';
import { fromServerError, GlideMQError } from '../shared/errors.js';
import { confirmedCall, type Confirm } from '../producing/confirm.js';

/**
 * The server refused to store this one request (a coded ERR_INVALID or ERR_WRONG_TYPE: a bad
 * argument of its own, or its job key holding another type) and left its job as it was. In a
 * batch the other requests were stored as usual (lua/finish.lua). `next` holds the request's share
 * of the next jobs the call claimed: the caller runs them.
 */
export class FinishRefusedError extends Error {
  constructor(
    readonly refusal: GlideMQError,
    readonly next: unknown[],
  ) {
    super(refusal.message);
    this.name = 'FinishRefusedError';
  }
}

/** A coded refusal of one finish, as the server answers it. */
function asRefusal(err: unknown): GlideMQError | undefined {
  const e = fromServerError(err);
  return e instanceof GlideMQError && (e.code === 'ERR_INVALID' || e.code === 'ERR_WRONG_TYPE') ? e : undefined;
}

export interface FinishRequest {
  id: string;
  fence: string;
  outcome: 'completed' | 'failed';
  value: string;
  /**
   * A failure's error stack, cut (stacktrace.ts): sent as the outcome 'failed:<stack>'
   * (lua/finish.lua).
   */
  stack?: string;
  /** -1: do not retry; else ms from the server's now until the retry may run (lua/finish.lua). */
  retryDelay: number;
  fetchCount: number;
  /** The retention rule for this outcome (encodeRetention of removeOnComplete or removeOnFail). */
  keep: string;
  durationMs: number;
  /** The next jobs are a prefetch: marked not started until reported (see above). */
  ahead: boolean;
}

/**
 * Who waits for a finish: told once, by resolve (the reply glidemq_finish would give: its status
 * and its share of the next jobs) or reject (why it failed). Neither may throw.
 */
export interface FinishWaiter {
  readonly req: FinishRequest;
  resolve(reply: unknown[]): void;
  reject(err: unknown): void;
}

type Pending = FinishWaiter;

/** The last element of a finish reply that wrote a flow outbox record (lua/flow-keys.lua FLOW.RELAY_MARK). */
export const RELAY_MARK = '{relay}';

/** Jobs per glidemq_finishMany call; a larger batch is split into pipelined calls. */
const MAX_BATCH = 100;
/** Calls kept in flight at once (see above). */
const MAX_IN_FLIGHT = 2;

/**
 * How long a start report is held back (ms; between this and twice this): a job that ends within
 * it has its report dropped (its finish clears the mark), so the server does not hear of the start
 * of a job whose end follows. Sent at once, a report cost the server work for every job that
 * outlived its turn (a sandboxed job, any job that awaits), and often a call of its own. The mark
 * only decides whether a worker that dies meanwhile has the claim given back with a stall counted
 * or, once, without (lua/activate.lua).
 */
const REPORT_WAIT_MS = 20;

/** Weight of the newest round trip in rttMs. */
const RTT_WEIGHT = 0.1;

export class FinishBatcher {
  private pending: Pending[] = [];
  private scheduled = false;
  private inFlight = 0;
  /**
   * Marked claims whose start is not reported yet, job id to fence: `fresh` ones are held back
   * (REPORT_WAIT_MS), `started` ones go with the next call.
   */
  private started = new Map<string, string>();
  private fresh = new Map<string, string>();
  /** A finish call's round trip, ms (an average weighted to the recent; 0 until one returned). */
  rttMs = 0;
  /**
   * A batch's finishes are pending (finishAll): the next flush sends everything, not half, so a
   * batch costs one call to finish.
   */
  private wholes = 0;
  /** Moves the fresh reports to `started` every REPORT_WAIT_MS while there are any. */
  private reportTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly client: () => Client,
    private readonly metaKey: string,
    private readonly consumer: string,
    /**
     * The worker's lockDuration and maxStalledCount: the terms of the claims its finishes make
     * (lua/activate.lua).
     */
    private readonly terms: [number, number],
    /** Told when a reply reports a flow outbox record to relay (lua/finish.lua '{relay}'). */
    private readonly onRelay?: () => void,
    /** Each finish call confirmed (producing/confirm.ts: one WAITAOF / WAIT per call, not per job), or none. */
    private readonly confirm?: Confirm,
  ) {}

  /** One finish call, confirmed when the worker asks (the batch's jobs share one confirmation). */
  private finishCall(fn: string, args: (string | number)[], jobs: number): Promise<unknown> {
    return confirmedCall(this.client(), fn, this.metaKey, args, this.confirm, () => ({ what: `finish of ${jobs} job${jobs === 1 ? '' : 's'} by worker ${this.consumer}` }));
  }

  /** Takes the '{relay}' mark off the end of a finish reply (lua/flow-keys.lua) and tells onRelay. */
  private takeRelayMark(reply: unknown[]): unknown[] {
    if (reply.length > 0 && reply[reply.length - 1] === RELAY_MARK) {
      reply.pop();
      this.onRelay?.();
    }
    return reply;
  }

  /** Resolves to `[status, ...nextJobs]`, as a glidemq_finish call for this one job would. */
  finish(req: FinishRequest): Promise<unknown[]> {
    this.started.delete(req.id);
    this.fresh.delete(req.id);
    return new Promise((resolve, reject) => {
      this.pending.push({ req, resolve, reject });
      this.schedule();
    });
  }

  /**
   * As finish(), the reply going to `waiter` itself (a worker's run: worker-finisher.ts RunFinish),
   * so that a job's finish makes no promise and no closure.
   */
  finishTo(waiter: FinishWaiter): void {
    const id = waiter.req.id;
    this.started.delete(id);
    this.fresh.delete(id);
    this.pending.push(waiter);
    this.schedule();
  }

  /**
   * The finishes of a batch's jobs (batch-runner.ts), sent together with whatever else is ready:
   * one promise for them all, resolving to each request's reply as finish() would give it
   * (`[status, ...nextJobs]`), or the error that would have rejected it, in order. A promise and a
   * callback per job less than finish() for each: a batch's client work is per batch where it can be.
   */
  finishAll(reqs: FinishRequest[]): Promise<(unknown[] | Error)[]> {
    return new Promise((resolve) => {
      const out = new Array<unknown[] | Error>(reqs.length);
      let left = reqs.length;
      if (left === 0) return resolve(out);
      const settleOne = (i: number, r: unknown[] | Error) => {
        out[i] = r;
        if (--left === 0) resolve(out);
      };
      for (let i = 0; i < reqs.length; i++) {
        const req = reqs[i];
        this.started.delete(req.id);
        this.fresh.delete(req.id);
        this.pending.push({ req, resolve: (reply) => settleOne(i, reply), reject: (err) => settleOne(i, err instanceof Error ? err : new Error(String(err))) });
      }
      this.wholes++;
      this.schedule();
    });
  }

  /**
   * A processor took the marked claim `fence` of job `id`: unless its finish comes first, the
   * server hears it with the first call made after REPORT_WAIT_MS, or in a call of its own.
   */
  report(id: string, fence: string): void {
    this.fresh.set(id, fence);
    this.reportTimer ??= setTimeout(this.reportsDue, REPORT_WAIT_MS);
  }

  private readonly reportsDue = (): void => {
    this.reportTimer = undefined;
    if (this.fresh.size === 0) return;
    for (const [id, fence] of this.fresh) this.started.set(id, fence);
    this.fresh.clear();
    this.schedule();
  };

  private schedule(): void {
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  private flush(): void {
    this.scheduled = false;
    if (this.inFlight >= MAX_IN_FLIGHT) return;
    const all = this.pending;
    if (all.length === 0) {
      if (this.started.size > 0) void this.send([]);
      return;
    }
    // nothing in flight: send half, keep the rest for when this call's reply arrives (a batch's
    // finishes go whole)
    const take = this.inFlight === 0 && all.length > 1 && this.wholes === 0 ? Math.ceil(all.length / 2) : all.length;
    this.wholes = 0;
    this.pending = all.slice(take);
    for (let i = 0; i < take; i += MAX_BATCH) void this.send(all.slice(i, Math.min(take, i + MAX_BATCH)));
  }

  /** The reports not sent yet, as glidemq_finishMany's `started` argument ('' for none). */
  private takeReports(): string {
    if (this.started.size === 0) return '';
    const words: string[] = [];
    for (const [id, fence] of this.started) words.push(id, fence);
    this.started.clear();
    return words.join(' ');
  }

  private async send(batch: Pending[]): Promise<void> {
    this.inFlight++;
    const sentAt = performance.now();
    let settled = false;
    // the reply is in: send what waits before running this batch's next jobs (see above)
    const done = () => {
      if (settled) return;
      settled = true;
      this.inFlight--;
      const rtt = performance.now() - sentAt;
      this.rttMs = this.rttMs === 0 ? rtt : this.rttMs + RTT_WEIGHT * (rtt - this.rttMs);
      this.flush();
    };
    try {
      const reports = this.takeReports();
      if (batch.length === 1 && reports === '') {
        const r = batch[0].req;
        let reply: unknown[];
        try {
          reply = this.takeRelayMark((await this.finishCall('glidemq_finish', [
            r.id, r.fence, this.consumer, outcomeArg(r), r.value, r.retryDelay, r.fetchCount, r.keep, r.durationMs, r.ahead ? '1' : '0',
            ...this.terms,
          ], 1)) as unknown[]);
        } catch (err) {
          // a refusal of the one job the call named is that job's alone
          const refusal = asRefusal(err);
          throw refusal ? new FinishRefusedError(refusal, []) : err;
        }
        done();
        batch[0].resolve(reply);
        return;
      }
      let fetchCount = 0;
      let ahead = false;
      for (const { req } of batch) {
        fetchCount += req.fetchCount;
        if (req.ahead) ahead = true;
      }
      const args: (string | number)[] = [this.consumer, batch.length, fetchCount, ahead ? '1' : '0', reports, ...this.terms];
      for (const { req: r } of batch) {
        args.push(r.id, r.fence, outcomeArg(r), r.value, r.retryDelay, r.keep, r.durationMs);
      }
      const reply = this.takeRelayMark((await this.finishCall('glidemq_finishMany', args, batch.length)) as unknown[]);
      done();
      let next = batch.length;
      for (let i = 0; i < batch.length; i++) {
        const p = batch[i];
        const end = Math.min(reply.length, next + p.req.fetchCount);
        const status = reply[i];
        if (status instanceof Error) {
          const share = reply.slice(next, end);
          next = end;
          // a job the server refused alone: its slot holds the coded error, the others were stored
          const refusal = asRefusal(status);
          if (refusal) p.reject(new FinishRefusedError(refusal, share));
          else p.reject(fromServerError(status));
          continue;
        }
        // [status, ...its share of the next jobs], built in place (no slice and spread per job)
        const own: unknown[] = [status];
        while (next < end) own.push(reply[next++]);
        p.resolve(own);
      }
    } catch (err) {
      done();
      for (const p of batch) p.reject(err);
    }
  }
}

/**
 * The outcome argument: a failure with a stack carries it ('failed:<stack>'); a completion is just
 * 'completed'.
 */
function outcomeArg(r: FinishRequest): string {
  return r.stack === undefined || r.outcome !== 'failed' ? r.outcome : `failed:${r.stack}`;
}
