/**
 * Flows on a real 3-primary / 3-replica cluster (issue 29, "In a Valkey Cluster"): a flow whose
 * queues are on different nodes is stored in parts (flows/flow-journal.ts, lua/flow-parts.lua) and
 * runs (each parent once, after its children, with their values); a producer that dies between
 * parts leaves a journal that heal or a worker's upkeep rolls forward; children a running parent
 * adds in other slots, removeChildDependency and failParentOnFailure across slots; and a failover
 * of the node holding the parent in the middle of a flow loses nothing that was acknowledged.
 */
import { expect } from 'chai';
import { keySlot } from '../../src/engine/connecting/connection.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { QueueKeys } from '../../src/engine/shared/keys.js';
import { WaitingChildrenError } from '../../src/engine/shared/errors.js';
import { FlowProducer } from '../../src/engine/flows/flow-producer.js';
import { addInParts, needsParts, partsOf } from '../../src/engine/flows/flow-journal.js';
import { encodeNodes, treeToNodes, type FlowJob } from '../../src/engine/flows/flow-nodes.js';
import { DEFAULT_MAX_PAYLOAD } from '../../src/engine/producing/options.js';
import { Producer } from '../../src/engine/producing/producer.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { useCluster, type TestCluster } from '../helpers/cluster.js';
import { waitFor } from '../helpers/valkey.js';
import { upkeep } from '../helpers/recovery.js';

const connection = (c: TestCluster) => ({ url: c.url, cluster: true });

/** A queue name whose slot the primary on `port` serves. */
async function queueOn(c: TestCluster, port: number, stem: string): Promise<string> {
  for (let i = 0; ; i++) {
    const name = `${stem}-${i}`;
    if ((await c.primaryForSlot(keySlot(new QueueKeys(name).meta))) === port) return name;
  }
}

/** Waits until the replica of `primary` has every write the primary had acknowledged when this was called (WAIT, for any client's writes). */
async function replicated(c: TestCluster, primary: number): Promise<void> {
  const replica = (await c.replicaOf(primary))!;
  const offset = (info: string, field: string) => Number(new RegExp(`${field}:(\\d+)`).exec(info)?.[1] ?? -1);
  const target = offset(String(await c.call(primary, 'INFO', 'replication')), 'master_repl_offset');
  await waitFor(async () => offset(String(await c.call(replica, 'INFO', 'replication')), 'slave_repl_offset') >= target, `the replica of ${primary} to catch up`, 10000);
}

describe('flows on a cluster: queues on different nodes', function () {
  this.timeout(120000);
  const cluster = useCluster({ nodeTimeout: 1000 });
  const closers: (() => Promise<unknown>)[] = [];
  const killed: number[] = [];
  let ports: number[] = [];
  let run = 0;

  before(async () => {
    ports = (await cluster().primaries()).map((p) => p.port);
    expect(ports).to.have.length(3);
  });

  afterEach(async function () {
    this.timeout(60000);
    for (const f of closers.splice(0).reverse()) await f().catch(() => undefined);
    const c = cluster();
    for (const port of killed.splice(0)) await c.restart(port);
    await c.waitHealthy();
    ports = (await c.primaries()).map((p) => p.port);
  });

  /** Three queue names, one on each primary (the first on `ports[0]`). */
  const threeQueues = async (stem: string) => {
    run++;
    return Promise.all(ports.map((p, i) => queueOn(cluster(), p, `${stem}${run}-${'abc'[i]}`)));
  };
  const queue = (name: string) => {
    const q = new Queue(name, { connection: connection(cluster()) });
    closers.push(() => q.close());
    return q;
  };
  const producer = () => {
    const f = new FlowProducer({ connection: connection(cluster()) });
    closers.push(() => f.close());
    return f;
  };
  const worker = (name: string, fn: (job: Job, token?: string) => Promise<unknown>, opts = {}) => {
    const w = new Worker(name, fn, { connection: connection(cluster()), blockTimeout: 500, promotionInterval: 100, ...opts });
    w.on('error', () => undefined);
    closers.push(() => w.close(true));
    return w;
  };
  const stateOf = async (q: Queue, id: string) => (await q.getJob(id))?.state;

  /** A tree over three queues: the parent in `a`, children in `b`, `c` and `a`, and a grandchild in `a` under the child in `b`. */
  const tree = (a: string, b: string, c: string, tag: string): FlowJob => ({
    name: 'parent',
    queueName: a,
    data: {},
    opts: { jobId: `${tag}-parent` },
    children: [
      { name: 'mid', queueName: b, data: { v: 1 }, opts: { jobId: `${tag}-mid` }, children: [{ name: 'leaf', queueName: a, data: { v: 3 }, opts: { jobId: `${tag}-grand` } }] },
      { name: 'leaf', queueName: c, data: { v: 2 }, opts: { jobId: `${tag}-c` } },
      { name: 'leaf', queueName: a, data: { v: 4 }, opts: { jobId: `${tag}-a` } },
    ],
  });

  /** Workers on the three queues; each job's run is logged with its start and end (this process's clock only orders runs here). */
  const runFlowWorkers = (names: string[]) => {
    const log: { name: string; id: string; start: number; end: number; values?: Record<string, unknown> }[] = [];
    for (const n of names) {
      worker(n, async (job: Job) => {
        const start = Date.now();
        let out: unknown;
        let values: Record<string, unknown> | undefined;
        if (job.name === 'leaf') out = (job.data as { v: number }).v * 10;
        else {
          values = await job.getChildrenValues();
          out = Object.values(values).reduce((s: number, v) => s + (v as number), 0);
        }
        log.push({ name: job.name, id: job.id, start, end: Date.now(), values });
        return out;
      });
    }
    return log;
  };

  it('a flow in one queue (one slot) is stored in one glidemq_addFlow call, with no journal, and its parent runs once after its children', async () => {
    const [a] = await threeQueues('fc-one');
    const q = queue(a);
    const t = await producer().add({ name: 'p', queueName: a, children: [{ name: 'c1', queueName: a, data: 1 }, { name: 'c2', queueName: a, data: 2 }] });
    const runs: string[] = [];
    worker(a, async (job: Job) => {
      runs.push(job.name);
      return job.name === 'p' ? Object.values(await job.getChildrenValues()).reduce((s: number, v) => s + (v as number), 0) : job.data;
    });
    await waitFor(async () => (await stateOf(q, t.job.id)) === 'completed', 'the parent to complete');
    expect(runs.filter((r) => r === 'p')).to.have.length(1);
    expect((await q.getJob(t.job.id))!.returnvalue).to.equal(3);
    await q.waitUntilReady();
    const one = treeToNodes({ name: 'p', queueName: a, children: [{ name: 'c', queueName: a }] });
    expect(needsParts(q.client, encodeNodes(one)), 'one slot: one call').to.equal(false);
    const two = treeToNodes({ name: 'p', queueName: a, children: [{ name: 'c', queueName: (await threeQueues('fc-one'))[1] }] });
    expect(needsParts(q.client, encodeNodes(two)), 'two slots: parts').to.equal(true);
  });

  it('flows added in one turn: those of one slot share a call, one across slots is stored in parts, and each runs once', async () => {
    const [a, b, c] = await threeQueues('fc-turn');
    const qa = queue(a);
    const qb = queue(b);
    const f = producer();
    await Promise.all([f.waitUntilReady(), qa.waitUntilReady(), qb.waitUntilReady()]);
    const inOne = (q: string, tag: string): FlowJob => ({
      name: 'parent', queueName: q, opts: { jobId: `${tag}-parent` },
      children: [{ name: 'leaf', queueName: q, data: { v: 1 }, opts: { jobId: `${tag}-leaf` } }],
    });
    const callsOn = async (port: number) => Number(/cmdstat_fcall:calls=(\d+)/.exec(String(await cluster().call(port, 'INFO', 'commandstats')))?.[1] ?? 0);
    const before = await callsOn(ports[1]);
    // a1 and a2 in a's slot, b1 and b2 in b's, x across the three
    const [a1, a2, b1, b2, x] = await Promise.all([
      f.add(inOne(a, 'a1')), f.add(inOne(a, 'a2')), f.add(inOne(b, 'b1')), f.add(inOne(b, 'b2')), f.add(tree(a, b, c, 'x')),
    ]);
    // b's node: one call for b1 and b2, one for x's part there
    expect(await callsOn(ports[1])).to.equal(before + 2);
    for (const t of [a1, a2, b1, b2, x]) expect(t.job.created).to.equal(true);
    const log = runFlowWorkers([a, b, c]);
    for (const [q, t] of [[qa, a1], [qa, a2], [qb, b1], [qb, b2], [qa, x]] as const) {
      await waitFor(async () => (await stateOf(q, t.job.id)) === 'completed', `parent ${t.job.id} to complete`);
    }
    expect(log.filter((r) => r.name === 'parent').map((r) => r.id).sort()).to.deep.equal(['a1-parent', 'a2-parent', 'b1-parent', 'b2-parent', 'x-parent']);
    expect((await qa.getJob('x-parent'))!.returnvalue).to.equal(30 + 20 + 40); // mid passes its grandchild's 30 on
  });

  it('stores a flow whose parent and children are on three nodes (in parts, the journal deleted after) and runs the parent once, after all children, with their values', async () => {
    const [a, b, c] = await threeQueues('fc-run');
    const qa = queue(a);
    const added = await producer().add(tree(a, b, c, 'r'));
    expect(added.job.id).to.equal('r-parent');
    expect(added.children!.map((n) => n.job.id)).to.deep.equal(['r-mid', 'r-c', 'r-a']);
    expect(await qa.client.exists(qa.keys.flows, qa.keys.flowsDue), 'the journal, deleted after the last part').to.equal(0);
    expect(await stateOf(qa, 'r-parent')).to.equal('waiting-children');
    expect(await stateOf(queue(b), 'r-mid')).to.equal('waiting-children');
    expect(await stateOf(queue(c), 'r-c')).to.equal('waiting');

    const log = runFlowWorkers([a, b, c]);
    await waitFor(async () => (await stateOf(qa, 'r-parent')) === 'completed', 'the parent to complete', 30000);
    const parentRuns = log.filter((r) => r.id === 'r-parent');
    expect(parentRuns, 'the parent runs once').to.have.length(1);
    const mid = log.filter((r) => r.id === 'r-mid');
    expect(mid).to.have.length(1);
    expect(mid[0].start, 'the middle parent after its grandchild').to.be.at.least(log.find((r) => r.id === 'r-grand')!.end);
    for (const r of log.filter((x) => x.id !== 'r-parent')) expect(parentRuns[0].start, `the parent after ${r.id}`).to.be.at.least(r.end);
    expect(parentRuns[0].values).to.deep.equal({
      [new QueueKeys(b).job('r-mid')]: 30,
      [new QueueKeys(c).job('r-c')]: 20,
      [new QueueKeys(a).job('r-a')]: 40,
    });
    expect((await qa.getJob('r-parent'))!.returnvalue).to.equal(90);
  });

  it('a DAG across three slots (a node with two parents in two other slots): the shared node runs once, first, and the last after both, with both values', async () => {
    const [a, b, c] = await threeQueues('fc-dag');
    const qa = queue(a);
    const jobs = await producer().addDAG({
      nodes: [
        { name: 'A', queueName: a, data: { v: 1 } },
        { name: 'B', queueName: b, data: { v: 2 }, deps: ['A'] },
        { name: 'C', queueName: c, data: { v: 3 }, deps: ['A'] },
        { name: 'D', queueName: a, data: { v: 4 }, deps: ['B', 'C'] },
      ],
    });
    const runs: { name: string; values: Record<string, unknown> }[] = [];
    for (const n of [a, b, c]) {
      worker(n, async (job: Job) => {
        const values = await job.getChildrenValues();
        runs.push({ name: job.name, values });
        return job.name;
      });
    }
    const d = jobs.get('D')!;
    await waitFor(async () => (await stateOf(qa, d.id)) === 'completed', 'the last node to complete', 30000);
    expect(runs.map((r) => r.name).filter((n) => n === 'A'), 'A runs once, for both').to.have.length(1);
    expect(runs[0].name).to.equal('A');
    expect(runs[runs.length - 1]).to.deep.equal({ name: 'D', values: { [new QueueKeys(b).job(jobs.get('B')!.id)]: 'B', [new QueueKeys(c).job(jobs.get('C')!.id)]: 'C' } });
    expect(runs.find((r) => r.name === 'B')!.values).to.deep.equal({ [new QueueKeys(a).job(jobs.get('A')!.id)]: 'A' });
  });

  it('a producer that dies after the first part: heal rolls the flow forward once its journal is past the grace period, and a resend stores nothing twice', async () => {
    const [a, b, c] = await threeQueues('fc-heal');
    const qa = queue(a);
    const qb = queue(b);
    await qa.waitUntilReady();
    const nodes = treeToNodes(tree(a, b, c, 'h'));
    const enc = encodeNodes(nodes);
    const plan = partsOf(nodes, enc, DEFAULT_MAX_PAYLOAD);
    expect(plan.rest.length, 'parts after the first').to.be.at.least(2);
    // the producer's first call, and nothing after it
    expect(await callFunction(qa.client, 'glidemq_addFlowPart', plan.first.keys, plan.first.args)).to.deep.include.members([1]);
    expect(await stateOf(qa, 'h-parent')).to.equal('waiting-children');
    expect(await stateOf(qa, 'h-a')).to.equal('waiting');
    expect(await qb.getJob('h-mid')).to.equal(undefined);
    expect(await qa.client.hexists(qa.keys.flows, plan.flowId)).to.equal(1);

    const m = upkeep(qa);
    expect((await m.heal()).flowsRolledForward, 'a journal within its grace period is left to its producer').to.equal(0);
    await waitFor(async () => ((await m.heal()).flowsRolledForward ?? 0) === 1, 'heal to roll the flow forward', 20000, 250);
    expect(await qa.client.exists(qa.keys.flows, qa.keys.flowsDue)).to.equal(0);
    expect(await stateOf(qb, 'h-mid')).to.equal('waiting-children');
    expect(await stateOf(qa, 'h-grand')).to.equal('waiting');
    expect(await stateOf(queue(c), 'h-c')).to.equal('waiting');
    expect((await m.heal()).flowsRolledForward, 'nothing left to roll forward').to.equal(0);

    // the producer's resend (the same jobs): every part answers as stored
    const again = await addInParts({ client: qa.client, producer: new Producer(), maxPayload: DEFAULT_MAX_PAYLOAD }, nodes, enc);
    expect(again.created).to.equal(false);
    expect(await qa.client.scard(qa.keys.deps('h-parent'))).to.equal(3);
    expect((await qa.getJobCounts()).waiting).to.equal(2);

    const log = runFlowWorkers([a, b, c]);
    await waitFor(async () => (await stateOf(qa, 'h-parent')) === 'completed', 'the parent to complete', 30000);
    expect(log.filter((r) => r.id === 'h-parent')).to.have.length(1);
    expect((await qa.getJob('h-parent'))!.returnvalue).to.equal(90);
  });

  it("a producer that dies after the first part: a worker's upkeep of the journal's queue rolls the flow forward, and the flow runs", async () => {
    const [a, b, c] = await threeQueues('fc-upkeep');
    const qa = queue(a);
    await qa.waitUntilReady();
    const nodes = treeToNodes(tree(a, b, c, 'u'));
    const plan = partsOf(nodes, encodeNodes(nodes), DEFAULT_MAX_PAYLOAD);
    await callFunction(qa.client, 'glidemq_addFlowPart', plan.first.keys, plan.first.args);
    const log = runFlowWorkers([a, b, c]);
    await waitFor(async () => (await stateOf(qa, 'u-parent')) === 'completed', 'the flow to be rolled forward and run', 40000);
    expect(log.filter((r) => r.id === 'u-parent')).to.have.length(1);
    expect((await qa.getJob('u-parent'))!.returnvalue).to.equal(90);
    expect(await qa.client.exists(qa.keys.flows)).to.equal(0);
  });

  it('a flow across slots one of whose job ids is taken in another slot is refused before anything is written, as one call refuses it', async () => {
    const [a, b] = await threeQueues('fc-taken');
    const qa = queue(a);
    const qb = queue(b);
    await qb.add('other', {}, { jobId: 'x-taken' });
    const err = await producer()
      .add({ name: 'p', queueName: a, opts: { jobId: 'x-parent' }, children: [{ name: 'k', queueName: b, opts: { jobId: 'x-taken' } }] })
      .then(() => undefined, (e: Error) => e);
    expect(err?.name).to.equal('InvalidArgumentError');
    expect(err?.message).to.match(/exists already, and other jobs of the flow do not/);
    expect(await qa.getJob('x-parent')).to.equal(undefined);
    expect(await qa.client.exists(qa.keys.flows, qa.keys.flowsDue)).to.equal(0);
    expect((await qb.getJob('x-taken'))!.name).to.equal('other');
  });

  it('a running parent adds children in other slots, waits for them (moveToWaitingChildren) and runs again with their values', async () => {
    const [a, b, c] = await threeQueues('fc-wait');
    const qa = queue(a);
    const qb = queue(b);
    const qc = queue(c);
    const steps: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    worker(a, async (job: Job, token?: string) => {
      const step = (job.data as { step?: string }).step ?? 'start';
      steps.push(step);
      if (step === 'start') {
        await qb.add('kid', { n: 1 }, { parent: { id: job.id, queue: qa.keys.base } });
        await qc.add('kid', { n: 2 }, { parent: { id: job.id, queue: qa.keys.base } });
        await job.updateData({ step: 'wait' });
        const waits = await job.moveToWaitingChildren(token!);
        release();
        if (waits) throw new WaitingChildrenError();
      }
      return Object.values(await job.getChildrenValues()).reduce((s: number, v) => s + (v as number), 0);
    });
    // the children run once the parent waits for them (so it does wait, and runs a second time)
    for (const n of [b, c]) worker(n, async (job: Job) => {
      await gate;
      return (job.data as { n: number }).n * 100;
    });
    const parent = await qa.add('parent', {});
    await waitFor(async () => (await stateOf(qa, parent.id)) === 'completed', 'the parent to complete', 30000);
    expect(steps).to.deep.equal(['start', 'wait']);
    expect((await qa.getJob(parent.id))!.returnvalue).to.equal(300);
    for (const q of [qa, qb, qc]) expect(await q.client.exists(q.keys.flows), `no journal left in ${q.name}`).to.equal(0);
  });

  it('a child added with `parent` to a queue in another slot: registered in its parent first, then stored; a resend stores it once', async () => {
    const [a, b] = await threeQueues('fc-child');
    const qa = queue(a);
    const qb = queue(b);
    const parent = await producer().add({ name: 'p', queueName: a, children: [{ name: 'first', queueName: a }] });
    const parentOpt = { id: parent.job.id, queue: qa.keys.base };
    const one = await qb.add('kid', {}, { jobId: 'kid-1', parent: parentOpt });
    expect(one.created).to.equal(true);
    const again = await qb.add('kid', {}, { jobId: 'kid-1', parent: parentOpt });
    expect(again.created).to.equal(false);
    expect(await qa.client.smembers(qa.keys.deps(parent.job.id))).to.have.members([qa.keys.job(parent.children![0].job.id), qb.keys.job('kid-1')]);
    expect((await qb.getJobCounts()).waiting).to.equal(1);
    expect(await qa.client.exists(qa.keys.flows, qa.keys.flowsDue)).to.equal(0);
    expect((await qb.getJob('kid-1'))!.parentKey).to.equal(qa.keys.job(parent.job.id));
  });

  it('removeChildDependency of a child in another slot releases its parent; a failParentOnFailure child in another slot fails its parent', async () => {
    const [a, b, c] = await threeQueues('fc-policy');
    const qa = queue(a);
    const qb = queue(b);
    const flow = producer();
    const t = await flow.add({ name: 'p', queueName: a, children: [{ name: 'k', queueName: b, data: {} }] });
    const child = (await qb.getJob(t.children![0].job.id))!;
    expect(await child.removeChildDependency()).to.equal(true);
    expect(await stateOf(qa, t.job.id)).to.equal('waiting');

    const f = await flow.add({ name: 'p', queueName: a, children: [{ name: 'bad', queueName: c, data: {}, opts: { failParentOnFailure: true } }] });
    worker(c, async () => {
      throw new Error('child broke');
    });
    await waitFor(async () => (await stateOf(qa, f.job.id)) === 'failed', 'the parent to fail', 30000);
    const failed = (await qa.getJob(f.job.id))!;
    expect(failed.failedReason).to.contain(new QueueKeys(c).job(f.children![0].job.id));

    // on up a chain across three slots: the leaf (c) fails its parent (a), which fails its own parent (b)
    const chain = await flow.add({
      name: 'top', queueName: b,
      children: [{ name: 'mid', queueName: a, opts: { failParentOnFailure: true }, children: [{ name: 'bad', queueName: c, opts: { failParentOnFailure: true } }] }],
    });
    await waitFor(async () => (await stateOf(qb, chain.job.id)) === 'failed', 'the top of the chain to fail', 30000);
    expect(await stateOf(qa, chain.children![0].job.id)).to.equal('failed');
  });

  it("heal settles again a child whose settlement a failover of the parent's node lost (the record relayed and gone, the parent still counting the child)", async () => {
    const [a, b] = await threeQueues('fc-lost');
    const qa = queue(a);
    const qb = queue(b);
    const t = await producer().add({ name: 'p', queueName: a, children: [{ name: 'k', queueName: b, data: {} }] });
    // the child's worker finishes it (the outbox record written in its slot) ...
    const manual = new Worker(b, undefined, { connection: connection(cluster()), blockTimeout: 500 });
    manual.on('error', () => undefined);
    const child = (await manual.getNextJob('w'))!;
    await callFunction(qb.client, 'glidemq_finish', qb.keys.meta, [child.id, child.claim!.fence, 'w', 'completed', '7', -1, 0, '', 1, '0', 30000, 1]);
    await manual.close(true);
    // ... and the relay's settle was acknowledged by the parent's old primary and the record deleted,
    // but the promoted replica never had the settle: the state a failover leaves
    expect(await qb.client.del(qb.keys.flowOutbox)).to.equal(1);
    expect(await stateOf(qa, t.job.id)).to.equal('waiting-children');
    const m = upkeep(qa);
    expect((await m.heal({ check: true })).settlementsRepaired, 'check mode finds it').to.equal(1);
    expect(await stateOf(qa, t.job.id)).to.equal('waiting-children');
    expect((await m.heal()).settlementsRepaired).to.equal(1);
    expect(await stateOf(qa, t.job.id)).to.equal('waiting');
    expect((await m.heal()).settlementsRepaired, 'once').to.equal(0);
    const runs: unknown[] = [];
    worker(a, async (job: Job) => runs.push(await job.getChildrenValues()));
    await waitFor(async () => (await stateOf(qa, t.job.id)) === 'completed', 'the parent to complete');
    expect(runs).to.deep.equal([{ [qb.keys.job(child.id)]: 7 }]);
  });

  it('a failover of the node holding the parent in the middle of a flow (a child settled inline, one relay pending, one child still to run) loses nothing acknowledged: the parent runs once with every value', async () => {
    const c = cluster();
    // the node to kill serves the first queue; it is not the node the clients' URL names (a client
    // made after the kill, as the workers below are, reaches the cluster through that URL)
    ports.sort((x, y) => Number(x === c.seedPort) - Number(y === c.seedPort));
    const [a, b, cc] = await threeQueues('fc-failover');
    const victim = ports[0];
    expect(victim).to.not.equal(c.seedPort);
    const replica = (await c.replicaOf(victim))!;
    expect(replica, 'the victim has a replica').to.be.a('number');
    const qa = queue(a);
    const qc = queue(cc);
    const added = await producer().add({
      name: 'parent',
      queueName: a,
      opts: { jobId: 'f-parent' },
      children: [
        { name: 'leaf', queueName: a, data: { v: 4 }, opts: { jobId: 'f-a' } },
        { name: 'leaf', queueName: b, data: { v: 1 }, opts: { jobId: 'f-b' } },
        { name: 'leaf', queueName: cc, data: { v: 2 }, opts: { jobId: 'f-c' } },
      ],
    });
    expect(added.job.id).to.equal('f-parent');
    // the child in the parent's queue completes (settled inline) on the node about to die
    const parentLog = runFlowWorkers([a]);
    await waitFor(async () => (await qa.client.scard(qa.keys.deps('f-parent'))) === 2, 'the child in the parent\'s queue to settle inline');
    // the child in the third queue: its worker finishes it (the outbox record is written) and dies before relaying
    const dying = new Worker(cc, undefined, { connection: connection(c), blockTimeout: 500 });
    dying.on('error', () => undefined);
    const child = (await dying.getNextJob('dying-worker'))!;
    const reply = (await callFunction(qc.client, 'glidemq_finish', qc.keys.meta, [child.id, child.claim!.fence, 'dying-worker', 'completed', '20', -1, 0, '', 1, '0', 30000, 1])) as unknown[];
    await dying.close(true);
    expect(reply).to.deep.equal(['completed', '{relay}']);
    // all of it acknowledged: the parent's node passed it to its replica before the kill
    await replicated(c, victim);
    killed.push(victim);
    await c.kill(victim);
    await c.waitPromoted(replica);
    // after the promotion: the child in the second queue runs and is relayed to the promoted node;
    // the record the dead worker left is relayed by the upkeep of its queue's worker (past the grace period)
    runFlowWorkers([b, cc]);
    await waitFor(async () => (await stateOf(qa, 'f-parent')) === 'completed', 'the parent to complete after the failover', 30000).catch(async (err: Error) => {
      const qb = queue(b);
      const seen = {
        parent: await qa.client.hgetall(qa.keys.job('f-parent')),
        deps: await qa.client.smembers(qa.keys.deps('f-parent')),
        b: await qb.client.hgetall(qb.keys.job('f-b')),
        outboxB: await qb.client.hgetall(qb.keys.flowOutbox),
        outboxC: await qc.client.hgetall(qc.keys.flowOutbox),
        log: parentLog.map((r) => r.id),
      };
      throw new Error(`${err.message}: ${JSON.stringify(seen)}`);
    });
    const parent = (await qa.getJob('f-parent'))!;
    expect(parent.returnvalue, 'every child value reached the parent').to.equal(70);
    expect(parentLog.filter((r) => r.id === 'f-parent'), 'the parent ran once, on the worker that lived through the failover').to.have.length(1);
    expect(parentLog.find((r) => r.id === 'f-parent')!.values).to.deep.equal({
      [new QueueKeys(a).job('f-a')]: 40,
      [new QueueKeys(b).job('f-b')]: 10,
      [new QueueKeys(cc).job('f-c')]: 20,
    });
    await waitFor(async () => (await qc.client.hlen(qc.keys.flowOutbox)) === 0, 'the outbox of the third queue to be relayed', 20000);
  });

  it('a failover of the node holding the journal while a flow is half stored: the promoted replica has the journal, and upkeep rolls the flow forward there', async () => {
    const c = cluster();
    // the node to kill serves the first queue; it is not the node the clients' URL names (a client
    // made after the kill, as the workers below are, reaches the cluster through that URL)
    ports.sort((x, y) => Number(x === c.seedPort) - Number(y === c.seedPort));
    const [a, b, cc] = await threeQueues('fc-journal-failover');
    const victim = ports[0];
    expect(victim).to.not.equal(c.seedPort);
    const replica = (await c.replicaOf(victim))!;
    const qa = queue(a);
    await qa.waitUntilReady();
    const nodes = treeToNodes(tree(a, b, cc, 'j'));
    const plan = partsOf(nodes, encodeNodes(nodes), DEFAULT_MAX_PAYLOAD);
    // the producer's first call was acknowledged (and copied), then the producer and the node died
    await callFunction(qa.client, 'glidemq_addFlowPart', plan.first.keys, plan.first.args);
    await replicated(c, victim);
    killed.push(victim);
    await c.kill(victim);
    await c.waitPromoted(replica);
    expect(await qa.client.hexists(qa.keys.flows, plan.flowId), 'the journal on the promoted replica').to.equal(1);
    const log = runFlowWorkers([a, b, cc]);
    await waitFor(async () => (await stateOf(qa, 'j-parent')) === 'completed', 'the flow to be rolled forward and run after the failover', 60000);
    expect(log.filter((r) => r.id === 'j-parent')).to.have.length(1);
    expect((await qa.getJob('j-parent'))!.returnvalue).to.equal(90);
    expect(await qa.client.exists(qa.keys.flows, qa.keys.flowsDue)).to.equal(0);
  });
});
