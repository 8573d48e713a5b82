/**
 * DURABILITY.md "Restart Behavior" on real servers: SIGKILL the server (no shutdown save, no
 * final flush) and start it again on the same data directory and port.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { runAudit } from '../../src/audit/audit.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { CONSUMER_GROUP, type QueueKeys } from '../../src/engine/shared/keys.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { valkeyFixture } from '../helpers/fixtures.js';
import { TestServer, waitFor } from '../helpers/valkey.js';
import { processorPath, startWorkerProcess } from '../helpers/worker-spawn.js';

const toObject = (list: unknown[]): Record<string, unknown> => {
  const out: Record<string, unknown> = {};
  for (let i = 0; i + 1 < list.length; i += 2) out[String(list[i])] = list[i + 1];
  return out;
};

/** Everything the queue keeps in Valkey, read raw, minus what moves by itself (idle times). */
async function queueState(c: Redis, keys: QueueKeys, ids: string[]) {
  const jobs: Record<string, Record<string, string>> = {};
  for (const id of ids) jobs[id] = await c.hgetall(keys.job(id));
  const groups = async (key: string) =>
    ((await c.xinfo('GROUPS', key)) as unknown[][]).map((g) => {
      const h = toObject(g);
      return { name: h.name, consumers: h.consumers, pending: h.pending, lastDelivered: h['last-delivered-id'] };
    });
  const pending = ((await c.xpending(keys.stream, CONSUMER_GROUP, '-', '+', 100)) as [string, string, number, number][]).map(
    ([sid, consumer, , deliveries]) => ({ sid, consumer, deliveries }),
  );
  return {
    jobs,
    stream: await c.xrange(keys.stream, '-', '+'),
    groups: await groups(keys.stream),
    wakeGroups: await groups(keys.wake),
    pending,
    scheduled: await c.zrange(keys.scheduled, '0', '-1', 'WITHSCORES'),
    prioritized: await c.zrange(keys.prioritized, '0', '-1', 'WITHSCORES'),
    lifo: await c.lrange(keys.lifo, '0', '-1'),
    listActiveIds: (await c.smembers(keys.listActiveIds)).sort(),
    listActive: await c.get(keys.listActive),
    completed: await c.zrange(keys.completed, '0', '-1', 'WITHSCORES'),
    failed: await c.zrange(keys.failed, '0', '-1', 'WITHSCORES'),
    meta: await c.hgetall(keys.meta),
  };
}

async function libraryListed(c: Redis): Promise<boolean> {
  const libs = (await c.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'glidemq')) as unknown[][];
  return libs.some((l) => toObject(l).library_name === 'glidemq');
}

/** Times FUNCTION LOAD ran since the server started (commandstats reset on restart). */
async function functionLoads(c: Redis): Promise<number> {
  const m = /cmdstat_function\|load:calls=(\d+)/.exec(await c.info('commandstats'));
  return m ? Number(m[1]) : 0;
}

describe('restart durability (SIGKILL and restart on the same data directory)', function () {
  this.timeout(60000);

  describe('AOF with appendfsync always', () => {
    let server: TestServer;
    let queue: Queue;
    let worker: Worker | undefined;
    let raw: Redis | undefined;
    const gates = new Map<string, () => void>();
    const finished: { id: string; status: string }[] = [];
    before(async () => {
      server = await new TestServer({ include: valkeyFixture('aof-always') }).start();
    });
    after(async () => {
      for (const open of gates.values()) open();
      await worker?.close(true);
      await queue?.close();
      raw?.disconnect();
      await server?.stop();
    });

    it('every job, the consumer group, its pending entries and the library come back; a worker then finishes everything', async () => {
      queue = new Queue('restart-aof', { connection: server.url });
      const keys = queue.keys;
      const processor = async (job: Job) => {
        if (job.name === 'boom') throw new Error('boom on purpose');
        if (job.name === 'hold') await new Promise<void>((open) => gates.set(job.id, open));
        return { done: job.id };
      };
      worker = new Worker('restart-aof', processor, { connection: server.url, concurrency: 4, lockDuration: 60000, stalledInterval: 60000, blockTimeout: 500 });
      worker.on('error', () => undefined); // the server disappears on purpose
      worker.on('completed', (job: Job) => finished.push({ id: job.id, status: 'completed' }));
      worker.on('failed', (job: Job) => finished.push({ id: job.id, status: 'failed' }));
      worker.on('lost', (job: Job, status: string) => finished.push({ id: job.id, status: `lost:${status}` }));

      // Finished before the crash: two completed, one failed.
      await queue.add('ok', {}, { jobId: 'c1' });
      await queue.add('ok', {}, { jobId: 'c2' });
      await queue.add('boom', {}, { jobId: 'f1' });
      await waitFor(() => finished.length === 3, 'the first three jobs to finish');

      // Claimed and unfinished at the crash: two stream jobs (pending entries), a priority and a LIFO job (list claims).
      await queue.add('hold', {}, { jobId: 'h1' });
      await queue.add('hold', {}, { jobId: 'h2' });
      await queue.add('hold', {}, { jobId: 'hp', priority: 3 });
      await queue.add('hold', {}, { jobId: 'hl', lifo: true });
      await waitFor(() => gates.size === 4, 'four jobs to be claimed and held');

      // Not yet claimed at the crash (every slot is busy): waiting, prioritized, LIFO and delayed.
      await queue.add('ok', {}, { jobId: 'w1' });
      await queue.add('ok', {}, { jobId: 'w2' });
      await queue.add('ok', {}, { jobId: 'p1', priority: 1 });
      await queue.add('ok', {}, { jobId: 'p2', priority: 7 });
      await queue.add('ok', {}, { jobId: 'l1', lifo: true });
      await queue.add('ok', {}, { jobId: 'l2', lifo: true });
      await queue.add('ok', {}, { jobId: 'd1', delay: 3_600_000 });

      const ids = ['c1', 'c2', 'f1', 'h1', 'h2', 'hp', 'hl', 'w1', 'w2', 'p1', 'p2', 'l1', 'l2', 'd1'];
      const states = async () => Object.fromEntries(await Promise.all(ids.map(async (id) => [id, (await queue.getJob(id))?.state])));
      const expectedStates = {
        c1: 'completed', c2: 'completed', f1: 'failed',
        h1: 'active', h2: 'active', hp: 'active', hl: 'active',
        w1: 'waiting', w2: 'waiting', p1: 'prioritized', p2: 'prioritized', l1: 'waiting', l2: 'waiting', d1: 'delayed',
      };
      const before = await states();
      expect(before).to.deep.equal(expectedStates);
      const counts = await queue.getJobCounts();

      raw = server.client();
      const snapshot = await queueState(raw, keys, ids);
      expect(snapshot.pending.map((p) => p.consumer)).to.deep.equal([worker.consumer, worker.consumer]);
      expect(snapshot.listActiveIds).to.deep.equal(['hl', 'hp']);
      expect(snapshot.lifo).to.deep.equal(['l2', 'l1']);
      expect(snapshot.scheduled[0]).to.equal('d1');
      expect(snapshot.groups[0].pending).to.equal(2);
      raw.disconnect();

      await server.kill();
      await server.start();

      raw = server.client();
      // Present straight from the data files: listed, and nobody had to FUNCTION LOAD it.
      expect(await libraryListed(raw)).to.equal(true);
      expect(await functionLoads(raw)).to.equal(0);
      expect(await queueState(raw, keys, ids)).to.deep.equal(snapshot);
      expect(await states()).to.deep.equal(before);
      expect(await queue.getJobCounts()).to.deep.include({ waiting: counts.waiting, active: 4, delayed: 1, prioritized: counts.prioritized, completed: 2, failed: 1 });
      expect(await functionLoads(raw)).to.equal(0);

      // The held claims are still valid after the restart: their processors finish them now.
      for (const open of gates.values()) open();
      // Bring the delayed job's time forward instead of waiting an hour.
      await raw.zadd(keys.scheduled, 'XX', Date.now(), 'd1');
      await waitFor(async () => {
        const c = await queue.getJobCounts();
        return c.completed === 13 && c.failed === 1 && c.waiting + c.active + c.delayed + c.prioritized === 0;
      }, 'the worker to finish every job');
      expect(finished.filter((f) => f.status.startsWith('lost'))).to.deep.equal([]);
      const after = await states();
      for (const id of ids) expect(after[id], id).to.equal(id === 'f1' ? 'failed' : 'completed');
      for (const id of ['h1', 'h2', 'hp', 'hl']) expect((await queue.getJob(id))!.attemptsMade, id).to.equal(1);
    });
  });

  describe('AOF: a worker process and the server both killed', () => {
    let server: TestServer;
    before(async () => {
      server = await new TestServer({ include: valkeyFixture('aof-always') }).start();
    });
    after(() => server?.stop());

    it('after the restart another worker reclaims the dead worker\'s stream, priority and LIFO claims and finishes them', async () => {
      const queue = new Queue('restart-takeover', { connection: server.url });
      await queue.add('x', {}, { jobId: 's1' });
      await queue.add('x', {}, { jobId: 'p1', priority: 2 });
      await queue.add('x', {}, { jobId: 'l1', lifo: true });
      const dead = await startWorkerProcess({
        url: server.url,
        queue: 'restart-takeover',
        processor: processorPath('hang.mjs'),
        options: { concurrency: 3, lockDuration: 1000, stalledInterval: 500, blockTimeout: 500 },
      });
      await waitFor(() => dead.started.length === 3, 'the doomed worker to claim all three');
      await dead.kill();
      await server.kill();
      await server.start();
      expect((await queue.getJobCounts()).active).to.equal(3);

      const done: string[] = [];
      const healthy = new Worker('restart-takeover', async (job: Job) => void done.push(job.id), {
        connection: server.url,
        lockDuration: 1000,
        stalledInterval: 500,
        blockTimeout: 500,
      });
      healthy.on('error', () => undefined);
      try {
        await waitFor(() => done.length === 3, 'the healthy worker to finish the reclaimed jobs', 20000);
        expect(done.sort()).to.deep.equal(['l1', 'p1', 's1']);
        for (const id of ['s1', 'p1', 'l1']) {
          const job = await queue.getJob(id);
          expect(job?.state, id).to.equal('completed');
          expect(job?.stalledCount, id).to.equal(1);
        }
        const c = await queue.getJobCounts();
        expect(c.active).to.equal(0);
        expect(c.listActive).to.equal(0);
      } finally {
        await healthy.close(true);
        await queue.close();
      }
    });
  });

  describe('RDB snapshots only, with writes after the last snapshot', () => {
    let server: TestServer;
    let queue: Queue | undefined;
    let raw: Redis | undefined;
    before(async () => {
      server = await new TestServer({ include: valkeyFixture('rdb-only') }).start();
    });
    after(async () => {
      await queue?.close();
      raw?.disconnect();
      await server?.stop();
    });

    it('loses exactly the writes since the snapshot, and the audit fails on exactly that', async () => {
      queue = new Queue('restart-rdb', { connection: server.url });
      await queue.add('ok', { n: 1 }, { jobId: 'kept-1' });
      await queue.add('ok', { n: 2 }, { jobId: 'kept-2' });
      raw = server.client();
      await raw.call('SAVE');
      const afterSnapshot = ['lost-1', 'lost-2', 'lost-3'];
      for (const id of afterSnapshot) await queue.add('ok', {}, { jobId: id });

      const report = await runAudit({ url: server.url, cluster: false });
      const failing = report.nodes[0].checks.filter((c) => c.status === 'fail');
      expect(failing.map((c) => c.id).sort()).to.deep.equal(['appendonly', 'persistence-mode']);
      const mode = failing.find((c) => c.id === 'persistence-mode')!;
      expect(mode.actual).to.equal('rdb-only');
      const changes = Number(/^rdb_changes_since_last_save:(\d+)/m.exec(await raw.info('persistence'))![1]);
      expect(changes).to.be.greaterThan(0);
      expect(mode.message).to.include(`${changes} changes since the last one`);
      raw.disconnect();

      await server.kill();
      await server.start();
      raw = server.client();
      expect(await libraryListed(raw)).to.equal(true);
      for (const id of ['kept-1', 'kept-2']) expect((await queue.getJob(id))?.state, id).to.equal('waiting');
      for (const id of afterSnapshot) expect(await queue.getJob(id), id).to.equal(undefined);
      expect((await queue.getJobCounts()).waiting).to.equal(2);
    });
  });
});
