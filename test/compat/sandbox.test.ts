/**
 * BullMQ's sandboxed processors (guide: workers/sandboxed-processors): a processor file given to the
 * Worker as a path or a file URL, run in child processes or, with useWorkerThreads, worker threads.
 */
import { expect } from 'chai';
import { pathToFileURL } from 'node:url';
import type { Job } from '../../src/index.js';
import { useCompat } from '../helpers/compat.js';
import { processorPath } from '../helpers/worker-spawn.js';
import { waitFor } from '../helpers/valkey.js';

describe('BullMQ compat: sandboxed processors', function () {
  this.timeout(30_000);
  const { queue, worker } = useCompat('compat-sandbox');
  const FILE = processorPath('sandbox-bullmq.cjs');

  for (const useWorkerThreads of [false, true]) {
    const kind = useWorkerThreads ? 'worker threads' : 'child processes';

    it(`new Worker(name, processorFile) runs module.exports in ${kind}: progress, log and the result`, async () => {
      const q = queue();
      const w = worker(q, FILE, { useWorkerThreads });
      const progress: unknown[] = [];
      w.on('progress', (_job: Job, p: unknown) => progress.push(p));
      const completed = new Promise<[Job, unknown]>((resolve) => w.on('completed', (job: Job, result: unknown) => resolve([job, result])));
      const job = await q.add('double', { n: 21 });
      const [done, result] = await completed;
      expect(done.id).to.equal(job.id);
      expect(result).to.deep.equal({ done: 42 });
      expect(progress).to.deep.equal([50]);
      expect((await q.getJob(job.id!))?.progress).to.equal(50);
      expect((await q.getJobLogs(job.id!)).logs).to.deep.equal(['working on double']);
    });

    it(`a processor URL, in ${kind}; a sandboxed throw is retried by the job's attempts`, async () => {
      const q = queue();
      const w = worker(q, pathToFileURL(FILE), { useWorkerThreads });
      const failed: string[] = [];
      w.on('failed', (_job: Job | undefined, err: Error) => failed.push(err.message));
      const job = await q.add('x', { fail: true, n: 1 }, { attempts: 2 });
      await waitFor(async () => (await q.getJob(job.id!))?.state === 'failed', 'the job fails for good');
      expect(failed).to.deep.equal(['attempt 1 failed', 'attempt 2 failed']);
    });

    it(`DelayedError after moveToDelayed(ts, token) parks the job; UnrecoverableError ends it, in ${kind}`, async () => {
      const q = queue();
      worker(q, processorPath('sandbox-bullmq-errors.mjs'), { useWorkerThreads });
      const parked = await q.add('park', { park: true });
      const doomed = await q.add('doomed', {}, { attempts: 3 });
      await waitFor(async () => (await q.getJob(parked.id!))?.state === 'delayed', 'the job parks');
      await waitFor(async () => (await q.getJob(doomed.id!))?.state === 'failed', 'the job fails');
      const d = (await q.getJob(doomed.id!))!;
      expect(d.failedReason).to.equal('never again');
      expect(d.attemptsMade).to.equal(1);
    });
  }
});
