/**
 * Deduplication as BullMQ's guide documents it, beyond the add options (test/compat/options.test.ts):
 * `debounce`, BullMQ's deprecated name for deduplication; queue.getDeduplicationJobId and
 * queue.removeDeduplicationKey; the Queue's own events ('waiting' for each job an add created,
 * 'removed' from queue.remove(id)); and QueueEvents 'duplicated' for an add whose custom jobId exists.
 */
import { expect } from 'chai';
import { QueueEvents, type Job, type Queue } from '../../src/index.js';
import { HOUR, rejection, useCompat } from '../helpers/compat.js';
import { waitFor } from '../helpers/valkey.js';

describe('BullMQ compatibility: deduplication queries, debounce and queue events', function () {
  this.timeout(30000);
  const { connection, queue, worker, closeLater } = useCompat('dedupq');
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
});
