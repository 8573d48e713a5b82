/**
 * BullMQ's flows (issue 29): FlowProducer.add / addBulk / getFlow with BullMQ's shapes, a parent
 * that runs once after its children (in its own queue and in others), its children's values, the
 * four failure policies as BullMQ documents them, a job added with `parent`, removeChildDependency,
 * and moveToWaitingChildren with WaitingChildrenError. Where glidemq names a child differently (its
 * job key `<prefix>:{<queue>}:job:<id>`, where BullMQ writes `<prefix>:<queue>:<id>`), the test says so.
 */
import { expect } from 'chai';
import { FlowProducer, type Job, type Queue, QueueEvents, WaitingChildrenError } from '../../src/index.js';
import { rejection, useCompat } from '../helpers/compat.js';
import { waitFor } from '../helpers/valkey.js';

describe('BullMQ compatibility: flows', function () {
  this.timeout(30000);
  const { queue, worker, connection, closeLater, redis } = useCompat('flow', { promotionInterval: 100 });
  const flowProducer = () => {
    const f = new FlowProducer({ connection: connection() });
    closeLater(() => f.close());
    return f;
  };
  const stateOf = (q: Queue, id: string) => q.getJobState(id);

  it('add: a tree with children in its own queue and another; the parent runs once, after both, and reads their values', async () => {
    const top = queue();
    const other = queue();
    const flow = flowProducer();
    const tree = await flow.add({
      name: 'parent',
      queueName: top.name,
      data: { p: 1 },
      children: [
        { name: 'same', queueName: top.name, data: { v: 1 } },
        { name: 'elsewhere', queueName: other.name, data: { v: 2 } },
      ],
    });
    expect(tree.job.name).to.equal('parent');
    expect(tree.children!.map((c) => c.job.name)).to.deep.equal(['same', 'elsewhere']);
    expect(tree.children![0].job.parentKey).to.equal(top.keys.job(tree.job.id));
    expect(tree.children![1].job.parent).to.deep.equal({ id: tree.job.id, queueKey: top.keys.base });
    expect(await stateOf(top, tree.job.id)).to.equal('waiting-children');
    expect(await tree.job.isWaitingChildren()).to.equal(true);
    expect((await top.getJobCounts())['waiting-children']).to.equal(1);
    expect((await top.getWaitingChildren()).map((j) => j.id)).to.deep.equal([tree.job.id]);
    expect(await tree.job.getDependenciesCount()).to.deep.equal({ processed: 0, unprocessed: 2, ignored: 0, failed: 0 });

    const runs: string[] = [];
    let seen: Record<string, unknown> = {};
    worker(top, async (job) => {
      runs.push(job.name);
      if (job.name === 'parent') {
        seen = await job.getChildrenValues();
        return 'done';
      }
      return job.data.v * 10;
    });
    worker(other, async (job) => {
      runs.push(job.name);
      return job.data.v * 10;
    });
    await waitFor(async () => (await stateOf(top, tree.job.id)) === 'completed', 'the parent to complete');
    expect(runs.filter((r) => r === 'parent')).to.have.length(1);
    expect(runs.indexOf('parent')).to.equal(2);
    // children are named by their job keys (BullMQ: `<prefix>:<queue>:<id>`)
    expect(seen).to.deep.equal({ [top.keys.job(tree.children![0].job.id)]: 10, [other.keys.job(tree.children![1].job.id)]: 20 });
    const deps = await tree.job.getDependencies();
    expect(deps.unprocessed).to.deep.equal([]);
    expect(Object.keys(deps.processed!)).to.have.length(2);
    expect(await redis().hlen(other.keys.flowOutbox)).to.equal(0); // the worker relayed its record
  });

  it('QueueEvents: a parent is added waiting-children, then waiting (prev waiting-children) once its child completed', async () => {
    const q = queue();
    const qe = new QueueEvents(q.name, { connection: connection(), blockingTimeout: 1000 });
    closeLater(() => qe.close());
    const seen: string[] = [];
    for (const event of ['added', 'waiting', 'waiting-children', 'completed'] as const) {
      qe.on(event, (args: { jobId: string; prev?: string }) => seen.push(`${event}:${args.jobId}${args.prev ? `:${args.prev}` : ''}`));
    }
    await qe.waitUntilReady();
    const tree = await flowProducer().add({ name: 'p', queueName: q.name, children: [{ name: 'c', queueName: q.name }] });
    const [p, c] = [tree.job.id, tree.children![0].job.id];
    worker(q, async () => 'ok');
    await waitFor(() => seen.includes(`completed:${p}:active`), 'the parent to complete');
    expect(seen.filter((e) => e.split(':')[1] === p)).to.deep.equal([`added:${p}`, `waiting-children:${p}`, `waiting:${p}:waiting-children`, `completed:${p}:active`]);
    expect(seen).to.include.members([`added:${c}`, `waiting:${c}`, `completed:${c}:active`]);
  });

  it('removing a parent removes its unfinished subtree in its queue, or refuses while a child runs', async () => {
    const q = queue();
    const flow = flowProducer();
    const tree = await flow.add({
      name: 'p',
      queueName: q.name,
      children: [{ name: 'c', queueName: q.name, children: [{ name: 'g', queueName: q.name, opts: { delay: 3_600_000 } }] }],
    });
    expect(await q.remove(tree.job.id)).to.equal(true);
    expect(await redis().exists(q.keys.job(tree.children![0].job.id), q.keys.job(tree.children![0].children![0].job.id), q.keys.deps(tree.job.id))).to.equal(0);
    expect(await q.getJobCounts('waiting-children', 'delayed')).to.deep.equal({ 'waiting-children': 0, delayed: 0 });

    const busy = await flow.add({ name: 'p', queueName: q.name, children: [{ name: 'c', queueName: q.name }] });
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    worker(q, async () => held);
    await waitFor(async () => (await q.getJobState(busy.children![0].job.id)) === 'active', 'the child to run');
    const err = await rejection(q.remove(busy.job.id));
    expect(err.name).to.equal('JobActiveError');
    expect(await q.getJobState(busy.job.id)).to.equal('waiting-children');
    release();
  });

  it('obliterate leaves none of a flow\'s keys (waiting-children, deps, processed, outbox)', async () => {
    const q = queue();
    const other = queue();
    const tree = await flowProducer().add({ name: 'p', queueName: q.name, children: [{ name: 'c', queueName: q.name }, { name: 'o', queueName: other.name }] });
    const w = worker(q, async () => 'ok');
    await waitFor(async () => (await tree.job.getDependenciesCount({ processed: true })).processed === 1, 'the child in the same queue to complete');
    await w.close(); // (a running worker writes its registry entry again)
    await q.obliterate({ force: true });
    expect(await redis().keys(`${q.keys.base}:*`)).to.deep.equal([]);
  });

  it('getFlow reads the tree back, with depth and maxChildren', async () => {
    const q = queue();
    const flow = flowProducer();
    const tree = await flow.add({
      name: 'root',
      queueName: q.name,
      children: [{ name: 'a', queueName: q.name, children: [{ name: 'a1', queueName: q.name }] }, { name: 'b', queueName: q.name }],
    });
    const read = (await flow.getFlow({ id: tree.job.id, queueName: q.name }))!;
    expect(read.job.name).to.equal('root');
    expect(read.children!.map((c) => c.job.name).sort()).to.deep.equal(['a', 'b']);
    const a = read.children!.find((c) => c.job.name === 'a')!;
    expect(a.children!.map((c) => c.job.name)).to.deep.equal(['a1']);
    const shallow = (await flow.getFlow({ id: tree.job.id, queueName: q.name, depth: 1, maxChildren: 1 }))!;
    expect(shallow.children).to.have.length(1);
    expect(shallow.children![0].children).to.equal(undefined);
    expect(await flow.getFlow({ id: 'no-such', queueName: q.name })).to.equal(undefined);
  });

  it('addBulk stores several trees in one call; a refused tree stores none of them', async () => {
    const q = queue();
    const flow = flowProducer();
    const trees = await flow.addBulk([
      { name: 'p1', queueName: q.name, children: [{ name: 'c1', queueName: q.name }] },
      { name: 'p2', queueName: q.name, children: [{ name: 'c2', queueName: q.name }] },
    ]);
    expect(trees.map((t) => t.job.name)).to.deep.equal(['p1', 'p2']);
    expect((await q.getJobCounts()).waiting).to.equal(2);
    const err = await rejection(
      flow.addBulk([
        { name: 'ok', queueName: q.name, children: [{ name: 'c', queueName: q.name }] },
        { name: 'bad', queueName: q.name, opts: { priority: -1 } },
      ]),
    );
    expect(err.message).to.match(/priority/);
    expect((await q.getJobCounts()).waiting).to.equal(2);
  });

  it('a job added with parent joins an existing parent\'s dependencies', async () => {
    const q = queue();
    const flow = flowProducer();
    const tree = await flow.add({ name: 'p', queueName: q.name, children: [{ name: 'c1', queueName: q.name }] });
    const late = await q.add('c2', { v: 2 }, { parent: { id: tree.job.id, queue: q.keys.base } });
    expect(late.parentKey).to.equal(q.keys.job(tree.job.id));
    // BullMQ's queue key form (`<prefix>:<name>`) names the same parent
    const bullmqForm = await q.add('c3', {}, { parent: { id: tree.job.id, queue: `glide:${q.name}` } });
    expect(bullmqForm.parentKey).to.equal(q.keys.job(tree.job.id));
    expect((await tree.job.getDependenciesCount({ unprocessed: true })).unprocessed).to.equal(3);
    // BullMQ's pages: a kind asked for, from a cursor, with the next cursor (0: the last page)
    const page = await tree.job.getDependencies({ unprocessed: { cursor: 0, count: 10 } });
    expect(page.unprocessed).to.have.members([q.keys.job(tree.children![0].job.id), q.keys.job(late.id), q.keys.job(bullmqForm.id)]);
    expect(page.nextUnprocessedCursor).to.equal(0);
    expect(page.processed).to.equal(undefined);
    const refused = await rejection(q.add('c3', {}, { parent: { id: 'missing', queue: q.keys.base } }));
    expect(refused.name).to.equal('JobNotFoundError');
  });

  const policyFlow = async (top: Queue, child: Queue, opts: Record<string, boolean>) => {
    const flow = flowProducer();
    return flow.add({
      name: 'parent',
      queueName: top.name,
      children: [
        { name: 'bad', queueName: child.name, opts },
        { name: 'good', queueName: child.name },
      ],
    });
  };
  const runChildren = (child: Queue) =>
    worker(child, async (job) => {
      if (job.name === 'bad') throw new Error('child broke');
      return 'fine';
    });

  it('default: a child that fails leaves its parent waiting for children', async () => {
    const top = queue();
    const child = queue();
    const tree = await policyFlow(top, child, {});
    runChildren(child);
    await waitFor(async () => (await child.getJobCounts('failed', 'completed')).completed === 1 && (await child.getJobCounts('failed')).failed === 1, 'children to finish');
    expect(await stateOf(top, tree.job.id)).to.equal('waiting-children');
    expect((await tree.job.getDependenciesCount()).unprocessed).to.equal(1);
  });

  it('failParentOnFailure: the parent fails, and on up its chain while the flag holds', async () => {
    const top = queue();
    const mid = queue();
    const leaf = queue();
    const flow = flowProducer();
    const tree = await flow.add({
      name: 'root',
      queueName: top.name,
      children: [{ name: 'mid', queueName: mid.name, opts: { failParentOnFailure: true }, children: [{ name: 'bad', queueName: leaf.name, opts: { failParentOnFailure: true } }] }],
    });
    runChildren(leaf);
    await waitFor(async () => (await stateOf(top, tree.job.id)) === 'failed', 'the root to fail');
    const midJob = tree.children![0].job;
    expect(await stateOf(mid, midJob.id)).to.equal('failed');
    expect((await mid.getJob(midJob.id))!.failedReason).to.equal(`child ${leaf.keys.job(tree.children![0].children![0].job.id)} failed`);
    expect(Object.keys(await (await top.getJob(tree.job.id))!.getFailedChildrenValues())).to.deep.equal([mid.keys.job(midJob.id)]);
  });

  it('failParentOnFailure while the parent runs: its next moveToWaitingChildren fails it', async () => {
    const q = queue();
    let err: Error | undefined;
    worker(q, async (job: Job, token?: string) => {
      if (job.name === 'kid') throw new Error('kid broke');
      await q.add('kid', {}, { parent: { id: job.id, queue: q.keys.base }, failParentOnFailure: true });
      await q.add('slow', {}, { parent: { id: job.id, queue: q.keys.base }, delay: 3_600_000 });
      await waitFor(async () => (await q.getJobCounts('failed')).failed === 1, 'the child to fail');
      try {
        await job.moveToWaitingChildren(token!);
      } catch (e) {
        err = e as Error;
        throw e;
      }
    }, { concurrency: 2 });
    const parent = await q.add('parent', {});
    await waitFor(async () => (await q.getJobState(parent.id)) === 'failed', 'the parent to fail');
    expect(err!.name).to.equal('UnrecoverableError');
    expect(err!.message).to.match(/^child .*:job:.* failed$/);
  });

  it('ignoreDependencyOnFailure: the parent runs once the others completed, and reads the failure', async () => {
    const top = queue();
    const child = queue();
    const tree = await policyFlow(top, child, { ignoreDependencyOnFailure: true });
    runChildren(child);
    let ignored: Record<string, string> = {};
    worker(top, async (job) => {
      ignored = await job.getIgnoredChildrenFailures();
    });
    await waitFor(async () => (await stateOf(top, tree.job.id)) === 'completed', 'the parent to complete');
    expect(ignored).to.deep.equal({ [child.keys.job(tree.children![0].job.id)]: 'child broke' });
  });

  it('removeDependencyOnFailure: the parent runs once the others completed, the failed child forgotten', async () => {
    const top = queue();
    const child = queue();
    const tree = await policyFlow(top, child, { removeDependencyOnFailure: true });
    runChildren(child);
    let counts: unknown;
    worker(top, async (job) => {
      counts = await job.getDependenciesCount();
    });
    await waitFor(async () => (await stateOf(top, tree.job.id)) === 'completed', 'the parent to complete');
    expect(counts).to.deep.equal({ processed: 1, unprocessed: 0, ignored: 0, failed: 0 });
  });

  it('continueParentOnFailure: the parent runs as soon as the child failed, and reads it in getFailedChildrenValues', async () => {
    const top = queue();
    const child = queue();
    const flow = flowProducer();
    const tree = await flow.add({
      name: 'parent',
      queueName: top.name,
      children: [
        { name: 'bad', queueName: child.name, opts: { continueParentOnFailure: true } },
        { name: 'slow', queueName: child.name, opts: { delay: 3_600_000 } },
      ],
    });
    runChildren(child);
    let failed: Record<string, string> = {};
    worker(top, async (job) => {
      failed = await job.getFailedChildrenValues();
    });
    await waitFor(async () => (await stateOf(top, tree.job.id)) === 'completed', 'the parent to complete');
    expect(failed).to.deep.equal({ [child.keys.job(tree.children![0].job.id)]: 'child broke' });
    expect(await stateOf(child, tree.children![1].job.id)).to.equal('delayed');
  });

  it('removeChildDependency: the parent no longer waits for that child', async () => {
    const q = queue();
    const flow = flowProducer();
    const tree = await flow.add({ name: 'p', queueName: q.name, children: [{ name: 'c', queueName: q.name, opts: { delay: 3_600_000 } }] });
    const child = (await q.getJob(tree.children![0].job.id))!;
    expect(await child.getState()).to.equal('delayed');
    const fetched = (await (await import('../../src/index.js')).Job.fromId(q, child.id))!;
    expect(await fetched.removeChildDependency()).to.equal(true);
    expect(await fetched.removeChildDependency()).to.equal(false);
    expect(await stateOf(q, tree.job.id)).to.equal('waiting');
  });

  it('moveToWaitingChildren: a running parent adds children, waits, and runs again once they completed', async () => {
    const q = queue();
    const steps: string[] = [];
    worker(q, async (job: Job, token?: string) => {
      if (job.name === 'kid') return job.data.n;
      const step = job.data.step ?? 'start';
      steps.push(step);
      if (step === 'start') {
        expect(job.queueQualifiedName).to.equal(q.keys.base);
        await q.add('kid', { n: 1 }, { parent: { id: job.id, queue: job.queueQualifiedName! } });
        await q.add('kid', { n: 2 }, { parent: { id: job.id, queue: q.keys.base } });
        await job.updateData({ step: 'wait' });
        if (await job.moveToWaitingChildren(token!)) throw new WaitingChildrenError();
      }
      expect(await job.moveToWaitingChildren(token!)).to.equal(false);
      return Object.values(await job.getChildrenValues()).reduce((a: number, b) => a + (b as number), 0);
    });
    const parent = await q.add('parent', {});
    await waitFor(async () => (await stateOf(q, parent.id)) === 'completed', 'the parent to complete');
    expect(steps).to.deep.equal(['start', 'wait']);
    expect((await q.getJob(parent.id))!.returnvalue).to.equal(3);
  });
});
