/**
 * BullMQ's queue-wide rate limiter as a BullMQ application uses it: the Worker option
 * `limiter: { max, duration }`, and `worker.rateLimit(ms)` with `throw Worker.RateLimitError()`.
 * Start times are read as the server stored them (processedOn: the server's time of the claim),
 * so what is checked is what the server decided, not when this process saw a job.
 * glidemq counts the window as a sliding log (lua/rate-window.lua): no `duration`-long span holds
 * more than `max` starts, where BullMQ's fixed window lets up to 2 x max through across its edge.
 */
import { expect } from 'chai';
import { Worker, type Job, type Queue } from '../../src/index.js';
import { HOUR, rejection, useCompat } from '../helpers/compat.js';
import { waitFor } from '../helpers/valkey.js';

describe('BullMQ compatibility: rate limiter', function () {
  this.timeout(30000);
  const { redis, connection, queue, worker, serverNow } = useCompat('rate');
  /** The stored start times of `ids`, as the server recorded them. */
  const startsOf = async (q: Queue, ids: string[]) => {
    const jobs = await Promise.all(ids.map((id) => q.getJob(id)));
    return jobs.map((j) => Number(j?.processedOn));
  };
  /** The most starts any half-open span [t, t + ms) holds. */
  const mostStartsWithin = (starts: number[], ms: number) => {
    const t = [...starts].sort((a, b) => a - b);
    let most = 0;
    for (let i = 0, j = 0; i < t.length; i++) {
      while (t[i] - t[j] >= ms) j++;
      most = Math.max(most, i - j + 1);
    }
    return most;
  };

  it('limiter { max: 5, duration: 1000 } across two workers: never more than 5 starts in 1000 ms, 20 jobs span 3 windows', async () => {
    const q = queue();
    const jobs = await q.addBulk(Array.from({ length: 20 }, (_, i) => ({ name: 'n', data: { i } })));
    const stats = redis();
    await stats.config('RESETSTAT');
    let done = 0;
    const opts = { concurrency: 5, limiter: { max: 5, duration: 1000 } };
    for (const w of [worker(q, async () => 'ok', opts), worker(q, async () => 'ok', opts)]) w.on('completed', () => done++);
    await waitFor(() => done === 20, 'all 20 jobs completed', 20000);
    const starts = await startsOf(q, jobs.map((j) => j.id));
    expect(mostStartsWithin(starts, 1000)).to.be.at.most(5);
    expect(Math.max(...starts) - Math.min(...starts)).to.be.at.least(3000);
    // a rate-limited worker waits on a timer for the window: it does not poll the server
    const fcalls = /cmdstat_fcall:calls=(\d+)/.exec(await stats.info('commandstats'));
    expect(Number(fcalls?.[1] ?? 0)).to.be.below(150);
  });

  it('worker.rateLimit(ms) then throw Worker.RateLimitError(): the job runs again after the hold, no attempt counted, nothing else starts', async () => {
    const q = queue();
    const first = await q.add('first', {});
    const runs: { attemptsMade: number; processedOn: number }[] = [];
    let others: Job[] = [];
    let w1: Worker | undefined;
    const processor = async (job: Job) => {
      if (job.id !== first.id) return 'other';
      const stored = await q.getJob(job.id);
      runs.push({ attemptsMade: job.attemptsMade, processedOn: Number(stored?.processedOn) });
      if (runs.length === 1) {
        await w1!.rateLimit(1000);
        // jobs added during the hold wait for it, whichever worker is free
        others = await q.addBulk(Array.from({ length: 4 }, () => ({ name: 'other', data: {} })));
        throw Worker.RateLimitError();
      }
      return 'again';
    };
    w1 = worker(q, processor, { concurrency: 2 });
    worker(q, processor, { concurrency: 2 });
    await waitFor(async () => (await q.getCompletedCount()) === 5, 'the held job and the 4 others completed', 15000);
    expect(runs).to.have.length(2);
    expect(runs[1].attemptsMade).to.equal(runs[0].attemptsMade);
    expect((await q.getJob(first.id))?.attemptsMade).to.equal(1);
    // the hold began after the first run's claim: nothing started within 1000 ms of it
    const holdFrom = runs[0].processedOn;
    expect(runs[1].processedOn - holdFrom).to.be.at.least(1000);
    for (const start of await startsOf(q, others.map((j) => j.id))) expect(start - holdFrom).to.be.at.least(1000);
  });

  it('a worker blocked in a read from before the limiter hands back what the window cannot start, and takes it after the wait', async () => {
    const q = queue();
    let done = 0;
    const early = worker(q, async () => 'ok', { concurrency: 10 });
    early.on('completed', () => done++);
    await early.waitUntilReady();
    const late = worker(q, async () => 'ok', { concurrency: 10, limiter: { max: 3, duration: 800 } });
    late.on('completed', () => done++);
    await late.waitUntilReady();
    const jobs = await q.addBulk(Array.from({ length: 8 }, (_, i) => ({ name: 'n', data: { i } })));
    await waitFor(() => done === 8, 'all 8 jobs completed');
    const starts = await startsOf(q, jobs.map((j) => j.id));
    expect(mostStartsWithin(starts, 800)).to.be.at.most(3);
    expect(Math.max(...starts) - Math.min(...starts)).to.be.at.least(1600);
  });

  it('a queue paused under a limiter starts nothing; after resume the limit still holds', async () => {
    const q = queue();
    await q.pause();
    const jobs = await q.addBulk(Array.from({ length: 7 }, (_, i) => ({ name: 'n', data: { i } })));
    let done = 0;
    const w = worker(q, async () => 'ok', { concurrency: 10, limiter: { max: 5, duration: 1000 } });
    w.on('completed', () => done++);
    await w.waitUntilReady();
    const resumedAt = await serverNow();
    await q.resume();
    await waitFor(() => done === 7, 'all 7 jobs completed after resume');
    const starts = await startsOf(q, jobs.map((j) => j.id));
    for (const s of starts) expect(s).to.be.at.least(resumedAt);
    expect(mostStartsWithin(starts, 1000)).to.be.at.most(5);
    expect(Math.max(...starts) - Math.min(...starts)).to.be.at.least(1000);
  });

  it('a pause that falls on a full window: the jobs wait for the resume, then for the window', async () => {
    const q = queue();
    const jobs = await q.addBulk(Array.from({ length: 6 }, (_, i) => ({ name: 'n', data: { i } })));
    let done = 0;
    const w = worker(q, async () => 'ok', { concurrency: 4, limiter: { max: 2, duration: 600 } });
    w.on('completed', () => done++);
    await waitFor(() => done === 2, 'the first window ran');
    await q.pause();
    const pausedAt = await serverNow();
    // let the window reopen while paused (time passing is the scenario, not a condition)
    await waitFor(async () => (await serverNow()) > pausedAt + 700, 'the window reopened during the pause');
    expect(done).to.equal(2);
    const resumedAt = await serverNow();
    await q.resume();
    await waitFor(() => done === 6, 'the rest completed after resume');
    const starts = await startsOf(q, jobs.map((j) => j.id));
    expect(starts.filter((s) => s >= resumedAt)).to.have.length(4);
    expect(mostStartsWithin(starts, 600)).to.be.at.most(2);
  });

  it('priority jobs under a limiter: the limit holds and the order is by priority', async () => {
    const q = queue();
    const priorities = [7, 2, 11, 5, 1, 9, 12, 3, 8, 4, 10, 6];
    const jobs = await q.addBulk(priorities.map((priority) => ({ name: 'p', data: { priority }, opts: { priority } })));
    let done = 0;
    const w = worker(q, async () => 'ok', { concurrency: 5, limiter: { max: 5, duration: 1000 } });
    w.on('completed', () => done++);
    await waitFor(() => done === 12, 'all 12 priority jobs completed');
    const starts = await startsOf(q, jobs.map((j) => j.id));
    expect(mostStartsWithin(starts, 1000)).to.be.at.most(5);
    expect(Math.max(...starts) - Math.min(...starts)).to.be.at.least(2000);
    const byPriority = priorities.map((p, i) => [p, starts[i]]).sort((a, b) => a[0] - b[0]).map(([, s]) => s);
    for (let i = 1; i < byPriority.length; i++) expect(byPriority[i]).to.be.at.least(byPriority[i - 1]);
  });

  it('limiter with globalConcurrency: both hold', async () => {
    const q = queue();
    const jobs = await q.addBulk(Array.from({ length: 6 }, (_, i) => ({ name: 'n', data: { i } })));
    let running = 0;
    let most = 0;
    const processor = async () => {
      most = Math.max(most, ++running);
      await new Promise((r) => setImmediate(r));
      running--;
      return 'ok';
    };
    let done = 0;
    const opts = { concurrency: 3, globalConcurrency: 1, limiter: { max: 3, duration: 500 } };
    for (const w of [worker(q, processor, opts), worker(q, processor, opts)]) w.on('completed', () => done++);
    await waitFor(() => done === 6, 'all 6 jobs completed');
    expect(most).to.equal(1);
    const starts = await startsOf(q, jobs.map((j) => j.id));
    expect(mostStartsWithin(starts, 500)).to.be.at.most(3);
    expect(Math.max(...starts) - Math.min(...starts)).to.be.at.least(500);
  });

  it('checks its arguments as BullMQ documents them', async () => {
    const q = queue();
    const bad = [{ max: 0, duration: 1000 }, { max: 1.5, duration: 1000 }, { max: 5, duration: 0 }, { max: 5 }, 'fast'];
    for (const limiter of bad) {
      expect(() => new Worker(q.name, async () => 'ok', { connection: connection(), autorun: false, limiter: limiter as never }), JSON.stringify(limiter))
        .to.throw(/limiter/);
    }
    const w = worker(q, async () => 'ok', { autorun: false });
    let refused: unknown;
    await w.rateLimit(-1).catch((e) => (refused = e));
    expect(String(refused)).to.match(/rateLimit/);
  });

  it('queue.setGlobalRateLimit(max, duration) limits workers that have no limiter; getRateLimitTtl reports the wait; removeGlobalRateLimit ends it', async () => {
    const q = queue();
    expect(await q.getRateLimitTtl()).to.equal(-2);
    await q.setGlobalRateLimit(2, 2000);
    const jobs = await q.addBulk(Array.from({ length: 4 }, (_, i) => ({ name: 'n', data: { i } })));
    let done = 0;
    worker(q, async () => 'ok', { concurrency: 4 }).on('completed', () => done++);
    await waitFor(() => done === 2, 'the first window of 2 jobs');
    // the window is full: a start waits, and no more than 2 jobs start in it
    const ttl = await q.getRateLimitTtl(2);
    expect(ttl).to.be.within(1, 2000);
    expect(await q.getRateLimitTtl()).to.be.within(1, 2000);
    expect(await q.getRateLimitTtl(3)).to.equal(0);
    expect(done).to.equal(2);
    await waitFor(() => done === 4, 'the second window', 10000);
    expect(mostStartsWithin(await startsOf(q, jobs.map((j) => j.id)), 2000)).to.be.at.most(2);
    await q.removeGlobalRateLimit();
    const more = await q.addBulk(Array.from({ length: 6 }, (_, i) => ({ name: 'm', data: { i } })));
    await waitFor(() => done === 10, 'all 6 more jobs, unlimited');
    expect(mostStartsWithin(await startsOf(q, more.map((j) => j.id)), 2000)).to.equal(6);
    for (const [max, duration] of [[0, 1000], [1, 0], [1.5, 1000]]) {
      expect((await rejection(() => q.setGlobalRateLimit(max, duration))).message).to.match(/setGlobalRateLimit/);
    }
  });

  it('getRateLimitTtl while worker.rateLimit(ms) holds the queue: the hold left, with or without maxJobs', async () => {
    const q = queue();
    const w = worker(q, async () => 'ok');
    await w.rateLimit(HOUR);
    for (const ttl of [await q.getRateLimitTtl(), await q.getRateLimitTtl(1)]) expect(ttl).to.be.within(HOUR - 5000, HOUR);
  });

  it('the job that hit the limit goes back first: after worker.rateLimit + RateLimitError the queue keeps its order', async () => {
    for (const priority of [undefined, 3]) {
      const q = queue();
      const jobs = await q.addBulk(['a', 'b', 'c'].map((name) => ({ name, data: {}, opts: priority ? { priority } : {} })));
      const order: string[] = [];
      let w: Worker | undefined;
      w = worker(q, async (job: Job) => {
        order.push(job.name);
        if (order.length === 1) {
          await w!.rateLimit(300);
          throw Worker.RateLimitError();
        }
        return 'ok';
      });
      await waitFor(async () => (await q.getJob(jobs[2].id))?.state === 'completed', 'the last job completed');
      expect(order, `priority ${String(priority)}`).to.deep.equal(['a', 'a', 'b', 'c']);
      await w.close();
    }
  });
});
