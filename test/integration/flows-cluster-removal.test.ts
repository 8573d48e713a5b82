/**
 * Removing a parent on a real 3-primary cluster whose children are on other nodes (issue 29's
 * gap): the unfinished subtree goes in every slot (the call writes an outbox record per child in
 * another slot, relayed at once: jobs/job-removal.ts, lua/remove.lua glidemq_parentRemoved), it is
 * refused while a child in another slot runs, `removeChildren: false` unlinks the children there,
 * and a removal whose relay a crash cut is carried through by heal once the record is past its grace.
 */
import { expect } from 'chai';
import { keySlot } from '../../src/engine/connecting/connection.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { QueueKeys } from '../../src/engine/shared/keys.js';
import { FlowProducer } from '../../src/engine/flows/flow-producer.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { useCluster, type TestCluster } from '../helpers/cluster.js';
import { waitFor } from '../helpers/valkey.js';
import { upkeep } from '../helpers/recovery.js';

const HOUR = 3_600_000;
const connection = (c: TestCluster) => ({ url: c.url, cluster: true });

/** A queue name whose slot the primary on `port` serves. */
async function queueOn(c: TestCluster, port: number, stem: string): Promise<string> {
  for (let i = 0; ; i++) {
    const name = `${stem}-${i}`;
    if ((await c.primaryForSlot(keySlot(new QueueKeys(name).meta))) === port) return name;
  }
}

describe('flows on a cluster: removing a parent whose children are on other nodes', function () {
  this.timeout(60000);
  const cluster = useCluster();
  const closers: (() => Promise<unknown>)[] = [];
  let run = 0;

  afterEach(async () => {
    for (const f of closers.splice(0).reverse()) await f().catch(() => undefined);
  });

  /** Three queues, one on each primary. */
  const threeQueues = async () => {
    run++;
    const ports = (await cluster().primaries()).map((p) => p.port);
    const names = await Promise.all(ports.map((p, i) => queueOn(cluster(), p, `rm${run}-${'abc'[i]}`)));
    return names.map((n) => {
      const q = new Queue(n, { connection: connection(cluster()) });
      closers.push(() => q.close());
      return q;
    });
  };
  const addFlow = async (a: Queue, b: Queue, c: Queue, tag: string) => {
    const f = new FlowProducer({ connection: connection(cluster()) });
    closers.push(() => f.close());
    return f.add({
      name: 'p',
      queueName: a.name,
      opts: { jobId: `${tag}-p` },
      children: [
        { name: 'mid', queueName: b.name, opts: { jobId: `${tag}-mid` }, children: [{ name: 'g', queueName: c.name, opts: { jobId: `${tag}-g`, delay: HOUR } }] },
        { name: 'same', queueName: a.name, opts: { jobId: `${tag}-same`, delay: HOUR } },
      ],
    });
  };
  const exists = async (q: Queue, id: string) => (await q.client.exists(q.keys.job(id))) === 1;

  it('the unfinished subtree goes on every node, and nothing is left in any outbox', async () => {
    const [a, b, c] = await threeQueues();
    await addFlow(a, b, c, 'x');
    expect(await a.remove('x-p')).to.equal(true);
    expect([await exists(a, 'x-p'), await exists(a, 'x-same'), await exists(b, 'x-mid'), await exists(c, 'x-g')]).to.deep.equal([false, false, false, false]);
    expect((await b.getJobCounts('waiting-children'))['waiting-children']).to.equal(0);
    expect((await c.getJobCounts('delayed')).delayed).to.equal(0);
    for (const q of [a, b, c]) expect(await q.client.hlen(q.keys.flowOutbox)).to.equal(0);
  });

  it('is refused while a child on another node runs, and then nothing changed', async () => {
    const [a, b, c] = await threeQueues();
    const tree = await new FlowProducer({ connection: connection(cluster()) }).add({
      name: 'p', queueName: a.name, opts: { jobId: 'y-p' },
      children: [{ name: 'c', queueName: b.name, opts: { jobId: 'y-c' } }, { name: 'd', queueName: c.name, opts: { jobId: 'y-d', delay: HOUR } }],
    });
    expect(tree.job.id).to.equal('y-p');
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const w = new Worker(b.name, async () => held, { connection: connection(cluster()), blockTimeout: 1000 });
    w.on('error', () => undefined);
    closers.push(() => w.close(true));
    await waitFor(async () => (await b.getJobState('y-c')) === 'active', 'the child to run');
    const err = await a.remove('y-p').then(() => undefined, (e: Error) => e);
    expect(err?.name).to.equal('JobActiveError');
    expect([await a.getJobState('y-p'), await c.getJobState('y-d')]).to.deep.equal(['waiting-children', 'delayed']);
    release();
  });

  it('removeChildren: false unlinks the children on other nodes; they complete without re-creating the parent', async () => {
    const [a, b, c] = await threeQueues();
    await addFlow(a, b, c, 'z');
    expect(await a.remove('z-p', { removeChildren: false })).to.equal(true);
    expect(await exists(a, 'z-p')).to.equal(false);
    const mid = (await b.getJob('z-mid'))!;
    expect(mid.parentKey).to.equal(undefined);
    expect(mid.state).to.equal('waiting-children');
    await (await c.getJob('z-g'))!.promote();
    for (const q of [b, c]) {
      const w = new Worker(q.name, async () => 'ok', { connection: connection(cluster()), blockTimeout: 1000 });
      w.on('error', () => undefined);
      closers.push(() => w.close());
    }
    await waitFor(async () => (await b.getJobState('z-mid')) === 'completed', 'the middle child to complete', 20000);
    expect(await exists(a, 'z-p')).to.equal(false);
    expect(await a.client.exists(a.keys.deps('z-p'), a.keys.processed('z-p'))).to.equal(0);
  });

  it('a removal whose relay a crash cut: heal carries it through once the record is past its grace', async () => {
    const [a, b, c] = await threeQueues();
    await addFlow(a, b, c, 'w');
    // the call alone, as a client that died right after it would leave it
    expect(await callFunction(a.client, 'glidemq_removeJob', a.keys.meta, ['w-p', '0', '1'])).to.equal(1);
    expect([await exists(a, 'w-p'), await exists(a, 'w-same'), await exists(b, 'w-mid'), await exists(c, 'w-g')]).to.deep.equal([false, false, true, true]);
    expect(await a.client.hlen(a.keys.flowOutbox)).to.equal(1);
    const m = upkeep(a);
    const check = await m.heal({ check: true });
    expect(check.drift, 'a record within its grace is no drift yet').to.equal(false);
    await waitFor(async () => (await m.heal({ check: true })).drift, 'the record to be past its grace', 20000, 250);
    // the record, then the one the middle child's removal wrote for its child on the third node
    expect((await m.heal()).outboxRelayed).to.equal(2);
    expect([await exists(b, 'w-mid'), await exists(c, 'w-g')]).to.deep.equal([false, false]);
    for (const q of [a, b, c]) expect(await q.client.hlen(q.keys.flowOutbox)).to.equal(0);
  });

  it("a worker's upkeep settles again a child whose settlement a failover of the parent's node lost, and the parent runs", async () => {
    const [a, b] = await threeQueues();
    const t = await new FlowProducer({ connection: connection(cluster()) }).add({ name: 'p', queueName: a.name, children: [{ name: 'k', queueName: b.name }] });
    const manual = new Worker(b.name, undefined, { connection: connection(cluster()), blockTimeout: 500 });
    manual.on('error', () => undefined);
    closers.push(() => manual.close(true));
    const child = (await manual.getNextJob('w'))!;
    await callFunction(b.client, 'glidemq_finish', b.keys.meta, [child.id, child.claim!.fence, 'w', 'completed', '7', -1, 0, '', 1, '0', 30000, 1]);
    // the relay's settle acknowledged by the parent's old primary and the record deleted, the
    // promoted replica without the settle: the state a failover leaves
    expect(await b.client.del(b.keys.flowOutbox)).to.equal(1);
    expect(await a.getJobState(t.job.id)).to.equal('waiting-children');
    const runs: unknown[] = [];
    const w = new Worker(a.name, async (job) => runs.push(await job.getChildrenValues()), { connection: connection(cluster()), blockTimeout: 500, promotionInterval: 20 });
    w.on('error', () => undefined);
    closers.push(() => w.close());
    await waitFor(async () => (await a.getJobState(t.job.id)) === 'completed', 'the parent to complete', 20000);
    expect(runs).to.deep.equal([{ [b.keys.job(child.id)]: 7 }]);
  });
});
