/**
 * Stores a worker's job results in as few server calls as possible: the results that are ready in
 * the same turn of the event loop go to Valkey together (glidemq_finishMany), one alone goes as a
 * glidemq_finish. Each caller gets the reply glidemq_finish would have given it: its status and
 * its share of the next jobs. Nothing waits for a batch to fill: a flush runs as soon as the
 * current turn's callbacks are done.
 */
import type { Client } from './connection.js';
import { callFunction } from './library.js';

export interface FinishRequest {
  id: string;
  fence: string;
  outcome: 'completed' | 'failed';
  value: string;
  retryDelay: number;
  fetchCount: number;
  keepCompleted: string;
  keepFailed: string;
  durationMs: number;
}

interface Pending {
  req: FinishRequest;
  resolve: (reply: unknown[]) => void;
  reject: (err: unknown) => void;
}

/** Jobs per glidemq_finishMany call; a larger batch is split into pipelined calls. */
const MAX_BATCH = 100;

export class FinishBatcher {
  private pending: Pending[] = [];
  private scheduled = false;

  constructor(
    private readonly client: () => Client,
    private readonly metaKey: string,
    private readonly consumer: string,
    private readonly now: () => number,
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
    const all = this.pending;
    this.pending = [];
    for (let i = 0; i < all.length; i += MAX_BATCH) void this.send(all.slice(i, i + MAX_BATCH));
  }

  private async send(batch: Pending[]): Promise<void> {
    const now = this.now();
    try {
      if (batch.length === 1) {
        const r = batch[0].req;
        const reply = (await callFunction(this.client(), 'glidemq_finish', this.metaKey, [
          r.id, r.fence, this.consumer, now, r.outcome, r.value, r.retryDelay, r.fetchCount, r.keepCompleted, r.keepFailed, r.durationMs,
        ])) as unknown[];
        batch[0].resolve(reply);
        return;
      }
      const args: (string | number)[] = [this.consumer, now, batch.length];
      for (const { req: r } of batch) {
        args.push(r.id, r.fence, r.outcome, r.value, r.retryDelay, r.fetchCount, r.keepCompleted, r.keepFailed, r.durationMs);
      }
      const reply = (await callFunction(this.client(), 'glidemq_finishMany', this.metaKey, args)) as unknown[];
      let next = batch.length;
      batch.forEach((p, i) => {
        const share = reply.slice(next, next + p.req.fetchCount);
        next += share.length;
        p.resolve([reply[i], ...share]);
      });
    } catch (err) {
      for (const p of batch) p.reject(err);
    }
  }
}
