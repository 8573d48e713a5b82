/** Consumer cleanup: dead processes' consumers go, live workers stay (or come back by themselves). */
import { expect } from 'chai';
import type { Queue } from '../../src/engine/queue/queue.js';
import { pairsToRecord } from '../../src/engine/shared/replies.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { claimAs, upkeep } from '../helpers/recovery.js';

async function consumers(q: Queue): Promise<{ name: string; pending: number; idle: number }[]> {
  try {
    const list = (await q.client.xinfo('CONSUMERS', q.keys.stream, 'workers')) as unknown[][];
    return list.map((c) => {
      const h = pairsToRecord(c);
      return { name: String(h.name), pending: Number(h.pending), idle: Number(h.idle) };
    });
  } catch {
    return [];
  }
}

/** Registers consumers that read once and never again, as crashed workers leave them. */
async function deadConsumers(q: Queue, names: string[]): Promise<void> {
  await q.waitUntilReady();
  await q.add('seed', {}); // creates the queue and its groups
  await q.client.xtrim(q.keys.stream, 'MAXLEN', 0);
  for (const n of names) await q.client.xreadgroup('GROUP', 'workers', n, 'COUNT', 1, 'STREAMS', q.keys.stream, '>');
}

describe('consumer cleanup (real valkey-server)', () => {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  it('the idle threshold is max(10 x stalledInterval, 3 x blockTimeout, 60s)', () => {
    const q = h.queue(uniqueQueue());
    expect(upkeep(q, { stalledInterval: 30_000, blockTimeout: 5_000 }).consumerIdleThreshold).to.equal(300_000);
    expect(upkeep(q, { stalledInterval: 1_000, blockTimeout: 5_000 }).consumerIdleThreshold).to.equal(60_000);
    expect(upkeep(q, { stalledInterval: 1_000, blockTimeout: 30_000 }).consumerIdleThreshold).to.equal(90_000);
  });

  it('stalled reclaim deletes idle consumers that hold nothing; keeps holders, live workers and itself', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    await deadConsumers(q, ['dead-a', 'dead-b', 'dead-c']);
    const held = await q.add('held', {});
    await claimAs(q, 'dead-holder');
    // a claim that carries no lock of its own (an older glidemq's): the reclaims' minIdle judges it
    await q.client.hdel(q.keys.job(held.id), 'terms');
    const live = h.worker(name, async () => 'ok', { blockTimeout: 100 });
    await live.waitUntilReady();
    await waitFor(async () => (await consumers(q)).some((c) => c.name === live.consumer), 'the live worker to read');
    await waitFor(async () => (await consumers(q)).filter((c) => c.name.startsWith('dead-')).every((c) => c.idle > 400), 'dead consumers idle');
    // the reclaim scheduler's own call: min idle far above the holder's idle, consumer threshold 400 ms
    const r = await upkeep(q).reclaim({ minIdle: 60_000, consumerIdleMs: 400 });
    expect(r.consumersRemoved).to.equal(3);
    const left = (await consumers(q)).map((c) => c.name).sort();
    expect(left).to.deep.equal(['dead-holder', live.consumer].sort());
    // the holder goes once its claim has been reclaimed and it too has been idle long enough
    const r2 = await upkeep(q).reclaim({ minIdle: 0, consumerIdleMs: 400 });
    expect(r2.redispatched.length + r2.failed.length).to.equal(1);
    expect(r2.consumersRemoved).to.equal(1);
    expect((await consumers(q)).map((c) => c.name)).to.deep.equal([live.consumer]);
  });

  it('deletes at most 20 consumers per call', async () => {
    const q = h.queue(uniqueQueue());
    await deadConsumers(q, Array.from({ length: 25 }, (_, i) => `dead-${i}`));
    await waitFor(async () => (await consumers(q)).every((c) => c.idle > 100), 'consumers idle');
    const m = upkeep(q);
    expect((await m.reclaim({ consumerIdleMs: 100 })).consumersRemoved).to.equal(20);
    expect((await consumers(q)).length).to.equal(5);
    expect((await m.reclaim({ consumerIdleMs: 100 })).consumersRemoved).to.equal(5);
    expect(await consumers(q)).to.deep.equal([]);
  });

  it('a dry run counts them and deletes none', async () => {
    const q = h.queue(uniqueQueue());
    await deadConsumers(q, ['dead-1', 'dead-2']);
    await waitFor(async () => (await consumers(q)).every((c) => c.idle > 100), 'consumers idle');
    expect((await upkeep(q).reclaim({ consumerIdleMs: 100, dryRun: true })).consumersRemoved).to.equal(2);
    expect((await consumers(q)).length).to.equal(2);
  });

  it('close() deletes the worker\'s own consumer', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const w = h.worker(name, async () => 'ok');
    await w.waitUntilReady();
    await waitFor(async () => (await consumers(q)).some((c) => c.name === w.consumer), 'consumer registered');
    await w.close();
    expect((await consumers(q)).map((c) => c.name)).to.not.include(w.consumer);
  });

  it('a live idle worker whose consumer was deleted goes on working', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const done: string[] = [];
    const w = h.worker(name, async (job) => void done.push(job.name), { blockTimeout: 300 });
    await w.waitUntilReady();
    await waitFor(async () => (await consumers(q)).some((c) => c.name === w.consumer), 'consumer registered');
    // what a stalled reclaim elsewhere does to an idle consumer (here without waiting a minute)
    await q.client.xgroup('DELCONSUMER', q.keys.stream, 'workers', w.consumer);
    await q.client.xgroup('DELCONSUMER', q.keys.wake, 'workers', w.consumer);
    expect((await consumers(q)).map((c) => c.name)).to.not.include(w.consumer);
    await q.add('stream-job', {});
    await q.add('priority-job', {}, { priority: 1 });
    await waitFor(() => done.length === 2, 'both jobs processed by the worker');
    expect(done.sort()).to.deep.equal(['priority-job', 'stream-job']);
    expect((await consumers(q)).map((c) => c.name)).to.include(w.consumer);
  });
});
