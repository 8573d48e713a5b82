/**
 * The gaps issue 29 left in BullMQ's flow API: removing a parent with its unfinished subtree in
 * every queue (or refusing while one of them runs), `remove({ removeChildren: false })`,
 * `moveToWaitingChildren(token, { child })`, the parent fields of `job.toJSON()`, and glide-mq's
 * `job.getParents()` for a DAG node with several parents. On a standalone server one call reaches
 * every queue; the cluster's side is in test/integration/flows-cluster-removal.test.ts.
 */
import { expect } from 'chai';
import { FlowProducer, Job, type Queue, WaitingChildrenError } from '../../src/index.js';
import { gate, HOUR, rejection, useCompat } from '../helpers/compat.js';
import { waitFor } from '../helpers/valkey.js';

describe('BullMQ compatibility: removing flows, and a flow job\'s parents', function () {
  this.timeout(30000);
  const { queue, worker, connection, closeLater, redis } = useCompat('flowrm', { promotionInterval: 100 });
  const flowProducer = () => {
    const f = new FlowProducer({ connection: connection() });
    closeLater(() => f.close());
    return f;
  };

  /** A parent in `top` with a child in `other`, which has a delayed child of its own in `third`. */
  const threeQueues = (top: Queue, other: Queue, third: Queue) =>
    flowProducer().add({
      name: 'p',
      queueName: top.name,
      children: [
        { name: 'c', queueName: other.name, children: [{ name: 'g', queueName: third.name, opts: { delay: HOUR } }] },
        { name: 'd', queueName: top.name, opts: { delay: HOUR } },
      ],
    });

  it('removing a parent removes its unfinished subtree in every queue', async () => {
    const [top, other, third] = [queue(), queue(), queue()];
    const tree = await threeQueues(top, other, third);
    const c = tree.children![0];
    const removedEvents: string[] = [];
    other.on('removed', (id: string) => removedEvents.push(id));
    expect(await top.remove(tree.job.id)).to.equal(true);
    expect(await redis().exists(other.keys.job(c.job.id), third.keys.job(c.children![0].job.id), top.keys.job(tree.children![1].job.id))).to.equal(0);
    expect(await other.getJobCounts('waiting', 'waiting-children')).to.deep.equal({ waiting: 0, 'waiting-children': 0 });
    expect((await third.getJobCounts('delayed')).delayed).to.equal(0);
  });

  it('removing a parent is refused while a child in another queue runs, and then changes nothing', async () => {
    const [top, other] = [queue(), queue()];
    const tree = await flowProducer().add({
      name: 'p',
      queueName: top.name,
      children: [{ name: 'c', queueName: other.name }, { name: 'd', queueName: top.name, opts: { delay: HOUR } }],
    });
    const held = gate();
    worker(other, async () => held.promise);
    await waitFor(async () => (await other.getJobState(tree.children![0].job.id)) === 'active', 'the child to run');
    const err = await rejection(top.remove(tree.job.id));
    expect(err.name).to.equal('JobActiveError');
    expect(await top.getJobState(tree.job.id)).to.equal('waiting-children');
    expect(await top.getJobState(tree.children![1].job.id)).to.equal('delayed');
    // force removes the running child too (its worker's finish then changes nothing)
    expect(await top.remove(tree.job.id, { force: true })).to.equal(true);
    expect(await redis().exists(other.keys.job(tree.children![0].job.id))).to.equal(0);
    held.open();
  });

  it('job.remove({ removeChildren: false }): the parent goes, its children stay and no longer name it; they finish without re-creating it', async () => {
    const [top, other] = [queue(), queue()];
    const tree = await flowProducer().add({
      name: 'p',
      queueName: top.name,
      children: [{ name: 'same', queueName: top.name }, { name: 'elsewhere', queueName: other.name }],
    });
    const parent = (await Job.fromId(top, tree.job.id))!;
    await parent.remove({ removeChildren: false });
    expect(await top.getJobState(tree.job.id)).to.equal('unknown');
    const [same, elsewhere] = [(await top.getJob(tree.children![0].job.id))!, (await other.getJob(tree.children![1].job.id))!];
    expect([same.state, elsewhere.state]).to.deep.equal(['waiting', 'waiting']);
    expect(same.parentKey).to.equal(undefined);
    expect(elsewhere.parent).to.equal(undefined);
    worker(top, async () => 'a');
    worker(other, async () => 'b');
    await waitFor(async () => (await top.getJobState(same.id)) === 'completed' && (await other.getJobState(elsewhere.id)) === 'completed', 'both children to complete');
    expect(await redis().exists(top.keys.job(tree.job.id), top.keys.processed(tree.job.id), top.keys.deps(tree.job.id))).to.equal(0);
    expect(await redis().hlen(other.keys.flowOutbox)).to.equal(0);
    expect(await top.getJobCounts('waiting', 'waiting-children', 'failed')).to.deep.equal({ waiting: 0, 'waiting-children': 0, failed: 0 });
  });

  it('queue.remove(id, { removeChildren: false }) keeps the children too', async () => {
    const q = queue();
    const tree = await flowProducer().add({ name: 'p', queueName: q.name, children: [{ name: 'c', queueName: q.name, opts: { delay: HOUR } }] });
    expect(await q.remove(tree.job.id, { removeChildren: false })).to.equal(true);
    expect(await q.getJobState(tree.children![0].job.id)).to.equal('delayed');
  });

  it('moveToWaitingChildren(token, { child }): waits only while that child is unsettled', async () => {
    const [q, other] = [queue(), queue()];
    const answers: boolean[] = [];
    worker(q, async (job: Job, token?: string) => {
      if (job.name === 'kid') return 'k';
      const step = job.data.step ?? 'start';
      if (step === 'start') {
        const slow = await other.add('slow', {}, { parent: { id: job.id, queue: job.queueQualifiedName! }, delay: HOUR });
        const fast = await q.add('kid', {}, { parent: { id: job.id, queue: job.queueQualifiedName! } });
        await job.updateData({ step: 'wait', slow: slow.id, fast: fast.id });
        // a job that is no unsettled child of this one: it runs on, though two children are unsettled
        answers.push(await job.moveToWaitingChildren(token!, { child: { id: 'not-a-child', queue: q.keys.base } }));
        // the fast child, named in BullMQ's queue form (<prefix>:<queue>), is unsettled: the parent waits
        const waits = await job.moveToWaitingChildren(token!, { child: { id: fast.id, queue: `glide:${q.name}` } });
        answers.push(waits);
        if (waits) throw new WaitingChildrenError();
      }
      // the fast child named settled: the parent runs on
      answers.push(await job.moveToWaitingChildren(token!, { child: { id: job.data.fast, queue: q.keys.base } }));
      return 'done';
    });
    const parent = await q.add('parent', {});
    await waitFor(async () => (await q.getJobState(parent.id)) === 'waiting-children', 'the parent to wait');
    // it waits for all of its children, as BullMQ's does: the slow one still holds it
    expect(answers).to.deep.equal([false, true]);
    const slowId = (await q.getJob(parent.id))!.data.slow as string;
    await (await Job.fromId(other, slowId))!.promote();
    worker(other, async () => 's');
    await waitFor(async () => (await q.getJobState(parent.id)) === 'completed', 'the parent to complete');
    expect(answers).to.deep.equal([false, true, false]);
  });

  it('job.toJSON() carries parentKey and parent, as BullMQ\'s JobJson', async () => {
    const [top, other] = [queue(), queue()];
    const tree = await flowProducer().add({ name: 'p', queueName: top.name, children: [{ name: 'c', queueName: other.name }] });
    const child = (await other.getJob(tree.children![0].job.id))!;
    const json = child.toJSON() as Record<string, unknown>;
    expect(json.parentKey).to.equal(top.keys.job(tree.job.id));
    expect(json.parent).to.deep.equal({ id: tree.job.id, queueKey: top.keys.base });
    const top1 = (await top.getJob(tree.job.id))!.toJSON() as Record<string, unknown>;
    expect(top1.parentKey).to.equal(undefined);
    expect(top1.parent).to.equal(undefined);
  });

  it('job.getParents() (glide-mq) lists every parent of a DAG node; none for a job without', async () => {
    const [q, other] = [queue(), queue()];
    const jobs = await flowProducer().addDAG({
      nodes: [
        { name: 'A', queueName: q.name, data: {} },
        { name: 'B', queueName: q.name, data: {}, deps: ['A'] },
        { name: 'C', queueName: other.name, data: {}, deps: ['A'] },
      ],
    });
    const a = (await Job.fromId(q, jobs.get('A')!.id))!;
    const parents = await a.getParents();
    expect(parents).to.have.deep.members([
      { queue: q.name, id: jobs.get('B')!.id },
      { queue: other.name, id: jobs.get('C')!.id },
    ]);
    expect(await (await Job.fromId(q, jobs.get('B')!.id))!.getParents()).to.deep.equal([]);
  });
});
