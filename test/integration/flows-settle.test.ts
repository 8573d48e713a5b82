/**
 * A parent becomes runnable exactly once, after its last dependency settled (issue 29,
 * lua/flow-keys.lua): whatever the order its children finish in, in its queue and in others,
 * with children finished together in one batch, retried children counting once, a DAG node with
 * two parents, and a child failed by stalled recovery. On this standalone server a parent in
 * another queue is settled in the child's own finish, so a worker gone right after the finish
 * leaves nothing to relay. The outbox a cluster node writes instead (test/integration/
 * flows-cluster.test.ts runs it across nodes) is relayed here from records written as a
 * cluster node's finish writes them: once however often it is relayed, and drained whole.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import type { FlowJob, FlowNode } from '../../src/engine/flows/flow-nodes.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { relayOutbox } from '../../src/engine/producing/flow-outbox.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { Prng } from '../helpers/prng.js';
import { claimAs, STALLED_REASON, upkeep } from '../helpers/recovery.js';

/**
 * Every key's contents: a hash's fields as an object (a hash holding a long value, such as a
 * child's parents, is a hashtable, whose serialized order a lookup's rehash may change), any
 * other key's serialized value.
 */
async function keyspaceContents(c: Redis): Promise<Record<string, unknown>> {
  const out: Record<string, unknown> = {};
  for (const key of await c.keys('*')) {
    out[key] = (await c.type(key)) === 'hash' ? await c.hgetall(key) : (await c.dumpBuffer(key))?.toString('hex');
  }
  return out;
}

describe('flows: a parent runs exactly once, after its last dependency settled', function () {
  this.timeout(60000);
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());
  const queue = (label: string) => h.queue(uniqueQueue(label));
  const producer = () => h.flowProducer();
  const worker = (q: Queue, fn: (job: Job) => Promise<unknown>, opts = {}) => h.worker(q.name, fn, { promotionInterval: 100, ...opts });

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

  it('a child failed for good by stalled recovery settles its parents by its policy (in its queue and in another, in the same call)', async () => {
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
    expect(await c.hlen(side.keys.flowOutbox)).to.equal(0);
    expect(await top.getJobState(other.job.id)).to.equal('waiting');
    expect(await (await top.getJob(other.job.id))!.getIgnoredChildrenFailures()).to.deep.equal({ [side.keys.job(other.children![0].job.id)]: STALLED_REASON });
    expect(await top.getJobState(tree.job.id)).to.equal('failed'); // settling into a failed parent changes nothing
  });

  it('one finish batch: the completions of one parent are recorded together, its release comes once and its claim in the same reply; a failure in the batch keeps the order', async () => {
    const q = queue('batch');
    const flow = producer();
    const done = await flow.add({ name: 'done', queueName: q.name, data: { p: 1 }, children: [1, 2, 3].map((i) => ({ name: 'c', queueName: q.name, data: { i } })) });
    const failed = await flow.add({
      name: 'failed',
      queueName: q.name,
      children: [
        { name: 'ok', queueName: q.name, data: { i: 4 } },
        { name: 'bad', queueName: q.name, data: { i: 5 }, opts: { failParentOnFailure: true } },
        { name: 'late', queueName: q.name, data: { i: 6 } },
      ],
    });
    const claims = await claimAs(q, 'w', 6);
    expect(claims).to.have.length(6);
    const bad = failed.children![1].job.id;
    const args: (string | number)[] = ['w', claims.length, 5, '0', '', 30000, 1];
    for (const c of claims) args.push(c.id, c.fence, c.id === bad ? 'failed' : 'completed', c.id === bad ? 'boom' : JSON.stringify(`v${c.id}`), -1, '', 1);
    const reply = (await callFunction(q.client, 'glidemq_finishMany', q.keys.meta, args)) as unknown[];
    expect(reply.slice(0, 6)).to.deep.equal(claims.map((c) => (c.id === bad ? 'failed' : 'completed')));
    // the parent released by the batch is claimed in the batch's own reply, and only it
    const next = reply.slice(6).filter((r): r is unknown[] => Array.isArray(r)).map((r) => String(r[0]));
    expect(next).to.deep.equal([done.job.id]);
    const values = await (await q.getJob(done.job.id))!.getChildrenValues();
    expect(values).to.deep.equal(Object.fromEntries(done.children!.map((c) => [q.keys.job(c.job.id), `v${c.job.id}`])));
    expect(await q.getJobState(failed.job.id)).to.equal('failed');
    const other = await q.getJob(failed.job.id);
    expect(await other!.getChildrenValues()).to.deep.equal(Object.fromEntries(failed.children!.filter((c) => c.job.name !== 'bad').map((c) => [q.keys.job(c.job.id), `v${c.job.id}`])));
    expect(await other!.getFailedChildrenValues()).to.deep.equal({ [q.keys.job(bad)]: 'boom' });
    expect((await q.getJobCounts())['waiting-children']).to.equal(0);
  });

  it('a batch of two children whose parent\'s dependency key holds another type refuses both, and writes nothing', async () => {
    const q = queue('wrongdeps');
    const flow = producer();
    const tree = await flow.add({ name: 'parent', queueName: q.name, children: [1, 2].map((i) => ({ name: 'c', queueName: q.name, data: { i } })) });
    const claims = await claimAs(q, 'w', 2);
    expect(claims).to.have.length(2);
    const c = q.client as Redis;
    // another program replaced the parent's dependency set with a string
    const deps = `${q.keys.job(tree.job.id)}:deps`;
    await c.del(deps);
    await c.set(deps, 'another program wrote this');
    const before = await keyspaceContents(c);
    const args: (string | number)[] = ['w', 2, 0, '0', '', 30000, 1];
    for (const cl of claims) args.push(cl.id, cl.fence, 'completed', '1', -1, '', 1);
    // the first plan raises at the first child; planned again isolated, each child is refused by
    // the same check (a check that passed for none is not taken as passed for the second)
    const reply = (await callFunction(c, 'glidemq_finishMany', q.keys.meta, args).catch((err: unknown) => [String(err)])) as unknown[];
    expect(reply.map(String)).to.have.length(2);
    for (const r of reply) expect(String(r)).to.match(/ERR_WRONG_TYPE .*:deps holds a string/);
    expect(await keyspaceContents(c)).to.deep.equal(before);
  });

  it('a worker gone right after a child\'s finish: its parent in another queue was settled in that finish, and runs once', async () => {
    const top = queue('top');
    const side = queue('side');
    const flow = producer();
    const tree = await flow.add({ name: 'parent', queueName: top.name, children: [{ name: 'child', queueName: side.name, data: { v: 7 } }] });
    const c = top.client as Redis;
    // the worker that runs the child: a claim, and the finish call a worker makes; the process is
    // then gone (SIGKILL) with nothing left to send
    const manual = new Worker(side.name, undefined, { connection: server().url, blockTimeout: 1000 });
    manual.on('error', () => undefined);
    const child = (await manual.getNextJob('dying-worker'))!;
    const reply = (await callFunction(c, 'glidemq_finish', side.keys.meta, [child.id, child.claim!.fence, 'dying-worker', 'completed', '7', -1, 0, '', 1, '0', 30000, 1])) as unknown[];
    await manual.close(true);
    expect(reply).to.deep.equal(['completed']);
    expect(await c.hlen(side.keys.flowOutbox)).to.equal(0);
    expect(await top.getJobState(tree.job.id)).to.equal('waiting');

    const parentRuns: unknown[] = [];
    worker(top, async (job) => {
      parentRuns.push(await job.getChildrenValues());
    });
    await waitFor(async () => (await top.getJobState(tree.job.id)) === 'completed', 'the parent to complete');
    expect(parentRuns).to.deep.equal([{ [side.keys.job(child.id)]: 7 }]);
  });

  it('a parent released while no QueueEvents listens gets no waiting event (a flow\'s events are written only for a listener)', async () => {
    const top = queue('top');
    const flow = producer();
    const tree = await flow.add({ name: 'parent', queueName: top.name, children: [{ name: 'child', queueName: top.name }] });
    const [claim] = await claimAs(top, 'w', 1);
    const c = top.client as Redis;
    await callFunction(c, 'glidemq_finish', top.keys.meta, [claim.id, claim.fence, 'w', 'completed', '1', -1, 0, '', 1, '0', 30000, 1]);
    expect(await top.getJobState(tree.job.id)).to.equal('waiting');
    const events = (await c.xrange(top.keys.events, '-', '+')).map(([, f]) => f.join(' '));
    expect(events.filter((e) => e.includes(tree.job.id))).to.deep.equal([]);
  });

  it('a parent removed on completion takes its dependency keys with it (the hash field flow marks a parent)', async () => {
    const top = queue('top');
    const side = queue('side');
    const flow = producer();
    const tree = await flow.add({
      name: 'parent',
      queueName: top.name,
      opts: { removeOnComplete: true },
      children: [{ name: 'child', queueName: side.name, opts: { removeOnComplete: true } }, { name: 'kept', queueName: top.name }],
    });
    const c = top.client as Redis;
    const parentKey = top.keys.job(tree.job.id);
    expect(await c.hget(parentKey, 'flow')).to.equal('p');
    // a child is one by its parents field alone
    expect(await c.hmget(side.keys.job(tree.children![0].job.id), 'flow', 'parents')).to.deep.equal([null, parentKey]);
    worker(side, async () => 'a');
    worker(top, async () => 'b');
    await waitFor(async () => (await c.exists(parentKey)) === 0, 'the parent to complete and be removed');
    expect(await c.exists(`${parentKey}:processed`, `${parentKey}:deps`, `${parentKey}:failed`, `${parentKey}:ignored`)).to.equal(0);
  });

  it('an outbox record relayed twice, and again after it was done, settles the parent once', async () => {
    const top = queue('top');
    const side = queue('side');
    const flow = producer();
    const tree = await flow.add({ name: 'parent', queueName: top.name, children: [{ name: 'child', queueName: side.name }] });
    const c = top.client as Redis;
    const childKey = side.keys.job(tree.children![0].job.id);
    const [field, value] = owe(top.keys.job(tree.job.id), childKey, '1');
    await c.hset(side.keys.flowOutbox, field, value);
    await Promise.all([relayOutbox(c, side.keys.meta, 0), relayOutbox(c, side.keys.meta, 0)]);
    const again = (await callFunction(c, 'glidemq_settle', top.keys.meta, [1, tree.job.id, childKey, 'completed', '1'])) as number[];
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
    const records = tree.children!.flatMap((ch, i) => owe(top.keys.job(tree.job.id), side.keys.job(ch.job.id), String(i)));
    await c.hset(side.keys.flowOutbox, ...records);
    expect(await relayOutbox(c, side.keys.meta, 0)).to.equal(children.length);
    expect(await c.hlen(side.keys.flowOutbox)).to.equal(0);
    expect(await top.getJobState(tree.job.id)).to.equal('waiting');
    const values = await (await top.getJob(tree.job.id))!.getChildrenValues();
    expect(Object.keys(values)).to.have.length(children.length);
  });
});

/** An outbox record of `childKey` owed to `parentKey` (field, value), as a cluster node's finish writes it (lua/flow-keys.lua). */
function owe(parentKey: string, childKey: string, value: string): [string, string] {
  return [`${parentKey} ${childKey}`, JSON.stringify({ t: 0, k: 'completed', v: value })];
}
