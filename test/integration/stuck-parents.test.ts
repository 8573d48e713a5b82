/**
 * findStuckParents (operating/stuck-parents.ts), behind `glidemq check stuck`: parents left in
 * waiting-children although their dependencies are all settled. The engine never leaves one, so
 * the state a crash could leave is written here by hand: a parent in waiting-children whose set
 * still holds children that finished (their settlement never reached it), or an empty set.
 */
import { expect } from 'chai';
import type { Queue } from '../../src/engine/queue/queue.js';
import { findStuckParents } from '../../src/engine/flows/stuck-parents.js';
import { FlowProducer } from '../../src/engine/flows/flow-producer.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';

describe('findStuckParents: parents whose dependencies all settled but still wait', function () {
  this.timeout(30_000);
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  /**
   * Makes job `id` of `q` a parent in waiting-children since `waitedMs` ago (server time) that
   * still counts `children` (job keys) as unsettled: the keyspace a settlement that never arrived leaves.
   */
  async function parentWaiting(q: Queue, id: string, children: string[], waitedMs: number): Promise<void> {
    await q.add('parent', { id }, { jobId: id, delay: 3_600_000 });
    const now = await q.serverTime();
    await q.client.zrem(q.keys.scheduled, id);
    await q.client.hset(q.keys.job(id), 'state', 'waiting-children');
    await q.client.zadd(q.keys.waitingChildren, now - waitedMs, id);
    if (children.length) await q.client.sadd(q.keys.deps(id), ...children);
  }

  /** Runs every waiting job of `c` through a worker: the ones whose data says fail fail for good. */
  async function runChildren(c: Queue, n: number): Promise<void> {
    const w = h.worker(c.name, async (job) => {
      if (job.data.fail) throw new Error('child failed');
      return 'ok';
    });
    await waitFor(async () => (await c.getCompletedCount()) + (await c.getFailedCount()) === n, `${n} children finished`);
    await w.close();
  }

  it('finds a parent whose children finished without settling it, and one with no dependency left; not one with a child still to run', async () => {
    const p = h.queue(uniqueQueue('sp-parents'));
    const c = h.queue(uniqueQueue('sp-children'));
    await c.add('child', {}, { jobId: 'done-a' });
    await c.add('child', {}, { jobId: 'done-b' });
    await c.add('child', { fail: true }, { jobId: 'failed-plain' });
    // the failure policy is what makes a failed child settle its parent
    await c.add('child', { fail: true }, { jobId: 'failed-policy', failParentOnFailure: true });
    await runChildren(c, 4);
    await c.add('child', {}, { jobId: 'still-waiting' });
    const key = (id: string) => c.keys.job(id);
    await parentWaiting(p, 'p-finished', [key('done-a'), key('done-b'), key('failed-policy')], 60_000);
    await parentWaiting(p, 'p-empty', [], 120_000);
    await parentWaiting(p, 'p-removed-child', [key('never-existed')], 30_000);
    await parentWaiting(p, 'p-running', [key('done-a'), key('still-waiting')], 60_000);
    await parentWaiting(p, 'p-failed-plain', [key('failed-plain')], 60_000);

    const found = await findStuckParents(p, 0);
    expect(found.waiting).to.equal(5);
    expect(found.read).to.equal(5);
    expect(found.count).to.equal(3);
    expect(found.parents.map((x) => x.jobId), 'the longest waiting first').to.deep.equal(['p-empty', 'p-finished', 'p-removed-child']);
    expect(found.parents[0]).to.include({ reason: 'no-deps' });
    expect(found.parents[0].waitingMs).to.be.at.least(120_000);
    expect(found.parents[1]).to.include({ reason: 'children-finished' });
    expect([...found.parents[1].children].sort()).to.deep.equal([key('done-a'), key('done-b'), key('failed-policy')].sort());
  });

  it('counts only what is older than olderMs: a parent that began to wait, or a child that finished, within it is not stuck yet', async () => {
    const p = h.queue(uniqueQueue('sp-parents'));
    const c = h.queue(uniqueQueue('sp-children'));
    await c.add('child', {}, { jobId: 'just-done' });
    await runChildren(c, 1);
    await parentWaiting(p, 'old-parent-new-child', [c.keys.job('just-done')], 600_000);
    await parentWaiting(p, 'new-parent', [], 0);
    const within = await findStuckParents(p, 60_000);
    expect(within.count).to.equal(0);
    expect(within.waiting).to.equal(2);
    expect(within.read, 'a parent waiting less than olderMs is not looked at').to.equal(1);
    // the child's finish 10 minutes back: now it is long settled and the parent still waits
    const [s] = await c.client.time();
    await c.client.hset(c.keys.job('just-done'), 'finishedOn', String(Number(s) * 1000 - 600_000));
    const later = await findStuckParents(p, 60_000);
    expect(later.parents.map((x) => x.jobId)).to.deep.equal(['old-parent-new-child']);
  });

  it('a real flow: a parent waiting for its children is not stuck, nor after they complete (the parent has moved on)', async () => {
    const p = h.queue(uniqueQueue('sp-parents'));
    const c = h.queue(uniqueQueue('sp-children'));
    const flows = new FlowProducer({ connection: server().url });
    try {
      await flows.add({ name: 'parent', queueName: p.name, opts: { jobId: 'top' }, children: [{ name: 'a', queueName: c.name }, { name: 'b', queueName: c.name, opts: { failParentOnFailure: true } }] });
    } finally {
      await flows.close();
    }
    expect(await findStuckParents(p, 0)).to.deep.include({ count: 0, waiting: 1, read: 1 });
    const w = h.worker(c.name, async () => 'ok');
    await waitFor(async () => (await p.getJobState('top')) === 'waiting', 'the parent queued once its children completed');
    await w.close();
    expect(await findStuckParents(p, 0)).to.deep.include({ count: 0, waiting: 0 });
  });

  it('a queue without flows has nothing to find', async () => {
    const q = h.queue(uniqueQueue('sp-none'));
    await q.add('plain', {});
    expect(await findStuckParents(q, 0)).to.deep.equal({ count: 0, parents: [], waiting: 0, read: 0, unchecked: 0 });
  });
});
