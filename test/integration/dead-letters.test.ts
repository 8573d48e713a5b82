/**
 * Dead letters on one server (README "Dead letters", lua/dead-letters.lua): a job that fails for
 * good on a queue with a dead-letter queue is copied there, in the same call, once, whichever path
 * fails it (a processor's last attempt, stalled recovery past maxStalledCount); the setting lives
 * in the queue's meta, so a worker made without it follows it; getDeadLetterJobs reads them. The
 * cluster path (outbox and relay) is in dead-letters-cluster.test.ts.
 */
import { expect } from 'chai';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { claimAs, jobHash, STALLED_REASON, upkeep } from '../helpers/recovery.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { FlowProducer } from '../../src/engine/flows/flow-producer.js';
import { callFunction } from '../../src/engine/connecting/library.js';

describe('dead letters (real valkey-server)', () => {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  function queueWithDlq(name: string, dlq: string): Queue {
    const q = new Queue(name, { connection: server().url, deadLetterQueue: { name: dlq } });
    h.queues.push(q);
    return q;
  }

  it('copies a job that fails for good after its retries into the dead-letter queue, with its fields, once', async () => {
    const name = uniqueQueue();
    const dlqName = `${name}-dlq`;
    const q = queueWithDlq(name, dlqName);
    const job = await q.add('charge', { order: 42 }, { attempts: 3 });
    let runs = 0;
    // made without the option: the setting the Queue stored in meta decides
    const w = h.worker(name, async () => {
      runs++;
      throw new Error(`card declined ${runs}`);
    });
    await waitFor(async () => (await q.getJobState(job.id)) === 'failed', 'the job to fail for good');
    expect(runs).to.equal(3);
    const letters = await q.getDeadLetterJobs();
    expect(letters).to.have.length(1);
    const l = letters[0];
    expect(l.name).to.equal('charge');
    expect(l.data).to.deep.equal({ order: 42 });
    expect(l.state).to.equal('failed');
    expect(l.failedReason).to.equal('card declined 3');
    expect(l.attemptsMade).to.equal(3);
    expect(l.stacktrace).to.have.length(3);
    expect(l.stacktrace[2]).to.contain('card declined 3');
    expect(l.originalQueue).to.equal(name);
    expect(l.originalJobId).to.equal(job.id);
    expect(l.opts.attempts).to.equal(3);
    // the dead letter is a job of the dead-letter queue's failed set; the source job stays failed
    const dlq = h.queue(dlqName);
    expect((await dlq.getJobCounts()).failed).to.equal(1);
    expect((await dlq.getFailed()).map((j) => j.id)).to.deep.equal([l.id]);
    expect(await q.getJobState(job.id)).to.equal('failed');
    // no claim, group or flow field came along
    const raw = await dlq.client.hgetall(dlq.keys.job(l.id));
    for (const f of ['owner', 'lockedAt', 'src', 'sid', 'fence', 'rf', 'terms']) expect(raw, f).to.not.have.property(f);
    await w.close();
    expect(await q.getDeadLetterJobs()).to.have.length(1);
  });

  it('copies a job revoked before it ran (queue.revoke fails it for good) into the dead-letter queue', async () => {
    const name = uniqueQueue();
    const q = queueWithDlq(name, `${name}-dlq`);
    const job = await q.add('never', { n: 1 }, { delay: 60_000 });
    expect(await q.revoke(job.id)).to.equal('revoked');
    const letters = await q.getDeadLetterJobs();
    expect(letters.map((l) => [l.originalJobId, l.failedReason, l.data])).to.deep.equal([[job.id, 'revoked', { n: 1 }]]);
    // a repeat answers the same and sends no second copy
    expect(await q.revoke(job.id)).to.equal('revoked');
    expect(await q.getDeadLetterJobs()).to.have.length(1);
  });

  it('does nothing more for a job that succeeds after a retry, or on a queue without a dead-letter queue', async () => {
    const name = uniqueQueue();
    const q = queueWithDlq(name, `${name}-dlq`);
    const job = await q.add('flaky', {}, { attempts: 2 });
    let runs = 0;
    h.worker(name, async () => {
      if (++runs === 1) throw new Error('once');
      return 'ok';
    });
    await waitFor(async () => (await q.getJobState(job.id)) === 'completed', 'the job to complete');
    expect(await q.getDeadLetterJobs()).to.deep.equal([]);
    expect(await q.client.exists(`glide:{${name}-dlq}:failed`)).to.equal(0);

    const plain = h.queue(uniqueQueue());
    const other = await plain.add('x', {});
    h.worker(plain.name, async () => {
      throw new Error('no dlq');
    });
    await waitFor(async () => (await plain.getJobState(other.id)) === 'failed', 'the job to fail');
    expect(await plain.getDeadLetterJobs()).to.deep.equal([]);
  });

  it('copies a job that stalled more than maxStalledCount into the dead-letter queue', async () => {
    const name = uniqueQueue();
    const q = queueWithDlq(name, `${name}-dlq`);
    const job = await q.add('stuck', { n: 1 });
    const m = upkeep(q, { lockDuration: 200, maxStalledCount: 0 });
    await q.waitUntilReady();
    await claimAs(q, 'dead-worker', 1, { lockDuration: 200, maxStalledCount: 0 });
    await waitFor(async () => (await m.reclaimStalled('reclaimer')).failed.length > 0, 'the stalled job to fail');
    expect((await jobHash(q, job.id)).state).to.equal('failed');
    const letters = await q.getDeadLetterJobs();
    expect(letters).to.have.length(1);
    expect(letters[0].failedReason).to.equal(STALLED_REASON);
    expect(letters[0].originalJobId).to.equal(job.id);
    expect(letters[0].data).to.deep.equal({ n: 1 });
  });

  it('a finish sent again after its reply was lost sends no second dead letter (with the job kept, and with removeOnFail removing it)', async () => {
    for (const removeOnFail of [false, true]) {
      const name = uniqueQueue();
      const q = queueWithDlq(name, `${name}-dlq`);
      const job = await q.add('once', { removeOnFail }, { removeOnFail });
      await q.waitUntilReady();
      const [claim] = await claimAs(q, 'w1', 1, { lockDuration: 60000 });
      const keep = removeOnFail ? '0' : '';
      const finish = () => callFunction(q.client, 'glidemq_finish', q.keys.meta, [claim.id, claim.fence, 'w1', 'failed:Error: x', 'x', -1, 0, keep, 1, '0', 60000, 1]) as Promise<unknown[]>;
      expect((await finish())[0]).to.equal('failed');
      expect((await finish())[0]).to.equal('failed'); // the repeat is answered, and changes nothing
      const letters = await q.getDeadLetterJobs();
      expect(letters.map((l) => l.originalJobId), `removeOnFail ${removeOnFail}`).to.deep.equal([job.id]);
      expect(letters[0].data).to.deep.equal({ removeOnFail });
      expect(await q.getJobState(job.id)).to.equal(removeOnFail ? 'unknown' : 'failed');
    }
  });

  it('a parent failed by its child (failParentOnFailure) is copied into its own queue\'s dead-letter queue', async () => {
    const name = uniqueQueue();
    const q = queueWithDlq(name, `${name}-dlq`);
    const flow = new FlowProducer({ connection: server().url });
    h.flowProducers.push(flow);
    const tree = await flow.add({ name: 'parent', queueName: name, data: { p: 1 }, children: [{ name: 'child', queueName: name, opts: { failParentOnFailure: true } }] });
    h.worker(name, async () => {
      throw new Error('child broke');
    });
    await waitFor(async () => (await q.getJobState(tree.job.id)) === 'failed', 'the parent to fail');
    const letters = await waitFor(async () => {
      const l = await q.getDeadLetterJobs();
      return l.length === 2 ? l : undefined;
    }, 'the child and its parent to be dead letters');
    const parent = letters!.find((l) => l.originalJobId === tree.job.id)!;
    expect(parent.name).to.equal('parent');
    expect(parent.data).to.deep.equal({ p: 1 });
    expect(parent.failedReason).to.contain('failed');
    expect(parent.raw).to.not.have.property('flow');
    const child = letters!.find((l) => l.originalJobId === tree.children![0].job.id)!;
    expect(child.failedReason).to.equal('child broke');
    expect(child.raw).to.not.have.property('parents');
  });

  it('reads pages with getDeadLetterJobs(start, end), newest first, and a later writer changes the setting for all', async () => {
    const name = uniqueQueue();
    const q = queueWithDlq(name, `${name}-dlq`);
    const jobs = [];
    for (let i = 0; i < 3; i++) jobs.push(await q.add('p', { i }));
    h.worker(name, async () => {
      throw new Error('no');
    });
    await waitFor(async () => (await q.getDeadLetterJobs()).length === 3, 'three dead letters');
    const page = await q.getDeadLetterJobs(0, 1);
    expect(page).to.have.length(2);
    const all = await q.getDeadLetterJobs();
    expect(all.slice(0, 2).map((j) => j.id)).to.deep.equal(page.map((j) => j.id));
    expect(new Set(all.map((j) => j.originalJobId))).to.deep.equal(new Set(jobs.map((j) => j.id)));

    // another client names another dead-letter queue: the next failure goes there
    const other = new Queue(name, { connection: server().url });
    h.queues.push(other);
    expect(await other.setDeadLetterQueue(`${name}-dlq2`)).to.equal(`${name}-dlq`);
    const late = await q.add('late', {});
    await waitFor(async () => (await q.getJobState(late.id)) === 'failed', 'the late job to fail');
    expect(await q.getDeadLetterJobs()).to.have.length(3);
    const second = await other.getDeadLetterJobs();
    expect(second.map((j) => j.originalJobId)).to.deep.equal([late.id]);
    expect(await other.setDeadLetterQueue(null)).to.equal(`${name}-dlq2`);
  });

  it('refuses a dead-letter queue that is the queue itself, or no queue name', async () => {
    expect(() => new Queue('same', { connection: server().url, deadLetterQueue: { name: 'same' } })).to.throw(/another queue/);
    expect(() => new Queue('same', { connection: server().url, deadLetterQueue: { name: 'a:b' } })).to.throw(/deadLetterQueue.name/);
    expect(() => h.worker('w', async () => undefined, { deadLetterQueue: {} as never, autorun: false })).to.throw(/deadLetterQueue/);
    expect(() => h.worker('w', async () => undefined, { deadLetterQueue: { name: 'w' }, autorun: false })).to.throw(/another queue/);
  });
});
