/**
 * Confirmed writes on a real cluster (issue 31, README "Confirmed writes"): each write is confirmed
 * on the primary that holds its slot. Adds and a worker's finishes in queues of every primary; a
 * flow whose child is on another node (stored in parts, each confirmed on its own node), and the
 * child's settlement relayed to its parent's node by a confirming worker (the flow outbox); a
 * Broadcast publish and a BroadcastWorker's finishes. The nodes run appendfsync always (glidemq
 * refuses confirm.fsync where WAITAOF acknowledges before the fsync) with one replica each, and the
 * writes are confirmed with { fsync: true, replicas: 1 }: WAITAOF 1 1 on the slot's primary.
 */
import { expect } from 'chai';
import { keySlot } from '../../src/engine/connecting/connection.js';
import { QueueKeys } from '../../src/engine/shared/keys.js';
import { BroadcastKeys } from '../../src/engine/shared/keys.js';
import { FlowProducer } from '../../src/engine/flows/flow-producer.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { Broadcast } from '../../src/engine/broadcast/broadcast.js';
import { BroadcastWorker } from '../../src/engine/broadcast/broadcast-worker.js';
import { useCluster, type TestCluster } from '../helpers/cluster.js';
import { waitFor } from '../helpers/valkey.js';

const connection = (c: TestCluster) => ({ url: c.url, cluster: true });
const CONFIRM = { fsync: true, replicas: 1, timeout: 5000 };

/** A name whose key (made by `meta`) the primary on `port` serves. */
async function nameOn(c: TestCluster, port: number, stem: string, meta: (name: string) => string): Promise<string> {
  for (let i = 0; ; i++) {
    const name = `${stem}-${i}`;
    if ((await c.primaryForSlot(keySlot(meta(name)))) === port) return name;
  }
}
const queueOn = (c: TestCluster, port: number, stem: string) => nameOn(c, port, stem, (n) => new QueueKeys(n).meta);

/** WAITAOF calls each primary has served so far (INFO commandstats), by port. */
async function waitaofCalls(c: TestCluster, ports: number[]): Promise<Map<number, number>> {
  const calls = new Map<number, number>();
  for (const port of ports) {
    const m = /cmdstat_waitaof:calls=(\d+)/.exec(String(await c.call(port, 'INFO', 'commandstats')));
    calls.set(port, m ? Number(m[1]) : 0);
  }
  return calls;
}

describe('confirmed writes on a cluster: each write confirmed on the primary of its slot', function () {
  this.timeout(60000);
  const cluster = useCluster({ nodeTimeout: 1000, persistence: 'aof-always' });
  const closers: (() => Promise<unknown>)[] = [];
  let ports: number[] = [];

  before(async () => {
    ports = (await cluster().primaries()).map((p) => p.port);
    expect(ports).to.have.length(3);
  });

  afterEach(async () => {
    for (const f of closers.splice(0).reverse()) await f().catch(() => undefined);
  });

  /** How many WAITAOF each primary served while `fn` ran. */
  async function confirmsDuring(fn: () => Promise<unknown>): Promise<Map<number, number>> {
    const before = await waitaofCalls(cluster(), ports);
    await fn();
    const after = await waitaofCalls(cluster(), ports);
    return new Map(ports.map((p) => [p, after.get(p)! - before.get(p)!]));
  }

  it('adds and a worker\'s finishes in queues on every primary are confirmed there', async () => {
    for (const port of ports) {
      const name = await queueOn(cluster(), port, 'cadd');
      const q = new Queue(name, { connection: connection(cluster()), confirm: CONFIRM });
      closers.push(() => q.close());
      await q.waitUntilReady();
      const adds = await confirmsDuring(async () => {
        await q.add('a', { v: 1 });
        await q.addBulk([{ name: 'b', data: {} }, { name: 'c', data: {} }]);
      });
      expect(adds.get(port), `WAITAOF on ${port}, the primary of ${name}`).to.be.at.least(2);
      for (const other of ports.filter((p) => p !== port)) expect(adds.get(other), `WAITAOF on ${other}`).to.equal(0);
      const w = new Worker(name, async () => 'ok', { connection: connection(cluster()), blockTimeout: 1000, confirm: CONFIRM });
      w.on('error', () => undefined);
      closers.push(() => w.close(true));
      const finishes = await confirmsDuring(() => waitFor(async () => (await q.getCompletedCount()) === 3, `three jobs of ${name} completed`));
      expect(finishes.get(port), `finishes confirmed on ${port}`).to.be.at.least(1);
    }
  });

  it('a flow across slots: each part confirmed on its node, and the child\'s settlement relayed to its parent confirmed on the parent\'s node', async () => {
    const [pPort, cPort] = ports;
    const parentQ = await queueOn(cluster(), pPort, 'cflowp');
    const childQ = await queueOn(cluster(), cPort, 'cflowc');
    const f = new FlowProducer({ connection: connection(cluster()), confirm: CONFIRM });
    closers.push(() => f.close());
    await f.waitUntilReady();
    let tree!: Awaited<ReturnType<FlowProducer['add']>>;
    const parts = await confirmsDuring(async () => {
      tree = await f.add({ name: 'p', queueName: parentQ, children: [{ name: 'c', queueName: childQ, data: { x: 1 } }] });
    });
    expect(parts.get(pPort), 'the parent\'s part confirmed on its node').to.be.at.least(1);
    expect(parts.get(cPort), 'the child\'s part confirmed on its node').to.be.at.least(1);
    const parents = new Queue(parentQ, { connection: connection(cluster()) });
    closers.push(() => parents.close());
    expect(await parents.getJobState(tree.job.id!)).to.equal('waiting-children');
    // the child runs on its node; its settlement of the parent is relayed to the parent's node
    const relay = await confirmsDuring(async () => {
      const w = new Worker(childQ, async () => 'child-done', { connection: connection(cluster()), blockTimeout: 1000, confirm: CONFIRM });
      w.on('error', () => undefined);
      closers.push(() => w.close(true));
      await waitFor(async () => (await parents.getJobState(tree.job.id!)) === 'waiting', 'the parent to become waiting after its child');
    });
    expect(relay.get(cPort), 'the child\'s finish confirmed on its node').to.be.at.least(1);
    expect(relay.get(pPort), 'the relayed settlement confirmed on the parent\'s node').to.be.at.least(1);
  });

  it('a Broadcast publish and a BroadcastWorker\'s finishes are confirmed on the primary of the broadcast', async () => {
    const port = ports[2];
    const name = await nameOn(cluster(), port, 'cbc', (n) => new BroadcastKeys(n).meta);
    const b = new Broadcast(name, { connection: connection(cluster()), confirm: CONFIRM });
    closers.push(() => b.close());
    let seen = 0;
    const bw = new BroadcastWorker(name, 'sub', async () => void seen++, { connection: connection(cluster()), blockTimeout: 1000, confirm: CONFIRM });
    bw.on('error', () => undefined);
    closers.push(() => bw.close());
    await bw.run();
    const both = await confirmsDuring(async () => {
      await b.publish('a.b', { x: 1 });
      await waitFor(() => bw.finished.completed === 1, 'the message to complete');
    });
    expect(seen).to.equal(1);
    // one for the publish, one for the worker's finish of it
    expect(both.get(port), 'the publish and the finish confirmed on their node').to.equal(2);
  });
});
