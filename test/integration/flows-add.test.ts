/**
 * Adding a flow is atomic and once (issue 29, lua/flow.lua glidemq_addFlow): a flow the server
 * refuses, for whatever reason found at any node, writes nothing in any of its queues; a call
 * re-sent after its reply was lost (same producer and call number) is answered with the first
 * reply and stores nothing twice; a resend without a call number finds every job stored and
 * writes nothing.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { encodeNodes, treeToNodes, type FlowJob } from '../../src/engine/flows/flow-nodes.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { useServer } from '../helpers/valkey.js';
import { useFaultProxy } from '../helpers/proxy.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { keyspaceFingerprint } from '../helpers/keyspace.js';
import { rejection } from '../helpers/compat.js';

describe('flows: a flow is stored whole or not at all, and once', function () {
  this.timeout(30000);
  const server = useServer();
  const { proxy, via } = useFaultProxy(server, 2000);
  const h = new Harness(server);
  afterEach(() => h.cleanup());
  const queue = (label: string) => h.queue(uniqueQueue(label));
  const producer = () => h.flowProducer();
  const tree = (top: Queue, other: Queue, lastOpts: FlowJob['opts'] = {}): FlowJob => ({
    name: 'top',
    queueName: top.name,
    children: [
      { name: 'a', queueName: other.name, children: [{ name: 'a1', queueName: top.name }] },
      { name: 'b', queueName: other.name, opts: lastOpts },
    ],
  });

  it('a flow refused at its last node (a job id taken) writes nothing in any queue', async () => {
    const top = queue('top');
    const other = queue('other');
    await other.add('existing', {}, { jobId: 'taken' });
    const flow = producer();
    const c = top.client as Redis;
    await flow.add(tree(top, other)); // both queues exist, with a flow stored
    const before = await keyspaceFingerprint(c);
    const err = await rejection(flow.add(tree(top, other, { jobId: 'taken' })));
    expect(err.name).to.equal('InvalidArgumentError');
    expect(err.message).to.match(/taken exists already/);
    expect(await keyspaceFingerprint(c)).to.equal(before);
  });

  it('a flow refused for a key of another type in one of its queues writes nothing', async () => {
    const top = queue('top');
    const other = queue('other');
    const c = top.client as Redis;
    await c.set(other.keys.waitingChildren, 'not a zset');
    const before = await keyspaceFingerprint(c);
    const err = await rejection(producer().add(tree(top, other)));
    expect(err.name).to.equal('WrongTypeError');
    expect(await keyspaceFingerprint(c)).to.equal(before);
  });

  it('a flow refused for a queue meta key of another type (read, not type-checked, by the add) writes nothing', async () => {
    const top = queue('top');
    const other = queue('other');
    const c = top.client as Redis;
    await c.del(other.keys.meta);
    await c.set(other.keys.meta, 'not a hash');
    const before = await keyspaceFingerprint(c);
    const err = await rejection(producer().add(tree(top, other)));
    expect(err.name).to.equal('WrongTypeError');
    expect(err.message).to.match(/:meta holds a string/);
    expect(await keyspaceFingerprint(c)).to.equal(before);
  });

  it('a child of a finished parent is refused and writes nothing', async () => {
    const q = queue('q');
    const c = q.client as Redis;
    const parent = await q.add('p', {});
    await c.hset(q.keys.job(parent.id), 'state', 'completed');
    const before = await keyspaceFingerprint(c);
    const err = await rejection(q.add('late', {}, { parent: { id: parent.id, queue: q.keys.base } }));
    expect(err.name).to.equal('JobStateError');
    expect(await keyspaceFingerprint(c)).to.equal(before);
  });

  it('the Lua refuses a cycle and a link one side does not name, before any write', async () => {
    const q = queue('q');
    const c = q.client as Redis;
    await q.add('seed', {});
    const nodes = treeToNodes({ name: 'p', queueName: q.name, children: [{ name: 'c', queueName: q.name }] });
    const enc = encodeNodes(nodes);
    const before = await keyspaceFingerprint(c);
    // the child names the parent, the parent does not name the child
    const oneSided = enc.groups.map((g) => [...g]);
    oneSided[0][11] = '';
    let err = await rejection(callFunction(c, 'glidemq_addFlow', enc.keys, [0, '', 0, 0, 2, ...oneSided.flat()]));
    expect(err.message).to.match(/does not list it among its dependencies/);
    // a cycle: the parent is also its child's child
    const cycle = enc.groups.map((g) => [...g]);
    cycle[0][10] = String(nodes[1] && q.keys.job(nodes[1].id));
    cycle[1][11] = q.keys.job(nodes[0].id);
    err = await rejection(callFunction(c, 'glidemq_addFlow', enc.keys, [0, '', 0, 0, 2, ...cycle.flat()]));
    expect(err.message).to.match(/cycle/);
    expect(await keyspaceFingerprint(c)).to.equal(before);
  });

  it('FlowProducer.add with replies cut: each flow stored once, every caller has its jobs, and close drops the kept replies', async () => {
    const top = queue('top');
    const other = queue('other');
    const flow = h.flowProducer(via());
    await flow.waitUntilReady();
    let cuts = 0;
    const trees = [];
    for (let round = 0; round < 8; round++) {
      const cut = proxy().cutOn(/glidemq_addFlow/, { forward: true });
      trees.push(await flow.add(tree(top, other)));
      await Promise.race([cut, new Promise((r) => setTimeout(r, 500))]);
      proxy().disarm();
      cuts = Math.max(cuts, proxy().stats.cuts);
    }
    expect(cuts).to.be.at.least(4);
    expect((await top.getJobCounts())['waiting-children']).to.equal(8);
    expect((await other.getJobCounts())['waiting-children']).to.equal(8);
    expect((await other.getJobCounts()).waiting).to.equal(8);
    for (const t of trees) expect(await top.getJobState(t.job.id)).to.equal('waiting-children');
    const c = top.client as Redis;
    const kept = await c.keys(`${top.keys.producerPrefix}*`);
    expect(kept).to.have.length(1);
    await flow.close();
    await new Promise((r) => setTimeout(r, 50)); // (close sends the DEL without waiting for it)
    expect(await c.exists(kept[0])).to.equal(0);
  });

  it('a call re-sent with the same producer and number gets the first reply and stores the flow once', async () => {
    const top = queue('top');
    const other = queue('other');
    const c = top.client as Redis;
    const enc = encodeNodes(treeToNodes(tree(top, other)));
    const args = [0, 'p1', 1, 1, enc.groups.length, ...enc.groups.flat()];
    const first = await callFunction(c, 'glidemq_addFlow', enc.keys, args);
    const stored = await keyspaceFingerprint(c, `glide:{${other.name}}:job:*`);
    const again = await callFunction(c, 'glidemq_addFlow', enc.keys, args);
    expect(again).to.deep.equal(first);
    expect(await keyspaceFingerprint(c, `glide:{${other.name}}:job:*`)).to.equal(stored);
    // without a call number, a resend finds every job stored: created 0, nothing written
    const before = await keyspaceFingerprint(c);
    const plain = (await callFunction(c, 'glidemq_addFlow', enc.keys, [0, '', 0, 0, enc.groups.length, ...enc.groups.flat()])) as number[];
    expect(plain[1]).to.equal(0);
    expect(await keyspaceFingerprint(c)).to.equal(before);
    expect((await top.getJobCounts())['waiting-children']).to.equal(1);
    expect((await other.getJobCounts())['waiting-children']).to.equal(1);
    expect((await top.getJobCounts()).waiting).to.equal(1);
  });
});
