/**
 * BullMQ's "manually processing jobs" pattern, as an application writes it: a Worker made without
 * a processor, worker.getNextJob(token, { block }), job.moveToCompleted / moveToFailed(..., token,
 * fetchNext) and job.extendLock(token, duration). glidemq's moveToCompleted / moveToFailed resolve
 * to the next Job (or undefined) where BullMQ's resolve to [jobData, jobId].
 */
import { expect } from 'chai';
import { StaleClaimError, Worker, type Job, type Queue, type WorkerOptions } from '../../src/index.js';
import { rejection, useCompat } from '../helpers/compat.js';
import { waitFor } from '../helpers/valkey.js';

describe('BullMQ compatibility: manual processing (getNextJob, moveToCompleted, moveToFailed, extendLock)', function () {
  this.timeout(30000);
  const { queue, worker, connection, closeLater, redis } = useCompat('manual');

  /** A Worker without a processor, as BullMQ's manual pattern makes it. */
  const manualWorker = (q: Queue, opts: Partial<WorkerOptions> = {}): Worker => {
    const w = new Worker(q.name, null, { connection: connection(), ...opts });
    w.on('error', () => undefined);
    closeLater(() => w.close());
    return w;
  };

  /** A connection of the server is blocked in an XREAD now (the manual worker's wait). */
  const blockedOnRead = async (): Promise<boolean> =>
    String(await redis().client('LIST'))
      .split('\n')
      .some((line) => /\bflags=\w*b/.test(line) && /\bcmd=xread\b/.test(line));

  it('a fetch-process-complete loop takes every job once, in order, with fetchNext', async () => {
    const q = queue();
    const n = 20;
    await q.addBulk(Array.from({ length: n }, (_, i) => ({ name: 'n', data: { i } })));
    const w = manualWorker(q);
    const token = 'my-token';
    const seen: number[] = [];
    let job = await w.getNextJob(token);
    while (job) {
      expect(job.token).to.equal(token);
      // nothing is held ahead: the job in hand is the only active one
      expect((await q.getJobCounts('active')).active).to.equal(1);
      seen.push(job.data.i);
      job = await job.moveToCompleted({ doubled: job.data.i * 2 }, token);
    }
    expect(seen).to.deep.equal(Array.from({ length: n }, (_, i) => i));
    const counts = await q.getJobCounts('completed', 'active', 'waiting');
    expect(counts).to.deep.equal({ completed: n, active: 0, waiting: 0 });
    const done = await q.getJobs(['completed'], 0, -1, true);
    expect(done.map((j) => j.returnvalue)).to.have.deep.members(seen.map((i) => ({ doubled: i * 2 })));
  });

  it('moveToCompleted(value, token, false) claims nothing more', async () => {
    const q = queue();
    await q.add('a', {});
    await q.add('b', {});
    const w = manualWorker(q);
    const job = (await w.getNextJob('t1'))!;
    expect(await job.moveToCompleted('done', 't1', false)).to.equal(undefined);
    expect(job.state).to.equal('completed');
    expect(job.returnvalue).to.equal('done');
    expect(await q.getJobCounts('active', 'waiting', 'completed')).to.deep.equal({ active: 0, waiting: 1, completed: 1 });
  });

  it('moveToFailed with attempts left retries the job (backoff as for a processor), then fails it for good', async () => {
    const q = queue();
    const added = await q.add('flaky', { n: 1 }, { attempts: 2 });
    const w = manualWorker(q);
    const token = 'flaky-token';
    const first = (await w.getNextJob(token))!;
    expect(first.id).to.equal(added.id);
    // fetchNext defaults to false for a failure, as BullMQ's
    expect(await first.moveToFailed(new Error('boom 1'), token)).to.equal(undefined);
    expect(first.state).to.equal('waiting');
    expect(first.attemptsMade).to.equal(1);
    expect(await q.getJobState(added.id)).to.equal('waiting');
    const second = (await w.getNextJob(token))!;
    expect(second.id).to.equal(added.id);
    expect(second.attemptsMade).to.equal(1);
    await second.moveToFailed(new Error('boom 2'), token);
    expect(second.state).to.equal('failed');
    const stored = (await q.getJob(added.id))!;
    expect(stored.state).to.equal('failed');
    expect(stored.failedReason).to.equal('boom 2');
    expect(stored.attemptsMade).to.equal(2);
    expect(stored.stacktrace).to.have.length(2);
  });

  it('moveToFailed with a backoff delays the retry; a manual worker\'s fetch promotes it once due', async () => {
    const q = queue();
    const added = await q.add('later', {}, { attempts: 2, backoff: { type: 'fixed', delay: 200 } });
    const w = manualWorker(q, { blockTimeout: 10000 });
    const first = (await w.getNextJob('t', { block: false }))!;
    await first.moveToFailed(new Error('not yet'), 't');
    expect(first.state).to.equal('delayed');
    expect(await q.getJobState(added.id)).to.equal('delayed');
    // no worker of the queue runs a promotion timer: the blocking fetch promotes the retry when due
    const again = (await w.getNextJob('t'))!;
    expect(again.id).to.equal(added.id);
    expect(again.attemptsMade).to.equal(1);
    await again.moveToCompleted('ok', 't', false);
    expect(await q.getJobState(added.id)).to.equal('completed');
  });

  it('a wrong token is refused with a StaleClaimError naming the job and the call, and changes nothing', async () => {
    const q = queue();
    await q.add('mine', {});
    const w = manualWorker(q);
    const job = (await w.getNextJob('right-token'))!;
    for (const [op, call] of [
      ['moveToCompleted', () => job.moveToCompleted('x', 'wrong-token')],
      ['moveToFailed', () => job.moveToFailed(new Error('x'), 'wrong-token')],
      ['extendLock', () => job.extendLock('wrong-token', 10000)],
    ] as const) {
      const err = await rejection(call);
      expect(err, op).to.be.instanceOf(StaleClaimError);
      expect(err.message).to.contain(`job ${job.id}`).and.to.contain(op);
    }
    expect(await q.getJobState(job.id)).to.equal('active');
    expect(await job.extendLock('right-token', 10000)).to.equal(1);
    await job.moveToCompleted('ok', 'right-token', false);
    expect(await q.getJobState(job.id)).to.equal('completed');
    // finished: the token no longer holds a claim to extend
    expect(await rejection(() => job.extendLock('right-token', 1000))).to.be.instanceOf(StaleClaimError);
  });

  it('getNextJob(token, { block: false }) on an empty queue resolves undefined at once', async () => {
    const q = queue();
    const w = manualWorker(q, { blockTimeout: 20000 });
    const started = Date.now();
    expect(await w.getNextJob('t', { block: false })).to.equal(undefined);
    // a safety net, not a speed check: a blocking wait would have taken the whole blockTimeout
    expect(Date.now() - started).to.be.below(10000);
  });

  it('getNextJob(token) blocks for at most blockTimeout on an empty queue', async () => {
    const q = queue();
    const w = manualWorker(q, { blockTimeout: 300 });
    const started = Date.now();
    expect(await w.getNextJob('t')).to.equal(undefined);
    expect(Date.now() - started).to.be.at.least(250);
  });

  it('getNextJob(token, { block: true }) wakes when a job is added', async () => {
    const q = queue();
    const w = manualWorker(q, { blockTimeout: 20000 });
    const started = Date.now();
    const pending = w.getNextJob('waiter', { block: true });
    // the worker waits on its blocking connection before the job exists
    await waitFor(blockedOnRead, 'the blocking wait');
    const added = await q.add('late', { v: 7 });
    const job = (await pending)!;
    expect(job.id).to.equal(added.id);
    expect(job.data).to.deep.equal({ v: 7 });
    expect(Date.now() - started).to.be.below(15000);
    await job.moveToCompleted('ok', 'waiter', false);
  });

  it('close() ends a blocking getNextJob, which resolves undefined', async () => {
    const q = queue();
    const w = manualWorker(q, { blockTimeout: 20000 });
    const started = Date.now();
    const pending = w.getNextJob('waiter');
    await waitFor(blockedOnRead, 'the blocking wait');
    await w.close();
    expect(await pending).to.equal(undefined);
    expect(Date.now() - started).to.be.below(15000);
    expect(await w.getNextJob('waiter')).to.equal(undefined);
  });

  it('a paused queue hands out nothing; getNextJob(token) wakes on resume', async () => {
    const q = queue();
    await q.add('held', {});
    await q.pause();
    const w = manualWorker(q, { blockTimeout: 20000 });
    expect(await w.getNextJob('t', { block: false })).to.equal(undefined);
    const pending = w.getNextJob('t');
    await waitFor(blockedOnRead, 'the blocking wait');
    await q.resume();
    const job = (await pending)!;
    expect(job.name).to.equal('held');
    await job.moveToCompleted('ok', 't', false);
  });

  it('a manual job left without extendLock is recovered on its own lock, by a worker with a longer lock', async () => {
    const q = queue();
    const [left, kept, later] = await q.addBulk([{ name: 'left', data: {} }, { name: 'kept', data: {} }, { name: 'later', data: {} }]);
    const manual = manualWorker(q, { lockDuration: 500 });
    const fetchedAt = Date.now();
    const leftJob = (await manual.getNextJob('lost-token', { block: false }))!;
    const keptJob = (await manual.getNextJob('kept-token', { block: false }))!;
    await keptJob.extendLock('kept-token', 60000);
    // fetched after the extension: its 500 ms lock runs out after a mere renewal of kept's would
    const laterJob = (await manual.getNextJob('lost-token', { block: false }))!;
    expect([leftJob.id, keptJob.id, laterJob.id]).to.deep.equal([left.id, kept.id, later.id]);
    // a worker whose own lock is 30 s: it judges the manual claims by their 500 ms lock
    const ran: string[] = [];
    let recoveredAfter = 0;
    worker(q, async (job) => {
      if (ran.length === 0) recoveredAfter = Date.now() - fetchedAt;
      ran.push(job.id);
      return 'recovered';
    }, { lockDuration: 30000, stalledInterval: 100 });
    await waitFor(() => ran.length >= 2, 'the manual jobs left without a lock extension run again');
    expect(ran).to.have.members([left.id, later.id]);
    expect(recoveredAfter).to.be.at.least(400);
    await waitFor(async () => (await q.getJobState(later.id)) === 'completed', 'the recovered jobs completed');
    expect((await q.getJob(left.id))!.stalledCount).to.equal(1);
    // their token holds nothing now; the claim extended for 60 s is still the manual worker's
    expect(await rejection(() => leftJob.moveToCompleted('late', 'lost-token', false))).to.be.instanceOf(StaleClaimError);
    expect(await q.getJobState(kept.id)).to.equal('active');
    await keptJob.moveToCompleted('kept', 'kept-token', false);
    expect((await q.getJob(kept.id))!.returnvalue).to.equal('kept');
  });

  it('startStalledCheckTimer() on the manual worker gives a job whose lock ran out back to the queue', async () => {
    const q = queue();
    const added = await q.add('once', {});
    const w = manualWorker(q, { lockDuration: 300, stalledInterval: 100 });
    const job = (await w.getNextJob('t1', { block: false }))!;
    await w.startStalledCheckTimer();
    const again = (await waitFor(() => w.getNextJob('t2', { block: false }), 'the job fetched again after its lock ran out'))!;
    expect(again.id).to.equal(added.id);
    expect(again.stalledCount).to.equal(1);
    expect(await rejection(() => job.moveToCompleted('late', 't1'))).to.be.instanceOf(StaleClaimError);
    await again.moveToCompleted('ok', 't2', false);
    expect(await q.getJobState(added.id)).to.equal('completed');
  });

  it('a processor worker refuses getNextJob, a manual one refuses run(), and a processor\'s job refuses moveToCompleted', async () => {
    const q = queue();
    let seen: Job | undefined;
    const w = worker(q, async (job) => {
      seen = job;
      return 'ok';
    });
    expect(await rejection(() => w.getNextJob('t'))).to.be.instanceOf(Error);
    const m = manualWorker(q);
    expect(await rejection(() => m.run())).to.be.instanceOf(Error);
    await q.add('x', {});
    await waitFor(() => seen, 'the processor ran');
    expect(await rejection(() => seen!.moveToCompleted('x', seen!.token!))).to.be.instanceOf(Error);
  });

  it('a processor may extend its own lock with its token (BullMQ\'s job.extendLock in a processor)', async () => {
    const q = queue();
    const results: unknown[] = [];
    const w = worker(q, async (job, token) => {
      results.push(await job.extendLock(token!, 60000));
      results.push(await rejection(() => job.extendLock('not-its-token', 60000)));
      return 'ok';
    });
    const done = new Promise<void>((resolve) => w.once('completed', () => resolve()));
    await q.add('long', {});
    await done;
    expect(results[0]).to.equal(1);
    expect(results[1]).to.be.instanceOf(StaleClaimError);
  });
});
