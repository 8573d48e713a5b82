/**
 * The worker registry (lua/workers.lua, src/engine/consuming/worker-registry.ts), the queue's latency
 * (getOldestWaitingAge) and the failure stacks a job keeps (job.stacktrace), on a real server.
 */
import { expect } from 'chai';
import { hostname } from 'node:os';
import type { Job } from '../../src/engine/jobs/job.js';
import type { Queue } from '../../src/engine/queue/queue.js';
import { callFunction, LIBRARY_PACKAGE_VERSION } from '../../src/engine/connecting/library.js';
import { MAX_STACK_BYTES, MAX_STACKS } from '../../src/engine/shared/stacktrace.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { killedAfterEach, processorPath, WorkerProcess } from '../helpers/worker-spawn.js';

/** A short registry expiry (refreshed every 100 ms) keeps the expiry tests fast. */
const SHORT = { registryTtl: 300 };

/** Waits until the server's clock reads at least `ms`. */
async function serverPassed(q: Queue, ms: number): Promise<void> {
  await waitFor(async () => (await q.serverTime()) >= ms, 'the server clock to pass the mark', 5000, 50);
}

describe('worker registry, oldest waiting age, failure stacks (real valkey-server)', function () {
  this.timeout(30_000);
  const server = useServer();
  const h = new Harness(server);
  const procs = killedAfterEach();
  afterEach(() => h.cleanup());

  describe('getWorkers', () => {
    it('lists a running worker with its consumer name, host, pid, concurrency and version', async () => {
      const name = uniqueQueue('reg');
      const q = h.queue(name);
      const w = h.worker(name, async () => 'ok', { concurrency: 3 });
      await w.waitUntilReady();
      const [info, ...rest] = await q.getWorkers();
      expect(rest).to.deep.equal([]);
      expect(info.id).to.equal(w.consumer); // the name its claims carry, so `pel` can name it
      expect(info).to.include({ host: hostname(), pid: process.pid, queue: name, concurrency: 3, running: 0, version: LIBRARY_PACKAGE_VERSION });
      expect(info.lastSeen).to.be.at.least(info.startedAt);
      expect(info.expiresAt).to.equal(info.lastSeen + 30_000);
    });

    it('refreshes lastSeen and running on its timer, keeping startedAt', async () => {
      const name = uniqueQueue('beat');
      const q = h.queue(name);
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const w = h.worker(name, async () => gate, { ...SHORT, concurrency: 2 });
      await w.waitUntilReady();
      const [first] = await q.getWorkers();
      await q.add('hold', {});
      await waitFor(async () => (await q.getWorkers())[0]?.running === 1, 'the refresh to count the running job');
      const [later] = await q.getWorkers();
      expect(later.startedAt).to.equal(first.startedAt);
      expect(later.lastSeen).to.be.above(first.lastSeen);
      release();
    });

    it('is gone as soon as the worker closes', async () => {
      const name = uniqueQueue('close');
      const q = h.queue(name);
      const a = h.worker(name, async () => 'ok');
      const b = h.worker(name, async () => 'ok');
      await Promise.all([a.waitUntilReady(), b.waitUntilReady()]);
      expect((await q.getWorkers()).map((w) => w.id).sort()).to.deep.equal([a.consumer, b.consumer].sort());
      await a.close();
      expect((await q.getWorkers()).map((w) => w.id)).to.deep.equal([b.consumer]);
      await b.close();
      expect(await q.getWorkers()).to.deep.equal([]);
      // an empty registry leaves no key behind
      expect(await q.client.exists(q.keys.workers, q.keys.workersExpiry)).to.equal(0);
    });

    it('drops a SIGKILLed worker by itself once its entry expires, and its keys expire with it', async () => {
      const name = uniqueQueue('kill');
      const q = h.queue(name);
      const p = new WorkerProcess({ url: server().url, queue: name, processor: processorPath('echo.mjs'), options: SHORT });
      procs.push(p);
      await p.waitReady();
      const [info] = await q.getWorkers();
      expect(info.pid).to.equal(p.proc.pid);
      await p.kill();
      await waitFor(async () => (await q.getWorkers()).length === 0, 'the dead worker to expire from the registry');
      // nobody lists or registers: the keys still go, with the last entry's expiry
      const other = new WorkerProcess({ url: server().url, queue: name, processor: processorPath('echo.mjs'), options: SHORT });
      procs.push(other);
      await other.waitReady();
      expect(await q.client.pttl(q.keys.workers)).to.be.within(1, 300);
      await other.kill();
      await waitFor(async () => (await q.client.exists(q.keys.workers, q.keys.workersExpiry)) === 0, 'the registry keys to expire');
    });

    it('refuses a ttl out of range', () => {
      expect(() => h.worker(uniqueQueue('ttl'), async () => 1, { registryTtl: 5, autorun: false })).to.throw(/registryTtl/);
    });
  });

  describe('getOldestWaitingAge', () => {
    it('is null when nothing waits, and reads a read-only call that writes no key', async () => {
      const q = h.queue(uniqueQueue('none'));
      expect(await q.getOldestWaitingAge()).to.equal(null);
      expect(await q.exists()).to.equal(false);
    });

    it('measures the oldest undelivered stream entry, LIFO, prioritized and group jobs by the server clock', async () => {
      for (const opts of [{}, { lifo: true }, { priority: 3 }, { group: { id: 'g1' } }]) {
        const q = h.queue(uniqueQueue('age'));
        const old = await q.add('old', {}, opts);
        await serverPassed(q, old.timestamp + 1000);
        await q.add('new', {}, opts);
        const age = await q.getOldestWaitingAge();
        expect(age, JSON.stringify(opts)).to.be.within(1000, 5000);
      }
    });

    it('skips delivered jobs: the age is that of the first job still waiting', async () => {
      const name = uniqueQueue('deliv');
      const q = h.queue(name);
      await q.add('first', {});
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const w = h.worker(name, async () => gate);
      await waitFor(async () => (await q.getActiveCount()) === 1, 'the first job to run');
      expect(await q.getOldestWaitingAge()).to.equal(null);
      await q.add('second', {});
      expect(await q.getOldestWaitingAge()).to.be.below(1000);
      release();
      await w.close();
    });

    it('takes the oldest of the first and the lowest priority band', async () => {
      const q = h.queue(uniqueQueue('prio'));
      const old = await q.add('low-old', {}, { priority: 9 });
      await serverPassed(q, old.timestamp + 1000);
      await q.add('high-new', {}, { priority: 1 });
      expect(await q.getOldestWaitingAge()).to.be.at.least(1000);
    });
  });

  describe('job.stacktrace', () => {
    it('keeps each failed attempt\'s stack, on getJob and on the failed event', async () => {
      const name = uniqueQueue('stack');
      const q = h.queue(name);
      const seen: string[][] = [];
      const w = h.worker(name, async (job: Job) => {
        throw new Error(`boom ${job.attemptsMade}`);
      });
      w.on('failed', (job: Job) => seen.push(job.stacktrace));
      const job = await q.add('fails', {}, { attempts: 3 });
      await waitFor(async () => (await q.getJobState(job.id)) === 'failed', 'the job to fail for good');
      const got = await q.getJob(job.id);
      expect(got!.stacktrace).to.have.length(3);
      got!.stacktrace.forEach((s, i) => expect(s).to.match(new RegExp(`^Error: boom ${i}\\n\\s+at `)));
      expect(seen).to.have.length(3);
      // the event's job knows the stack of the attempt just failed (the claim carries no earlier ones)
      expect(seen[2][seen[2].length - 1]).to.equal(got!.stacktrace[2]);
      // a completed job carries none
      const ok = h.queue(uniqueQueue('nostack'));
      h.worker(ok.name, async () => 'fine');
      const done = await ok.add('ok', {});
      await waitFor(async () => (await ok.getJobState(done.id)) === 'completed', 'the job to complete');
      expect((await ok.getJob(done.id))!.stacktrace).to.deep.equal([]);
      expect(await ok.client.hexists(ok.keys.job(done.id), 'stacktrace')).to.equal(0);
    });

    it('is bounded: the newest 10 stacks, each cut to 4 KiB', async () => {
      const name = uniqueQueue('bound');
      const q = h.queue(name);
      h.worker(name, async (job: Job) => {
        const e = new Error(`attempt ${job.attemptsMade}`);
        e.stack = `Error: attempt ${job.attemptsMade}\n` + 'é'.repeat(5000); // 10 KB of two-byte characters
        throw e;
      });
      const job = await q.add('many', {}, { attempts: 13 });
      await waitFor(async () => (await q.getJobState(job.id)) === 'failed', 'the job to fail for good', 20_000);
      const got = (await q.getJob(job.id))!.stacktrace;
      expect(got).to.have.length(MAX_STACKS);
      expect(got[0]).to.match(/^Error: attempt 3\n/);
      expect(got[MAX_STACKS - 1]).to.match(/^Error: attempt 12\n/);
      for (const s of got) {
        expect(Buffer.byteLength(s)).to.be.at.most(MAX_STACK_BYTES).and.above(MAX_STACK_BYTES - 4);
        expect(s.endsWith('é')).to.equal(true); // cut between characters
      }
    });

    it('the server refuses a longer stack before writing anything', async () => {
      const q = h.queue(uniqueQueue('refuse'));
      await q.waitUntilReady();
      const job = await q.add('x', {});
      const err = await callFunction(q.client, 'glidemq_finish', q.keys.meta, [job.id, '1', 'c1', `failed:${'x'.repeat(MAX_STACK_BYTES + 1)}`, 'r', '-1', '0', '', '0', '0', '30000', '1'])
        .catch((e: Error) => e);
      expect(String(err)).to.match(/glidemq_finish: outcome must be/);
      expect(await q.getJobState(job.id)).to.equal('waiting');
    });
  });

  describe('requests from afar (Queue.quietWorker, Queue.stopWorker)', () => {
    it('quiet: the worker hears it at its next refresh, emits quietRequested and takes no new job; stop: stopRequested, it finishes and closes', async () => {
      const name = uniqueQueue('ask');
      const q = h.queue(name);
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      const w = h.worker(name, async (job: Job) => (job.name === 'hold' ? gate : 'ok'), { ...SHORT, concurrency: 2 });
      const held = await q.add('hold', {});
      await waitFor(async () => (await q.getWorkers())[0]?.jobs.includes(held.id), 'the registry to list the running job');

      const quiet = new Promise<void>((r) => w.once('quietRequested', () => r()));
      expect(await q.quietWorker(w.consumer)).to.equal(true);
      await quiet;
      await waitFor(() => w.isPaused(), 'the worker to pause');
      const later = await q.add('later', {});
      const seen = (await q.getWorkers())[0].lastSeen;
      await waitFor(async () => ((await q.getWorkers())[0]?.lastSeen ?? Infinity) > seen + 200, 'two more refreshes');
      expect(await q.getJobState(later.id)).to.equal('waiting');
      expect((await q.getWorkers())[0]).to.include({ request: 'quiet' });

      const stopping = new Promise<void>((r) => w.once('stopRequested', () => r()));
      const closed = new Promise<void>((r) => w.once('closed', () => r()));
      expect(await q.stopWorker(w.consumer)).to.equal(true);
      await stopping;
      expect(await q.quietWorker(w.consumer)).to.equal(true); // a stop is not turned back into a quiet
      expect((await q.getWorkers())[0]).to.include({ request: 'stop' });
      release();
      await closed;
      expect(await q.getJobState(held.id)).to.equal('completed');
      expect(await q.getJobState(later.id)).to.equal('waiting');
      expect(await q.getWorkers()).to.deep.equal([]);
    });

    it('an id no live worker has: false, and nothing is written', async () => {
      const q = h.queue(uniqueQueue('nobody'));
      await q.waitUntilReady();
      expect(await q.quietWorker('no-such-worker')).to.equal(false);
      expect(await q.stopWorker('no-such-worker')).to.equal(false);
      expect(await q.client.exists(q.keys.workers, q.keys.workersExpiry)).to.equal(0);
    });
  });
});
