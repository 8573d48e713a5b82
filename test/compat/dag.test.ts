/**
 * glide-mq's DAG helpers (issue 29), in glide-mq's shapes: FlowProducer.addDAG({ nodes }) and
 * dag(nodes, connection) answering a Map of node name to Job; chain (the last step runs first, each
 * reading the one before through getChildrenValues), group (a '__group__' parent collecting the
 * results) and chord (a callback with every result). Each runs end to end with real Workers; a DAG
 * refused (a cycle, an unknown dep, a duplicate name, a bad option) leaves the keyspace as it was.
 * glide-mq names a child in getChildrenValues by an opaque key; glidemq's is the child's job key.
 */
import { expect } from 'chai';
import {
  chain,
  chord,
  CycleError,
  dag,
  FlowProducer,
  group,
  InvalidArgumentError,
  type DAGNode,
  type Job,
  type JobNode,
  type Queue,
} from '../../src/index.js';
import { gate, rejection, useCompat } from '../helpers/compat.js';
import { keyspaceFingerprint } from '../helpers/keyspace.js';
import { waitFor } from '../helpers/valkey.js';

describe('glide-mq compatibility: DAGs, chain, group and chord', function () {
  this.timeout(30000);
  const { queue, worker, connection, closeLater, redis } = useCompat('dag', { promotionInterval: 100 });
  const flowProducer = () => {
    const f = new FlowProducer({ connection: connection() });
    closeLater(() => f.close());
    return f;
  };
  const completed = (q: Queue, job: Job) => waitFor(async () => (await q.getJobState(job.id)) === 'completed', `${job.name} to complete`);

  /** A processor that logs each run's start and end, and answers `answer(job)`. */
  const logged = (log: string[], answer: (job: Job) => Promise<unknown> | unknown) => async (job: Job) => {
    log.push(`start ${job.name}`);
    const value = await answer(job);
    log.push(`end ${job.name}`);
    return value;
  };

  it('addDAG: a diamond; the shared dep runs once, and the node waiting for two runs once, after both, with both values', async () => {
    const q = queue();
    const flow = flowProducer();
    const jobs = await flow.addDAG({
      nodes: [
        { name: 'A', queueName: q.name, data: { v: 1 } },
        { name: 'B', queueName: q.name, data: { v: 2 }, deps: ['A'] },
        { name: 'C', queueName: q.name, data: { v: 3 }, deps: ['A'] },
        { name: 'D', queueName: q.name, data: { v: 4 }, deps: ['B', 'C'] },
      ],
    });
    expect(jobs).to.be.instanceOf(Map);
    expect([...jobs.keys()]).to.deep.equal(['A', 'B', 'C', 'D']);
    const [a, b, c, d] = ['A', 'B', 'C', 'D'].map((n) => jobs.get(n)!);
    expect(a.name).to.equal('A');
    expect(a.data).to.deep.equal({ v: 1 });
    expect(await q.getJobState(a.id)).to.equal('waiting');
    for (const j of [b, c, d]) expect(await q.getJobState(j.id)).to.equal('waiting-children');
    expect(await d.getDependenciesCount()).to.deep.equal({ processed: 0, unprocessed: 2, ignored: 0, failed: 0 });

    const log: string[] = [];
    const seen = new Map<string, Record<string, unknown>>();
    worker(
      q,
      logged(log, async (job) => {
        seen.set(job.name, await job.getChildrenValues());
        return job.data.v * 10;
      }),
      { concurrency: 4 },
    );
    await completed(q, d);
    const starts = (name: string) => log.filter((l) => l === `start ${name}`).length;
    expect(['A', 'B', 'C', 'D'].map(starts)).to.deep.equal([1, 1, 1, 1]);
    expect(log.indexOf('start B')).to.be.greaterThan(log.indexOf('end A'));
    expect(log.indexOf('start C')).to.be.greaterThan(log.indexOf('end A'));
    expect(log.indexOf('start D')).to.be.greaterThan(log.indexOf('end B'));
    expect(log.indexOf('start D')).to.be.greaterThan(log.indexOf('end C'));
    expect(seen.get('B')).to.deep.equal({ [q.keys.job(a.id)]: 10 });
    expect(seen.get('C')).to.deep.equal({ [q.keys.job(a.id)]: 10 });
    expect(seen.get('D')).to.deep.equal({ [q.keys.job(b.id)]: 20, [q.keys.job(c.id)]: 30 });
    expect((await q.getJob(d.id))!.returnvalue).to.equal(40);
  });

  it('addDAG: a node waited for by two nodes in two other queues runs once, and each of them runs after it with its value', async () => {
    const src = queue();
    const left = queue();
    const right = queue();
    const flow = flowProducer();
    const jobs = await flow.addDAG({
      nodes: [
        { name: 'fetch', queueName: src.name, data: { v: 7 } },
        { name: 'same-queue', queueName: src.name, deps: ['fetch'] },
        { name: 'left', queueName: left.name, deps: ['fetch'] },
        { name: 'right', queueName: right.name, deps: ['fetch'] },
      ],
    });
    const fetch = jobs.get('fetch')!;
    const log: string[] = [];
    const seen = new Map<string, Record<string, unknown>>();
    const run = logged(log, async (job) => {
      seen.set(job.name, await job.getChildrenValues());
      return job.name === 'fetch' ? job.data.v * 2 : job.name;
    });
    worker(src, run);
    worker(left, run);
    worker(right, run);
    await completed(src, jobs.get('same-queue')!);
    await completed(left, jobs.get('left')!);
    await completed(right, jobs.get('right')!);
    expect(log.filter((l) => l === 'start fetch')).to.have.length(1);
    for (const name of ['same-queue', 'left', 'right']) {
      expect(log.filter((l) => l === `start ${name}`), name).to.have.length(1);
      expect(log.indexOf(`start ${name}`), name).to.be.greaterThan(log.indexOf('end fetch'));
      expect(seen.get(name), name).to.deep.equal({ [src.keys.job(fetch.id)]: 14 });
    }
    expect(await redis().hlen(src.keys.flowOutbox)).to.equal(0); // the records for the other queues were relayed
  });

  it('addDAG: a node waits for deps in two other queues, and runs once after both', async () => {
    const top = queue();
    const one = queue();
    const two = queue();
    const flow = flowProducer();
    const jobs = await flow.addDAG({
      nodes: [
        { name: 'merge', queueName: top.name, deps: ['x', 'y', 'x'] }, // a dep named twice is one dep
        { name: 'x', queueName: one.name, data: 'x' },
        { name: 'y', queueName: two.name, data: 'y' },
      ],
    });
    const log: string[] = [];
    let values: Record<string, unknown> = {};
    worker(
      top,
      logged(log, async (job) => {
        values = await job.getChildrenValues();
      }),
    );
    worker(one, logged(log, (job) => `${job.data}!`));
    worker(two, logged(log, (job) => `${job.data}?`));
    await completed(top, jobs.get('merge')!);
    expect(log.filter((l) => l === 'start merge')).to.have.length(1);
    expect(log.indexOf('start merge')).to.be.greaterThan(Math.max(log.indexOf('end x'), log.indexOf('end y')));
    expect(values).to.deep.equal({ [one.keys.job(jobs.get('x')!.id)]: 'x!', [two.keys.job(jobs.get('y')!.id)]: 'y?' });
  });

  it('dag(nodes, connection): the same, on a connection of its own that it closes once the DAG is stored', async () => {
    const q = queue();
    const jobs = await dag(
      [
        { name: 'fetch-a', queueName: q.name, data: 1 },
        { name: 'fetch-b', queueName: q.name, data: 2 },
        { name: 'merge', queueName: q.name, data: 0, deps: ['fetch-a', 'fetch-b'] },
      ],
      connection(),
    );
    expect(jobs).to.be.instanceOf(Map);
    expect([...jobs.keys()].sort()).to.deep.equal(['fetch-a', 'fetch-b', 'merge']);
    await jobs.close();
    let sum = 0;
    worker(q, async (job) => {
      if (job.name !== 'merge') return job.data * 100;
      sum = Object.values(await job.getChildrenValues()).reduce((s: number, v) => s + (v as number), 0);
      return sum;
    });
    await completed(q, jobs.get('merge')!);
    expect(sum).to.equal(300);
  });

  it('a shared client ({ client }, glide-mq\'s form) keeps the returned jobs usable, and stays open after close()', async () => {
    const q = queue();
    const client = redis();
    const jobs = await dag([{ name: 'only', queueName: q.name, data: 5 }], { client });
    expect(await jobs.get('only')!.getState()).to.equal('waiting');
    await jobs.close();
    expect(await client.ping()).to.equal('PONG');
    const tree = await chain(q.name, [{ name: 'two' }, { name: 'one' }], client);
    expect(await tree.job.getState()).to.equal('waiting-children');
    await tree.close();
  });

  describe('refused before anything is written, naming the node', () => {
    const refusals: [string, (q: string) => DAGNode[], RegExp][] = [
      [
        'a cycle',
        (q) => [
          { name: 'start', queueName: q },
          { name: 'a', queueName: q, deps: ['start', 'c'] },
          { name: 'b', queueName: q, deps: ['a'] },
          { name: 'c', queueName: q, deps: ['b'] },
        ],
        /cycle \("(a|b|c)" -> "(a|b|c)" -> "(a|b|c)" -> "(a|b|c)"\)/,
      ],
      ['a node depending on itself', (q) => [{ name: 'self', queueName: q, deps: ['self'] }], /cycle \("self" -> "self"\)/],
      ['an unknown dep', (q) => [{ name: 'a', queueName: q }, { name: 'b', queueName: q, deps: ['a', 'nope'] }], /node "b" depends on "nope"/],
      ['a duplicate name', (q) => [{ name: 'a', queueName: q }, { name: 'b', queueName: q }, { name: 'a', queueName: q }], /node "a" is named twice/],
      [
        'two nodes with one jobId',
        (q) => [{ name: 'a', queueName: q, opts: { jobId: 'same' } }, { name: 'b', queueName: q, opts: { jobId: 'same' } }],
        /nodes "a" and "b" are both given jobId "same"/,
      ],
      ['a bad option', (q) => [{ name: 'a', queueName: q }, { name: 'b', queueName: q, deps: ['a'], opts: { priority: -1 } }], /job b .*priority/],
      [
        'a parent option (its parents are the nodes naming it)',
        (q) => [{ name: 'a', queueName: q, opts: { parent: { id: 'x', queue: q } } as never }],
        /node "a": opts\.parent/,
      ],
      ['a node without a queue', () => [{ name: 'a' } as DAGNode], /node "a": queueName/],
      ['no nodes', () => [], /non-empty array/],
    ];
    for (const [what, nodes, message] of refusals) {
      it(`${what}: addDAG and dag() refuse it, and the keyspace is unchanged`, async () => {
        const q = queue();
        await q.add('existing', {}); // a queue with something in it, to show it stays as it was
        const flow = flowProducer();
        await flow.waitUntilReady();
        const before = await keyspaceFingerprint(redis());
        const viaFlow = await rejection(flow.addDAG({ nodes: nodes(q.name) }));
        const viaHelper = await rejection(dag(nodes(q.name), connection()));
        for (const err of [viaFlow, viaHelper]) {
          expect(err, err.message).to.be.instanceOf(InvalidArgumentError);
          expect((err as InvalidArgumentError).code).to.equal('ERR_INVALID');
          expect(err.message).to.match(message);
        }
        expect(await keyspaceFingerprint(redis())).to.equal(before);
      });
    }

    it('a DAG the server refuses (one node\'s jobId taken already) stores none of its nodes', async () => {
      const q = queue();
      const other = queue();
      await q.add('existing', {}, { jobId: 'taken' });
      const flow = flowProducer();
      await flow.waitUntilReady();
      const before = await keyspaceFingerprint(redis());
      const err = await rejection(
        flow.addDAG({
          nodes: [
            { name: 'first', queueName: other.name },
            { name: 'second', queueName: other.name, deps: ['first'] },
            { name: 'clash', queueName: q.name, opts: { jobId: 'taken' }, deps: ['second'] },
          ],
        }),
      );
      expect(err).to.be.instanceOf(InvalidArgumentError);
      expect(err.message).to.match(/job .*taken exists already/);
      expect(await keyspaceFingerprint(redis())).to.equal(before);
    });

    it('a cycle is a CycleError (glide-mq\'s name) whose cycle lists its nodes', async () => {
      const q = queue();
      const err = await rejection(
        flowProducer().addDAG({
          nodes: [
            { name: 'x', queueName: q.name, deps: ['y'] },
            { name: 'y', queueName: q.name, deps: ['x'] },
          ],
        }),
      );
      expect(err).to.be.instanceOf(CycleError);
      expect(err.name).to.equal('CycleError');
      expect([...(err as CycleError).cycle].sort()).to.deep.equal(['x', 'x', 'y'].sort());
    });
  });

  it('chain: the last step runs first, each step after the one below it, reading its value through getChildrenValues', async () => {
    const q = queue();
    const tree = await chain(
      q.name,
      [
        { name: 'upload', data: { step: 'upload' } },
        { name: 'transform', data: { step: 'transform' } },
        { name: 'parse', data: { step: 'parse' } },
        { name: 'download', data: { step: 'download' } },
      ],
      connection(),
    );
    // the tree's top is steps[0], which runs last
    const names: string[] = [];
    for (let n: JobNode | undefined = tree; n; n = n.children?.[0]) names.push(n.job.name);
    expect(names).to.deep.equal(['upload', 'transform', 'parse', 'download']);
    expect(tree.children).to.have.length(1);
    const order: string[] = [];
    worker(
      q,
      async (job) => {
        order.push(job.name);
        const before = Object.values(await job.getChildrenValues());
        expect(before).to.have.length(job.name === 'download' ? 0 : 1);
        return [...((before[0] as string[] | undefined) ?? []), job.data.step];
      },
      { concurrency: 4 },
    );
    await completed(q, tree.job);
    expect(order).to.deep.equal(['download', 'parse', 'transform', 'upload']);
    expect((await q.getJob(tree.job.id))!.returnvalue).to.deep.equal(['download', 'parse', 'transform', 'upload']);
  });

  it('chain of one step adds one plain job', async () => {
    const q = queue();
    const tree = await chain(q.name, [{ name: 'solo', data: 1 }], connection());
    expect(tree.children).to.equal(undefined);
    expect(await q.getJobState(tree.job.id)).to.equal('waiting');
  });

  it('group: the jobs run in parallel under a "__group__" parent (data {}), which runs once with all their results', async () => {
    const q = queue();
    const tree = await group(
      q.name,
      [
        { name: 'resize-sm', data: { size: 1 } },
        { name: 'resize-md', data: { size: 2 } },
        { name: 'resize-lg', data: { size: 3 } },
      ],
      connection(),
    );
    expect(tree.job.name).to.equal('__group__');
    expect(tree.job.data).to.deep.equal({});
    expect(tree.children!.map((c) => c.job.name)).to.deep.equal(['resize-sm', 'resize-md', 'resize-lg']);
    const allStarted = gate();
    let running = 0;
    let groupRuns = 0;
    let collected: Record<string, unknown> = {};
    worker(
      q,
      async (job) => {
        if (job.name === '__group__') {
          groupRuns++;
          collected = await job.getChildrenValues();
          return Object.keys(collected).length;
        }
        // each member waits until all three run at once: they run in parallel
        if (++running === 3) allStarted.open();
        await allStarted.promise;
        return job.data.size * 10;
      },
      { concurrency: 4 },
    );
    await completed(q, tree.job);
    expect(groupRuns).to.equal(1);
    expect(collected).to.deep.equal(Object.fromEntries(tree.children!.map((c, i) => [q.keys.job(c.job.id), (i + 1) * 10])));
  });

  it('chord: the callback runs once, after every job, with every result', async () => {
    const q = queue();
    const tree = await chord(
      q.name,
      [
        { name: 'score', data: { model: 'a', score: 3 } },
        { name: 'score', data: { model: 'b', score: 9 } },
        { name: 'score', data: { model: 'c', score: 5 } },
      ],
      { name: 'select-best', data: { pick: 'max' } },
      connection(),
    );
    expect(tree.job.name).to.equal('select-best');
    expect(tree.job.data).to.deep.equal({ pick: 'max' });
    expect(tree.children).to.have.length(3);
    const log: string[] = [];
    let results: Record<string, unknown> = {};
    worker(
      q,
      logged(log, async (job) => {
        if (job.name === 'score') return { model: job.data.model, score: job.data.score };
        results = await job.getChildrenValues();
        return (Object.values(results) as { model: string; score: number }[]).sort((x, y) => y.score - x.score)[0].model;
      }),
      { concurrency: 3 },
    );
    await completed(q, tree.job);
    expect(log.filter((l) => l === 'start select-best')).to.have.length(1);
    expect(log.indexOf('start select-best')).to.equal(log.lastIndexOf('end score') + 1);
    expect(Object.keys(results).sort()).to.deep.equal(tree.children!.map((c) => q.keys.job(c.job.id)).sort());
    expect((await q.getJob(tree.job.id))!.returnvalue).to.equal('b');
  });

  it('chain, group and chord refuse bad input before anything is written, naming the job', async () => {
    const q = queue();
    await q.add('existing', {});
    const before = await keyspaceFingerprint(redis());
    const cases: [() => Promise<unknown>, RegExp][] = [
      [() => chain(q.name, [], connection()), /chain: the jobs must be a non-empty array/],
      [() => group(q.name, [{ name: 'ok' }, { name: '' }], connection()), /group: jobs\[1\]: name/],
      [() => chord(q.name, [{ name: 'ok' }], { name: 'cb', opts: { attempts: 0 } }, connection()), /job cb .*attempts/],
      [() => chain('', [{ name: 'a' }], connection()), /chain: queueName/],
      [() => chain(q.name, [{ name: 'a', opts: { parent: { id: 'p', queue: q.name } } as never }], connection()), /chain: jobs\[0\] \("a"\): opts\.parent/],
    ];
    for (const [call, message] of cases) {
      const err = await rejection(call);
      expect(err, err.message).to.be.instanceOf(InvalidArgumentError);
      expect(err.message).to.match(message);
    }
    expect(await keyspaceFingerprint(redis())).to.equal(before);
  });
});
