/**
 * The batch row (issue 30): glidemq's batch worker (the `batch` option, size 50, a no-op batch
 * processor) against glidemq's own c=10 worker on the same backlog in the same round. The target
 * is on glidemq against itself, so the row's "BullMQ" column holds glidemq's c=10 rate.
 */
import type { Redis } from 'ioredis';
import { Worker } from '../../src/index.js';
import { preload, processBacklog, type Sizes } from './figures.js';
import { glidemq, type System } from './systems.js';

/** The batch size of the row. */
export const BATCH_SIZE = 50;

/** glidemq with a batch worker of `size` in place of its per-job worker (one batch at a time). */
function batchSide(size: number): System {
  return {
    ...glidemq,
    async worker(url, queue, _concurrency, onCompleted) {
      const w = new Worker(queue, async (jobs) => jobs.map(() => null), { connection: url, batch: { size }, autorun: false });
      w.on('completed', (job) => onCompleted(job.data));
      w.on('error', (err) => console.error(`glidemq batch worker error: ${String(err)}`));
      w.run().catch(() => undefined); // settles at close
      await w.waitUntilReady();
      return { close: () => w.close() };
    },
  };
}

/** Jobs/s of the batch worker and of glidemq's c=10 worker, each over a fresh backlog. */
export async function batchAgainstC10(url: string, admin: Redis, s: Sizes): Promise<{ batch: number; c10: number }> {
  await admin.flushall('SYNC');
  await preload(glidemq, url, s.backlog);
  const c10 = (await processBacklog(glidemq, url, 10, s)).rate;
  await admin.flushall('SYNC');
  await preload(glidemq, url, s.backlog);
  const batch = (await processBacklog(batchSide(BATCH_SIZE), url, 1, s)).rate;
  return { batch, c10 };
}
