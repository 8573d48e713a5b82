/**
 * A parent becomes runnable exactly once, after its last dependency settled (issue 29,
 * lua/flow-keys.lua): whatever the order its children finish in, in its queue and in others,
 * with children finished together in one batch, retried children counting once, a DAG node with
 * two parents, a child failed by stalled recovery, and a worker gone between a child's finish and
 * the relay of its outbox record (the record waits on the server; upkeep relays it once past the
 * grace period, by the server's clock): a real worker process whose relay is refused (an ACL that
 * lets it write its own queue only) and is SIGKILLed, or a record relayed twice.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { FlowProducer } from '../../src/engine/flows/flow-producer.js';
import type { FlowJob, FlowNode } from '../../src/engine/flows/flow-nodes.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { relayOutbox } from '../../src/engine/producing/flow-outbox.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { uniqueQueue } from '../helpers/engine.js';
import { Prng } from '../helpers/prng.js';
import { claimAs, STALLED_REASON, upkeep } from '../helpers/recovery.js';
import { killedAfterEach, processorPath, WorkerProcess } from '../helpers/worker-spawn.js';

describe('flows: a parent runs exactly once, after its last dependency settled', function () {
  this.timeout(60000);
  const server = useServer();
  const procs = killedAfterEach();
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });
  const queue = (label: string) => {
    const q = new Queue(uniqueQueue(label), { connection: server().url });
    closers.push(() => q.close());
    return q;
  };
  const producer = () => {
    const f = new FlowProducer({ connection: server().url });
    closers.push(() => f.close());
    return f;
  };
  const worker = (q: Queue, fn: (job: Job) => Promise<unknown>, opts = {}) => {
    const w = new Worker(q.name, fn, { connection: server().url, blockTimeout: 1000, promotionInterval: 100, ...opts });
    w.on('error', () => undefined);
    closers.push(() => w.close(true));
    return w;
  };

  it('in any completion order, with children in two queues, some retried, some finished in one batch', async () => {
    const seed = Number(process.env.GLIDEMQ_SEED ?? Date.now() % 1e9);
    const rng = new Prng(seed);
    const top = queue('top');
    const side = queue('side');
    const flow = producer();
    const FLOWS = 8;
    const trees: FlowJob[] = [];
    for (let f = 0; f < FLOWS; f++) {
      const children: FlowJob[] = [];
      const n = rng.int(2, 9);
      for (let i = 0; i < n; i++) {
        children.push({ name: 'child', queueName: rng.chance(0.5) ? top.name : side.name, data: { f, i, wait: rng.int(0, 30), flaky: rng.chance(0.25) }, opts: { attempts: 2, removeOnComplete: rng.chance(0.3) } });
      }
      trees.push({ name: 'parent', queueName: top.name, data: { f, n }, children });
    }
    const added = await flow.addBulk(trees);
    const parentRuns = new Map<string, number>();
    const early: string[] = [];
    const run = async (job: Job) => {
      if (job.name === 'parent') {
        parentRuns.set(job.id, (parentRuns.get(job.id) ?? 0) + 1);
        const values = await job.getChildrenValues();
        if (Object.keys(values).length !== job.data.n) early.push(`${job.id}: ran with ${Object.keys(values).length} of ${job.data.n}`);
        return 'parent done';
      }
      await new Promise((r) => setTimeout(r, job.data.wait));
      if (job.data.flaky && job.attemptsMade === 0) throw new Error('first attempt fails');
      return job.data.i;
    };
    const errors: string[] = [];
    for (const w of [worker(top, run, { concurrency: 8 }), worker(top, run, { concurrency: 3 }), worker(side, run, { concurrency: 8 })]) {
      w.on('error', (e: Error) => errors.push(e.message));
    }
    const parentsDone = async () => (await Promise.all(added.map((t) => top.getJobState(t.job.id)))).every((st) => st === 'completed');
    try {
      await waitFor(parentsDone, `every parent to complete (seed ${seed})`, 40000);
    } catch (err) {
      // what is left: each unsettled child's state, and the workers' errors
      for (const t of added) {
        for (const d of await top.client.smembers(top.keys.deps(t.job.id))) console.log(`      unsettled ${d}: ${JSON.stringify(await top.client.hgetall(d))}`);
      }
      console.log(`      worker errors: ${JSON.stringify(errors)}`);
      throw err;
    }
    expect(early, `seed ${seed}`).to.deep.equal([]);
    expect([...parentRuns.values()].every((n) => n === 1), `seed ${seed}: ${JSON.stringify([...parentRuns])}`).to.equal(true);
    expect(parentRuns.size).to.equal(FLOWS);
    const c = top.client as Redis;
    expect(await c.hlen(side.keys.flowOutbox)).to.equal(0);
    expect(await c.zcard(top.keys.waitingChildren)).to.equal(0);
  });

  it('a node with two parents (a DAG, as the DAG helpers will build node lists) settles both, and each runs once', async () => {
    const top = queue('top');
    const side = queue('side');
    const flow = producer();
    const node = (q: Queue, id: string, parents: string[], deps: string[]): FlowNode => ({
      queueName: q.name, prefix: 'glide', id, name: id, data: {}, opts: {}, parents: parents.map((p) => p), deps,
    });
    // a <- b, a <- c, b <- d, c <- d: d runs first, then b and c, then a
    const [ka, kb, kc, kd] = [top.keys.job('a'), side.keys.job('b'), top.keys.job('c'), side.keys.job('d')];
    const nodes = [node(top, 'a', [], [kb, kc]), node(side, 'b', [ka], [kd]), node(top, 'c', [ka], [kd]), node(side, 'd', [kb, kc], [])];
    const jobs = await flow.addNodes(nodes);
    expect([...jobs.values()].map((j) => j.state)).to.deep.equal(['waiting-children', 'waiting-children', 'waiting-children', 'waiting']);
    const order: string[] = [];
    const run = async (job: Job) => {
      order.push(job.id);
      return Object.keys(await job.getChildrenValues()).length;
    };
    worker(top, run);
    worker(side, run);
    await waitFor(async () => (await top.getJobState('a')) === 'completed', 'the top node to complete');
    expect(order[0]).to.equal('d');
    expect(order.slice(1, 3).sort()).to.deep.equal(['b', 'c']);
    expect(order.slice(3)).to.deep.equal(['a']);
    expect((await top.getJob('a'))!.returnvalue).to.equal(2);
  });

  it('a child failed for good by stalled recovery settles its parents by its policy (inline, and through the outbox)', async () => {
    const top = queue('top');
    const side = queue('side');
    const flow = producer();
    const tree = await flow.add({
      name: 'parent',
      queueName: top.name,
      children: [
        { name: 'fails-parent', queueName: top.name, opts: { failParentOnFailure: true } },
        { name: 'ignored', queueName: side.name, opts: { ignoreDependencyOnFailure: true } },
      ],
    });
    const other = await flow.add({ name: 'other', queueName: top.name, children: [{ name: 'ignored', queueName: side.name, opts: { ignoreDependencyOnFailure: true } }] });
    // claimed by workers that die at once (lock 0, no stall allowed): the next check fails them for good
    await claimAs(top, 'dead', 1, { lockDuration: 0, maxStalledCount: 0 });
    await claimAs(side, 'dead', 2, { lockDuration: 0, maxStalledCount: 0 });
    expect((await upkeep(top).reclaimStalled('reclaimer')).failed).to.deep.equal([tree.children![0].job.id]);
    expect(await top.getJobState(tree.job.id)).to.equal('failed');
    expect((await upkeep(side).reclaimStalled('reclaimer')).failed).to.have.length(2);
    const c = top.client as Redis;
    expect(await c.hlen(side.keys.flowOutbox)).to.equal(2);
    await relayOutbox(c, side.keys.meta, 0);
    expect(await top.getJobState(other.job.id)).to.equal('waiting');
    expect(await (await top.getJob(other.job.id))!.getIgnoredChildrenFailures()).to.deep.equal({ [side.keys.job(other.children![0].job.id)]: STALLED_REASON });
    expect(await top.getJobState(tree.job.id)).to.equal('failed'); // settling into a failed parent changes nothing
  });

  it('a worker gone between a child\'s finish and its relay: upkeep relays the record after the grace period, and the parent runs once', async () => {
    const top = queue('top');
    const side = queue('side');
    const flow = producer();
    const tree = await flow.add({ name: 'parent', queueName: top.name, children: [{ name: 'child', queueName: side.name, data: { v: 7 } }] });
    const c = top.client as Redis;
    // the worker that runs the child: a claim, and the finish call a worker makes, whose reply
    // reports the record; the process is then gone (SIGKILL) before it relays
    const manual = new Worker(side.name, undefined, { connection: server().url, blockTimeout: 1000 });
    manual.on('error', () => undefined);
    const child = (await manual.getNextJob('dying-worker'))!;
    const reply = (await callFunction(c, 'glidemq_finish', side.keys.meta, [child.id, child.claim!.fence, 'dying-worker', 'completed', '7', -1, 0, '', 1, '0', 30000, 1])) as unknown[];
    await manual.close(true);
    expect(reply).to.deep.equal(['completed', '{relay}']);
    expect(await c.hlen(side.keys.flowOutbox)).to.equal(1);
    expect(await top.getJobState(tree.job.id)).to.equal('waiting-children');

    const parentRuns: unknown[] = [];
    worker(top, async (job) => {
      parentRuns.push(await job.getChildrenValues());
    });
    worker(side, async () => 'another child');
    await waitFor(async () => (await top.getJobState(tree.job.id)) === 'completed', 'the parent to complete once upkeep relayed', 20000);
    expect(parentRuns).to.deep.equal([{ [side.keys.job(child.id)]: 7 }]);
    expect(await c.hlen(side.keys.flowOutbox)).to.equal(0);
  });

  it('a worker process SIGKILLed after a child\'s finish, before its relay went through: the parent still runs once', async () => {
    const top = queue('top');
    const side = queue('side');
    const c = top.client as Redis;
    // the child's worker may write its own queue's keys only: its finish stores the outbox record,
    // its relay's settle on the parent's queue is refused (NOPERM), and it is killed then
    await c.call('ACL', 'SETUSER', 'flowchild', 'on', '>flowchild-pw', `~glide:{${side.name}}:*`, '+@all');
    const flow = producer();
    const tree = await flow.add({ name: 'parent', queueName: top.name, children: [{ name: 'child', queueName: side.name, data: { v: 5 } }] });
    const url = server().url.replace('redis://', 'redis://flowchild:flowchild-pw@');
    const proc = new WorkerProcess({ url, queue: side.name, processor: processorPath('echo.mjs'), options: { blockTimeout: 1000 } });
    procs.push(proc);
    await waitFor(() => proc.stderr.includes('NOPERM'), 'the child to finish and its relay to be refused');
    await proc.kill();
    expect(await side.getJobState(tree.children![0].job.id)).to.equal('completed');
    expect(await c.hlen(side.keys.flowOutbox)).to.equal(1);
    expect(await top.getJobState(tree.job.id)).to.equal('waiting-children');

    const parentRuns: unknown[] = [];
    worker(top, async (job) => {
      parentRuns.push(await job.getChildrenValues());
    });
    worker(side, async () => 'another');
    await waitFor(async () => (await top.getJobState(tree.job.id)) === 'completed', 'upkeep to relay the record and the parent to complete', 20000);
    expect(parentRuns).to.deep.equal([{ [side.keys.job(tree.children![0].job.id)]: { echoed: { v: 5 } } }]);
    expect(await c.hlen(side.keys.flowOutbox)).to.equal(0);
  });

  it('a record relayed twice, and again after it was done, settles the parent once', async () => {
    const top = queue('top');
    const side = queue('side');
    const flow = producer();
    const tree = await flow.add({ name: 'parent', queueName: top.name, children: [{ name: 'child', queueName: side.name }] });
    const c = top.client as Redis;
    const manual = new Worker(side.name, undefined, { connection: server().url, blockTimeout: 1000 });
    manual.on('error', () => undefined);
    closers.push(() => manual.close(true));
    const child = (await manual.getNextJob('w'))!;
    await callFunction(c, 'glidemq_finish', side.keys.meta, [child.id, child.claim!.fence, 'w', 'completed', '1', -1, 0, '', 1, '0', 30000, 1]);
    const [field, value] = Object.entries(await c.hgetall(side.keys.flowOutbox))[0];
    await Promise.all([relayOutbox(c, side.keys.meta, 0), relayOutbox(c, side.keys.meta, 0)]);
    const [parentId, childKey] = [tree.job.id, field.split(' ')[1]];
    const again = (await callFunction(c, 'glidemq_settle', top.keys.meta, [1, parentId, childKey, 'completed', JSON.parse(value).v])) as number[];
    expect(again).to.deep.equal([0, 0]);
    expect(await top.getJobState(tree.job.id)).to.equal('waiting');
    expect((await top.getJobCounts()).waiting).to.equal(1);
    expect(await c.hlen(side.keys.flowOutbox)).to.equal(0);
  });
  it('one relay drains an outbox of more records than one read takes (each parent queue settled in one call per read)', async () => {
    const top = queue('top');
    const side = queue('side');
    const flow = producer();
    const children = Array.from({ length: 620 }, (_, i) => ({ name: 'child', queueName: side.name, data: { i } }));
    const tree = await flow.add({ name: 'parent', queueName: top.name, children });
    const c = top.client as Redis;
    const manual = new Worker(side.name, undefined, { connection: server().url, blockTimeout: 1000 });
    manual.on('error', () => undefined);
    closers.push(() => manual.close(true));
    // finished by hand, so no worker relays: every settlement waits in the outbox
    for (let i = 0; i < children.length; i++) {
      const child = (await manual.getNextJob('w'))!;
      await callFunction(c, 'glidemq_finish', side.keys.meta, [child.id, child.claim!.fence, 'w', 'completed', String(child.data.i), -1, 0, '', 1, '0', 30000, 1]);
    }
    expect(await c.hlen(side.keys.flowOutbox)).to.equal(children.length);
    expect(await relayOutbox(c, side.keys.meta, 0)).to.equal(children.length);
    expect(await c.hlen(side.keys.flowOutbox)).to.equal(0);
    expect(await top.getJobState(tree.job.id)).to.equal('waiting');
    const values = await (await top.getJob(tree.job.id))!.getChildrenValues();
    expect(Object.keys(values)).to.have.length(children.length);
  });
});
