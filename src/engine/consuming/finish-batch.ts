/**
 * Stores a worker's job results in as few server calls as possible: the results that are ready in
 * the same turn of the event loop go to Valkey together (glidemq_finishMany), one alone goes as a
 * glidemq_finish. Each caller gets the reply glidemq_finish would have given it: its status and
 * its share of the next jobs. Nothing waits for a batch to fill: a flush runs as soon as the
 * current turn's callbacks are done.
 *
 * Calls are kept in flight so that the worker and the server work at the same time: while the
 * server runs one call (and claims its next jobs), the worker runs the jobs of another. With one
 * call only they take turns, each idle while the other works. The worker's slot ledger (a
 * FetchShaper) tells how many jobs the worker circulates (its slots and its prefetch); they are
 * split evenly over at least two calls, more when a call would carry over MAX_BATCH, and each call
 * asks for its share of next jobs whatever the results it carries asked (the results of one reply
 * ask for what they free), so that the calls stay alike in size: a call twice the size of the
 * other leaves the server idle while the worker runs the large one's jobs. Results wait when that
 * many calls are in flight. When many results are ready and nothing is in flight, half of them go
 * now and the rest as soon as the first reply arrives, before its jobs run
 * (both at once would not overlap: the server reads them together and answers both together);
 * when a reply arrives while others are in flight, only full calls go before its jobs run, the
 * rest with those jobs' results.
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
 * What sizes the finish calls (the worker's slot ledger, worker-prefetch.ts): the calls in flight
 * share what the worker keeps circulating, so that each carries about as many jobs as the others
 * and the worker and the server each work on one while the other works on another (see above).
 */
export interface FetchShaper {
  /** Jobs the worker keeps circulating: its slots and its prefetch. */
  circulating(): number;
  /**
   * Next jobs its slots still lack beyond those on their way, were the finishes not sent yet
   * (which ask for `pendingAsked` together, counted as on their way) to ask for none.
   */
  slotsShort(pendingAsked: number): number;
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

/** The last element of a finish reply that wrote a flow outbox record (lua/flow-keys.lua FLOW.RELAY_MARK). */
export const RELAY_MARK = '{relay}';

/** Jobs per glidemq_finishMany call, at most (a call's server time stays short for other clients). */
const MAX_BATCH = 100;
/** Calls kept in flight at once, at least (see above). */
const MIN_IN_FLIGHT = 2;

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
  private pending: FinishWaiter[] = [];
  private scheduled = false;
  private inFlight = 0;
  /** The last flush sent part of what was pending and kept the rest for its reply. */
  private heldBack = false;
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
    /**
     * Sizes the calls and the next jobs each asks for (see FetchShaper); without it, two calls of up
     * to MAX_BATCH in flight, each request asking for what it asked.
     */
    private readonly shaper?: FetchShaper,
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

  /**
   * How many calls may be in flight, and how many jobs each carries: the jobs the worker
   * circulates split evenly over as few calls as MAX_BATCH allows, and at least MIN_IN_FLIGHT.
   */
  private plan(): { calls: number; size: number } {
    const circulating = this.shaper?.circulating() ?? 0;
    if (circulating <= 0) return { calls: MIN_IN_FLIGHT, size: MAX_BATCH };
    const calls = Math.max(MIN_IN_FLIGHT, Math.ceil(circulating / MAX_BATCH));
    return { calls, size: Math.min(MAX_BATCH, Math.ceil(circulating / calls)) };
  }

  /**
   * Sends what is pending, in calls of plan().size while fewer than plan().calls are in flight.
   * `atReply`: a reply just came, before its next jobs run: only full calls go now (the rest joins
   * the results of those jobs at the end of this turn), or everything when nothing else is in flight
   * (the server would wait).
   */
  private flush(atReply = false): void {
    this.scheduled = false;
    const plan = this.plan();
    if (this.inFlight >= plan.calls) return;
    const all = this.pending;
    if (all.length === 0) {
      if (this.started.size > 0) void this.send([]);
      return;
    }
    // a batch's finishes go whole, in as few calls as MAX_BATCH allows
    const whole = this.wholes > 0;
    this.wholes = 0;
    const size = whole ? MAX_BATCH : plan.size;
    let take = all.length;
    // nothing in flight: send half, keep the rest for when the first reply arrives (then it goes
    // at once, before that reply's next jobs run)
    if (this.inFlight === 0 && all.length > 1 && !whole && !this.heldBack) take = Math.ceil(all.length / 2);
    else if (atReply && this.inFlight > 0 && !whole) take = all.length - (all.length % size);
    this.heldBack = take < all.length && this.inFlight === 0;
    const calls: FinishWaiter[][] = [];
    let sent = 0;
    while (sent < take && (whole || this.inFlight + calls.length < plan.calls)) {
      const call = all.slice(sent, Math.min(take, sent + size));
      sent += call.length;
      calls.push(call);
    }
    this.pending = sent === all.length ? [] : all.slice(sent);
    if (!whole && this.shaper) this.shareAsks(calls, all, size);
    for (const call of calls) void this.send(call);
    if (this.pending.length > 0 && atReply) this.schedule();
  }

  /**
   * The next jobs the pending finishes ask for, as one pool: each call asks for `size` of them (or
   * what the slots lack, if more), so that the calls in flight carry about as many jobs each; the
   * finishes still pending keep the rest, or else the last call asks for it (its reply's jobs then
   * go back in more calls). (Which request a claim comes with does not matter: each is dispatched
   * alike.)
   */
  private shareAsks(calls: FinishWaiter[][], all: FinishWaiter[], size: number): void {
    let pool = 0;
    let ahead = false;
    for (const p of all) {
      pool += p.req.fetchCount;
      p.req.fetchCount = 0;
      if (p.req.ahead) ahead = true;
    }
    const ask = (req: FinishRequest, count: number) => {
      req.fetchCount = count;
      if (count > 0 && ahead) req.ahead = true;
      pool -= count;
    };
    for (let i = 0; i < calls.length; i++) {
      const last = i === calls.length - 1 && this.pending.length === 0;
      ask(calls[i][0].req, last ? pool : Math.min(pool, Math.max(size, this.shaper!.slotsShort(pool))));
    }
    if (pool > 0) ask(this.pending[0].req, pool);
  }

  /** The reports not sent yet, as glidemq_finishMany's `started` argument ('' for none). */
  private takeReports(): string {
    if (this.started.size === 0) return '';
    const words: string[] = [];
    for (const [id, fence] of this.started) words.push(id, fence);
    this.started.clear();
    return words.join(' ');
  }

  private async send(batch: FinishWaiter[]): Promise<void> {
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
      this.flush(true);
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
