import { expect } from 'chai';
import type { Redis } from 'ioredis';
import type { Queue } from '../../src/engine/queue/queue.js';
import { TestServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';

/** Everything group scheduling keeps in Valkey for the given groups, read raw. */
async function groupSnapshot(c: Redis, q: Queue, groups: string[]) {
  const k = q.keys;
  const out: Record<string, unknown> = {
    ready: await c.zrange(k.readyGroups, '0', '-1', 'WITHSCORES'),
    timed: await c.zrange(k.timedGroups, '0', '-1', 'WITHSCORES'),
    groupWaiting: await c.hget(k.meta, 'groupWaiting'),
    listActiveIds: (await c.smembers(k.listActiveIds)).sort(),
    listActive: await c.get(k.listActive),
  };
  for (const g of groups) {
    out[`hash:${g}`] = await c.hgetall(k.group(g));
    out[`jobs:${g}`] = await c.zrange(k.groupJobs(g), '0', '-1', 'WITHSCORES');
  }
  return out;
}

describe('Group state durability (server SIGKILL, AOF always)', function () {
  this.timeout(60_000);
  let server: TestServer;
  let h: Harness;
  before(async () => {
    server = await new TestServer({ persistence: 'aof-always' }).start();
    h = new Harness(() => server);
  });
  after(async () => {
    await h.cleanup();
    await server.stop();
  });

  it('group state before the kill equals the state after restart, and the held jobs then finish', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const groups = ['a', 'r', 't', 'o'];
    const jobs = [];
    for (let i = 0; i < 4; i++) jobs.push({ name: 'j', data: { g: 'a', i }, opts: { group: { id: 'a', maxConcurrency: 2 } } });
    for (let i = 0; i < 3; i++) jobs.push({ name: 'j', data: { g: 'r', i }, opts: { group: { id: 'r', rateMax: 1, rateDuration: 600_000 } } });
    for (let i = 0; i < 3; i++) jobs.push({ name: 'j', data: { g: 't', i }, opts: { group: { id: 't', tokenBucket: { capacity: 1, refillRate: 0.001 } } } });
    for (let i = 0; i < 3; i++) jobs.push({ name: 'j', data: { g: 'o', i }, opts: { group: { id: 'o', ordered: true } } });
    await q.addBulk(jobs);

    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const finished: string[] = [];
    let started = 0;
    const w = h.worker(
      name,
      async (job) => {
        started++;
        await gate;
        finished.push(`${job.data.g}${job.data.i}`);
      },
      { concurrency: 10, lockDuration: 120_000, stalledInterval: 120_000 },
    );
    // a: 2 holders; r: one start, then the window; t: one token, then empty; o: one at a time
    await waitFor(() => started === 5, 'five jobs holding group slots');
    const c = server.client();
    const before = await groupSnapshot(c, q, groups);
    expect(before['hash:a']).to.include({ active: '2', maxConcurrency: '2', seq: '4' });
    expect(before['hash:r']).to.include({ windowCount: '1', rateMax: '1' });
    expect(Number((before['hash:t'] as Record<string, string>).tokens)).to.be.lessThan(1);
    expect((before.timed as string[]).filter((_, i) => i % 2 === 0).sort()).to.deep.equal(['r', 't']);
    c.disconnect();

    await server.kill();
    await server.start();
    const c2 = server.client();
    const after = await groupSnapshot(c2, q, groups);
    expect(after).to.deep.equal(before);

    // the worker reconnects; its claims (fence + owner) survived, so its results are accepted
    release();
    await waitFor(() => finished.length === 9, 'the held jobs and the rest of a and o to finish after the restart');
    expect(finished.filter((f) => f.startsWith('o'))).to.deep.equal(['o0', 'o1', 'o2']);
    expect(await q.getGroup('a')).to.include({ active: 0, waiting: 0, seq: 4 });
    expect(await q.getGroup('o')).to.include({ active: 0, waiting: 0 });
    // r and t stay held by their (persisted) window and bucket
    expect(await q.getGroup('r')).to.include({ waiting: 2, active: 0, windowCount: 1 });
    expect(await q.getGroup('t')).to.include({ waiting: 2, active: 0 });
    const counts = await q.getJobCounts();
    expect(counts).to.include({ completed: 9, active: 0, waiting: 4, listActive: 0 });
    await w.close();
    c2.disconnect();
  });
});
