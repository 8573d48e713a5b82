/**
 * A Worker as a BullMQ application uses it: the same calls, options, processor arguments and event
 * listeners, with only the import changed (here: the package's entry, src/index.ts).
 */
import { expect } from 'chai';
import { DelayedError, Worker, type Job } from '../../src/index.js';
import { useCompat } from '../helpers/compat.js';
import { waitFor } from '../helpers/valkey.js';

describe('BullMQ compatibility: Worker', function () {
  this.timeout(30000);
  const { queue, worker } = useCompat('compat');

  it('waitUntilReady() resolves, isRunning() says so, and a second run() rejects', async () => {
    const q = queue();
    const w = worker(q, async () => 'ok');
    await w.waitUntilReady();
    expect(w.isRunning()).to.equal(true);
    let refused: unknown;
    await w.run().catch((e) => (refused = e));
    expect(refused).to.be.instanceOf(Error);
    const idle = worker(q, async () => 'ok', { autorun: false });
    await idle.waitUntilReady();
    expect(idle.isRunning()).to.equal(false);
  });

  it('run() resolves only once the worker has closed, as BullMQ\'s does', async () => {
    const q = queue();
    const w = worker(q, async () => 'ok', { autorun: false });
    let settled = false;
    const running = w.run().then(() => (settled = true));
    await w.waitUntilReady();
    await q.add('one', {});
    await new Promise<void>((resolve) => w.once('completed', () => resolve()));
    expect(settled, 'run() settled while the worker still runs').to.equal(false);
    await w.close();
    await running;
    expect(settled).to.equal(true);
  });

  it('isRunning() is false while the worker is paused and true again after resume()', async () => {
    const q = queue();
    const w = worker(q, async () => 'ok');
    await w.waitUntilReady();
    expect(w.isRunning()).to.equal(true);
    await w.pause();
    expect(w.isRunning()).to.equal(false);
    w.resume();
    expect(w.isRunning()).to.equal(true);
    await w.close();
    expect(w.isRunning()).to.equal(false);
  });

  it('emits ready, active(job, prev), completed(job, result, prev) with the job up to date, drained, closing and closed', async () => {
    const q = queue();
    const events: string[] = [];
    const w = worker(q, async (job) => ({ doubled: job.data.n * 2 }), { autorun: false });
    w.on('ready', () => events.push('ready'));
    w.on('active', (job: Job, prev: string) => events.push(`active:${job.id}:${prev}`));
    let done: { job: Job; result: unknown; prev: string } | undefined;
    w.on('completed', (job: Job, result: unknown, prev: string) => {
      done = { job, result, prev };
      events.push(`completed:${job.id}`);
    });
    w.on('drained', () => events.push('drained'));
    w.on('closing', () => events.push('closing'));
    w.on('closed', () => events.push('closed'));
    const job = await q.add('double', { n: 21 });
    void w.run();
    await waitFor(() => events.includes('drained'), 'drained after the only job');
    expect(done?.result).to.deep.equal({ doubled: 42 });
    expect(done?.prev).to.equal('active');
    expect(done?.job.attemptsMade).to.equal(1);
    expect(done?.job.returnvalue).to.deep.equal({ doubled: 42 });
    expect(done?.job.finishedOn).to.be.at.least(done?.job.processedOn ?? Infinity);
    await w.close();
    expect(events).to.deep.equal(['ready', `active:${job.id}:waiting`, `completed:${job.id}`, 'drained', 'closing', 'closed']);
  });

  it('failed(job, err, prev): attemptsMade counts the attempt just made; the job says whether it runs again', async () => {
    const q = queue();
    const seen: { attemptsMade: number; state: string; message: string; prev: string }[] = [];
    const w = worker(q, async () => {
      throw new Error('boom');
    });
    w.on('failed', (job: Job | undefined, err: Error, prev: string) =>
      seen.push({ attemptsMade: job?.attemptsMade ?? -1, state: job?.state ?? '', message: err.message, prev }));
    await q.add('fails', {}, { attempts: 2 });
    await waitFor(() => seen.length === 2, 'both attempts failed');
    expect(seen).to.deep.equal([
      { attemptsMade: 1, state: 'waiting', message: 'boom', prev: 'active' },
      { attemptsMade: 2, state: 'failed', message: 'boom', prev: 'active' },
    ]);
  });

  it('the processor gets (job, token, signal): the token is job.token, cancelJob() aborts the signal', async () => {
    const q = queue();
    let token: string | undefined;
    let jobToken: string | undefined;
    const w = worker(q, (job, t, signal) => {
      token = t;
      jobToken = job.token;
      return new Promise((resolve, reject) => {
        signal?.addEventListener('abort', () => reject(new Error(`aborted: ${String((signal.reason as Error).message)}`)));
      });
    });
    const failed: string[] = [];
    w.on('failed', (_job: Job, err: Error) => failed.push(err.message));
    const job = await q.add('long', {});
    await waitFor(() => token !== undefined, 'the job runs');
    expect(token).to.be.a('string').and.equal(jobToken);
    expect(w.cancelJob(job.id, 'no longer needed')).to.equal(true);
    expect(w.cancelJob('nope')).to.equal(false);
    await waitFor(() => failed.length === 1, 'the run ended');
    expect(failed[0]).to.equal('aborted: no longer needed');
  });

  it('a rest-parameter processor gets the signal too; one that declares only (job) gets none (none is made for it: an AbortSignal costs µs per job)', async () => {
    const q = queue();
    const seen: unknown[] = [];
    const w = worker(q, async (...args: unknown[]) => {
      seen.push(args[2]);
      return 'ok';
    });
    const one = new Promise<void>((r) => w.once('completed', () => r()));
    await q.add('rest', {});
    await one;
    expect(seen[0]).to.be.instanceOf(AbortSignal);
    await w.close();
    let arity = -1;
    const w2 = worker(q, async function (this: unknown, job: Job) {
      arity = arguments.length >= 3 && arguments[2] !== undefined ? 3 : 1;
      return job.id;
    });
    const two = new Promise<void>((r) => w2.once('completed', () => r()));
    await q.add('plain', {});
    await two;
    expect(arity).to.equal(1);
  });

  it('pause() lets the running job finish and takes no other until resume(); pause(true) does not wait', async () => {
    const q = queue();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const started: string[] = [];
    const w = worker(q, async (job) => {
      started.push(job.name);
      if (job.name === 'first') await gate;
      return 'ok';
    });
    const events: string[] = [];
    w.on('paused', () => events.push('paused'));
    w.on('resumed', () => events.push('resumed'));
    await q.add('first', {});
    await waitFor(() => started.length === 1, 'the first job runs');
    const paused = w.pause();
    expect(w.isPaused()).to.equal(true);
    await q.add('second', {});
    release();
    await paused;
    expect(events).to.deep.equal(['paused']);
    expect(w.activeCount).to.equal(0);
    expect((await q.getJobCounts()).waiting).to.equal(1);
    w.resume();
    await waitFor(() => started.length === 2, 'the second job runs after resume');
    expect(events).to.deep.equal(['paused', 'resumed']);
    await w.pause(true);
    expect(w.isPaused()).to.equal(true);
  });

  it('Worker-level removeOnComplete and removeOnFail apply to jobs that name none', async () => {
    const q = queue();
    const w = worker(q, async (job) => {
      if (job.name === 'bad') throw new Error('no');
      return 'ok';
    }, { removeOnComplete: true, removeOnFail: true });
    const finished: string[] = [];
    w.on('completed', (job: Job) => finished.push(job.id));
    w.on('failed', (job: Job) => finished.push(job.id));
    const good = await q.add('good', {});
    const bad = await q.add('bad', {});
    const kept = await q.add('kept', {}, { removeOnComplete: false, removeOnFail: 5 });
    await waitFor(() => finished.length === 3, 'all three finished');
    expect(await q.getJob(good.id)).to.equal(undefined);
    expect(await q.getJob(bad.id)).to.equal(undefined);
    expect((await q.getJob(kept.id))?.state).to.equal('completed');
  });

  it('a processor that throws Worker.RateLimitError() gives its job back with no attempt counted', async () => {
    const q = queue();
    let runs = 0;
    const w = worker(q, async () => {
      runs++;
      if (runs === 1) throw Worker.RateLimitError();
      return 'ok';
    });
    let done: Job | undefined;
    w.on('completed', (job: Job) => (done = job));
    await q.add('limited', {});
    await waitFor(() => done !== undefined, 'the job ran again and completed');
    expect(runs).to.equal(2);
    expect(done?.attemptsMade).to.equal(1);
  });

  it('moveToDelayed(timestamp, token) then DelayedError parks the job; it runs again when due', async () => {
    const q = queue();
    const runs: unknown[] = [];
    const w = worker(q, async (job, token) => {
      runs.push(job.data.step ?? null);
      if (runs.length === 1) {
        await job.moveToDelayed(Date.now() + 200, token);
        throw new DelayedError();
      }
      return 'ok';
    });
    const completed: string[] = [];
    const failed: string[] = [];
    w.on('completed', (job: Job) => completed.push(job.id));
    w.on('failed', (job: Job) => failed.push(job.id));
    const job = await q.add('later', {});
    await waitFor(() => completed.length === 1, 'the job ran again and completed');
    expect(completed).to.deep.equal([job.id]);
    expect(failed).to.deep.equal([]);
    expect(runs).to.deep.equal([null, null]);
  });

  it('the step-job pattern: moveToDelayed, updateData, DelayedError walks the job through its steps', async () => {
    // BullMQ's "process step jobs" guide: the processor parks its job, stores the next step in its
    // data (after the move: the holder of the token may still write the job it parked), and throws
    const q = queue();
    const steps = ['initial', 'second', 'third', 'finish'];
    const runs: string[] = [];
    const updated: boolean[] = [];
    const w = worker(q, async (job, token) => {
      const step = (job.data.step as string | undefined) ?? steps[0];
      runs.push(step);
      // bounded: a step that is not stored runs again, and the test fails instead of looping
      if (runs.length > steps.length + 2) return 'gave up';
      if (step === 'finish') return `done after ${job.data.count as number} steps`;
      await job.moveToDelayed(Date.now() + 50, token);
      updated.push(await job.updateData({ step: steps[steps.indexOf(step) + 1], count: ((job.data.count as number) ?? 0) + 1 }));
      await job.updateProgress(steps.indexOf(step) + 1);
      throw new DelayedError();
    });
    let done: { job: Job; result: unknown } | undefined;
    w.on('completed', (job: Job, result: unknown) => (done = { job, result }));
    const added = await q.add('steps', {});
    await waitFor(() => done !== undefined, 'the step job to complete');
    expect(runs).to.deep.equal(steps);
    expect(updated).to.deep.equal([true, true, true]);
    expect(done?.result).to.equal('done after 3 steps');
    const stored = await q.getJob(added.id);
    expect(stored?.data).to.deep.equal({ step: 'finish', count: 3 });
    expect(stored?.progress).to.equal(3);
    expect(stored?.attemptsMade).to.equal(1);
  });
});
