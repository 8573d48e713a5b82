/**
 * The engine on a real 3-primary / 3-replica cluster: queues spread over every primary, each
 * function call on one slot, the library on every primary, and auto-detection of a cluster URL.
 */
import { expect } from 'chai';
import { Cluster } from 'ioredis';
import { isCluster, keySlot } from '../../src/engine/connecting/connection.js';
import { QueueKeys } from '../../src/engine/shared/keys.js';
import { LIBRARY_VERSION, serverLibrary } from '../../src/engine/connecting/library.js';
import { Broadcast } from '../../src/engine/broadcast/broadcast.js';
import { BroadcastWorker } from '../../src/engine/broadcast/broadcast-worker.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { useCluster } from '../helpers/cluster.js';
import { waitFor } from '../helpers/valkey.js';

const QUEUES = Array.from({ length: 24 }, (_, i) => `spread-${i}`);

describe('cluster: queues spread over every primary', function () {
  this.timeout(60000);
  const cluster = useCluster();
  const opened: { close(): Promise<void> }[] = [];
  const track = <T extends { close(): Promise<void> }>(x: T): T => {
    opened.push(x);
    return x;
  };

  afterEach(async () => {
    await Promise.all(opened.splice(0).map((x) => x.close()));
  });

  it('hashes every key of a queue to one slot, and the queues to all three primaries', async () => {
    const c = cluster();
    const primaries = await c.primaries();
    expect(primaries).to.have.length(3);
    const owners = new Map<number, string[]>();
    for (const q of QUEUES) {
      const k = new QueueKeys(q);
      const slots = new Set<number>();
      for (const key of [k.meta, k.stream, k.wake, k.scheduled, k.prioritized, k.lifo, k.job('1'), k.logs('1'), k.group('g')]) {
        slots.add(Number(await c.call(c.seedPort, 'CLUSTER', 'KEYSLOT', key)));
      }
      expect([...slots], `keys of ${q}`).to.have.length(1);
      const slot = [...slots][0];
      expect(keySlot(k.meta), `client-side slot of ${q}`).to.equal(slot);
      const port = await c.primaryForSlot(slot);
      owners.set(port, [...(owners.get(port) ?? []), `${q}@${slot}`]);
    }
    for (const [port, qs] of owners) console.log(`      primary ${port}: ${qs.join(' ')}`);
    expect([...owners.keys()].sort()).to.deep.equal(primaries.map((p) => p.port).sort());
  });

  it('adds, processes and counts jobs on every queue through one cluster client', async () => {
    const c = cluster();
    const queues = QUEUES.map((q) => track(new Queue(q, { connection: { url: c.url, cluster: true } })));
    await Promise.all(queues.map((q) => q.addBulk([1, 2, 3].map((n) => ({ name: 'n', data: { n } })))));
    await Promise.all(queues.map((q) => q.add('p', { p: 1 }, { priority: 2 })));
    await Promise.all(queues.map((q) => q.add('l', { l: 1 }, { lifo: true })));
    await Promise.all(queues.map((q) => q.add('d', { d: 1 }, { delay: 50 })));
    for (const q of queues) {
      const counts = await q.getJobCounts();
      expect(counts.waiting + counts.delayed + counts.prioritized, q.name).to.equal(6);
    }
    const workers = QUEUES.map((name) =>
      track(new Worker(name, async (job) => ({ ok: job.id }), { connection: { url: c.url, cluster: true }, concurrency: 2, promotionInterval: 50, blockTimeout: 1000 })),
    );
    await waitFor(async () => {
      const counts = await Promise.all(queues.map((q) => q.getJobCounts()));
      return counts.every((x) => x.completed === 6);
    }, 'every job on every queue to complete');
    expect(workers.reduce((n, w) => n + w.finished.completed, 0)).to.equal(QUEUES.length * 6);
    const done = await queues[0].getJob('1');
    expect(done?.state).to.equal('completed');
    expect(done?.returnvalue).to.deep.equal({ ok: '1' });
  });

  it('loads the library on every primary', async () => {
    const c = cluster();
    const q = track(new Queue('lib-check', { connection: { url: c.url, cluster: true } }));
    await q.waitUntilReady();
    for (const p of await c.primaries()) {
      const node = c.direct(p.port);
      try {
        expect((await serverLibrary(node))?.version, `primary ${p.port}`).to.equal(LIBRARY_VERSION);
      } finally {
        node.disconnect();
      }
    }
  });

  it('re-loads the library on the very node that lost it, then retries the call once', async () => {
    const c = cluster();
    const q = track(new Queue('flushed', { connection: { url: c.url, cluster: true } }));
    await q.add('a', {});
    const port = await c.primaryForSlot(keySlot(q.keys.meta));
    expect(await c.call(port, 'FUNCTION', 'FLUSH', 'SYNC')).to.equal('OK');
    const job = await q.add('b', {});
    expect(job.id).to.equal('2');
    const node = c.direct(port);
    try {
      expect((await serverLibrary(node))?.version).to.equal(LIBRARY_VERSION);
    } finally {
      node.disconnect();
    }
  });

  it('notices that a plain URL names a cluster node and switches to a cluster client', async () => {
    const c = cluster();
    const queues = QUEUES.slice(0, 6).map((name) => track(new Queue(name, { connection: c.url, prefix: 'auto' })));
    await Promise.all(queues.map((q) => q.add('x', { auto: true })));
    expect(queues.every((q) => isCluster(q.client))).to.equal(true);
    const worker = track(new Worker(QUEUES[0], async () => 'done', { connection: c.url, prefix: 'auto', blockTimeout: 500 }));
    await waitFor(async () => (await queues[0].getJobCounts()).completed === 1, 'the job on the auto-detected cluster');
    expect(worker.finished.completed).to.equal(1);
  });

  it('accepts a caller-made ioredis Cluster instance', async () => {
    const c = cluster();
    const client = new Cluster(c.startupNodes.slice(0, 1));
    client.on('error', () => undefined);
    try {
      const q = new Queue('given-instance', { connection: client });
      await q.add('x', {});
      expect((await q.getJobCounts()).waiting).to.equal(1);
      await q.close();
    } finally {
      await client.quit();
    }
  });

  it('broadcasts on three primaries: every subscription sees every message', async () => {
    const c = cluster();
    const names: string[] = [];
    const owners = new Set<number>();
    for (let i = 0; owners.size < 3; i++) {
      const name = `bc-${i}`;
      const b = new Broadcast(name, { connection: c.url });
      const port = await c.primaryForSlot(keySlot(b.keys.meta));
      await b.close();
      if (!owners.has(port)) {
        owners.add(port);
        names.push(name);
      }
    }
    const seen = new Map<string, number[]>();
    for (const name of names) {
      for (const sub of ['a', 'b']) {
        seen.set(`${name}/${sub}`, []);
        const w = track(new BroadcastWorker(name, sub, async (m: { data: { i: number } }) => void seen.get(`${name}/${sub}`)!.push(m.data.i), { connection: c.url, startFrom: 'earliest', blockTimeout: 500, autorun: false }));
        w.on('error', () => undefined);
        await w.run();
      }
      const b = track(new Broadcast(name, { connection: c.url }));
      for (let i = 0; i < 5; i++) await b.publish('tick', { i });
    }
    await waitFor(() => [...seen.values()].every((v) => v.length === 5), 'every subscription on every primary to see all five');
    for (const [key, v] of seen) expect(v.sort(), key).to.deep.equal([0, 1, 2, 3, 4]);
  });

  it('group jobs, a scheduler, dedup and metrics work on a queue of each primary', async () => {
    const c = cluster();
    const names: string[] = [];
    const owners = new Set<number>();
    for (let i = 0; owners.size < 3; i++) {
      const name = `feat-${i}`;
      const port = await c.primaryForSlot(keySlot(new QueueKeys(name).meta));
      if (!owners.has(port)) {
        owners.add(port);
        names.push(name);
      }
    }
    for (const name of names) {
      const q = track(new Queue(name, { connection: c.url }));
      await q.add('g', { n: 1 }, { group: { id: 'tenant-a', maxConcurrency: 1 } });
      await q.add('g', { n: 2 }, { group: { id: 'tenant-a', maxConcurrency: 1 } });
      await q.add('d', {}, { dedup: { id: 'once' } });
      const again = await q.add('d', {}, { dedup: { id: 'once' } });
      expect((again as { created?: boolean }).created, `dedup on ${name}`).to.equal(false);
      await q.upsertScheduler('tick', { every: 1000 }, { name: 'tick', data: {} });
      track(new Worker(name, async () => 'ok', { connection: c.url, concurrency: 4, blockTimeout: 300, promotionInterval: 50 }));
    }
    await waitFor(async () => {
      for (const name of names) {
        const q = new Queue(name, { connection: c.url });
        try {
          const k = await q.getJobCounts();
          if (k.completed < 4) return false; // two group jobs, one deduplicated job, and the first tick
        } finally {
          await q.close();
        }
      }
      return true;
    }, 'group, dedup and scheduled jobs to complete on every primary');
    const q = track(new Queue(names[0], { connection: c.url }));
    const metrics = await q.getMetrics();
    expect(JSON.stringify(metrics)).to.match(/\d/);
  });
});
