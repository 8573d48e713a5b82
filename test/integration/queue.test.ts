import { expect } from 'chai';
import { Queue } from '../../src/engine/queue.js';
import { InvalidArgumentError, PayloadTooLargeError } from '../../src/engine/errors.js';
import { useServer } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';

describe('Queue (real valkey-server)', () => {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  it('stores the job hash with payload and metadata, and counts it as waiting', async () => {
    const q = h.queue(uniqueQueue());
    const job = await q.add('email', { to: 'ann' }, { attempts: 3, backoff: { type: 'fixed', delay: 10 } });
    const stored = await q.getJob(job.id);
    expect(stored?.name).to.equal('email');
    expect(stored?.data).to.deep.equal({ to: 'ann' });
    expect(stored?.state).to.equal('waiting');
    expect(stored?.opts.attempts).to.equal(3);
    expect(stored?.opts.backoff).to.deep.equal({ type: 'fixed', delay: 10 });
    const counts = await q.getJobCounts();
    expect(counts.waiting).to.equal(1);
    expect(counts.active).to.equal(0);
  });

  it('a duplicate custom job id adds nothing and returns the existing id', async () => {
    const q = h.queue(uniqueQueue());
    const first = await q.add('a', { v: 1 }, { jobId: 'order-7' });
    const second = await q.add('a', { v: 2 }, { jobId: 'order-7' });
    expect(first.id).to.equal('order-7');
    expect(second.id).to.equal('order-7');
    expect((second as unknown as { created: boolean }).created).to.equal(false);
    expect((await q.getJob('order-7'))?.data).to.deep.equal({ v: 1 });
    expect((await q.getJobCounts()).waiting).to.equal(1);
  });

  it('auto ids skip numbers a custom id already took', async () => {
    const q = h.queue(uniqueQueue());
    await q.add('a', {}, { jobId: '1' });
    const next = await q.add('a', {});
    expect(next.id).to.equal('2');
  });

  it('validates priority, attempts, delay and payload size before writing anything', async () => {
    const name = uniqueQueue();
    const q = new Queue(name, { connection: server().url, maxPayloadBytes: 100 });
    h.queues.push(q);
    for (const bad of [0, -1, 2097153, 1.5]) {
      let err: unknown;
      try {
        await q.add('a', {}, { priority: bad });
      } catch (e) {
        err = e;
      }
      expect(err, `priority ${bad}`).to.be.instanceOf(InvalidArgumentError);
    }
    await q.add('a', {}, { priority: 2097152 });
    let tooLarge: unknown;
    try {
      await q.add('a', { blob: 'x'.repeat(200) });
    } catch (e) {
      tooLarge = e;
    }
    expect(tooLarge).to.be.instanceOf(PayloadTooLargeError);
    expect(String((tooLarge as Error).message)).to.match(/over the limit of 100 bytes/);
    let bulkErr: unknown;
    try {
      await q.addBulk([{ name: 'a', data: {} }, { name: 'b', data: { blob: 'x'.repeat(200) } }]);
    } catch (e) {
      bulkErr = e;
    }
    expect((bulkErr as { index?: number }).index).to.equal(2);
    const counts = await q.getJobCounts();
    expect(counts.prioritized + counts.waiting).to.equal(1); // only the valid max-priority job
  });

  it('addBulk writes many jobs in pipelined chunks, in order', async () => {
    const q = h.queue(uniqueQueue());
    const jobs = await q.addBulk(Array.from({ length: 1000 }, (_, i) => ({ name: 'b', data: { i } })));
    expect(jobs).to.have.length(1000);
    expect(jobs[0].id).to.equal('1');
    expect(jobs[999].id).to.equal('1000');
    expect((await q.getJobCounts()).waiting).to.equal(1000);
  });

  it('getJobs lists jobs by state', async () => {
    const q = h.queue(uniqueQueue());
    await q.add('w', {});
    await q.add('d', {}, { delay: 60_000 });
    await q.add('p', {}, { priority: 5 });
    expect((await q.getJobs('waiting')).map((j) => j.name)).to.deep.equal(['w']);
    expect((await q.getJobs('delayed')).map((j) => j.name)).to.deep.equal(['d']);
    expect((await q.getJobs('prioritized')).map((j) => j.name)).to.deep.equal(['p']);
  });

  it('removes a waiting job, and a removed job is never re-created by promotion', async () => {
    const q = h.queue(uniqueQueue());
    const a = await q.add('a', {});
    const d = await q.add('d', {}, { delay: 1 });
    expect(await q.remove(a.id)).to.equal(true);
    expect(await q.remove(d.id)).to.equal(true);
    expect(await q.getJob(a.id)).to.equal(undefined);
    await q.client.fcall('glidemq_promote', 1, q.keys.meta, Date.now() + 1000, 100);
    expect(await q.client.exists(q.keys.job(d.id))).to.equal(0);
    const counts = await q.getJobCounts();
    expect(counts.waiting + counts.delayed).to.equal(0);
  });

  it('refuses queue names that would break the hash tag', () => {
    for (const bad of ['a{b', 'a}b', 'a:b', '', 'a b']) {
      expect(() => new Queue(bad, { connection: server().url }), bad).to.throw(InvalidArgumentError);
    }
  });
});
