/**
 * Job states and counts as a BullMQ application asks for them (issue 18): queue.getJobState,
 * job.getState and isX, getJobCounts(...types), getJobCountByTypes, count(), the getXCount and
 * getX(start, end) calls, and getJobs(types, start, end, asc) with BullMQ's names and order.
 * Where glidemq answers differently on purpose, the test says so: a paused queue's waiting jobs
 * count under `paused` only (BullMQ 6.7 keeps counting them under `wait`), an unknown type is
 * refused instead of counted as 0. (The 'waiting-children' state of flows: test/compat/flows.test.ts.)
 */
import { expect } from 'chai';
import { InvalidArgumentError, Job, type Queue } from '../../src/index.js';
import { HOUR, gate, rejection, useCompat } from '../helpers/compat.js';
import { waitFor } from '../helpers/valkey.js';

const names = (jobs: Job[]) => jobs.map((j) => j.name);

describe('BullMQ compatibility: job states and counts', function () {
  this.timeout(30000);
  const { queue, worker, serverNow } = useCompat('state', { promotionInterval: 100 });
  /**
   * Jobs named `done` completed and `bad` failed, one at a time (concurrency 1), so each finishes
   * after the one before: their ids (single digits) also order any two that finished in the same ms.
   */
  const finish = async (q: Queue, done: string[], bad: string[]) => {
    const w = worker(q, async (job) => {
      if (bad.includes(job.name)) throw new Error(`${job.name} failed`);
      return job.name;
    });
    for (const name of [...done, ...bad]) {
      const job = await q.add(name, {});
      await waitFor(async () => ['completed', 'failed'].includes(await q.getJobState(job.id)), `job ${name} finished`);
    }
    await w.close();
  };

  it('getJobState and job.getState/isX: waiting, prioritized, delayed, unknown (from add, getJob and Job.fromId)', async () => {
    const q = queue();
    const plain = await q.add('plain', {});
    const prio = await q.add('prio', {}, { priority: 3 });
    const later = await q.add('later', {}, { delay: HOUR });
    expect(await q.getJobState(plain.id)).to.equal('waiting');
    expect(await q.getJobState(prio.id)).to.equal('prioritized');
    expect(await q.getJobState(later.id)).to.equal('delayed');
    expect(await q.getJobState('no-such-job')).to.equal('unknown');

    // the job queue.add returned, one from getJob and one from Job.fromId ask the server
    expect(await plain.getState()).to.equal('waiting');
    expect(await plain.isWaiting()).to.equal(true);
    const fetched = (await q.getJob(prio.id))!;
    expect(await fetched.getState()).to.equal('prioritized');
    expect(await fetched.isWaiting()).to.equal(false); // BullMQ: a prioritized job is not in the wait list
    const delayed = (await Job.fromId(q, later.id))!;
    expect([await delayed.isDelayed(), await delayed.isActive(), await delayed.isCompleted(), await delayed.isFailed()]).to.deep.equal([true, false, false, false]);
    expect(await delayed.isWaitingChildren()).to.equal(false);

    await delayed.promote();
    expect(await later.getState()).to.equal('waiting'); // read now, not what add saw
    await q.remove(plain.id);
    expect(await plain.getState()).to.equal('unknown');
    expect(await plain.isWaiting()).to.equal(false);
  });

  it('active: a worker holding a job; getState/isActive inside the processor, isCompleted/isFailed after', async () => {
    const q = queue();
    const hold = gate();
    const inside: unknown[] = [];
    worker(q, async (job) => {
      inside.push(await job.getState(), await job.isActive(), await job.isWaiting());
      await hold.promise;
      if (job.name === 'bad') throw new Error('bad');
      return 'ok';
    });
    const good = await q.add('good', {});
    await waitFor(async () => (await q.getJobState(good.id)) === 'active', 'the worker to take the job');
    expect(await good.isActive()).to.equal(true);
    expect(await q.getActiveCount()).to.equal(1);
    expect(names(await q.getActive())).to.deep.equal(['good']);
    hold.open();
    await waitFor(() => good.isCompleted(), 'the job to complete');
    expect(inside).to.deep.equal(['active', true, false]);
    const bad = await q.add('bad', {});
    await waitFor(() => bad.isFailed(), 'the job to fail');
    expect(await q.getJobState(bad.id)).to.equal('failed');
  });

  it('active jobs are listed the one active longest first (asc true), newest first by default', async () => {
    const q = queue();
    const hold = gate();
    worker(q, () => hold.promise, { concurrency: 2 });
    for (const name of ['first', 'second']) {
      const job = await q.add(name, {});
      await waitFor(() => job.isActive(), `${name} to be active`);
    }
    expect(names(await q.getActive())).to.deep.equal(['first', 'second']);
    expect(names(await q.getJobs('active'))).to.deep.equal(['second', 'first']);
    expect(names(await q.getJobs(['active'], 0, 0, true))).to.deep.equal(['first']);
    expect(await q.getJobCounts('active')).to.deep.equal({ active: 2 });
    hold.open();
  });

  it('getJobCounts with no types: every BullMQ key and glidemq own; with types: only those keys, as spelled', async () => {
    const q = queue();
    await finish(q, ['c1', 'c2'], ['f1']);
    await q.add('w1', {});
    await q.add('w2', {}, { lifo: true });
    await q.add('p1', {}, { priority: 2 });
    await q.add('d1', {}, { delay: HOUR });
    const all = await q.getJobCounts();
    expect(all).to.include({
      active: 0, completed: 2, delayed: 1, failed: 1, prioritized: 1, waiting: 2, 'waiting-children': 0, paused: 0, isPaused: false,
    });
    expect(all).to.have.property('consumers');
    expect(await q.getJobCounts('completed', 'failed')).to.deep.equal({ completed: 2, failed: 1 });
    expect(await q.getJobCounts('wait')).to.deep.equal({ wait: 2 });
    expect(await q.getJobCounts('waiting', 'paused', 'waiting-children')).to.deep.equal({ waiting: 2, paused: 0, 'waiting-children': 0 });
    expect(await q.getJobCounts(...(['delayed', 'delayed'] as const))).to.deep.equal({ delayed: 1 });

    expect(await q.getJobCountByTypes('completed', 'failed')).to.equal(3);
    expect(await q.getJobCountByTypes('completed', 'waiting', 'failed')).to.equal(5);
    expect(await q.getJobCountByTypes()).to.equal(2 + 1 + 1 + 1 + 2); // every type, each job once
    expect(await q.count()).to.equal(2 + 1 + 1); // waiting, delayed, prioritized
    expect([await q.getWaitingCount(), await q.getActiveCount(), await q.getDelayedCount(), await q.getCompletedCount()]).to.deep.equal([2, 0, 1, 2]);
    expect([await q.getFailedCount(), await q.getPrioritizedCount(), await q.getWaitingChildrenCount()]).to.deep.equal([1, 1, 0]);
  });

  it('getDelayedCount(timestamp) counts the delayed jobs due strictly before it', async () => {
    const q = queue();
    const before = await serverNow();
    await q.add('soon', {}, { delay: HOUR });
    await q.add('late', {}, { delay: 3 * HOUR });
    expect(await q.getDelayedCount()).to.equal(2);
    expect(await q.getDelayedCount(before + 2 * HOUR)).to.equal(1);
    expect(await q.getDelayedCount(before)).to.equal(0);
    expect(await rejection(q.getDelayedCount(1.5))).to.be.instanceOf(InvalidArgumentError);
  });

  it('a paused queue: its waiting jobs count under paused, not under waiting too; they are still waiting jobs', async () => {
    const q = queue();
    await q.pause();
    const a = await q.add('a', {});
    await q.add('b', {}, { lifo: true });
    await q.add('p', {}, { priority: 1 });
    await q.add('d', {}, { delay: HOUR });
    // glidemq differs from BullMQ 6.7 here on purpose: 6.7 counts them under wait (its pause no
    // longer moves jobs to the paused list), BullMQ 5 under paused; never under both
    expect(await q.getJobCounts()).to.include({ waiting: 0, paused: 2, prioritized: 1, delayed: 1, isPaused: true });
    expect(await q.getJobCounts('wait', 'paused')).to.deep.equal({ wait: 0, paused: 2 });
    // what BullMQ calls waiting ("waiting or paused") includes them
    expect(await q.getWaitingCount()).to.equal(2);
    expect(await q.getJobCountByTypes('waiting', 'paused')).to.equal(2);
    expect(await q.getJobCountByTypes('paused')).to.equal(2);
    expect(await q.count()).to.equal(4);
    expect(await q.getJobState(a.id)).to.equal('waiting');
    expect(await a.isWaiting()).to.equal(true);
    expect(names(await q.getWaiting())).to.deep.equal(['b', 'a']); // the LIFO job runs first
    expect(names(await q.getJobs('paused', 0, -1, true))).to.deep.equal(['b', 'a']);
    expect(names(await q.getJobs(['wait', 'paused'], 0, -1, true))).to.deep.equal(['b', 'a']); // each job once

    await q.resume();
    expect(await q.getJobCounts('waiting', 'paused')).to.deep.equal({ waiting: 2, paused: 0 });
    expect(await q.getJobs('paused')).to.deep.equal([]);
    expect(await q.getWaitingCount()).to.equal(2);
  });

  it('waiting, delayed and prioritized pages: getX(start, end) the next to run first; getJobs asc false newest first', async () => {
    const q = queue();
    for (const name of ['w1', 'w2', 'w3']) await q.add(name, {});
    await q.add('d-late', {}, { delay: 2 * HOUR });
    await q.add('d-soon', {}, { delay: HOUR });
    await q.add('p-low', {}, { priority: 9 });
    await q.add('p-high', {}, { priority: 1 });

    expect(names(await q.getWaiting())).to.deep.equal(['w1', 'w2', 'w3']);
    expect(names(await q.getWaiting(1, 1))).to.deep.equal(['w2']);
    expect(names(await q.getJobs('waiting'))).to.deep.equal(['w3', 'w2', 'w1']);
    expect(names(await q.getJobs('wait', 0, 1, true))).to.deep.equal(['w1', 'w2']);
    expect(names(await q.getJobs(['waiting'], 0, 0))).to.deep.equal(['w3']);
    expect(names(await q.getJobs('waiting', -2, -1, true))).to.deep.equal(['w2', 'w3']);

    expect(names(await q.getDelayed())).to.deep.equal(['d-soon', 'd-late']);
    expect(names(await q.getJobs('delayed'))).to.deep.equal(['d-late', 'd-soon']);
    expect(names(await q.getPrioritized())).to.deep.equal(['p-high', 'p-low']);
    expect(names(await q.getPrioritized(0, 0))).to.deep.equal(['p-high']);
    expect(names(await q.getJobs('prioritized', 0, 0))).to.deep.equal(['p-low']);
    expect(await q.getWaitingChildren()).to.deep.equal([]);

    // several types: each type's page in turn, in the order asked
    expect(names(await q.getJobs(['prioritized', 'delayed'], 0, 0, true))).to.deep.equal(['p-high', 'd-soon']);
    // no types: every type
    expect(names(await q.getJobs()).sort()).to.deep.equal(['d-late', 'd-soon', 'p-high', 'p-low', 'w1', 'w2', 'w3']);
    // every listed job can ask for its state
    expect(await (await q.getWaiting(0, 0))[0].getState()).to.equal('waiting');
  });

  it('completed and failed pages: getCompleted/getFailed newest first, getJobs(type, start, end, true) oldest first', async () => {
    const q = queue();
    await finish(q, ['c1', 'c2', 'c3'], ['f1', 'f2']);
    expect(names(await q.getCompleted())).to.deep.equal(['c3', 'c2', 'c1']);
    expect(names(await q.getCompleted(0, 1))).to.deep.equal(['c3', 'c2']);
    expect(names(await q.getJobs('completed', 0, 1, true))).to.deep.equal(['c1', 'c2']);
    expect(names(await q.getJobs(['completed'], -1, -1, true))).to.deep.equal(['c3']);
    expect(names(await q.getFailed())).to.deep.equal(['f2', 'f1']);
    expect(names(await q.getJobs('failed', 0, -1, true))).to.deep.equal(['f1', 'f2']);
    expect(names(await q.getJobs(['completed', 'failed'], 0, 0))).to.deep.equal(['c3', 'f2']);
    const [last] = await q.getCompleted(0, 0);
    expect(last.returnvalue).to.equal('c3');
    expect(await last.isCompleted()).to.equal(true);
    expect((await q.getFailed(0, 0))[0].failedReason).to.equal('f2 failed');
  });

  it('an unknown type is refused by name instead of counted as 0 (a typo would read as an empty queue)', async () => {
    const q = queue();
    for (const call of [
      () => q.getJobCounts('complete' as never),
      () => q.getJobCountByTypes('waiting', 'finished' as never),
      () => q.getJobs('done' as never),
      () => q.getJobs('completed', 0.5, 2),
    ]) {
      const err = await rejection(call());
      expect(err).to.be.instanceOf(InvalidArgumentError);
    }
    expect(((await rejection(q.getJobCounts('complete' as never))) as Error).message).to.match(/unknown job type "complete".*completed/);
  });

  it('fields a job does not have read undefined, as in BullMQ (returnvalue stays null, as BullMQ starts it); each is set once the job has it', async () => {
    const q = queue();
    const added = await q.add('a', {});
    const blank = (j: Job, where: string) => {
      for (const field of ['failedReason', 'finishedOn', 'processedOn', 'parent', 'parentKey', 'groupId'] as const) {
        expect((j as unknown as Record<string, unknown>)[field], `${where}: ${field}`).to.equal(undefined);
      }
      expect(j.returnvalue, `${where}: returnvalue`).to.equal(null);
      expect(j.stacktrace, `${where}: stacktrace`).to.deep.equal([]);
    };
    blank(added, 'from add');
    blank((await q.getJob(added.id))!, 'from getJob');
    blank((await Job.fromId(q, added.id))!, 'from Job.fromId');
    blank((await q.getWaiting())[0], 'from getWaiting');
    const inProcessor = gate();
    let running: Job | undefined;
    worker(q, async (job) => {
      running = job;
      expect(job.failedReason).to.equal(undefined);
      expect(job.finishedOn).to.equal(undefined);
      expect(job.processedOn).to.be.a('number');
      await inProcessor.promise;
      if (job.name === 'bad') throw new Error('bad failed');
      return 'done';
    });
    await waitFor(() => running !== undefined, 'the job running');
    inProcessor.open();
    await waitFor(async () => (await q.getJobState(added.id)) === 'completed', 'the job completed');
    const done = (await q.getJob(added.id))!;
    expect(done.failedReason).to.equal(undefined);
    expect(done.returnvalue).to.equal('done');
    expect(done.finishedOn).to.be.a('number');
    expect(done.processedOn).to.be.a('number');
    const bad = await q.add('bad', {}, { group: { id: 'g1' } });
    await waitFor(async () => (await q.getJobState(bad.id)) === 'failed', 'the bad job failed');
    const failed = (await q.getJob(bad.id))!;
    expect(failed.failedReason).to.equal('bad failed');
    expect(failed.returnvalue).to.equal(null);
    expect(failed.groupId).to.equal('g1');
  });

  it("'repeat' counts the job schedulers; getJobs('repeat') lists none (a scheduler is not a job)", async () => {
    const q = queue();
    await q.upsertScheduler('every-hour', { every: HOUR });
    expect(await q.getJobCounts('repeat')).to.deep.equal({ repeat: 1 });
    expect(await q.getJobs('repeat')).to.deep.equal([]);
  });
});
