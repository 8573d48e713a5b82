/**
 * Batches (the Worker's `batch` option, src/engine/consuming/batch-runner.ts): the processor gets
 * the jobs of a batch and answers one result per job; each job is finished, retried or failed by
 * its own rules; claims, locks and stall recovery stay per job; a batch costs about one call to
 * finish.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { Worker, type WorkerOptions } from '../../src/engine/consuming/worker.js';
import type { BatchProcessor } from '../../src/engine/consuming/batch-runner.js';
import type { BatchOptions } from '../../src/engine/consuming/batch-options.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { BatchError, InvalidArgumentError, UnrecoverableError } from '../../src/index.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { jobHash } from '../helpers/recovery.js';
import { killedAfterEach, processorPath, WorkerProcess } from '../helpers/worker-spawn.js';

// short enough for fast tests, long enough that a healthy worker's heartbeat (every 500 ms) is never late on a busy machine
const FAST = { lockDuration: 1000, stalledInterval: 500, blockTimeout: 1000 };

describe('batches: the batch option (real valkey-server)', function () {
  this.timeout(60_000);
  const server = useServer();
  const h = new Harness(server);
  const procs = killedAfterEach();
  afterEach(() => h.cleanup());

  /** A batch worker on the test server, closed by the harness. */
  function batchWorker(name: string, processor: BatchProcessor, opts: WorkerOptions & { batch: BatchOptions }): Worker {
    const w = new Worker(name, processor, { connection: server().url, blockTimeout: 1000, ...opts });
    w.on('error', () => undefined);
    h.workers.push(w);
    return w;
  }

  it('fills batches up to size, and hands over what is left after the timeout', async () => {
    const name = uniqueQueue('fill');
    const q = h.queue(name);
    await q.addBulk(Array.from({ length: 120 }, (_, i) => ({ name: 'n', data: { i } })));
    const sizes: number[] = [];
    const w = batchWorker(name, async (jobs: Job<{ i: number }>[]) => {
      sizes.push(jobs.length);
      return jobs.map((j) => j.data.i * 2);
    }, { batch: { size: 50, timeout: 500 } });
    await waitFor(() => w.finished.completed === 120, 'all 120 jobs completed');
    expect(sizes).to.deep.equal([50, 50, 20]);
    const job = await q.getJob((await q.getJobs(['completed'], 0, 0))[0].id);
    expect(job!.returnvalue).to.equal(job!.data.i * 2);
    const counts = await q.getJobCounts();
    expect(counts.completed).to.equal(120);
    expect(counts.waiting + counts.active).to.equal(0);
  });

  it('waits up to the timeout for a batch to fill, then runs it partial', async () => {
    const name = uniqueQueue('partial');
    const q = h.queue(name);
    const batches: string[][] = [];
    const w = batchWorker(name, async (jobs: Job[]) => {
      batches.push(jobs.map((j) => j.name));
      return jobs.map(() => 'ok');
    }, { batch: { size: 10, timeout: 2000 } });
    await w.waitUntilReady();
    await q.add('first', {});
    // the first job is claimed and waits for its batch to fill
    await waitFor(() => w.activeCount === 1, 'the first job to join a filling batch');
    expect(batches).to.deep.equal([]);
    await q.addBulk([{ name: 'second', data: {} }, { name: 'third', data: {} }]);
    await waitFor(() => w.finished.completed === 3, 'the partial batch to run after its timeout');
    expect(batches).to.deep.equal([['first', 'second', 'third']]);
  });

  it('a job whose claim is lost while its batch fills is left out of the batch; the others run', async () => {
    const name = uniqueQueue('lost');
    const q = h.queue(name);
    const batches: string[][] = [];
    const lockLost: string[] = [];
    const w = batchWorker(name, async (jobs: Job[]) => {
      batches.push(jobs.map((j) => j.name));
      return jobs.map(() => 'ok');
    }, { ...FAST, batch: { size: 10, timeout: 3000 } });
    w.on('lockLost', (id: string) => lockLost.push(id));
    await w.waitUntilReady();
    const [gone] = await q.addBulk([{ name: 'gone', data: {} }, { name: 'kept', data: {} }]);
    await waitFor(() => w.activeCount === 2, 'both jobs to join the filling batch');
    await q.remove(gone.id, { force: true });
    await waitFor(() => lockLost.includes(gone.id), 'the heartbeat to hear that the claim is gone');
    await waitFor(() => w.finished.completed === 1, 'the batch to run');
    expect(batches).to.deep.equal([['kept']]);
    expect(w.activeCount).to.equal(0);
  });

  it('close() hands over a batch still filling, and its jobs finish before the close resolves', async () => {
    const name = uniqueQueue('close');
    const q = h.queue(name);
    const batches: number[] = [];
    const w = batchWorker(name, async (jobs: Job[]) => {
      batches.push(jobs.length);
      return jobs.map(() => 'done at close');
    }, { batch: { size: 10, timeout: 60_000 } });
    await w.waitUntilReady();
    await q.addBulk([{ name: 'a', data: {} }, { name: 'b', data: {} }]);
    await waitFor(() => w.activeCount === 2, 'both jobs to join the filling batch');
    await w.close();
    expect(batches).to.deep.equal([2]);
    expect(w.finished.completed).to.equal(2);
    expect((await q.getJobCounts()).completed).to.equal(2);
  });

  it('BatchError: each job completes, retries or fails for good by its own rules', async () => {
    const name = uniqueQueue('partial-fail');
    const q = h.queue(name);
    const retried = await q.add('retried', {}, { attempts: 2 });
    const fine = await q.add('fine', {});
    const failed = await q.add('failed', {}, { attempts: 1 });
    const unrecoverable = await q.add('unrecoverable', {}, { attempts: 5 });
    const calls: string[][] = [];
    const failedEvents: string[] = [];
    const w = batchWorker(name, async (jobs: Job[]) => {
      calls.push(jobs.map((j) => j.name));
      throw new BatchError(jobs.map((j) => {
        if (j.name === 'retried') return j.attemptsMade === 0 ? new Error('first try fails') : 'second try';
        if (j.name === 'failed') return new Error('fails for good');
        if (j.name === 'unrecoverable') return new UnrecoverableError('never again');
        return { ok: j.name };
      }));
    }, { batch: { size: 4, timeout: 300 } });
    w.on('failed', (job: Job, err: Error) => failedEvents.push(`${job.name}: ${err.message}`));
    await waitFor(async () => (await q.getJobCounts()).completed === 2, 'the two completions');
    expect(calls[0]).to.have.members(['retried', 'fine', 'failed', 'unrecoverable']);
    expect(calls.slice(1)).to.deep.equal([['retried']]);
    expect(failedEvents).to.have.members(['retried: first try fails', 'failed: fails for good', 'unrecoverable: never again']);
    const r = (await q.getJob(retried.id))!;
    expect([r.state, r.returnvalue, r.attemptsMade]).to.deep.equal(['completed', 'second try', 2]);
    expect((await q.getJob(fine.id))!.returnvalue).to.deep.equal({ ok: 'fine' });
    const f = (await q.getJob(failed.id))!;
    expect([f.state, f.failedReason, f.attemptsMade]).to.deep.equal(['failed', 'fails for good', 1]);
    const u = (await q.getJob(unrecoverable.id))!;
    expect([u.state, u.failedReason, u.attemptsMade]).to.deep.equal(['failed', 'never again', 1]);
    expect(w.finished).to.deep.equal({ completed: 2, failed: 2 });
  });

  it('a processor that throws fails every job of the batch, each by its own retry rules', async () => {
    const name = uniqueQueue('throws');
    const q = h.queue(name);
    const again = await q.add('again', {}, { attempts: 2 });
    const once = await q.add('once', {}, { attempts: 1 });
    let call = 0;
    const w = batchWorker(name, async (jobs: Job[]) => {
      if (call++ === 0) throw new Error('the whole batch broke');
      return jobs.map((j) => `done ${j.name}`);
    }, { batch: { size: 2, timeout: 300 } });
    await waitFor(async () => (await q.getJob(again.id))?.state === 'completed', 'the retried job to complete');
    const o = (await q.getJob(once.id))!;
    expect([o.state, o.failedReason, o.attemptsMade]).to.deep.equal(['failed', 'the whole batch broke', 1]);
    const a = (await q.getJob(again.id))!;
    expect([a.returnvalue, a.attemptsMade]).to.deep.equal(['done again', 2]);
    expect(w.finished).to.deep.equal({ completed: 1, failed: 1 });
  });

  it('a job parked by moveToDelayed leaves its batch alone; RateLimitError puts the batch back unattempted', async () => {
    const name = uniqueQueue('park');
    const q = h.queue(name);
    const moved: string[] = [];
    let limited = false;
    const w: Worker = batchWorker(name, async (jobs: Job[]) => {
      if (!limited) {
        limited = true;
        await w.rateLimit(200);
        throw Worker.RateLimitError();
      }
      for (const j of jobs) if (j.name === 'park' && !j.data.step) await j.moveToDelayedIn(0, 'again');
      return jobs.map((j) => `${j.name} ${j.data.step ?? 'first'}`);
    }, { batch: { size: 2, timeout: 300 } });
    w.on('moved', (job: Job) => moved.push(job.name));
    const [park, plain] = await q.addBulk([{ name: 'park', data: {} }, { name: 'plain', data: {} }]);
    await waitFor(async () => (await q.getJobCounts()).completed === 2, 'both jobs to complete');
    expect(moved).to.deep.equal(['park']);
    const p = (await q.getJob(park.id))!;
    expect(p.returnvalue).to.equal('park again');
    const j = (await q.getJob(plain.id))!;
    // the rate-limited run was no attempt
    expect([j.returnvalue, j.attemptsMade]).to.deep.equal(['plain first', 1]);
  });

  it('cancelJob aborts the signal its batch shares', async () => {
    const name = uniqueQueue('cancel');
    const q = h.queue(name);
    const w = batchWorker(name, async (jobs: Job[], signal: AbortSignal) => {
      await new Promise((resolve) => signal.addEventListener('abort', resolve));
      throw signal.reason;
    }, { batch: { size: 2, timeout: 300 } });
    const [a] = await q.addBulk([{ name: 'a', data: {} }, { name: 'b', data: {} }]);
    await waitFor(() => w.activeCount === 2, 'the batch to run');
    expect(w.cancelJob(a.id, 'stop this batch')).to.equal(true);
    await waitFor(() => w.finished.failed === 2, 'both jobs to fail');
    const failed = await q.getJobs(['failed']);
    expect(failed.map((j) => j.failedReason)).to.deep.equal(['stop this batch', 'stop this batch']);
  });

  it("a batch's time limit is the smallest of its jobs': its signal aborts with the reason, and each job fails with it by its own retry rules", async () => {
    const name = uniqueQueue('batch-timeout');
    const q = h.queue(name);
    const reasons: string[] = [];
    let call = 0;
    const w = batchWorker(name, async (jobs: Job[], signal: AbortSignal) => {
      if (call++ > 0) return jobs.map((j) => `retried ${j.name}`);
      await new Promise((resolve) => signal.addEventListener('abort', resolve));
      reasons.push((signal.reason as Error).message);
      throw new Error('the processor says it stopped');
    }, { batch: { size: 3, timeout: 300 }, timeout: 5_000 });
    const [short, long, plain] = await q.addBulk([
      { name: 'short', data: {}, opts: { timeout: 200, attempts: 2 } },
      { name: 'long', data: {}, opts: { timeout: 1_000 } },
      { name: 'plain', data: {} },
    ]);
    await waitFor(async () => (await q.getJob(short.id))?.state === 'completed', 'the job with attempts left to complete on its retry');
    expect(reasons).to.deep.equal(['timed out after 200 ms']);
    for (const id of [long.id, plain.id]) {
      const j = (await q.getJob(id))!;
      expect([j.state, j.failedReason], 'whatever the processor threw, the reason is the timeout').to.deep.equal(['failed', 'timed out after 200 ms']);
    }
    expect((await q.getJob(short.id))!.returnvalue).to.equal('retried short');
    expect(w.finished).to.deep.equal({ completed: 1, failed: 2 });
  });

  it("a batch processor that ignores its signal: its jobs fail at the worker's timeout + grace, it is reported, and its slot stays taken until it returns", async () => {
    const name = uniqueQueue('batch-stuck');
    const q = h.queue(name);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const ran: string[] = [];
    const w = batchWorker(name, async (jobs: Job[]) => {
      ran.push(...jobs.map((j) => j.name));
      if (jobs[0].name === 'stuck') await released;
      return jobs.map(() => 'done');
    }, { batch: { size: 1 }, concurrency: 1, timeout: 200, timeoutGraceMs: 200 });
    const errors: Error[] = [];
    w.on('error', (e: Error) => errors.push(e));
    const stuck = await q.add('stuck', {});
    await waitFor(async () => (await q.getJob(stuck.id))?.state === 'failed', 'the stuck batch\'s job to be failed');
    expect((await q.getJob(stuck.id))?.failedReason).to.equal('timed out after 200 ms');
    await waitFor(() => errors.length > 0, 'the stuck processor to be reported');
    expect(errors[0].message).to.contain(`job ${stuck.id}`);
    const next = await q.add('next', {});
    // a check that something does not happen has no condition to await: the next job is given
    // a moment in which it would start on a free slot
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(ran, 'the stuck processor keeps the only slot').to.deep.equal(['stuck']);
    release();
    await waitFor(async () => (await q.getJob(next.id))?.state === 'completed', 'the next job to run once the slot is free');
    expect((await q.getJob(stuck.id))?.state, 'the late result changed nothing').to.equal('failed');
    expect(w.finished).to.deep.equal({ completed: 1, failed: 1 });
  });

  it('a result array of the wrong length fails the batch with a reason that names its size', async () => {
    const name = uniqueQueue('length');
    const q = h.queue(name);
    await q.addBulk([{ name: 'a', data: {} }, { name: 'b', data: {} }]);
    const w = batchWorker(name, async () => ['only one'], { batch: { size: 2, timeout: 300 } });
    await waitFor(() => w.finished.failed === 2, 'both jobs to fail');
    const [job] = await q.getJobs(['failed'], 0, 0);
    expect(job.failedReason).to.match(/gave 1 results for a batch of 2 jobs/);
  });

  it('checks the option, naming what is wrong', () => {
    const make = (batch: unknown, processor: unknown = async () => []) =>
      new Worker('checked', processor as BatchProcessor, { connection: server().url, autorun: false, batch: batch as BatchOptions });
    for (const [batch, what] of [
      [{ size: 0 }, /batch\.size must be a whole number from 1 to 1000.*got 0/],
      [{ size: 1001 }, /batch\.size .*got 1001/],
      [{ size: 2.5 }, /batch\.size .*got 2\.5/],
      [{}, /batch\.size .*got undefined/],
      [{ size: 10, timeout: -1 }, /batch\.timeout must be a number of ms >= 0.*got -1/],
      [{ size: 10, timeout: Infinity }, /batch\.timeout .*got Infinity/],
      ['fifty', /batch must be an object/],
    ] as const) {
      expect(() => make(batch), JSON.stringify(batch)).to.throw(InvalidArgumentError, what);
    }
    expect(() => make({ size: 10 }, null)).to.throw(InvalidArgumentError, /batch: a batch worker needs a processor function/);
  });

  it('a worker killed mid-batch: stalled recovery takes back each job of its batch', async () => {
    const name = uniqueQueue('killed');
    const q = h.queue(name);
    const victim = new WorkerProcess({ url: server().url, queue: name, processor: processorPath('hang.mjs'), options: { ...FAST, batch: { size: 5, timeout: 1000 } } });
    procs.push(victim);
    await victim.waitReady();
    const jobs = await q.addBulk(Array.from({ length: 5 }, (_, i) => ({ name: 'n', data: { i } })));
    const ids = jobs.map((j) => j.id);
    await waitFor(() => ids.every((id) => victim.started.includes(id)), 'the batch to start in the worker process');
    await victim.kill();
    for (const id of ids) expect((await jobHash(q, id)).state).to.equal('active');
    const rescued: string[] = [];
    batchWorker(name, async (batch: Job[]) => {
      rescued.push(...batch.map((j) => j.id));
      return batch.map(() => 'rescued');
    }, { ...FAST, batch: { size: 5, timeout: 200 } });
    await waitFor(async () => (await q.getJobCounts()).completed === 5, 'every job of the batch to be reclaimed and completed');
    expect(rescued).to.have.members(ids);
    for (const id of ids) {
      const job = (await q.getJob(id))!;
      expect([job.returnvalue, job.stalledCount]).to.deep.equal(['rescued', 1]);
    }
  });

  it('the next batch is claimed while the current one runs, under the same claim rules (a processor slower than a round trip)', async () => {
    const name = uniqueQueue('ahead');
    const q = h.queue(name);
    await q.addBulk(Array.from({ length: 20 }, (_, i) => ({ name: 'n', data: { i } })));
    const sizes: number[] = [];
    const activeDuring: number[] = [];
    const w = batchWorker(name, async (jobs: Job[]) => {
      sizes.push(jobs.length);
      activeDuring.push((await q.getJobCounts()).active);
      // a run well past a round trip: a prefetch sized by run time alone would claim nothing ahead
      await new Promise((resolve) => setTimeout(resolve, 150));
      return jobs.map(() => null);
    }, { batch: { size: 5 } });
    await waitFor(() => w.finished.completed === 20, 'all 20 jobs completed');
    expect(sizes).to.deep.equal([5, 5, 5, 5]);
    // the first batch came before any finish (nothing ahead yet); the second and third ran with
    // the next batch claimed and waiting (its claims are held and renewed as prefetched ones are)
    expect(activeDuring.slice(1, 3), `jobs active during each batch: ${activeDuring.join(', ')}`).to.deep.equal([10, 10]);
    const counts = await q.getJobCounts();
    expect(counts.completed).to.equal(20);
    expect(counts.active).to.equal(0);
  });

  it('a batch of 50 costs about one call to claim and one to finish', async () => {
    const name = uniqueQueue('calls');
    const q = h.queue(name);
    await q.addBulk(Array.from({ length: 50 }, (_, i) => ({ name: 'n', data: { i } })));
    // monitor() opens a second connection: both are closed below (the first would otherwise
    // reconnect forever once the server stops, printing ECONNREFUSED through the rest of the suite)
    const base = new Redis(server().port, '127.0.0.1');
    const monitor = await base.monitor();
    const calls: string[] = [];
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (String(args[0]).toLowerCase() === 'fcall') calls.push(String(args[1]));
    });
    try {
      const w = batchWorker(name, async (jobs: Job[]) => jobs.map(() => null), { batch: { size: 50, timeout: 1000 } });
      await waitFor(() => w.finished.completed === 50, 'the batch to complete');
      const count = (...fns: string[]) => calls.filter((c) => fns.includes(c)).length;
      expect(count('glidemq_fetch', 'glidemq_activate'), calls.join(' ')).to.equal(1);
      expect(count('glidemq_finish', 'glidemq_finishMany'), calls.join(' ')).to.equal(1);
    } finally {
      monitor.disconnect();
      base.disconnect();
    }
  });
});
