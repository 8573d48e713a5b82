/**
 * glide-mq's workflow helpers on a real 3-primary cluster: chain, group, chord and a DAG in one
 * queue each live in that queue's slot, so each is stored by one call there and runs end to end
 * with a cluster client. (A DAG across queues of different slots is the cluster flow's journal.)
 */
import { expect } from 'chai';
import { chain, chord, dag, group, Queue, Worker, type Job } from '../../src/index.js';
import { useCluster } from '../helpers/cluster.js';
import { waitFor } from '../helpers/valkey.js';

describe('cluster: glide-mq workflow helpers in one queue', function () {
  this.timeout(60000);
  const cluster = useCluster();
  const opened: { close(): Promise<unknown> }[] = [];
  afterEach(async () => {
    for (const x of opened.splice(0).reverse()) await x.close();
  });
  const connection = () => ({ url: cluster().url, cluster: true });
  const setUp = (name: string, processor: (job: Job) => Promise<unknown>) => {
    const q = new Queue(name, { connection: connection() });
    opened.push(q);
    opened.push(new Worker(name, processor, { connection: connection(), concurrency: 4, blockTimeout: 1000 }));
    return q;
  };
  const completed = (q: Queue, id: string) => waitFor(async () => (await q.getJobState(id)) === 'completed', `job ${id} to complete`);
  const values = async (job: Job) => Object.values(await job.getChildrenValues());

  it('chain, group and chord run in order and read their children\'s values', async () => {
    const order: string[] = [];
    const q = setUp('dag-cluster-helpers', async (job) => {
      order.push(job.name);
      const before = await values(job);
      if (job.name.startsWith('step')) return [...((before[0] as string[] | undefined) ?? []), job.name];
      if (job.name === '__group__' || job.name === 'callback') return (before as number[]).sort((a, b) => a - b);
      return job.data;
    });
    const steps = await chain(q.name, [{ name: 'step3' }, { name: 'step2' }, { name: 'step1' }], connection());
    await completed(q, steps.job.id);
    expect((await q.getJob(steps.job.id))!.returnvalue).to.deep.equal(['step1', 'step2', 'step3']);
    const parallel = await group(q.name, [{ name: 'n', data: 2 }, { name: 'n', data: 1 }], connection());
    await completed(q, parallel.job.id);
    expect((await q.getJob(parallel.job.id))!.returnvalue).to.deep.equal([1, 2]);
    const both = await chord(q.name, [{ name: 'n', data: 5 }, { name: 'n', data: 4 }], { name: 'callback' }, connection());
    await completed(q, both.job.id);
    expect((await q.getJob(both.job.id))!.returnvalue).to.deep.equal([4, 5]);
    expect(order.filter((n) => n === 'callback')).to.have.length(1);
  });

  it('a diamond DAG in one queue: the node waiting for two runs once, after both', async () => {
    const runs: string[] = [];
    const q = setUp('dag-cluster-diamond', async (job) => {
      runs.push(job.name);
      return (await values(job)).length;
    });
    const jobs = await dag(
      [
        { name: 'A', queueName: q.name },
        { name: 'B', queueName: q.name, deps: ['A'] },
        { name: 'C', queueName: q.name, deps: ['A'] },
        { name: 'D', queueName: q.name, deps: ['B', 'C'] },
      ],
      connection(),
    );
    await completed(q, jobs.get('D')!.id);
    expect(runs.slice().sort()).to.deep.equal(['A', 'B', 'C', 'D']);
    expect(runs[3]).to.equal('D');
    expect((await q.getJob(jobs.get('D')!.id))!.returnvalue).to.equal(2);
  });
});
