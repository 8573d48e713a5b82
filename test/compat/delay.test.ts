/**
 * job.delay as BullMQ keeps it (issue 27): a property every job has, live rather than the add
 * option. A delayed add, a backoff retry, changeDelay and moveToDelayed store the delay they
 * schedule; promotion (by time or by promote) stores 0. A handle shows what it read or did last;
 * getJob shows the stored value.
 */
import { expect } from 'chai';
import { DelayedError, Job, type Queue } from '../../src/index.js';
import { HOUR, useCompat } from '../helpers/compat.js';
import { waitFor } from '../helpers/valkey.js';

describe('BullMQ compatibility: job.delay', function () {
  this.timeout(30000);
  const { queue, worker } = useCompat('delay');
  const stored = async (q: Queue, id: string) => (await q.getJob(id))!.delay;

  it('a job has delay 0 unless it was delayed; add and getJob show the delay it was added with', async () => {
    const q = queue();
    const plain = await q.add('plain', {});
    const later = await q.add('later', {}, { delay: HOUR });
    expect(plain.delay).to.equal(0);
    expect(later.delay).to.equal(HOUR);
    expect(await stored(q, plain.id)).to.equal(0);
    expect(await stored(q, later.id)).to.equal(HOUR);
    expect(new Job().delay).to.equal(0);
    expect(later.toJSON().delay).to.equal(HOUR);
  });

  it('promotion stores 0: job.promote() and promotion when due, which the processor then sees', async () => {
    const q = queue();
    const later = await q.add('later', {}, { delay: HOUR });
    const handle = (await Job.fromId(q, later.id))!;
    await handle.promote();
    expect(handle.delay).to.equal(0);
    expect(await stored(q, later.id)).to.equal(0);
    const soon = await q.add('soon', {}, { delay: 100 });
    expect(await stored(q, soon.id)).to.equal(100);
    const seen = new Map<string, number>();
    worker(q, async (job) => {
      seen.set(job.id, job.delay);
    });
    await waitFor(() => seen.size === 2, 'both jobs to run');
    expect(seen.get(soon.id)).to.equal(0);
    expect(seen.get(later.id)).to.equal(0);
    expect(await stored(q, soon.id)).to.equal(0);
  });

  it('a backoff retry stores its delay: the failed job and getJob show it until the retry is promoted', async () => {
    const q = queue();
    const runs: number[] = [];
    const w = worker(q, async (job) => {
      runs.push(job.delay);
      if (runs.length === 1) throw new Error('the first attempt fails');
      return 'ok';
    });
    const failed: number[] = [];
    w.on('failed', (job: Job) => failed.push(job.delay));
    const job = await q.add('retry', {}, { attempts: 2, backoff: { type: 'fixed', delay: 1500 } });
    await waitFor(() => failed.length === 1, 'the first attempt to fail');
    expect(failed).to.deep.equal([1500]);
    expect(await stored(q, job.id)).to.equal(1500);
    await waitFor(() => runs.length === 2, 'the retry to run');
    expect(runs).to.deep.equal([0, 0]);
  });

  it('changeDelay stores the new delay, on the handle and in the job', async () => {
    const q = queue();
    const later = await q.add('later', {}, { delay: HOUR });
    await later.changeDelay(2 * HOUR);
    expect(later.delay).to.equal(2 * HOUR);
    expect(await stored(q, later.id)).to.equal(2 * HOUR);
  });

  it('moveToDelayed stores the delay until the run time it parks the job for', async () => {
    const q = queue();
    let handleDelay: number | undefined;
    worker(q, async (job, token) => {
      await job.moveToDelayed(Date.now() + HOUR, token);
      handleDelay = job.delay;
      throw new DelayedError();
    });
    const job = await q.add('parked', {});
    await waitFor(() => handleDelay !== undefined, 'the job to be parked');
    expect(handleDelay).to.be.within(HOUR - 5000, HOUR);
    // stored by the server from its own clock: within the run time's distance from its now
    expect(await stored(q, job.id)).to.be.within(HOUR - 5000, HOUR + 5000);
  });
});
