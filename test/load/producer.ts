/**
 * One producer of the load run: adds the job mix in bulks at a target rate, and holds back while
 * the queue's backlog is above a high-water mark (as a well-behaved producer would), so the run
 * measures retention, not a queue that grows because producers outrun workers.
 */
import type { Queue } from '../../src/engine/queue/queue.js';
import { mixJob, designedToFail, type RetentionRule } from './job-mix.js';

export interface ProducerSettings {
  /** Names this producer's dedup ids and data. */
  label: string;
  ratePerSec: number;
  batch: number;
  /** Waiting + prioritized + LIFO + delayed jobs above which the producer waits. */
  highWater: number;
  retention: RetentionRule;
}

export interface AddedBatch {
  ids: string[];
  /** The ids of this batch that are designed to fail. */
  fail: string[];
  /** Adds that returned an existing job instead of a new one (must stay 0: every dedup id is unique). */
  absorbed: number;
}

async function backlog(queue: Queue): Promise<number> {
  const k = queue.keys;
  const r = (await queue.client.multi().xlen(k.stream).zcard(k.prioritized).llen(k.lifo).zcard(k.scheduled).exec()) ?? [];
  return r.reduce((sum, [err, n]) => sum + (err ? 0 : Number(n)), 0);
}

const tick = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Adds until `stop()` is true; calls `onBatch` after each bulk. Returns the number of jobs added. */
export async function produce(queue: Queue, s: ProducerSettings, stop: () => boolean, onBatch: (b: AddedBatch) => void): Promise<number> {
  await queue.waitUntilReady();
  const started = Date.now();
  let i = 0;
  while (!stop()) {
    // pacing to a rate: the next bulk is due when the rate allows it
    const due = started + ((i / s.ratePerSec) * 1000);
    if (due > Date.now()) await tick(due - Date.now());
    while (!stop() && (await backlog(queue)) > s.highWater) await tick(20);
    if (stop()) break;
    const seqs = Array.from({ length: s.batch }, (_, n) => i + n);
    const jobs = await queue.addBulk(seqs.map((n) => mixJob(s.label, n, s.retention)));
    const batch: AddedBatch = { ids: [], fail: [], absorbed: 0 };
    jobs.forEach((job, n) => {
      if (!job.created) {
        batch.absorbed++;
        return;
      }
      batch.ids.push(job.id);
      if (designedToFail(seqs[n])) batch.fail.push(job.id);
    });
    onBatch(batch);
    i += s.batch;
  }
  return i;
}
