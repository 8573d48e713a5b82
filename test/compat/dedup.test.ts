/**
 * Deduplication as BullMQ's guide documents it, beyond the add options (test/compat/options.test.ts):
 * `debounce`, BullMQ's deprecated name for deduplication; queue.getDeduplicationJobId and
 * queue.removeDeduplicationKey; the Queue's own events ('waiting' for each job an add created,
 * 'removed' from queue.remove(id)); QueueEvents 'duplicated' for an add whose custom jobId exists;
 * job.deduplicationId and job.removeDeduplicationKey(); QueueEvents 'deduplicated' with BullMQ's
 * arguments; and the counts and returned jobs of the throttle and replace modes.
 */
import { expect } from 'chai';
import { NotSupportedError, QueueEvents, type Job, type Queue } from '../../src/index.js';
import { gate, HOUR, rejection, useCompat } from '../helpers/compat.js';
import { waitFor } from '../helpers/valkey.js';

describe('BullMQ compatibility: deduplication queries, debounce and queue events', function () {
  this.timeout(30000);
  const { connection, queue, worker, closeLater, redis, serverNow } = useCompat('dedupq');
  const queueEvents = async (q: Queue) => {
    const qe = new QueueEvents(q.name, { connection: connection(), blockingTimeout: 1000 });
    closeLater(() => qe.close());
    await qe.waitUntilReady();
    return qe;
  };
  const finished = (q: Queue, id: string) => waitFor(async () => (await q.getJob(id))?.state === 'completed', `job ${id} completed`);

  it('debounce { id, ttl } deduplicates as deduplication does; an empty or missing debounce id is refused', async () => {
    const q = queue();
    const first = await q.add('d', { v: 1 }, { debounce: { id: 'deb', ttl: HOUR } });
    const dup = await q.add('d', { v: 2 }, { debounce: { id: 'deb', ttl: HOUR } });
    expect(dup.id).to.equal(first.id);
    expect(dup.deduplicated).to.equal('blocked');
    expect(await q.getDeduplicationJobId('deb')).to.equal(first.id);
    for (const debounce of [{ id: '' }, {}, null]) {
      const err = await rejection(() => q.add('d', {}, { debounce: debounce as never }));
      expect(err.message).to.match(/Debounce id must be provided/);
    }
    expect(await q.count()).to.equal(1);
  });

  it('getDeduplicationJobId: the job a simple id points at while it is unfinished, then null; a ttl id outlives its job', async () => {
    const q = queue();
    const simple = await q.add('d', {}, { deduplication: { id: 'simple' } });
    const throttled = await q.add('d', {}, { deduplication: { id: 'throttle', ttl: HOUR } });
    expect(await q.getDeduplicationJobId('simple')).to.equal(simple.id);
    expect(await q.getDeduplicationJobId('throttle')).to.equal(throttled.id);
    expect(await q.getDeduplicationJobId('never-used')).to.equal(null);
    worker(q, async () => 'ok');
    await finished(q, simple.id);
    await finished(q, throttled.id);
    expect(await q.getDeduplicationJobId('simple')).to.equal(null);
    expect(await q.getDeduplicationJobId('throttle')).to.equal(throttled.id);
  });

  it('removeDeduplicationKey: 1 when the id was there (the next add with it creates a job), else 0', async () => {
    const q = queue();
    const first = await q.add('d', {}, { deduplication: { id: 'k', ttl: HOUR } });
    expect(await q.removeDeduplicationKey('k')).to.equal(1);
    expect(await q.getDeduplicationJobId('k')).to.equal(null);
    const next = await q.add('d', {}, { deduplication: { id: 'k', ttl: HOUR } });
    expect(next.created).to.equal(true);
    expect(next.id).to.not.equal(first.id);
    expect(await q.getDeduplicationJobId('k')).to.equal(next.id);
    expect(await q.removeDeduplicationKey('not-there')).to.equal(0);
  });

  it("the Queue emits 'waiting' with each job an add created (not a deduplicated one), and 'removed' with the id queue.remove removed", async () => {
    const q = queue();
    const waiting: string[] = [];
    const removed: unknown[] = [];
    q.on('waiting', (job: Job) => waiting.push(job.id));
    q.on('removed', (id: unknown) => removed.push(id));
    const a = await q.add('a', {}, { deduplication: { id: 'w' } });
    await q.add('a', {}, { deduplication: { id: 'w' } });
    const [b, c] = await q.addBulk([{ name: 'b', data: {} }, { name: 'c', data: {} }]);
    expect(waiting).to.deep.equal([a.id, b.id, c.id]);
    expect(await q.remove(b.id)).to.equal(true);
    expect(await q.remove(b.id)).to.equal(false);
    expect(removed).to.deep.equal([b.id]);
  });

  it("QueueEvents 'duplicated' { jobId } when an add names an existing custom jobId (nothing else is written)", async () => {
    const q = queue();
    const qe = new QueueEvents(q.name, { connection: connection(), blockingTimeout: 1000 });
    closeLater(() => qe.close());
    const duplicated: unknown[] = [];
    qe.on('duplicated', (args: unknown) => duplicated.push(args));
    await qe.waitUntilReady();
    const first = await q.add('j', { v: 1 }, { jobId: 'order-7' });
    const again = await q.add('j', { v: 2 }, { jobId: 'order-7' });
    expect(again.created).to.equal(false);
    await waitFor(() => duplicated.length === 1, "the 'duplicated' event");
    expect(duplicated).to.deep.equal([{ jobId: first.id }]);
    expect((await q.getJob('order-7'))?.data).to.deep.equal({ v: 1 });
  });

  it('job.deduplicationId: the dedup id on the job add returned, on getJob and on the worker\'s job; undefined without one', async () => {
    const q = queue();
    const seen = gate();
    let workerSaw: unknown = 'not run';
    const added = await q.add('d', {}, { deduplication: { id: 'house' } });
    const blocked = await q.add('d', {}, { deduplication: { id: 'house' } });
    const native = await q.add('d', {}, { dedup: { id: 'native', ttl: HOUR } });
    const plain = await q.add('p', {});
    expect(added.deduplicationId).to.equal('house');
    expect(blocked.deduplicationId).to.equal('house');
    expect(native.deduplicationId).to.equal('native');
    expect(plain.deduplicationId).to.equal(undefined);
    expect((await q.getJob(added.id))?.deduplicationId).to.equal('house');
    expect((await q.getJob(native.id))?.deduplicationId).to.equal('native');
    expect((await q.getJob(plain.id))?.deduplicationId).to.equal(undefined);
    worker(q, async (job) => {
      if (job.id === added.id) {
        workerSaw = job.deduplicationId;
        seen.open();
      }
    });
    await seen.promise;
    expect(workerSaw).to.equal('house');
  });

  it('job.removeDeduplicationKey(): true while the id points at this job (the next add then creates a job), false once it points at another', async () => {
    const q = queue();
    const first = await q.add('d', {}, { jobId: 'a1', deduplication: { id: 'k', ttl: HOUR } });
    const blocked = await q.add('d', {}, { jobId: 'a2', deduplication: { id: 'k', ttl: HOUR } });
    expect(blocked.id).to.equal('a1');
    const handle = (await q.getJob('a1'))!;
    expect(await handle.removeDeduplicationKey()).to.equal(true);
    expect(await handle.removeDeduplicationKey()).to.equal(false);
    const next = await q.add('d', {}, { jobId: 'a3', deduplication: { id: 'k', ttl: HOUR } });
    expect(next.created).to.equal(true);
    expect(await first.removeDeduplicationKey()).to.equal(false); // 'k' points at a3 now
    expect(await q.getDeduplicationJobId('k')).to.equal('a3');
    expect(await (await q.getJob('a3'))!.removeDeduplicationKey()).to.equal(true);
    expect(await (await q.add('p', {})).removeDeduplicationKey()).to.equal(false); // no dedup id
  });

  it('job.removeDeduplicationKey() in the processor: the add made while the job runs creates a job', async () => {
    const q = queue();
    const removed: boolean[] = [];
    const release = gate();
    const started = gate();
    worker(q, async (job) => {
      if (job.id !== 'a1') return;
      removed.push(await job.removeDeduplicationKey());
      started.open();
      await release.promise;
    });
    await q.add('d', {}, { jobId: 'a1', deduplication: { id: 'busy' } });
    await started.promise;
    const second = await q.add('d', {}, { jobId: 'a2', deduplication: { id: 'busy' } });
    release.open();
    expect(removed).to.deep.equal([true]);
    expect(second.created).to.equal(true);
    await finished(q, 'a1');
    await finished(q, 'a2');
  });

  it("QueueEvents 'deduplicated' { jobId: the kept job, deduplicationId, deduplicatedJobId: the dropped add's id }, as the events stream holds it", async () => {
    const q = queue();
    const qe = await queueEvents(q);
    const got: unknown[] = [];
    qe.on('deduplicated', (args: unknown) => got.push(args));
    await q.add('d', {}, { jobId: 'a1', deduplication: { id: 'dd' } });
    const dropped = await q.add('d', {}, { jobId: 'a2', deduplication: { id: 'dd' } });
    expect(dropped.id).to.equal('a1');
    const kept = await q.add('d', {}, { deduplication: { id: 'gen', ttl: HOUR } });
    await q.add('d', {}, { deduplication: { id: 'gen', ttl: HOUR } });
    await waitFor(() => got.length === 2, "two 'deduplicated' events");
    expect(got[0]).to.deep.equal({ jobId: 'a1', deduplicationId: 'dd', deduplicatedJobId: 'a2' });
    const second = got[1] as { jobId: string; deduplicationId: string; deduplicatedJobId: string };
    expect(second).to.include({ jobId: kept.id, deduplicationId: 'gen' });
    // a generated id, as the add would have had: after the kept job's, never a job
    expect(Number(second.deduplicatedJobId)).to.be.greaterThan(Number(kept.id));
    expect(await q.getJob(second.deduplicatedJobId)).to.equal(undefined);
    expect(await q.getJob('a2')).to.equal(undefined);
    // the stream entry has BullMQ's field names
    const entries = await redis().xrange(q.keys.events, '-', '+');
    const fields = entries.map(([, f]) => f).filter((f) => f[1] === 'deduplicated');
    expect(fields[0]).to.deep.equal(['event', 'deduplicated', 'jobId', 'a1', 'deduplicationId', 'dd', 'deduplicatedJobId', 'a2']);
  });

  it('throttle { id, ttl }: the adds in the window return the kept job and count nothing; once the window is over on the server clock, the next add creates a job', async () => {
    const q = queue();
    const TTL = 500;
    const first = await q.add('t', { v: 1 }, { deduplication: { id: 'th', ttl: TTL } });
    const second = await q.add('t', { v: 2 }, { deduplication: { id: 'th', ttl: TTL } });
    expect(second).to.include({ id: first.id, created: false });
    expect(await q.getJobCounts('waiting')).to.deep.equal({ waiting: 1 });
    expect((await q.getJob(first.id))?.data).to.deep.equal({ v: 1 });
    await waitFor(async () => (await serverNow()) >= first.timestamp + TTL, 'the end of the window on the server clock');
    const third = await q.add('t', { v: 3 }, { deduplication: { id: 'th', ttl: TTL } });
    expect(third.created).to.equal(true);
    expect(third.id).to.not.equal(first.id);
    expect(await q.getDeduplicationJobId('th')).to.equal(third.id);
    expect(await q.getJobCounts('waiting')).to.deep.equal({ waiting: 2 });
  });

  it("replace with extend and a delay: each add replaces the delayed job; one delayed job is counted, it runs once with the last data; one 'deduplicated' per replacement", async () => {
    const q = queue();
    const qe = await queueEvents(q);
    let dedups = 0;
    qe.on('deduplicated', () => dedups++);
    const opts = { delay: 400, deduplication: { id: 'deb', ttl: 400, extend: true, replace: true } };
    const jobs: Job[] = [];
    for (let i = 0; i < 5; i++) jobs.push(await q.add('r', { foo: i }, opts));
    expect(jobs.map((j) => j.id)).to.deep.equal(jobs.map(() => jobs[0].id));
    expect(await q.getDeduplicationJobId('deb')).to.equal(jobs[4].id);
    expect(await q.getJobCounts('delayed', 'waiting')).to.deep.equal({ delayed: 1, waiting: 0 });
    const ran: unknown[] = [];
    worker(q, async (job) => {
      ran.push(job.data);
    });
    await finished(q, jobs[0].id);
    expect(ran).to.deep.equal([{ foo: 4 }]);
    await waitFor(() => dedups === 4, "four 'deduplicated' events");
    expect(await q.getJobCounts('completed', 'delayed')).to.deep.equal({ completed: 1, delayed: 0 });
  });

  it('the entry decides while it blocks: a throttle window blocks a simple add even once its job is gone; a finished simple job blocks no throttle add', async () => {
    const q = queue();
    await q.add('d', { v: 1 }, { jobId: 'a1', deduplication: { id: 'win', ttl: HOUR } });
    await redis().del(q.keys.job('a1')); // the job is gone, the window is not
    const simple = await q.add('d', { v: 2 }, { jobId: 'a2', deduplication: { id: 'win' } });
    expect(simple).to.include({ id: 'a1', created: false });
    expect(await q.getJob('a2')).to.equal(undefined);
    expect(await q.getDeduplicationJobId('win')).to.equal('a1');

    const first = await q.add('d', {}, { jobId: 'b1', deduplication: { id: 'fin' } });
    worker(q, async () => 'ok');
    await finished(q, first.id);
    const throttled = await q.add('d', {}, { jobId: 'b2', deduplication: { id: 'fin', ttl: HOUR } });
    expect(throttled).to.include({ id: 'b2', created: true });
    expect(await q.getDeduplicationJobId('fin')).to.equal('b2');
  });

  it("removing a job forgets the dedup id that points at it (the next add creates a job), not one that points at another job", async () => {
    const q = queue();
    const first = await q.add('d', {}, { deduplication: { id: 'rm', ttl: HOUR } });
    await first.remove();
    const second = await q.add('d', {}, { deduplication: { id: 'rm', ttl: HOUR } });
    expect(second.created).to.equal(true);
    expect(await q.getDeduplicationJobId('rm')).to.equal(second.id);

    const done = await q.add('d', {}, { deduplication: { id: 'old' } });
    worker(q, async () => 'ok');
    await finished(q, done.id);
    const next = await q.add('d', {}, { delay: HOUR, deduplication: { id: 'old' } });
    expect(next.created).to.equal(true);
    expect(await q.remove(done.id)).to.equal(true); // the finished job 'old' no longer points at
    const blocked = await q.add('d', {}, { deduplication: { id: 'old' } });
    expect(blocked).to.include({ id: next.id, created: false });
    expect(await q.getDeduplicationJobId('old')).to.equal(next.id);
  });

  it('keepLastIfActive: true is refused by name (NotSupportedError), before anything is written; false is the default', async () => {
    const q = queue();
    const err = await rejection(() => q.add('d', {}, { deduplication: { id: 'k', keepLastIfActive: true } }));
    expect(err).to.be.instanceOf(NotSupportedError);
    expect(err.message).to.match(/deduplication\.keepLastIfActive is not supported/);
    expect(await q.count()).to.equal(0);
    expect(await q.getDeduplicationJobId('k')).to.equal(null);
    expect((await q.add('d', {}, { deduplication: { id: 'k', keepLastIfActive: false } })).created).to.equal(true);
  });

  it('getDeduplicationJobId of a replace id: the delayed job while it can still take an add, null once it started (an add then creates a job)', async () => {
    const q = queue();
    const promoted = await q.add('r', {}, { delay: HOUR, deduplication: { id: 'early', ttl: HOUR, replace: true } });
    await promoted.promote(); // waiting now: no add can replace it
    expect(await q.getDeduplicationJobId('early')).to.equal(null);
    expect((await q.add('r', {}, { delay: HOUR, deduplication: { id: 'early', ttl: HOUR, replace: true } })).created).to.equal(true);

    const job = await q.add('r', {}, { delay: 200, deduplication: { id: 'rep', ttl: HOUR, replace: true } });
    expect(await q.getDeduplicationJobId('rep')).to.equal(job.id);
    const running = gate();
    const release = gate();
    worker(q, async (j) => {
      if (j.id !== job.id) return;
      running.open();
      await release.promise;
    });
    await running.promise;
    expect(await q.getDeduplicationJobId('rep')).to.equal(null);
    const next = await q.add('r', {}, { delay: HOUR, deduplication: { id: 'rep', ttl: HOUR, replace: true } });
    release.open();
    expect(next.created).to.equal(true);
    expect(await q.getDeduplicationJobId('rep')).to.equal(next.id);
  });

  it('a job scheduler template with deduplication is refused, as BullMQ has no deduplication in scheduler templates', async () => {
    const q = queue();
    for (const opts of [{ deduplication: { id: 's' } }, { debounce: { id: 's' } }, { dedup: { id: 's' } }]) {
      const err = await rejection(() => q.upsertJobScheduler('every-hour', { every: HOUR }, { name: 'tick', opts }));
      expect(err.message).to.match(/jobs it adds cannot use dedup/);
    }
    expect(await q.getJobScheduler('every-hour')).to.equal(undefined);
  });
});
