/** globalConcurrency: one limit across all workers of a queue, stream and priority/LIFO jobs together. */
import { expect } from 'chai';
import type { Queue } from '../../src/engine/queue/queue.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { jobHash } from '../helpers/recovery.js';

async function commandCalls(q: Queue, cmd: string): Promise<number> {
  const info = (await q.client.info('commandstats')) as string;
  const m = new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(info);
  return m ? Number(m[1]) : 0;
}

describe('globalConcurrency (real valkey-server)', function () {
  this.timeout(60_000);
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  it('4 workers, limit 3: never more than 3 active at once, and every job completes', async () => {
    const name = uniqueQueue('limit');
    const q = h.queue(name);
    const jobs = await q.addBulk(
      Array.from({ length: 60 }, (_, i) => ({ name: 'j', data: { i }, opts: i % 6 === 0 ? { priority: 1 + (i % 4) } : i % 6 === 1 ? { lifo: true } : {} })),
    );
    let running = 0;
    let maxRunning = 0;
    const processor = async () => {
      running++;
      maxRunning = Math.max(maxRunning, running);
      await new Promise((r) => setTimeout(r, 15));
      running--;
      return 'ok';
    };
    let maxActive = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) maxActive = Math.max(maxActive, (await q.getJobCounts()).active);
    })();
    for (let i = 0; i < 4; i++) h.worker(name, processor, { concurrency: 4, globalConcurrency: 3 });
    await waitFor(async () => (await q.getJobCounts()).completed === 60, 'all jobs to complete', 30_000);
    sampling = false;
    await sampler;
    expect(maxActive).to.be.at.most(3);
    expect(maxRunning).to.be.at.most(3);
    expect(maxRunning).to.be.at.least(2); // the limit is used, not just obeyed
    for (const j of jobs) expect((await jobHash(q, j.id)).state).to.equal('completed');
  });

  it('a worker at the limit waits instead of spinning, and takes jobs as soon as a slot frees', async () => {
    const name = uniqueQueue('nospin');
    const q = h.queue(name);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const holder = h.worker(name, async (job) => {
      if (job.name === 'hold') await gate;
      return 'ok';
    }, { globalConcurrency: 1, lockDuration: 400, stalledInterval: 60_000 });
    const hold = await q.add('hold', {});
    await waitFor(async () => (await jobHash(q, hold.id)).state === 'active', 'the slot to be taken');
    const waiters = [1, 2, 3].map(() => h.worker(name, async () => 'ok', { concurrency: 2, stalledInterval: 60_000 }));
    await Promise.all(waiters.map((w) => w.waitUntilReady()));
    await q.addBulk(Array.from({ length: 6 }, (_, i) => ({ name: 'queued', data: { i }, opts: i % 3 === 1 ? { priority: 1 } : {} })));
    const fcalls = await commandCalls(q, 'fcall');
    const reads = await commandCalls(q, 'xreadgroup');
    // wait for three heartbeats of the running job (about 600 ms of being at the limit)
    let lockedAt: string = (await jobHash(q, hold.id)).lockedAt;
    for (let beats = 0; beats < 3; beats++) {
      const prev = lockedAt;
      lockedAt = (await waitFor(async () => {
        const now = (await jobHash(q, hold.id)).lockedAt;
        return now !== prev ? now : undefined;
      }, 'a heartbeat of the running job'))!;
    }
    const fcallsWhileLimited = (await commandCalls(q, 'fcall')) - fcalls;
    expect(fcallsWhileLimited).to.be.below(60); // a spinning worker makes thousands
    expect((await commandCalls(q, 'xreadgroup')) - reads).to.equal(0); // no blocking read holds claims past the limit
    expect((await q.getJobCounts()).active).to.equal(1);
    release();
    await waitFor(async () => (await q.getJobCounts()).completed === 7, 'the queued jobs to run once the slot is free');
    expect(holder.finished.completed + waiters.reduce((n, w) => n + w.finished.completed, 0)).to.equal(7);
  });

  it('a delivery that races a new limit is handed back at once, not held', async () => {
    const name = uniqueQueue('race');
    const q = h.queue(name);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const a = h.worker(name, async () => {
      await gate;
      return 'a';
    }, { lockDuration: 500, stalledInterval: 500 });
    const first = await q.add('first', {});
    await waitFor(async () => (await jobHash(q, first.id)).state === 'active', 'A busy');
    const b = h.worker(name, async () => 'b', { lockDuration: 500, stalledInterval: 500, blockTimeout: 10_000 });
    await b.waitUntilReady(); // blocked in XREADGROUP: it does not know about a limit yet
    await q.setGlobalConcurrency(1);
    const second = await q.add('second', {});
    // B's read delivers the entry; glidemq_activate finds no slot and gives it back in the same call,
    // ahead of the stream (the LIFO list), its place in line kept
    await waitFor(async () => (await q.client.lrange(q.keys.lifo, 0, -1)).includes(second.id), 'delivery');
    expect((await jobHash(q, second.id)).sid).to.equal(undefined);
    await waitFor(async () => {
      const pend = (await q.client.xpending(q.keys.stream, 'workers')) as [number];
      return pend[0] === 1;
    }, 'only the running job to hold a pending entry');
    expect((await jobHash(q, second.id)).state).to.equal('waiting');
    release();
    await waitFor(async () => (await jobHash(q, second.id)).state === 'completed', 'the second job to run once the slot is free');
    expect((await q.getJob(second.id))!.stalledCount).to.equal(0);
    expect(a.finished.completed + b.finished.completed).to.equal(2);
  });
});
