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
 */
import type { Client } from './connection.js';
import { callFunction } from './library.js';

export interface FinishRequest {
  id: string;
  fence: string;
  outcome: 'completed' | 'failed';
  value: string;
  /** A failure's error stack, cut (stacktrace.ts): sent as the outcome 'failed:<stack>' (lua/finish.lua). */
  stack?: string;
  /** -1: do not retry; else ms from the server's now until the retry may run (lua/finish.lua). */
  retryDelay: number;
  fetchCount: number;
  /** The retention rule for this outcome (encodeRetention of removeOnComplete or removeOnFail). */
  keep: string;
  durationMs: number;
}

interface Pending {
  req: FinishRequest;
  resolve: (reply: unknown[]) => void;
  reject: (err: unknown) => void;
}

/** Jobs per glidemq_finishMany call; a larger batch is split into pipelined calls. */
const MAX_BATCH = 100;
/** Calls kept in flight at once (see above). */
const MAX_IN_FLIGHT = 2;

export class FinishBatcher {
  private pending: Pending[] = [];
  private scheduled = false;
  private inFlight = 0;

  constructor(
    private readonly client: () => Client,
    private readonly metaKey: string,
    private readonly consumer: string,
  ) {}

  /** Resolves to `[status, ...nextJobs]`, as a glidemq_finish call for this one job would. */
  finish(req: FinishRequest): Promise<unknown[]> {
    return new Promise((resolve, reject) => {
      this.pending.push({ req, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    this.scheduled = false;
    if (this.inFlight >= MAX_IN_FLIGHT || this.pending.length === 0) return;
    const all = this.pending;
    // nothing in flight: send half, keep the rest for when this call's reply arrives
    const take = this.inFlight === 0 && all.length > 1 ? Math.ceil(all.length / 2) : all.length;
    this.pending = all.slice(take);
    for (let i = 0; i < take; i += MAX_BATCH) void this.send(all.slice(i, Math.min(take, i + MAX_BATCH)));
  }

  private async send(batch: Pending[]): Promise<void> {
    this.inFlight++;
    let settled = false;
    // the reply is in: send what waits before running this batch's next jobs (see above)
    const done = () => {
      if (settled) return;
      settled = true;
      this.inFlight--;
      this.flush();
    };
    try {
      if (batch.length === 1) {
        const r = batch[0].req;
        const reply = (await callFunction(this.client(), 'glidemq_finish', this.metaKey, [
          r.id, r.fence, this.consumer, outcomeArg(r), r.value, r.retryDelay, r.fetchCount, r.keep, r.durationMs,
        ])) as unknown[];
        done();
        batch[0].resolve(reply);
        return;
      }
      let fetchCount = 0;
      for (const { req } of batch) fetchCount += req.fetchCount;
      const args: (string | number)[] = [this.consumer, batch.length, fetchCount];
      for (const { req: r } of batch) {
        args.push(r.id, r.fence, outcomeArg(r), r.value, r.retryDelay, r.keep, r.durationMs);
      }
      const reply = (await callFunction(this.client(), 'glidemq_finishMany', this.metaKey, args)) as unknown[];
      done();
      let next = batch.length;
      batch.forEach((p, i) => {
        const share = reply.slice(next, next + p.req.fetchCount);
        next += share.length;
        p.resolve([reply[i], ...share]);
      });
    } catch (err) {
      done();
      for (const p of batch) p.reject(err);
    }
  }
}

/** The outcome argument: a failure with a stack carries it ('failed:<stack>'); a completion is just 'completed'. */
function outcomeArg(r: FinishRequest): string {
  return r.stack === undefined || r.outcome !== 'failed' ? r.outcome : `failed:${r.stack}`;
}
