/**
 * Flows added together are stored together (src/engine/flows/flow-coalescer.ts): the adds one
 * FlowProducer makes in one turn of the event loop go to the server as one glidemq_addFlow call,
 * and each add still gets exactly the answer it would have had alone: its own tree, its own
 * refusal (which stores nothing of it and nothing less of the others), `created` false for a flow
 * whose jobs all existed.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import type { FlowJob } from '../../src/engine/flows/flow-nodes.js';
import { COALESCE_MAX_FLOWS } from '../../src/engine/flows/flow-coalescer.js';
import { useServer } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';

describe('flows: adds made together are one call, each answered as alone', function () {
  this.timeout(30000);
  const server = useServer();
  const h = new Harness(server);
  let admin: Redis;
  beforeEach(() => (admin = server().client()));
  afterEach(async () => {
    admin.disconnect();
    await h.cleanup();
  });

  /** FCALLs the server ran so far (INFO commandstats: cmdstat_fcall:calls=N,...). */
  const flowCalls = async () => Number(/cmdstat_fcall:calls=(\d+)/.exec(await admin.info('commandstats'))?.[1] ?? 0);
  const tree = (top: string, child: string, tag: number, childOpts: FlowJob['opts'] = {}): FlowJob => ({
    name: 'top',
    queueName: top,
    data: { tag },
    children: [
      { name: 'a', queueName: child, data: { tag } },
      { name: 'b', queueName: child, data: { tag }, opts: childOpts },
    ],
  });

  it('eight adds in one turn are one call; each resolves to its own tree, stored whole', async () => {
    const top = h.queue(uniqueQueue('top'));
    const child = h.queue(uniqueQueue('child'));
    const flow = h.flowProducer();
    await flow.waitUntilReady();
    const before = await flowCalls();
    const trees = await Promise.all(Array.from({ length: 8 }, (_, i) => flow.add(tree(top.name, child.name, i))));
    expect(await flowCalls()).to.equal(before + 1);
    trees.forEach((t, i) => {
      expect(t.job.data).to.deep.equal({ tag: i });
      expect(t.children!.map((c) => c.job.data)).to.deep.equal([{ tag: i }, { tag: i }]);
      expect(t.job.created).to.equal(true);
    });
    for (const t of trees) {
      expect(await top.getJobState(t.job.id!)).to.equal('waiting-children');
      expect(await t.job.getDependenciesCount()).to.deep.include({ unprocessed: 2 });
      for (const c of t.children!) expect(await child.getJobState(c.job.id!)).to.equal('waiting');
    }
    expect(await child.count()).to.equal(16);
  });

  it('a refused flow among others gets its own refusal and stores nothing; the others are stored', async () => {
    const top = h.queue(uniqueQueue('top'));
    const child = h.queue(uniqueQueue('child'));
    await child.add('existing', {}, { jobId: 'taken' });
    const flow = h.flowProducer();
    const [a, b, c] = await Promise.allSettled([
      flow.add(tree(top.name, child.name, 1)),
      flow.add(tree(top.name, child.name, 2, { jobId: 'taken' })),
      flow.add(tree(top.name, child.name, 3)),
    ]);
    expect(a.status).to.equal('fulfilled');
    expect(c.status).to.equal('fulfilled');
    expect(b.status).to.equal('rejected');
    const err = (b as PromiseRejectedResult).reason as Error;
    expect(err.name).to.equal('InvalidArgumentError');
    expect(err.message).to.match(/taken exists already/);
    // the two stored flows and the job that was there: nothing of the refused flow
    expect(await top.getJobCounts('waiting-children')).to.deep.equal({ 'waiting-children': 2 });
    expect(await child.count()).to.equal(5);
    for (const r of [a, c]) {
      const t = (r as PromiseFulfilledResult<Awaited<ReturnType<typeof flow.add>>>).value;
      expect(await top.getJobState(t.job.id!)).to.equal('waiting-children');
    }
  });

  it('the same flow added twice in one turn is stored once: the second answers created false', async () => {
    const top = h.queue(uniqueQueue('top'));
    const child = h.queue(uniqueQueue('child'));
    const same = (): FlowJob => ({
      name: 'top', queueName: top.name, opts: { jobId: 'p1' },
      children: [{ name: 'a', queueName: child.name, opts: { jobId: 'c1' } }],
    });
    const flow = h.flowProducer();
    const trees = await Promise.all([flow.add(same()), flow.add(same())]);
    expect(trees.map((t) => t.job.created).sort()).to.deep.equal([false, true]);
    expect(await child.count()).to.equal(1);
    expect(await top.getJobState('p1')).to.equal('waiting-children');
  });

  it('close() right after adds it was not awaited for stores them first', async () => {
    const top = h.queue(uniqueQueue('top'));
    const child = h.queue(uniqueQueue('child'));
    const flow = h.flowProducer();
    await flow.waitUntilReady();
    const adds = [flow.add(tree(top.name, child.name, 1)), flow.add(tree(top.name, child.name, 2))];
    await flow.close();
    for (const t of await Promise.all(adds)) expect(await top.getJobState(t.job.id!)).to.equal('waiting-children');
    expect(await child.count()).to.equal(4);
  });

  it(`more than ${COALESCE_MAX_FLOWS} adds in one turn are cut into calls of at most ${COALESCE_MAX_FLOWS} flows`, async () => {
    const top = h.queue(uniqueQueue('top'));
    const child = h.queue(uniqueQueue('child'));
    const flow = h.flowProducer();
    await flow.waitUntilReady();
    const before = await flowCalls();
    const n = COALESCE_MAX_FLOWS + 6;
    const trees = await Promise.all(Array.from({ length: n }, (_, i) => flow.add(tree(top.name, child.name, i))));
    expect(await flowCalls()).to.equal(before + 2);
    expect(new Set(trees.map((t) => t.job.id)).size).to.equal(n);
    expect(await child.count()).to.equal(2 * n);
  });
});
