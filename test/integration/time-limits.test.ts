/**
 * Time limits and revocation (issue 30): a job's `timeout` aborts its run's signal and fails it
 * with "timed out after N ms" (retried by its attempts); a processor that does not stop within the
 * grace period has its job failed anyway, is reported, and keeps its slot until it returns.
 * queue.revoke decides on the server: a job that has not started never runs, a running one's
 * signal aborts in whichever worker runs it within one lock renewal (here: a worker in another
 * process).
 */
import { expect } from 'chai';
import type { Job } from '../../src/engine/jobs/job.js';
import type { Queue } from '../../src/engine/queue/queue.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { killedAfterEach, processorPath, WorkerProcess } from '../helpers/worker-spawn.js';
import { useFaultProxy } from '../helpers/proxy.js';
import { Worker } from '../../src/engine/consuming/worker.js';

/** A processor that runs until its signal aborts, then throws the signal's reason. */
function untilAborted(signal: AbortSignal | undefined): Promise<never> {
  return new Promise((_, reject) => {
    if (!signal) return reject(new Error('no signal given'));
    if (signal.aborted) return reject(signal.reason);
    signal.addEventListener('abort', () => reject(signal.reason), { once: true });
  });
}

/** The events stream's entries as field lists without their ids. */
async function events(q: Queue): Promise<string[][]> {
  return (await q.client.xrange(q.keys.events, '-', '+')).map(([, f]) => f);
}

describe('time limits and revocation (real valkey-server)', function () {
  this.timeout(60_000);
  const server = useServer();
  const h = new Harness(server);
  const procs = killedAfterEach();
  afterEach(() => h.cleanup());

  describe('timeout', () => {
    it('aborts the signal of a processor that honours it at the limit: the job fails with "timed out after N ms", not retried without attempts', async () => {
      const name = uniqueQueue('timeout');
      const q = h.queue(name);
      let reason: unknown;
      const w = h.worker(name, async (_job: Job, _token?: string, signal?: AbortSignal) => {
        try {
          return await untilAborted(signal);
        } catch (err) {
          reason = err;
          throw new Error('the processor says it stopped');
        }
      });
      const failed = new Promise<[Job, Error]>((resolve) => w.on('failed', (j: Job, e: Error) => resolve([j, e])));
      const started = Date.now();
      const job = await q.add('slow', {}, { timeout: 300 });
      const [j, err] = await failed;
      expect(Date.now() - started, 'it failed at the limit, not after the grace period').to.be.below(2_000);
      expect((reason as Error).message).to.equal('timed out after 300 ms');
      expect(err.message).to.equal('timed out after 300 ms');
      expect(j.id).to.equal(job.id);
      const stored = await q.getJob(job.id);
      expect(stored?.state).to.equal('failed');
      expect(stored?.failedReason, 'whatever the processor threw, the reason is the timeout').to.equal('timed out after 300 ms');
      expect(stored?.opts.timeout).to.equal(300);
    });

    it('the Worker\'s timeout applies to a job that names none; job.abortSignal is the run\'s signal for a processor that takes no third parameter', async () => {
      const name = uniqueQueue('timeout-default');
      const q = h.queue(name);
      h.worker(name, (job: Job) => untilAborted(job.abortSignal), { timeout: 200 });
      const job = await q.add('slow', {});
      await waitFor(async () => (await q.getJob(job.id))?.state === 'failed', 'the job to time out');
      expect((await q.getJob(job.id))?.failedReason).to.equal('timed out after 200 ms');
    });

    it('a timed-out attempt follows the retry rules: the next attempt runs and completes', async () => {
      const name = uniqueQueue('timeout-retry');
      const q = h.queue(name);
      let runs = 0;
      h.worker(name, async (job: Job, _t?: string, signal?: AbortSignal) => {
        runs++;
        if (job.attemptsMade === 0) return untilAborted(signal);
        return 'second time lucky';
      });
      const job = await q.add('flaky', {}, { timeout: 200, attempts: 2 });
      await waitFor(async () => (await q.getJob(job.id))?.state === 'completed', 'the retry to complete');
      const stored = await q.getJob(job.id);
      expect(runs).to.equal(2);
      expect(stored?.attemptsMade).to.equal(2);
      expect(stored?.returnvalue).to.equal('second time lucky');
      const reasons = (await events(q)).filter((f) => f[1] === 'retrying' && f[3] === job.id).map((f) => f[5]);
      expect(reasons).to.deep.equal(['timed out after 200 ms']);
    });

    it('a processor that ignores its signal: the job fails at timeout + grace, the worker reports it, its slot stays taken until it returns, and its late result is dropped', async () => {
      const name = uniqueQueue('timeout-stuck');
      const q = h.queue(name);
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      const ran: string[] = [];
      const w = h.worker(name, async (job: Job) => {
        ran.push(job.id);
        if (job.name === 'stuck') {
          await released;
          return 'too late';
        }
        return 'next';
      }, { concurrency: 1, timeoutGraceMs: 300 });
      const errors: Error[] = [];
      w.on('error', (e: Error) => errors.push(e));
      const started = Date.now();
      const stuck = await q.add('stuck', {}, { timeout: 200 });
      await waitFor(async () => (await q.getJob(stuck.id))?.state === 'failed', 'the stuck job to be failed');
      expect(Date.now() - started, 'failed no sooner than timeout + grace').to.be.at.least(500);
      expect((await q.getJob(stuck.id))?.failedReason).to.equal('timed out after 200 ms');
      await waitFor(() => errors.length > 0, 'the stuck processor to be reported');
      expect(errors[0].message).to.contain(`job ${stuck.id}`);

      const next = await q.add('next', {});
      // a check that something does not happen has no condition to await: the next job is given
      // half a second in which it would start on a free slot
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(ran, 'the stuck processor keeps the only slot').to.deep.equal([stuck.id]);
      expect(w.activeCount).to.equal(1);

      release();
      await waitFor(async () => (await q.getJob(next.id))?.state === 'completed', 'the next job to run once the slot is free');
      const stored = await q.getJob(stuck.id);
      expect(stored?.state, 'the late result changed nothing').to.equal('failed');
      expect(stored?.returnvalue).to.equal(null);
      expect(w.finished).to.deep.equal({ completed: 1, failed: 1 });
    });

    it('a timeout out of range is refused at add, naming the option', async () => {
      const q = h.queue(uniqueQueue('timeout-bad'));
      for (const bad of [0, -1, 1.5, 2 ** 31]) {
        await q.add('x', {}, { timeout: bad }).then(
          () => expect.fail(`timeout ${bad} was accepted`),
          (err: Error) => expect(err.message).to.contain('timeout must be a whole number of ms'),
        );
      }
    });
  });

  describe('queue.revoke', () => {
    for (const [kind, opts] of [
      ['waiting', {}],
      ['delayed', { delay: 60_000 }],
      ['prioritized', { priority: 3 }],
      ['LIFO', { lifo: true }],
      ['grouped', { group: { id: 'g1', maxConcurrency: 1 } }],
    ] as const) {
      it(`a ${kind} job never runs: it is failed as revoked, not retried, the failed event written, and a repeat answers the same`, async () => {
        const name = uniqueQueue('revoke');
        const q = h.queue(name);
        const job = await q.add('never', {}, { ...opts, attempts: 3 });
        expect(await q.revoke(job.id)).to.equal('revoked');
        expect(await q.revoke(job.id), 'a repeat').to.equal('revoked');
        const stored = await q.getJob(job.id);
        expect(stored?.state).to.equal('failed');
        expect(stored?.failedReason).to.equal('revoked');
        expect(stored?.attemptsMade).to.equal(0);
        expect(await q.getFailedCount()).to.equal(1);
        expect((await events(q)).some((f) => f[1] === 'failed' && f[3] === job.id && f[5] === 'revoked')).to.equal(true);

        const ran: string[] = [];
        h.worker(name, async (j: Job) => void ran.push(j.id));
        const other = await q.add('other', {}, 'group' in opts ? { group: opts.group } : {});
        await waitFor(async () => (await q.getJob(other.id))?.state === 'completed', 'a later job to complete');
        expect(ran, 'the revoked job never ran').to.deep.equal([other.id]);
        expect((await q.getJob(job.id))?.state).to.equal('failed');
      });
    }

    it('a revoked child settles its parent as a failure for good does: failParentOnFailure fails it, ignoreDependencyOnFailure lets it run', async () => {
      const name = uniqueQueue('revoke-flow');
      const q = h.queue(name);
      const flow = h.flowProducer();
      const failing = await flow.add({ name: 'parent', queueName: name, children: [{ name: 'child', queueName: name, opts: { failParentOnFailure: true } }] });
      const ignoring = await flow.add({ name: 'parent', queueName: name, children: [{ name: 'child', queueName: name, opts: { ignoreDependencyOnFailure: true } }] });
      expect(await q.revoke(failing.children![0].job.id)).to.equal('revoked');
      expect(await q.revoke(ignoring.children![0].job.id)).to.equal('revoked');
      expect(await q.getJobState(failing.job.id)).to.equal('failed');
      expect(await q.getJobState(ignoring.job.id)).to.equal('waiting');
      // a parent waiting for its children is revoked too: its children run on, and never start it
      const parentRevoked = await flow.add({ name: 'parent', queueName: name, children: [{ name: 'child', queueName: name }] });
      expect(await q.revoke(parentRevoked.job.id)).to.equal('revoked');
      const ran: string[] = [];
      h.worker(name, async (j: Job) => void ran.push(j.id));
      await waitFor(async () => (await q.getJobState(parentRevoked.children![0].job.id)) === 'completed', 'the child to complete');
      await waitFor(async () => (await q.getJobState(ignoring.job.id)) === 'completed', 'the other parent to run');
      expect(ran).to.not.include(parentRevoked.job.id);
      expect(await q.getJobState(parentRevoked.job.id)).to.equal('failed');
    });

    it('a revoked job is kept or removed as its removeOnFail says', async () => {
      const q = h.queue(uniqueQueue('revoke-retention'));
      const job = await q.add('gone', {}, { removeOnFail: true });
      expect(await q.revoke(job.id)).to.equal('revoked');
      expect(await q.getJob(job.id)).to.equal(undefined);
      expect(await q.getFailedCount()).to.equal(0);
    });

    it('answers not_found for an unknown id, and finished for a job that completed (left as it was)', async () => {
      const name = uniqueQueue('revoke-none');
      const q = h.queue(name);
      expect(await q.revoke('no-such-job')).to.equal('not_found');
      h.worker(name, async () => 'done');
      const job = await q.add('quick', {});
      await waitFor(async () => (await q.getJob(job.id))?.state === 'completed', 'the job to complete');
      expect(await q.revoke(job.id)).to.equal('finished');
      expect((await q.getJob(job.id))?.returnvalue).to.equal('done');
    });

    it('a job running in another process\'s worker: flagged, its signal aborts within one lock renewal, and it fails for good as revoked', async () => {
      const name = uniqueQueue('revoke-remote');
      const q = h.queue(name);
      const p = new WorkerProcess({ url: server().url, queue: name, processor: processorPath('until-aborted.mjs'), options: { lockDuration: 1000, stalledInterval: 500, blockTimeout: 1000 } });
      procs.push(p);
      await p.waitReady();
      const job = await q.add('long', {}, { attempts: 3 });
      await waitFor(() => p.started.includes(job.id), 'the worker process to start the job');
      const flaggedAt = Date.now();
      expect(await q.revoke(job.id)).to.equal('flagged');
      await waitFor(async () => (await q.getJob(job.id))?.state === 'failed', 'the revoked job to fail');
      // the heartbeat runs every lockDuration / 2 (500 ms): a generous safety net for a loaded machine
      expect(Date.now() - flaggedAt).to.be.below(5_000);
      const stored = await q.getJob(job.id);
      expect(stored?.failedReason).to.equal('revoked');
      expect(stored?.attemptsMade, 'no retry').to.equal(1);
      expect(p.started.filter((id) => id === job.id)).to.have.length(1);
    });

    it('a flagged job whose worker died is not run again: the worker it is redispatched to fails it unrun; a retry by hand runs it', async () => {
      const name = uniqueQueue('revoke-stalled');
      const q = h.queue(name);
      const p = new WorkerProcess({ url: server().url, queue: name, processor: processorPath('hang.mjs'), options: { lockDuration: 1000, stalledInterval: 500, blockTimeout: 1000 } });
      procs.push(p);
      await p.waitReady();
      const job = await q.add('long', {}, { attempts: 3 });
      await waitFor(() => p.started.includes(job.id), 'the worker process to start the job');
      expect(await q.revoke(job.id)).to.equal('flagged');
      await p.kill();

      const ran: string[] = [];
      const rescuer = h.worker(name, async (j: Job) => {
        ran.push(j.id);
        return 'ran';
      }, { lockDuration: 1000, stalledInterval: 500 });
      const stalled = new Promise<void>((resolve) => rescuer.on('stalled', () => resolve()));
      await stalled;
      await waitFor(async () => (await q.getJob(job.id))?.state === 'failed', 'the redispatched job to fail unrun');
      expect(ran).to.deep.equal([]);
      expect((await q.getJob(job.id))?.failedReason).to.equal('revoked');

      await (await q.getJob(job.id))!.retry();
      await waitFor(async () => (await q.getJob(job.id))?.state === 'completed', 'the job retried by hand to run');
      expect(ran).to.deep.equal([job.id]);
    });

    describe('a worker cut off from the server', () => {
      const { proxy, via, closeAfter } = useFaultProxy(server, 1000);

      it('obeys a revoke made while it was offline once it renews again', async () => {
        const name = uniqueQueue('revoke-offline');
        const q = h.queue(name);
        let aborted: unknown;
        const w = new Worker(name, async (_job: Job, _t?: string, signal?: AbortSignal) => {
          try {
            return await untilAborted(signal);
          } catch (err) {
            aborted = err;
            throw err;
          }
        }, { connection: via(), lockDuration: 4000, stalledInterval: 60_000, blockTimeout: 300 });
        w.on('error', () => undefined);
        closeAfter(() => w.close(true));
        const job = await q.add('long', {}, { attempts: 3 });
        await waitFor(async () => (await q.getJob(job.id))?.state === 'active', 'the job to start');
        proxy().blackhole();
        expect(await q.revoke(job.id), 'asked while the worker cannot hear').to.equal('flagged');
        // a negative check has no condition to await: a heartbeat (every 2 s) is due in this time
        await new Promise((resolve) => setTimeout(resolve, 2_500));
        expect(aborted, 'the offline worker has not heard').to.equal(undefined);
        proxy().recover();
        await waitFor(async () => (await q.getJob(job.id))?.state === 'failed', 'the job to fail once the worker is back');
        expect((aborted as Error).message).to.equal('revoked');
        expect((await q.getJob(job.id))?.failedReason).to.equal('revoked');
      });
    });

    it('a running job whose processor ignores the revoke and completes: the completion stands', async () => {
      const name = uniqueQueue('revoke-complete');
      const q = h.queue(name);
      let aborted: unknown;
      let release!: () => void;
      const released = new Promise<void>((resolve) => (release = resolve));
      h.worker(name, async (job: Job) => {
        job.abortSignal?.addEventListener('abort', () => (aborted = job.abortSignal?.reason));
        await released;
        return 'finished anyway';
      }, { lockDuration: 1000 });
      const job = await q.add('stubborn', {});
      await waitFor(async () => (await q.getJob(job.id))?.state === 'active', 'the job to start');
      expect(await q.revoke(job.id)).to.equal('flagged');
      expect(await q.revoke(job.id), 'a repeat').to.equal('flagged');
      await waitFor(() => aborted !== undefined, 'the signal to abort at the next renewal');
      expect((aborted as Error).message).to.equal('revoked');
      release();
      await waitFor(async () => (await q.getJob(job.id))?.state === 'completed', 'the job to complete');
      expect((await q.getJob(job.id))?.returnvalue).to.equal('finished anyway');
    });

    it('a revoked claim whose failure reaches the server before its worker heard of the flag fails for good as revoked', async () => {
      const name = uniqueQueue('revoke-race');
      const q = h.queue(name);
      let fail!: () => void;
      const failNow = new Promise<void>((resolve) => (fail = resolve));
      // a lock of a minute: no renewal tells the worker before the processor fails
      const w = h.worker(name, async () => {
        await failNow;
        throw new Error('boom');
      }, { lockDuration: 60_000 });
      const failed = new Promise<[Job, Error]>((resolve) => w.on('failed', (j: Job, e: Error) => resolve([j, e])));
      const job = await q.add('racy', {}, { attempts: 5 });
      await waitFor(async () => (await q.getJob(job.id))?.state === 'active', 'the job to start');
      expect(await q.revoke(job.id)).to.equal('flagged');
      fail();
      await waitFor(async () => (await q.getJob(job.id))?.state === 'failed', 'the job to fail for good');
      const stored = await q.getJob(job.id);
      expect(stored?.failedReason).to.equal('revoked');
      expect(stored?.attemptsMade).to.equal(1);
      const [j, err] = await failed;
      expect(j.failedReason, 'the worker\'s event says what the server stored').to.equal('revoked');
      expect(j.state).to.equal('failed');
      expect(err.message).to.equal('revoked');
      expect((err.cause as Error).message).to.equal('boom');
    });
  });
});
