/**
 * A claim carries its own terms (issue 27, bug 1): the lock duration and maxStalledCount of the
 * worker it was made for are recorded with it on the server, and every stalled check judges the
 * claim by them, not by the settings of the worker that runs the check. So a short-lock worker's
 * checks never take a long-lock worker's running job, and a long-lock checker recovers a dead
 * short-lock worker's job on the short lock's schedule. Stream and priority (list) claims, and
 * broadcast claims.
 */
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Broadcast } from '../../src/engine/broadcast/broadcast.js';
import { BroadcastWorker, type BroadcastProcessor, type BroadcastWorkerOptions } from '../../src/engine/broadcast/broadcast-worker.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { claimAs, jobHash, termsArgs, upkeep } from '../helpers/recovery.js';
import { killedAfterEach, processorPath, WorkerProcess } from '../helpers/worker-spawn.js';

const HOLDING_WORKER = fileURLToPath(new URL('../fixtures/holding-worker.js', import.meta.url));

/** The short lock: its checks run every 200 ms. */
const SHORT = { lockDuration: 1000, stalledInterval: 200, blockTimeout: 1000 };
/** A worker with the default settings: a 30 s lock, its heartbeat every 15 s, its checks every 30 s. */
const HOLDER = { lockDuration: 30_000, blockTimeout: 1000 };
/** A checker with the default 30 s lock whose checks run as often as the short lock's. */
const LONG = { lockDuration: 30_000, stalledInterval: 200, blockTimeout: 1000 };
/** How long a job of the long-lock worker runs: past the short lock, twice. */
const RUN_MS = 2200;
/**
 * A dead short-lock claim is recovered within its lock plus one check interval (1.2 s); the
 * safety margin covers a slow machine, and stays far below the checker's own 30 s lock.
 */
const RECOVERED_WITHIN_MS = 8000;

const KINDS = [
  ['stream', {}],
  ['priority', { priority: 3 }],
] as const;

describe('a claim is judged by its own lock (real valkey-server)', function () {
  this.timeout(60_000);
  const server = useServer();
  const h = new Harness(server);
  const procs = killedAfterEach();
  const children: ChildProcess[] = [];
  const open: { close(force?: boolean): Promise<void> }[] = [];
  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await Promise.all(open.splice(0).map((o) => o.close(true)));
    await h.cleanup();
  });

  function bcWorker(name: string, sub: string, fn: BroadcastProcessor, opts: BroadcastWorkerOptions): BroadcastWorker {
    const w = new BroadcastWorker(name, sub, fn, { connection: server().url, startFrom: 'earliest', ...opts });
    w.on('error', () => undefined);
    open.push(w);
    return w;
  }

  for (const [kind, opts] of KINDS) {
    it(`a ${kind} job of a worker with a 30 s lock runs once while a worker with a 1 s lock checks for stalls`, async () => {
      const name = uniqueQueue(kind);
      const q = h.queue(name);
      const runs: string[] = [];
      const long = h.worker(name, async () => {
        runs.push('long');
        await new Promise((r) => setTimeout(r, RUN_MS));
        return 'from the long lock';
      }, HOLDER);
      const job = await q.add('work', {}, opts);
      await waitFor(async () => (await jobHash(q, job.id)).state === 'active', 'the long-lock worker to take the job');
      const stalled: string[] = [];
      const short = h.worker(name, async () => {
        runs.push('short');
        return 'from the short lock';
      }, SHORT);
      short.on('stalled', (id: string) => stalled.push(id));
      await waitFor(async () => (await jobHash(q, job.id)).state === 'completed', 'the job to complete', 15_000);
      const done = await q.getJob(job.id);
      expect(runs).to.deep.equal(['long']);
      expect(done!.returnvalue).to.equal('from the long lock');
      expect(done!.stalledCount).to.equal(0);
      expect(stalled).to.deep.equal([]);
      expect(long.finished.completed).to.equal(1);
    });

    it(`a ${kind} job of a dead worker with a 1 s lock is recovered on that lock's schedule by a checker with a 30 s lock`, async () => {
      const name = uniqueQueue(kind);
      const q = h.queue(name);
      const victim = new WorkerProcess({ url: server().url, queue: name, processor: processorPath('hang.mjs'), options: SHORT });
      procs.push(victim);
      await victim.waitReady();
      const job = await q.add('work', {}, opts);
      await waitFor(() => victim.started.includes(job.id), 'the short-lock worker process to start the job');
      await victim.kill();
      const killedAt = Date.now();
      const ran: string[] = [];
      h.worker(name, async (j: Job) => {
        ran.push(j.id);
        return 'rescued';
      }, LONG);
      await waitFor(async () => (await jobHash(q, job.id)).state === 'completed', 'the 30 s checker to recover the job', RECOVERED_WITHIN_MS);
      expect(Date.now() - killedAt).to.be.below(RECOVERED_WITHIN_MS);
      expect(ran).to.deep.equal([job.id]);
      const done = await q.getJob(job.id);
      expect(done!.stalledCount).to.equal(1);
      expect(done!.returnvalue).to.equal('rescued');
    });
  }

  it("a claim's maxStalledCount is its own: the checker's does not fail a job its holder would give another chance", async () => {
    const q = h.queue(uniqueQueue());
    const job = await q.add('work', {}, { priority: 1 });
    // a dead worker that allowed 3 stalls; the checker allows none
    await claimAs(q, 'dead', 1, { lockDuration: 0, maxStalledCount: 3 });
    const r = await upkeep(q, { lockDuration: 30_000, maxStalledCount: 0 }).reclaimStalled('checker');
    expect(r.redispatched).to.deep.equal([job.id]);
    expect(r.failed).to.deep.equal([]);
    expect((await jobHash(q, job.id)).state).to.equal('prioritized');
  });

  it('a plain job that becomes a flow parent while claimed is finished as a parent: its removal takes its dependency keys', async () => {
    const q = h.queue(uniqueQueue());
    const first = await q.add('plain', {}, { removeOnComplete: true });
    const parent = await q.add('p', {}, { removeOnComplete: true });
    const [c1, c2] = await claimAs(q, 'w', 2, { lockDuration: 30_000 });
    // claimed plain (lua/activate.lua): its finish would read none of the flow fields
    expect((await jobHash(q, parent.id)).terms).to.equal('30000:1:p');
    await q.add('kid', {}, { parent: { id: parent.id, queue: q.keys.base } });
    const deps = `${q.keys.job(parent.id)}:deps`;
    expect(await q.client.exists(deps)).to.equal(1);
    // (a plain job finished first: the finish then expects plain jobs, and reads the terms)
    const r = (await callFunction(q.client, 'glidemq_finishMany', q.keys.meta, ['w', 2, 0, '0', '', ...termsArgs({ lockDuration: 30_000 }),
      first.id, c1.fence, 'completed', 'null', -1, '0', 0, parent.id, c2.fence, 'completed', 'null', -1, '0', 0])) as unknown[];
    expect(r.slice(0, 2)).to.deep.equal(['completed', 'completed']);
    expect(await q.client.exists(q.keys.job(parent.id), deps)).to.equal(0);
  });

  it("a finish batch that mixes plain jobs and flow children settles each child's parent, in either order", async () => {
    const flows = h.flowProducer();
    for (const order of ['child first', 'plain first']) {
      const q = h.queue(uniqueQueue());
      const tree = await flows.add({ name: 'top', queueName: q.name, children: [{ name: 'kid', queueName: q.name, opts: { removeOnComplete: true } }] });
      const plain = await q.add('plain', {}, { removeOnComplete: true });
      const claims = await claimAs(q, 'w', 2, { lockDuration: 30_000 });
      const fences = new Map(claims.map((c) => [c.id, c.fence]));
      const kid = tree.children![0].job.id;
      const ids = order === 'child first' ? [kid, plain.id] : [plain.id, kid];
      const r = (await callFunction(q.client, 'glidemq_finishMany', q.keys.meta, ['w', 2, 0, '0', '', ...termsArgs({ lockDuration: 30_000 }),
        ...ids.flatMap((id) => [id, fences.get(id)!, 'completed', '"done"', -1, '0', 0])])) as unknown[];
      expect(r.slice(0, 2), order).to.deep.equal(['completed', 'completed']);
      expect(await q.getJobState(tree.job.id), order).to.equal('waiting'); // its one child is done
      expect(await q.client.exists(q.keys.job(kid), q.keys.job(plain.id)), order).to.equal(0);
    }
  });

  it("a claim with no terms recorded (made by an older glidemq) is judged by the checker's settings", async () => {
    const q = h.queue(uniqueQueue());
    const s = await q.add('s', {});
    const p = await q.add('p', {}, { priority: 1 });
    await claimAs(q, 'old-library', 2, { lockDuration: 3_600_000 });
    for (const id of [s.id, p.id]) await q.client.hdel(q.keys.job(id), 'terms');
    const r = await upkeep(q, { lockDuration: 0 }).reclaim();
    expect([...r.redispatched].sort()).to.deep.equal([s.id, p.id].sort());
  });

  it('a broadcast message a worker with a 30 s lock runs is not taken by the checks of a worker with a 1 s lock', async () => {
    const name = uniqueQueue('bc');
    const b = new Broadcast(name, { connection: server().url });
    open.push(b);
    const runs: string[] = [];
    const long = bcWorker(name, 'sub', async () => {
      runs.push('long');
      await new Promise((r) => setTimeout(r, RUN_MS));
    }, HOLDER);
    let completed = 0;
    long.on('completed', () => completed++);
    await long.run();
    await b.publish('orders.new', {});
    await waitFor(() => runs.length === 1, 'the long-lock worker to take the message');
    const stalled: string[] = [];
    const short = bcWorker(name, 'sub', async () => void runs.push('short'), SHORT);
    short.on('stalled', (id: string) => stalled.push(id));
    await waitFor(() => completed === 1, 'the long-lock worker to finish the message', 15_000);
    expect(runs).to.deep.equal(['long']);
    expect(stalled).to.deep.equal([]);
  });

  it('a broadcast message of a dead worker with a 1 s lock is recovered on that schedule by a checker with a 30 s lock', async () => {
    const name = uniqueQueue('bc');
    const b = new Broadcast(name, { connection: server().url });
    open.push(b);
    const c = server().client();
    const traceKey = `trace:${name}`;
    const child = spawn(process.execPath, [HOLDING_WORKER, 'broadcast', server().url, name, 'sub'], {
      env: { ...process.env, TRACE_KEY: traceKey, LOCK_MS: String(SHORT.lockDuration), STALLED_MS: '60000' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    children.push(child);
    await waitFor(async () => (await b.subscriptions()).some((s) => s.name === 'sub'), 'the child to subscribe');
    const id = await b.publish('x', { hang: true });
    await waitFor(async () => (await c.lrange(traceKey, 0, -1)).length === 1, 'the child to take the message');
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    const killedAt = Date.now();
    const runs: { id: string; stalled: number }[] = [];
    bcWorker(name, 'sub', (m) => void runs.push({ id: m.id, stalled: m.stalledCount }), LONG);
    await waitFor(() => runs.length === 1, 'the 30 s checker to recover the message', RECOVERED_WITHIN_MS);
    expect(Date.now() - killedAt).to.be.below(RECOVERED_WITHIN_MS);
    expect(runs).to.deep.equal([{ id, stalled: 1 }]);
    c.disconnect();
  });
});
