import { expect } from 'chai';
import { Redis } from 'ioredis';
import type { Job } from '../../src/engine/jobs/job.js';
import { upkeep } from '../helpers/recovery.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';

describe('Worker (real valkey-server)', () => {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  it('serves priority jobs first (lowest number first, FIFO within a priority), then LIFO, then FIFO', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    await q.add('fifo', { n: 1 });
    await q.add('fifo', { n: 2 });
    await q.add('lifo', { n: 1 }, { lifo: true });
    await q.add('lifo', { n: 2 }, { lifo: true });
    await q.add('prio', { p: 10, n: 1 }, { priority: 10 });
    await q.add('prio', { p: 1, n: 1 }, { priority: 1 });
    await q.add('prio', { p: 5, n: 1 }, { priority: 5 });
    await q.add('prio', { p: 1, n: 2 }, { priority: 1 });
    await q.add('prio', { p: 2097152, n: 1 }, { priority: 2097152 });
    const seen: string[] = [];
    h.worker(name, async (job: Job) => {
      seen.push(`${job.name}:${JSON.stringify(job.data)}`);
    });
    await waitFor(() => seen.length === 9, 'all jobs processed');
    expect(seen).to.deep.equal([
      'prio:{"p":1,"n":1}',
      'prio:{"p":1,"n":2}',
      'prio:{"p":5,"n":1}',
      'prio:{"p":10,"n":1}',
      'prio:{"p":2097152,"n":1}',
      'lifo:{"n":2}',
      'lifo:{"n":1}',
      'fifo:{"n":1}',
      'fifo:{"n":2}',
    ]);
  });

  it('wakes an idle worker for a new priority or LIFO job without waiting out the block timeout', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const seen: string[] = [];
    const w = h.worker(name, async (job: Job) => void seen.push(job.name), { blockTimeout: 20_000 });
    await w.waitUntilReady();
    await waitFor(async () => (await q.getJobCounts()).consumers === 1, 'worker consumer registered');
    const t0 = Date.now();
    await q.add('urgent', {}, { priority: 1 });
    await q.add('stack', {}, { lifo: true });
    await waitFor(() => seen.length === 2, 'both processed', 5000);
    expect(Date.now() - t0).to.be.below(5000);
  });

  it('promotes a delayed job on time', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    let ranAt = 0;
    h.worker(name, async () => {
      ranAt = Date.now();
    });
    const added = Date.now();
    await q.add('later', {}, { delay: 700 });
    expect((await q.getJobCounts()).delayed).to.equal(1);
    await waitFor(() => ranAt > 0, 'delayed job ran');
    expect(ranAt - added).to.be.at.least(700);
    expect(ranAt - added).to.be.below(700 + 3000); // a safety net, not a speed check
  });

  it('retries with backoff and succeeds on the third attempt', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const attempts: number[] = [];
    h.worker(name, async (job: Job) => {
      attempts.push(Date.now());
      if (job.attemptsMade < 2) throw new Error(`boom ${job.attemptsMade + 1}`);
      return 'ok';
    });
    const job = await q.add('flaky', {}, { attempts: 3, backoff: { type: 'exponential', delay: 100 } });
    await waitFor(async () => (await q.getJob(job.id))?.state === 'completed', 'job completed');
    const done = await q.getJob(job.id);
    expect(done?.attemptsMade).to.equal(3);
    expect(done?.returnvalue).to.equal('ok');
    expect(attempts).to.have.length(3);
    expect(attempts[1] - attempts[0]).to.be.at.least(100); // 100 ms, then 200 ms
    expect(attempts[2] - attempts[1]).to.be.at.least(200);
  });

  it('fails for good after the last attempt, with the reason stored', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    h.worker(name, async () => {
      throw new Error('always broken');
    });
    const job = await q.add('bad', {}, { attempts: 2 });
    await waitFor(async () => (await q.getJob(job.id))?.state === 'failed', 'job failed');
    const failed = await q.getJob(job.id);
    expect(failed?.failedReason).to.equal('always broken');
    expect(failed?.attemptsMade).to.equal(2);
    expect((await q.getJobCounts()).failed).to.equal(1);
  });

  it('pause holds jobs back from every worker until resume', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    await q.pause();
    const seen: string[] = [];
    const w1 = h.worker(name, async (job: Job) => void seen.push(job.id), { autorun: false });
    const w2 = h.worker(name, async (job: Job) => void seen.push(job.id), { autorun: false });
    for (const w of [w1, w2]) w.run().catch(() => undefined); // settles at close
    await Promise.all([w1.waitUntilReady(), w2.waitUntilReady()]);
    await q.add('a', {});
    await q.add('p', {}, { priority: 1 });
    await q.add('l', {}, { lifo: true });
    await q.add('d', {}, { delay: 10 });
    // While paused the jobs stay put; check that they are still there after workers had every chance.
    await waitFor(async () => (await q.getJobCounts()).delayed === 0, 'delayed job promoted while paused');
    const held = await q.getJobCounts();
    expect(seen).to.deep.equal([]);
    expect(held.isPaused).to.equal(true);
    // a paused queue's waiting jobs count under paused only; the prioritized one stays prioritized
    expect([held.waiting, held.paused, held.prioritized]).to.deep.equal([0, 3, 1]);
    await q.resume();
    await waitFor(() => seen.length === 4, 'all jobs processed after resume');
  });

  it('a job added while every worker is blocked and the queue gets paused is handed back, not run', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const seen: string[] = [];
    const w = h.worker(name, async (job: Job) => void seen.push(job.id), { blockTimeout: 20_000 });
    await w.waitUntilReady();
    await q.pause();
    await q.add('a', {});
    await waitFor(async () => {
      const c = await q.getJobCounts();
      return c.paused === 1 && c.active === 0; // a paused queue's waiting job counts under paused
    }, 'job back in waiting');
    expect(seen).to.deep.equal([]);
    await q.resume();
    await waitFor(() => seen.length === 1, 'processed after resume');
  });

  it('respects concurrency and stores return values, progress and logs', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    let running = 0;
    let peak = 0;
    h.worker(
      name,
      async (job: Job) => {
        running++;
        peak = Math.max(peak, running);
        await job.updateProgress({ half: true });
        await job.log(`working on ${job.id}`);
        await new Promise((r) => setTimeout(r, 30));
        running--;
        return { doubled: (job.data as { n: number }).n * 2 };
      },
      { concurrency: 3 },
    );
    const jobs = await q.addBulk(Array.from({ length: 12 }, (_, n) => ({ name: 'c', data: { n } })));
    await waitFor(async () => (await q.getJobCounts()).completed === 12, 'all completed');
    expect(peak).to.equal(3);
    const j5 = await q.getJob(jobs[5].id);
    expect(j5?.returnvalue).to.deep.equal({ doubled: 10 });
    expect(j5?.progress).to.deep.equal({ half: true });
    expect((await q.getJobLogs(jobs[5].id)).logs).to.deep.equal([`working on ${jobs[5].id}`]);
  });

  it('removeOnComplete / removeOnFail: true, a count, and an age', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    h.worker(name, async (job: Job) => {
      if (job.name === 'fail') throw new Error('x');
    });
    const gone = await q.add('ok', {}, { removeOnComplete: true });
    for (let i = 0; i < 5; i++) await q.add('ok', { i }, { removeOnComplete: 2 });
    const failGone = await q.add('fail', {}, { removeOnFail: true });
    const aged = await q.add('fail', {}, { removeOnFail: { age: 0 } });
    await waitFor(async () => (await q.getJob(aged.id)) === undefined, 'aged failed job removed');
    await waitFor(async () => (await q.getJobCounts()).completed === 2, 'two kept');
    expect(await q.getJob(gone.id)).to.equal(undefined);
    expect(await q.getJob(failGone.id)).to.equal(undefined);
    expect((await q.getJobCounts()).failed).to.equal(0);
  });

  it('a processor result that JSON cannot hold fails the job with a clear reason, and the worker goes on', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    h.worker(name, async (job: Job) => (job.name === 'bigint' ? { n: BigInt(1) } : 'fine'));
    const bad = await q.add('bigint', {}, { attempts: 3 });
    const good = await q.add('plain', {});
    await waitFor(async () => (await q.getJob(good.id))?.state === 'completed', 'next job completed');
    const failed = await q.getJob(bad.id);
    expect(failed?.state).to.equal('failed');
    expect(failed?.attemptsMade).to.equal(1); // not retried: the same result would fail again
    expect(failed?.failedReason).to.match(/cannot be stored as JSON/);
  });

  it('a stale claim cannot finish a job: the late call is a visible no-op', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const job = await q.add('a', {});
    const r = (await q.client.fcall('glidemq_fetch', 1, q.keys.meta, 'c1', 1, 30_000, 1)) as unknown[];
    expect(r[0]).to.equal('ok');
    const reply = (await q.client.fcall('glidemq_finish', 1, q.keys.meta, job.id, '999', 'c1', 'completed', '1', -1, 0, '', 0, '0', 30_000, 1)) as unknown[];
    expect(reply[0]).to.equal('stale');
    const other = (await q.client.fcall('glidemq_finish', 1, q.keys.meta, job.id, '1', 'someone-else', 'completed', '1', -1, 0, '', 0, '0', 30_000, 1)) as unknown[];
    expect(other[0]).to.equal('stale');
    expect((await q.getJob(job.id))?.state).to.equal('active');
  });

  it('re-loads the library after FUNCTION DELETE and a dropped connection while a worker runs', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const seen: string[] = [];
    h.worker(name, async (job: Job) => void seen.push(job.id), { blockTimeout: 500 });
    await q.add('before', {});
    await waitFor(() => seen.length === 1, 'first job');
    const admin = new Redis(server().port, '127.0.0.1');
    await admin.call('FUNCTION', 'DELETE', 'glidemq');
    await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
    await admin.quit();
    await waitFor(async () => {
      try {
        await q.add('after', {});
        return true;
      } catch {
        return false;
      }
    }, 'queue usable again');
    await waitFor(() => seen.length >= 2, 'job after the library was deleted', 20000);
    const lib = (await q.client.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'glidemq')) as unknown[];
    expect(lib).to.have.length(1);
  });

  it('steady state costs at most one client command (FCALL) per job', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const N = 2000;
    await q.addBulk(Array.from({ length: N }, (_, i) => ({ name: 'n', data: { i } })));
    const admin = new Redis(server().port, '127.0.0.1');
    await admin.config('RESETSTAT');
    const w = h.worker(name, async () => 1, { concurrency: 10 });
    await waitFor(() => w.finished.completed === N, 'backlog processed', 30000);
    const stats = await admin.info('commandstats');
    await admin.quit();
    const calls = (cmd: string) => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
    // Top-level client commands: FCALLs (results ready together share one) plus a handful of
    // start-up and timer calls.
    const fcalls = calls('fcall');
    expect(fcalls).to.be.at.least(1);
    expect(fcalls).to.be.below(N * 1.02 + 20);
    expect(calls('hgetall')).to.be.at.most(N + 5); // inside functions only: no separate job reads
  });

  it('prefetch claims jobs ahead of free slots, heartbeats them, and gives them back at close', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    await q.addBulk(Array.from({ length: 6 }, (_, i) => ({ name: 'p', data: { i } })));
    let running = 0;
    let peak = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const started: string[] = [];
    const w = h.worker(
      name,
      async (job: Job) => {
        started.push(job.id);
        running++;
        peak = Math.max(peak, running);
        await gate;
        running--;
      },
      { concurrency: 1, prefetch: 2, autorun: false },
    );
    w.run().catch(() => undefined); // settles at close
    await w.waitUntilReady();
    await waitFor(() => started.length === 1, 'first job started');
    const c = await q.getJobCounts();
    expect(c.active).to.equal(3); // one running, two prefetched claims
    expect(c.waiting).to.equal(3);
    const closing = w.close();
    release();
    await closing;
    expect(peak).to.equal(1);
    const after = await q.getJobCounts();
    expect(after.active).to.equal(0);
    expect(after.completed).to.equal(1);
    expect(after.waiting).to.equal(5); // the prefetched two are back for other workers
    const seen: string[] = [];
    h.worker(name, async (job: Job) => void seen.push(job.id));
    await waitFor(() => seen.length === 5, 'the rest processed by another worker');
  });

  it('an idle worker hears of a pause and a resume at once, not when its blocking read times out', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    await q.waitUntilReady();
    const heard: string[] = [];
    const w = h.worker(name, async () => null, { blockTimeout: 30_000 });
    w.on('queuePaused', () => heard.push('paused'));
    w.on('queueResumed', () => heard.push('resumed'));
    await w.waitUntilReady();
    // (the safety nets below are far shorter than the block timeout: only a wake-up passes)
    await q.pause();
    await waitFor(() => heard.includes('paused'), 'the idle worker to hear of the pause', 5_000);
    await q.resume();
    await waitFor(() => heard.includes('resumed'), 'the worker to hear of the resume', 5_000);
    const job = await q.add('after', {});
    await waitFor(async () => (await q.getJob(job.id))?.state === 'completed', 'a job added after the resume to run', 5_000);
  });

  it('a prefetched job whose claim was lost is dropped, never started under the lost claim', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    await q.addBulk(Array.from({ length: 3 }, (_, i) => ({ name: 'p', data: { i } })));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const runs: string[] = [];
    const w = h.worker(
      name,
      async (job: Job) => {
        runs.push(job.id);
        if (runs.length === 1) await gate;
      },
      { concurrency: 1, prefetch: 2, lockDuration: 1000, stalledInterval: 60_000 },
    );
    await waitFor(() => runs.length === 1 && w.activeCount === 1, 'first job running');
    await waitFor(async () => (await q.getJobCounts()).active === 3, 'two more prefetched');
    // another worker's stalled recovery takes every claim (as after a long cut-off): the two
    // prefetched ones go back to the queue, and the heartbeat tells this worker it lost them
    const lost: string[] = [];
    w.on('lockLost', (id: string) => lost.push(id));
    // (the claims' own locks, their terms, are made to have run out)
    for (const job of await q.getJobs(['active'])) await q.client.hset(q.keys.job(job.id), 'terms', '0:5');
    await upkeep(q, { lockDuration: 0, maxStalledCount: 5 }).reclaimStalled('other');
    await waitFor(() => lost.length === 3, 'the worker to learn it lost all three claims', 5_000);
    // another worker runs them now; then the first one's slot frees
    h.worker(name, async (job: Job) => void runs.push(job.id));
    await waitFor(async () => (await q.getJobCounts()).completed === 3, 'every job completed by the other worker');
    const stale: string[] = [];
    w.on('lost', (job: Job) => stale.push(job.id));
    release();
    // its first job's finish comes back stale: by then its slot would have run a prefetched job
    await waitFor(() => stale.length === 1 && w.activeCount === 0, 'the first run to end, stale');
    await w.close();
    // the prefetched two ran once each (the first may run again: it was running when its claim went)
    const counts = new Map<string, number>();
    for (const id of runs) counts.set(id, (counts.get(id) ?? 0) + 1);
    expect(counts.size).to.equal(3);
    for (const [id, n] of counts) if (id !== runs[0]) expect(n, `runs of prefetched job ${id}`).to.equal(1);
  });
});
