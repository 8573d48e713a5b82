/**
 * `glidemq import-bullmq` from a BullMQ queue on a Valkey cluster (issue 31): BullMQ, given a cluster
 * client and its hash-tagged prefix `{bull}`, fills a queue (waiting, prioritized, delayed, a flow
 * parent and its child, a dedup id); the CLI, given a cluster node's URL as --source and that prefix,
 * copies it into a glidemq queue on the same cluster, with counts equal on both sides; a BullMQ
 * worker connected to any primary makes it refuse.
 */
import { expect } from 'chai';
import { Cluster } from 'ioredis';
import { FlowProducer as BullFlowProducer, Queue as BullQueue, Worker as BullWorker } from 'bullmq';
import { Queue } from '../../src/engine/queue/queue.js';
import { runCli } from '../helpers/cli.js';
import { useCluster } from '../helpers/cluster.js';
import { uniqueQueue } from '../helpers/engine.js';
import { waitFor } from '../helpers/valkey.js';

const HOUR = 3_600_000;

describe('CLI: import-bullmq from a cluster', function () {
  this.timeout(60000);
  const cluster = useCluster();
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });

  it('reads a BullMQ queue under a hash-tagged prefix through a cluster client, flows and dedup ids included', async () => {
    const name = uniqueQueue('bullcluster');
    const connection = new Cluster(cluster().startupNodes);
    const bull = new BullQueue(name, { connection, prefix: '{bull}' });
    const flows = new BullFlowProducer({ connection, prefix: '{bull}' });
    const q = new Queue(name, { connection: { url: cluster().url, cluster: true } });
    closers.push(() => connection.quit(), () => bull.close(), () => flows.close(), () => q.close());
    await bull.add('w', { n: 1 }, { jobId: 'w-1', deduplication: { id: 'once' } });
    await bull.add('p', { n: 2 }, { jobId: 'p-1', priority: 4 });
    await bull.add('d', { n: 3 }, { jobId: 'd-1', delay: HOUR });
    await flows.add({ name: 'top', queueName: name, opts: { jobId: 'top-1' }, children: [{ name: 'leaf', queueName: name, opts: { jobId: 'leaf-1' } }] });

    const r = await runCli(['-u', cluster().url, 'import-bullmq', name, '--source', cluster().url, '--source-prefix', '{bull}', '--json']);
    expect(r.code, r.stderr + r.stdout).to.equal(0);
    const [out] = JSON.parse(r.stdout).queues;
    expect(out.source).to.include({ waiting: 2, prioritized: 1, delayed: 1, 'waiting-children': 1 });
    expect(out.target).to.deep.equal(out.source);
    expect(out.dedupIds).to.equal(1);
    expect((await q.getJob('leaf-1'))!.parentKey).to.equal(q.keys.job('top-1'));
    expect(await (await q.getJob('top-1'))!.getDependenciesCount()).to.include({ unprocessed: 1 });
    expect((await q.add('w', { n: 4 }, { deduplication: { id: 'once' } })).id).to.equal('w-1');
  });

  it('refuses while a BullMQ worker of the queue is connected to the cluster', async () => {
    const name = uniqueQueue('bullcluster');
    const connection = new Cluster(cluster().startupNodes);
    const bull = new BullQueue(name, { connection, prefix: '{bull}' });
    // BullMQ leaves a connection it was given open at close: quit here, or it retries the stopped
    // cluster for the rest of the run
    const workerConnection = new Cluster(cluster().startupNodes);
    const w = new BullWorker(name, async () => undefined, { connection: workerConnection, prefix: '{bull}' });
    w.on('error', () => undefined);
    closers.push(() => connection.quit(), () => bull.close(), () => workerConnection.quit(), () => w.close());
    await waitFor(async () => (await bull.getWorkersCount()) > 0, 'the BullMQ worker to connect');
    const r = await runCli(['-u', cluster().url, 'import-bullmq', name, '--source', cluster().url, '--source-prefix', '{bull}']);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.match(/BullMQ is working on queue .*worker connection/);
  });
});
