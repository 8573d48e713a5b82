/**
 * Changing jobs from any handle as a BullMQ application does: through the Queue, or through a Job
 * fetched with Job.fromId(queue, id), not only inside the processor (issue 18). The same calls and
 * arguments as BullMQ's, against glidemq's durability: a write from a handle that holds no claim may
 * change data, logs and progress but never finishes a job, and a worker whose claim is stale still
 * changes nothing.
 */
import { expect } from 'chai';
import {
  InvalidArgumentError,
  Job,
  JobActiveError,
  JobNotFoundError,
  JobStateError,
  PayloadTooLargeError,
  Queue,
} from '../../src/index.js';
import { HOUR, gate, rejection, useCompat } from '../helpers/compat.js';
import { waitFor } from '../helpers/valkey.js';

describe('BullMQ compatibility: changing jobs from any handle', function () {
  this.timeout(30000);
  const { redis, connection, queue, worker, closeLater, serverNow } = useCompat('edits', { promotionInterval: 100 });
  const stateOf = async (q: Queue, id: string) => (await q.getJob(id))?.state;
  const fetch = async (q: Queue, id: string) => {
    const job = await Job.fromId(q, id);
    expect(job, `job ${id}`).to.not.equal(undefined);
    return job!;
  };
  /** Jobs that failed for good (attempts 1), one per name, each with a later finishedOn. */
  const failJobs = async (q: Queue, names: string[]) => {
    const w = worker(q, async () => {
      throw new Error('boom');
    });
    const ids: string[] = [];
    for (const name of names) {
      const { id } = await q.add(name, { name });
      ids.push(id);
      await waitFor(async () => (await stateOf(q, id)) === 'failed', `job ${id} failed`);
    }
    await w.close();
    return ids;
  };

  it('Job.fromId returns the job, or undefined for an id that does not exist', async () => {
    const q = queue();
    const added = await q.add('mail', { to: 'a@b' });
    const job = await fetch(q, added.id);
    expect(job.name).to.equal('mail');
    expect(job.data).to.deep.equal({ to: 'a@b' });
    expect(await Job.fromId(q, 'no-such-job')).to.equal(undefined);
  });

  it('updateProgress/log from a Job.fromId handle and queue.updateJobProgress/addJobLog; getJobLogs → { logs, count } with start, end, asc', async () => {
    const q = queue();
    const { id } = await q.add('report', {});
    const job = await fetch(q, id);
    expect(await job.updateProgress({ pct: 10 })).to.equal(true);
    expect(job.progress).to.deep.equal({ pct: 10 });
    expect(await job.log('first')).to.equal(1);
    expect(await q.addJobLog(id, 'second')).to.equal(2);
    expect(await q.addJobLog(id, 'third')).to.equal(3);
    const seen: unknown[] = [];
    q.on('progress', (jobId: string, progress: unknown) => seen.push([jobId, progress]));
    await q.updateJobProgress(id, 42);
    expect(seen).to.deep.equal([[id, 42]]);
    expect((await q.getJob(id))?.progress).to.equal(42);
    expect(await stateOf(q, id)).to.equal('waiting'); // nothing else changed
    expect(await q.getJobLogs(id)).to.deep.equal({ logs: ['first', 'second', 'third'], count: 3 });
    expect(await q.getJobLogs(id, 0, 1)).to.deep.equal({ logs: ['first', 'second'], count: 3 });
    expect(await q.getJobLogs(id, 0, 1, false)).to.deep.equal({ logs: ['third', 'second'], count: 3 });
    expect(await q.getJobLogs(id, 0, -1, false)).to.deep.equal({ logs: ['third', 'second', 'first'], count: 3 });
    expect(await q.getJobLogs('no-such-job')).to.deep.equal({ logs: [], count: 0 });
  });

  it('addJobLog(id, line, keepLogs) keeps the newest lines; clearLogs(keep) keeps the newest, clearLogs() deletes the log', async () => {
    const q = queue();
    const { id } = await q.add('chatty', {});
    for (const line of ['a', 'b', 'c', 'd']) await q.addJobLog(id, line, 3);
    expect(await q.getJobLogs(id)).to.deep.equal({ logs: ['b', 'c', 'd'], count: 3 });
    expect(await q.addJobLog(id, 'e', 2)).to.equal(2); // BullMQ: the lines kept
    const job = await fetch(q, id);
    await job.log('f');
    await job.clearLogs(2);
    expect(await q.getJobLogs(id)).to.deep.equal({ logs: ['e', 'f'], count: 2 });
    await job.clearLogs();
    expect(await q.getJobLogs(id)).to.deep.equal({ logs: [], count: 0 });
    expect(await redis().exists(q.keys.logs(id))).to.equal(0);
  });

  it('the job option keepLogs keeps the newest N lines of job.log', async () => {
    const q = queue();
    const { id } = await q.add('kept', {}, { keepLogs: 2 });
    const job = await fetch(q, id);
    expect(job.opts.keepLogs).to.equal(2);
    for (const bad of [-1, 1.5, Number.NaN]) {
      const err = await q.add('bad', {}, { keepLogs: bad }).catch((e: Error) => e);
      expect(String(err)).to.match(/keepLogs must be a whole number/);
    }
    for (const line of ['1', '2', '3']) await job.log(line);
    expect(await q.getJobLogs(id)).to.deep.equal({ logs: ['2', '3'], count: 2 });
  });

  it('job.updateData from a handle replaces the data the worker then runs with; over maxPayloadBytes it is refused', async () => {
    const q = queue();
    const { id } = await q.add('resize', { width: 100 });
    const job = await fetch(q, id);
    expect(await job.updateData({ width: 640, height: 480 })).to.equal(true);
    expect(job.data).to.deep.equal({ width: 640, height: 480 });
    const big = new Queue(q.name, { connection: connection(), maxPayloadBytes: 64 });
    closeLater(() => big.close());
    const small = await fetch(big, id);
    const err = await rejection(small.updateData({ blob: 'x'.repeat(100) }));
    expect(err).to.be.instanceOf(PayloadTooLargeError);
    expect((err as Error).message).to.match(new RegExp(`job ${id}: .*64 bytes`));
    let ran: unknown;
    worker(q, async (j) => {
      ran = j.data;
    });
    await waitFor(() => ran !== undefined, 'the job ran');
    expect(ran).to.deep.equal({ width: 640, height: 480 });
  });

  it('fencing: a handle changes an active job\'s data, progress and logs but cannot finish, retry, promote or remove it; the worker finishes it', async () => {
    const q = queue();
    const held = gate();
    let running: Job | undefined;
    const w = worker(q, async (job) => {
      running = job;
      await held.promise;
      return { data: job.data };
    });
    const done: unknown[] = [];
    w.on('completed', (_job: Job, result: unknown) => done.push(result));
    const { id } = await q.add('long', { v: 1 });
    await waitFor(() => running, 'the job runs');
    const handle = await fetch(q, id);
    expect(handle.state).to.equal('active');
    expect(await handle.updateProgress(50)).to.equal(true);
    expect(await handle.updateData({ v: 2 })).to.equal(true);
    expect(await handle.log('from the dashboard')).to.equal(1);
    expect(await rejection(handle.remove())).to.be.instanceOf(JobActiveError);
    expect(await rejection(handle.retry('failed'))).to.be.instanceOf(JobStateError);
    expect(await rejection(handle.promote())).to.be.instanceOf(JobStateError);
    expect(await rejection(handle.changeDelay(10))).to.be.instanceOf(JobStateError);
    const now = await q.getJob(id);
    expect(now?.state).to.equal('active');
    expect(now?.progress).to.equal(50);
    expect(now?.raw.fence).to.equal(running!.claim?.fence); // the claim is the worker's still
    // the worker still holds the claim: its own writes and its finish take effect
    expect(await running!.updateProgress(75)).to.equal(true);
    held.open();
    await waitFor(() => done.length === 1, 'the worker completed the job');
    expect(await stateOf(q, id)).to.equal('completed');
    expect((await q.getJob(id))?.progress).to.equal(75);
  });

  it('fencing: a worker whose claim is stale changes no progress, log or data, while a handle still can', async () => {
    const q = queue();
    const runs: Job[] = [];
    const second = gate();
    worker(q, async (job) => {
      runs.push(job);
      if (runs.length === 2) await second.promise;
      return 'ok';
    });
    const { id } = await q.add('twice', { v: 1 });
    await waitFor(async () => (await stateOf(q, id)) === 'completed', 'the first run completed');
    await (await fetch(q, id)).retry('completed');
    await waitFor(() => runs.length === 2, 'the second run started');
    const [stale, current] = runs;
    expect(Number(current.claim?.fence)).to.be.greaterThan(Number(stale.claim?.fence));
    expect(await stale.updateProgress(99)).to.equal(false);
    expect(await stale.log('late line')).to.equal(0);
    expect(await stale.updateData({ v: 'stale' })).to.equal(false);
    let stored = await q.getJob(id);
    expect(stored?.progress).to.equal(0);
    expect(stored?.data).to.deep.equal({ v: 1 });
    expect(await q.getJobLogs(id)).to.deep.equal({ logs: [], count: 0 });
    // the stale worker's job object still reaches the queue for the calls that need no claim
    expect(await rejection(stale.retry('completed'))).to.be.instanceOf(JobStateError);
    const handle = await fetch(q, id);
    await handle.updateProgress(5);
    stored = await q.getJob(id);
    expect(stored?.progress).to.equal(5);
    expect(stored?.state).to.equal('active');
    second.open();
    await waitFor(async () => (await stateOf(q, id)) === 'completed', 'the second run completed');
  });

  it('a removed job is never re-created by a handle; job.remove() removes a waiting job, and again is no error', async () => {
    const q = queue();
    const { id } = await q.add('gone', {});
    const job = await fetch(q, id);
    const removed: unknown[] = [];
    q.on('removed', (j: Job) => removed.push(j.id));
    await job.remove();
    expect(removed).to.deep.equal([id]);
    expect(await q.getJob(id)).to.equal(undefined);
    await job.remove();
    for (const call of [
      () => job.updateProgress(1),
      () => job.log('x'),
      () => job.updateData({}),
      () => job.clearLogs(),
      () => job.retry(),
      () => job.promote(),
      () => job.changeDelay(5),
      () => job.changePriority({ priority: 3 }),
      () => q.addJobLog(id, 'x'),
      () => q.updateJobProgress(id, 1),
    ]) {
      const err = await rejection(call());
      expect(err).to.be.instanceOf(JobNotFoundError);
      expect((err as Error).message).to.contain(`job ${id}`);
    }
    expect(await redis().exists(q.keys.job(id), q.keys.logs(id))).to.equal(0);
  });

  it('job.retry() puts a failed job back to waiting, its outcome cleared and attemptsMade kept; resetAttemptsMade resets it; it runs again', async () => {
    const q = queue();
    const [id] = await failJobs(q, ['flaky']);
    const job = await fetch(q, id);
    expect(job.attemptsMade).to.equal(1);
    expect(job.failedReason).to.equal('boom');
    expect(await rejection(job.retry('completed'))).to.be.instanceOf(JobStateError);
    await job.retry();
    expect(job.state).to.equal('waiting');
    let stored = await q.getJob(id);
    expect(stored?.state).to.equal('waiting');
    expect(stored?.failedReason).to.equal(undefined);
    expect(stored?.finishedOn).to.equal(undefined);
    expect(job.failedReason).to.equal(undefined);
    expect(job.finishedOn).to.equal(undefined);
    expect(job.processedOn).to.equal(undefined);
    expect(stored?.attemptsMade).to.equal(1);
    expect(await redis().zscore(q.keys.failed, id)).to.equal(null);
    expect(await rejection(job.retry())).to.be.instanceOf(JobStateError); // waiting, not failed
    const results: unknown[] = [];
    const w = worker(q, async (j) => `ran with ${j.attemptsMade} made`);
    w.on('completed', (_j: Job, r: unknown) => results.push(r));
    await waitFor(() => results.length === 1, 'the retried job ran');
    expect(results).to.deep.equal(['ran with 1 made']);
    const done = await fetch(q, id);
    expect(done.state).to.equal('completed');
    expect(done.attemptsMade).to.equal(2);
    expect(done.attemptsStarted).to.equal(2);
    await done.retry('completed', { resetAttemptsMade: true, resetAttemptsStarted: true });
    expect(done.attemptsMade).to.equal(0);
    expect(done.attemptsStarted).to.equal(0);
    await waitFor(() => results.length === 2, 'the completed job ran again');
    stored = await q.getJob(id);
    expect(stored?.returnvalue).to.equal('ran with 0 made');
    expect(stored?.attemptsMade).to.equal(1);
    expect(stored?.attemptsStarted).to.equal(1);
  });

  it('queue.retryJobs({ state, count, timestamp }) moves the jobs finished by timestamp, in batches of count', async () => {
    const q = queue();
    const early = await failJobs(q, ['a', 'b', 'c']);
    const cut = Math.max(...(await Promise.all(early.map(async (id) => (await q.getJob(id))!.finishedOn!))));
    await waitFor(async () => (await serverNow()) > cut, "the server's clock passed the cut");
    const late = await failJobs(q, ['d', 'e']);
    await q.pause(); // nothing runs: the states stay as retryJobs left them
    await q.retryJobs({ state: 'failed', count: 1, timestamp: cut });
    for (const id of early) expect(await stateOf(q, id), `early job ${id}`).to.equal('waiting');
    for (const id of late) expect(await stateOf(q, id), `late job ${id}`).to.equal('failed');
    await q.retryJobs({ count: 1 }); // default state 'failed', timestamp: the server's now
    for (const id of late) expect(await stateOf(q, id), `late job ${id}`).to.equal('waiting');
    expect(await redis().zcard(q.keys.failed)).to.equal(0);
    await q.retryJobs({ state: 'completed' }); // nothing completed: nothing to do
    expect(await rejection(q.retryJobs({ count: 0 }))).to.be.instanceOf(InvalidArgumentError);
    // resumed, every job runs once more
    const ran: string[] = [];
    worker(q, async (j) => {
      ran.push(j.id);
    });
    await q.resume();
    await waitFor(() => ran.length === 5, 'the five retried jobs ran');
    expect([...ran].sort()).to.deep.equal([...early, ...late].sort());
  });

  it('job.promote() moves a delayed job to waiting and it runs; promote of a job that is not delayed is refused', async () => {
    const q = queue();
    const { id } = await q.add('later', {}, { delay: HOUR });
    const job = await fetch(q, id);
    expect(job.state).to.equal('delayed');
    await job.promote();
    expect(job.state).to.equal('waiting');
    expect(job.opts.delay).to.equal(0);
    expect(await redis().zscore(q.keys.scheduled, id)).to.equal(null);
    const err = await rejection(job.promote());
    expect(err).to.be.instanceOf(JobStateError);
    expect((err as Error).message).to.match(new RegExp(`job ${id} is waiting, not delayed`));
    const ran: string[] = [];
    worker(q, async (j) => {
      ran.push(j.id);
    });
    await waitFor(() => ran.length === 1, 'the promoted job ran');
    const prioritized = await q.add('later-p', {}, { delay: HOUR, priority: 3 });
    await (await fetch(q, prioritized.id)).promote();
    await waitFor(() => ran.length === 2, 'the promoted prioritized job ran');
  });

  it('on a paused queue a promoted or retried job waits, and nothing runs until resume', async () => {
    const q = queue();
    const [failed] = await failJobs(q, ['f']);
    const ran: string[] = [];
    worker(q, async (j) => {
      ran.push(j.id);
    });
    await q.pause();
    const delayed = await q.add('d', {}, { delay: HOUR });
    const prioritized = await q.add('p', {}, { delay: HOUR, priority: 1 });
    await (await fetch(q, delayed.id)).promote();
    await (await fetch(q, prioritized.id)).promote();
    await (await fetch(q, failed)).retry();
    await q.promoteJobs();
    expect(await stateOf(q, delayed.id)).to.equal('waiting');
    expect(await stateOf(q, prioritized.id)).to.equal('prioritized');
    expect(await stateOf(q, failed)).to.equal('waiting');
    // the worker goes on while paused (its promotion tick makes a job due soon waiting) and takes none
    const marker = await q.add('marker', {}, { delay: 200 });
    await waitFor(async () => (await stateOf(q, marker.id)) === 'waiting', "the worker's promotion tick moved the marker");
    expect(ran).to.deep.equal([]);
    expect(await stateOf(q, prioritized.id)).to.equal('prioritized');
    await q.resume();
    await waitFor(() => ran.length === 4, 'the four jobs ran after resume');
    expect(ran[0]).to.equal(prioritized.id); // the priority set first
  });

  it('queue.promoteJobs({ count }) moves every delayed job, due or not, in batches', async () => {
    const q = queue();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await q.add(`d${i}`, {}, { delay: HOUR + i })).id);
    await q.promoteJobs({ count: 2 });
    for (const id of ids) expect(await stateOf(q, id)).to.equal('waiting');
    expect(await redis().zcard(q.keys.scheduled)).to.equal(0);
    await q.promoteJobs(); // nothing left
  });

  it("job.changeDelay(ms) makes a delayed job due ms after the server's now; refused for a job that is not delayed", async () => {
    const q = queue();
    const { id } = await q.add('reminder', {}, { delay: HOUR });
    const job = await fetch(q, id);
    const before = await serverNow();
    await job.changeDelay(5000);
    const after = await serverNow();
    const due = Number(await redis().zscore(q.keys.scheduled, id));
    expect(due).to.be.within(before + 5000, after + 5000);
    expect((await q.getJob(id))?.opts.delay).to.equal(5000);
    expect(job.opts.delay).to.equal(5000);
    await job.changeDelay(0);
    const ran: string[] = [];
    worker(q, async (j) => {
      ran.push(j.id);
    });
    await waitFor(() => ran.length === 1, 'the job ran once due');
    expect(await rejection(job.changeDelay(100))).to.be.instanceOf(JobStateError);
    expect(await rejection(job.changeDelay(-1))).to.be.instanceOf(InvalidArgumentError);
  });

  it('job.changePriority({ priority, lifo }) moves a waiting job; the worker takes the priority set, then LIFO, then the rest', async () => {
    const q = queue();
    const ids: string[] = [];
    for (const name of ['a', 'b', 'c', 'd']) ids.push((await q.add(name, {})).id);
    const [a, b, c, d] = await Promise.all(ids.map((id) => fetch(q, id)));
    await c.changePriority({ priority: 1 });
    expect(c.state).to.equal('prioritized');
    expect(c.opts.priority).to.equal(1);
    await b.changePriority({ lifo: true });
    expect(b.state).to.equal('waiting');
    await d.changePriority({ priority: 5 });
    await d.changePriority({ priority: 0 }); // back to the stream, at its end
    expect(await stateOf(q, d.id)).to.equal('waiting');
    expect(await rejection(a.changePriority({ priority: 2, lifo: true }))).to.be.instanceOf(InvalidArgumentError);
    expect(await rejection(a.changePriority({ priority: 2097153 }))).to.be.instanceOf(InvalidArgumentError);
    const order: string[] = [];
    worker(q, async (j) => {
      order.push(j.name);
    }, { concurrency: 1 });
    await waitFor(() => order.length === 4, 'all four ran');
    expect(order).to.deep.equal(['c', 'b', 'a', 'd']);
    // a delayed job keeps its place and is queued by its new priority when promoted
    const later = await q.add('later', {}, { delay: HOUR });
    const handle = await fetch(q, later.id);
    await handle.changePriority({ priority: 2 });
    expect(await stateOf(q, later.id)).to.equal('delayed');
    expect(await redis().hget(q.keys.job(later.id), 'priority')).to.equal('2');
  });

  it('group jobs: changePriority is refused (they run in their group\'s order); a retried group job goes to the end of its line', async () => {
    const q = queue();
    const group = { id: 'tenant-1', maxConcurrency: 1 };
    const first = await q.add('x', {}, { group });
    const done: string[] = [];
    const w = worker(q, async (j) => {
      done.push(j.name);
    }, { concurrency: 1 });
    await waitFor(() => done.length === 1, 'x ran');
    await w.close();
    const err = await rejection((await fetch(q, first.id)).changePriority({ priority: 1 }));
    expect(err).to.be.instanceOf(InvalidArgumentError);
    expect((err as Error).message).to.contain('tenant-1');
    await q.pause();
    await q.add('y', {}, { group });
    await q.add('z', {}, { group });
    await (await fetch(q, first.id)).retry('completed');
    expect(await stateOf(q, first.id)).to.equal('waiting');
    expect(Number(await redis().hget(q.keys.meta, 'groupWaiting'))).to.equal(3);
    worker(q, async (j) => {
      done.push(j.name);
    }, { concurrency: 1 });
    await q.resume();
    await waitFor(() => done.length === 4, 'y, z and x again ran');
    expect(done).to.deep.equal(['x', 'y', 'z', 'x']);
    expect(Number(await redis().hget(q.keys.meta, 'groupWaiting') ?? 0)).to.equal(0);
  });

  it('an ordered group: a delayed job holds its place; promote() makes it waiting there, and it runs before the job added after it', async () => {
    const q = queue();
    const group = { id: 'ledger', ordered: true };
    const first = await q.add('first', {}, { group, delay: HOUR });
    await q.add('second', {}, { group });
    const order: string[] = [];
    worker(q, async (j) => {
      order.push(j.name);
    });
    const marker = await q.add('marker', {});
    await waitFor(() => order.includes('marker'), 'the worker is taking jobs');
    expect(order).to.deep.equal(['marker']); // the line starts with the delayed job: nothing of it ran
    await (await fetch(q, first.id)).promote();
    await waitFor(() => order.length === 3, 'both group jobs ran');
    expect(order).to.deep.equal(['marker', 'first', 'second']);
    expect(marker.id).to.not.equal(first.id);
    expect(Number((await redis().hget(q.keys.meta, 'groupWaiting')) ?? 0)).to.equal(0);
  });

  it('a job with no queue handle says how to get one', async () => {
    const job = Job.fromFields({ id: '7', name: 'n', data: '{}' });
    const err = await rejection(job.promote());
    expect(err).to.be.instanceOf(InvalidArgumentError);
    expect((err as Error).message).to.contain('Job.fromId(queue, id)');
  });
});
