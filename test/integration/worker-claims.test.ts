/**
 * A worker tracks its runs by claim: a job a reclaim gives back to the worker that still runs it
 * stays one run (under the new claim), a stale finish never touches the current claim, and the
 * worker's events say what happened (no lockLost for a job it completed, no `lost` for a finish
 * whose reply was lost and that the client sent again).
 */
import { expect } from 'chai';
import { callFunction } from '../../src/engine/connecting/library.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker, type WorkerOptions } from '../../src/engine/consuming/worker.js';
import { uniqueQueue } from '../helpers/engine.js';
import { useFaultProxy } from '../helpers/proxy.js';
import { useServer, waitFor } from '../helpers/valkey.js';

/** What a worker said, by event. */
function listen(w: Worker) {
  const seen = { active: [] as string[], completed: [] as string[], failed: [] as string[], lost: [] as string[], lockLost: [] as string[], stalled: [] as string[], errors: [] as unknown[] };
  w.on('active', (j: Job) => seen.active.push(j.id));
  w.on('completed', (j: Job) => seen.completed.push(j.id));
  w.on('failed', (j: Job) => seen.failed.push(j.id));
  w.on('lost', (j: Job, status: string) => seen.lost.push(`${j.id}:${status}`));
  w.on('lockLost', (id: string) => seen.lockLost.push(id));
  w.on('stalled', (id: string) => seen.stalled.push(id));
  w.on('error', (e: unknown) => seen.errors.push(e));
  return seen;
}

/**
 * Stalled recovery from outside the worker, taking every claim at once: each claim's own lock (its
 * terms, lua/activate.lua) is made to have run out, as after an outage counted against it.
 */
async function reclaimNow(q: Queue): Promise<unknown[]> {
  for (const job of await q.getJobs(['active'])) await q.client.hset(q.keys.job(job.id), 'terms', '0:5');
  const r = (await callFunction(q.client, 'glidemq_reclaimStalled', q.keys.meta, ['outsider', 0, 5, 600000, 0, '0-0', ''])) as unknown[][];
  const l = (await callFunction(q.client, 'glidemq_reclaimStalledListJobs', q.keys.meta, [0, 5, 0, ''])) as unknown[][];
  return [...r[1], ...l[1]];
}

describe('a worker tracks its runs by claim', function () {
  this.timeout(60000);
  const server = useServer();
  const closers: (() => Promise<unknown>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });
  const setup = (name: string, processor: (job: Job) => Promise<unknown>, opts: WorkerOptions = {}) => {
    const q = new Queue(name, { connection: server().url });
    const w = new Worker(name, processor, { connection: server().url, blockTimeout: 1000, ...opts });
    closers.push(() => q.close(), () => w.close(true));
    return { q, w, seen: listen(w) };
  };

  for (const [kind, concurrency, priority] of [
    ['a stream job, a free slot', 2, undefined],
    ['a stream job, no free slot (the claim comes back in its own finish)', 1, undefined],
    ['a priority job, a free slot', 2, 1],
  ] as const) {
    it(`a job reclaimed back to the worker that runs it stays one run: ${kind}`, async () => {
      let release!: () => void;
      const gate = new Promise<void>((r) => (release = r));
      let runs = 0;
      let maxActive = 0;
      const { q, w, seen } = setup(uniqueQueue('again'), async () => {
        runs++;
        await gate;
        return 'done';
      }, { concurrency, lockDuration: 30000 });
      w.on('active', () => (maxActive = Math.max(maxActive, w.activeCount)));
      const job = await q.add('j', { n: 1 }, priority ? { priority } : {});
      await waitFor(() => runs === 1, 'the job runs');
      // another worker's check takes the claim (as after an outage counted against it)...
      expect(await reclaimNow(q)).to.deep.equal([job.id]);
      // ...and the job comes back to this worker, which runs it already
      if (concurrency > 1) await waitFor(async () => (await q.client.hget(q.keys.job(job.id), 'state')) === 'active', 'the job claimed again');
      release();
      await waitFor(() => seen.completed.length === 1, 'the job completed');
      const stored = await q.client.hgetall(q.keys.job(job.id));
      expect(runs, 'processor runs').to.equal(1);
      expect(maxActive).to.equal(1);
      expect(stored.state).to.equal('completed');
      expect(stored.returnvalue).to.equal('"done"');
      expect(stored.stalledCount).to.equal('1');
      expect(seen.lost, 'lost events').to.deep.equal([]);
      expect(seen.lockLost, 'lockLost events').to.deep.equal([]);
      const counts = await q.getJobCounts();
      expect([counts.active, counts.waiting, counts.completed]).to.deep.equal([0, 0, 1]);
    });
  }

  it('a single worker whose event loop is blocked for 1.6 × lockDuration keeps its jobs (its own check renews first)', async () => {
    const lock = 1000;
    let runs = 0;
    const { q, seen } = setup(uniqueQueue('blocked'), async (job) => {
      runs++;
      if (job.data.block) {
        const until = Date.now() + 1.6 * lock;
        while (Date.now() < until) {
          // a processor that blocks the event loop: no timer runs in this time
        }
      }
      await new Promise((r) => setTimeout(r, 2 * lock)); // then runs on past the lock
      return 'ok';
    }, { lockDuration: lock, stalledInterval: lock, concurrency: 2 });
    await q.add('a', { block: true });
    await q.add('b', { block: false });
    await waitFor(() => seen.completed.length === 2, 'both jobs completed', 20000);
    expect(runs).to.equal(2);
    expect(seen.stalled).to.deep.equal([]);
    expect(seen.lockLost).to.deep.equal([]);
  });

  describe('through a proxy', () => {
    const { proxy, via, closeAfter } = useFaultProxy(server, 2000);

    for (const removeOnComplete of [false, true]) {
      it(`a finish whose reply is lost and that is sent again reports completed, never lost (removeOnComplete ${removeOnComplete})`, async () => {
        const name = uniqueQueue('refinish');
        const q = new Queue(name, { connection: server().url });
        const w = new Worker(name, async () => 'ok', { connection: via(), blockTimeout: 1000 });
        closeAfter(() => q.close(), () => w.close(true));
        const seen = listen(w);
        const ids: string[] = [];
        let cuts = 0;
        for (let i = 0; i < 6; i++) {
          const cut = proxy().cutOn(/glidemq_finish/, { forward: true });
          ids.push((await q.add('j', { i }, { removeOnComplete })).id);
          await Promise.race([cut, new Promise((r) => setTimeout(r, 2000))]);
          proxy().disarm();
          cuts = proxy().stats.cuts;
          await waitFor(() => seen.completed.length + seen.lost.length > i, `job ${i} finished`);
        }
        expect(cuts).to.be.at.least(4);
        expect(seen.lost, 'lost events').to.deep.equal([]);
        expect([...seen.completed].sort()).to.deep.equal([...ids].sort());
        const counts = await q.getJobCounts();
        expect(counts.completed).to.equal(removeOnComplete ? 0 : ids.length);
        expect(counts.active + counts.waiting).to.equal(0);
      });
    }

    it('close() returns soon when the server cannot be reached, with jobs running and prefetched', async () => {
      const name = uniqueQueue('gone');
      const q = new Queue(name, { connection: server().url });
      closeAfter(() => q.close());
      let started = 0;
      const w = new Worker(name, () => {
        started++;
        return new Promise(() => undefined); // never ends
      }, { connection: via(), blockTimeout: 1000, concurrency: 1, prefetch: 2, closeGracePeriod: 500 });
      w.on('error', () => undefined);
      await q.addBulk(Array.from({ length: 3 }, (_, i) => ({ name: 'j', data: { i } })));
      await waitFor(async () => started === 1 && (await q.getJobCounts()).waiting === 0, 'one job runs, two are prefetched');
      proxy().blackhole();
      const t0 = Date.now();
      await w.close();
      expect(Date.now() - t0).to.be.below(8000);
      proxy().recover();
    });

    it('no lockLost for jobs that completed while a heartbeat was on its way', async () => {
      const name = uniqueQueue('beats');
      const q = new Queue(name, { connection: server().url });
      // heartbeats every 50 ms over a slow link: many are sent while finishes are on their way
      const w = new Worker(name, async () => new Promise((r) => setTimeout(() => r('ok'), Math.random() * 30)), {
        connection: via(),
        blockTimeout: 1000,
        lockDuration: 100,
        stalledInterval: 60000,
        concurrency: 8,
      });
      closeAfter(() => q.close(), () => w.close(true));
      const seen = listen(w);
      proxy().setLatency(5, 5);
      await q.addBulk(Array.from({ length: 400 }, (_, i) => ({ name: 'j', data: { i } })));
      await waitFor(() => seen.completed.length === 400, 'every job completed', 30000);
      expect(seen.lockLost, 'lockLost events').to.deep.equal([]);
      expect(seen.lost, 'lost events').to.deep.equal([]);
    });
  });
});
