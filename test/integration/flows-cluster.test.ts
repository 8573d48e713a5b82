/**
 * Flows on a real 3-primary cluster (issue 29), as far as this part goes: a flow whose jobs are in
 * one queue (one slot) is stored in one call and runs there; a flow across slots is refused by name
 * before anything is written (its parts and their journal are a later part of the issue).
 */
import { expect } from 'chai';
import { Cluster } from 'ioredis';
import { keySlot } from '../../src/engine/connecting/connection.js';
import { FlowProducer } from '../../src/engine/flows/flow-producer.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { useCluster } from '../helpers/cluster.js';
import { waitFor } from '../helpers/valkey.js';
import { rejection } from '../helpers/compat.js';

describe('flows on a cluster', function () {
  this.timeout(60000);
  const cluster = useCluster();
  const opened: { close(): Promise<unknown> }[] = [];
  const track = <T extends { close(): Promise<unknown> }>(x: T): T => {
    opened.push(x);
    return x;
  };
  afterEach(async () => {
    for (const x of opened.splice(0).reverse()) await x.close();
  });
  const connection = () => ({ url: cluster().url, cluster: true });

  it('a flow in one queue is stored in one call, and its parent runs once after its children', async () => {
    const q = track(new Queue('flow-one-slot', { connection: connection() }));
    const flow = track(new FlowProducer({ connection: connection() }));
    const tree = await flow.add({ name: 'p', queueName: q.name, children: [{ name: 'c1', queueName: q.name, data: 1 }, { name: 'c2', queueName: q.name, data: 2 }] });
    const runs: string[] = [];
    const w = track(new Worker(q.name, async (job) => {
      runs.push(job.name);
      return job.name === 'p' ? Object.values(await job.getChildrenValues()).reduce((a: number, b) => a + (b as number), 0) : job.data;
    }, { connection: connection(), blockTimeout: 1000 }));
    w.on('error', () => undefined);
    await waitFor(async () => (await q.getJobState(tree.job.id)) === 'completed', 'the parent to complete');
    expect(runs.filter((r) => r === 'p')).to.have.length(1);
    expect((await q.getJob(tree.job.id))!.returnvalue).to.equal(3);
  });

  it('a flow across slots is refused by name and writes nothing', async () => {
    const [a, b] = ['flow-slot-a', 'flow-slot-b'];
    const qa = track(new Queue(a, { connection: connection() }));
    const qb = track(new Queue(b, { connection: connection() }));
    expect(keySlot(qa.keys.meta)).to.not.equal(keySlot(qb.keys.meta));
    const flow = track(new FlowProducer({ connection: connection() }));
    const err = await rejection(flow.add({ name: 'p', queueName: a, children: [{ name: 'c', queueName: b }] }));
    expect(err.name).to.equal('NotSupportedError');
    expect(err.message).to.match(/different cluster slots/);
    await qa.waitUntilReady();
    const client = qa.client as Cluster;
    expect(await client.exists(qa.keys.waitingChildren)).to.equal(0);
    expect((await qb.getJobCounts()).waiting).to.equal(0);
  });
});
