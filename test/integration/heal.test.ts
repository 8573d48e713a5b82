/**
 * list-active bookkeeping (the set and counter that stand in for a PEL for priority/LIFO claims):
 * drift made on purpose and repaired by glidemq_healListActive, the SCAN fallback of list-job
 * reclaim, and a re-seed of a keyspace too large for one call, carried over ticks by
 * meta listActiveScanCursor.
 */
import { expect } from 'chai';
import type { Queue } from '../../src/engine/queue/queue.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { claimAs, jobHash, upkeep } from '../helpers/recovery.js';

async function listClaims(q: Queue, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) ids.push((await q.add('l', { i }, i % 2 ? { lifo: true } : { priority: 1 + i })).id);
  const claimed = await claimAs(q, 'dead', n);
  expect(claimed.map((c) => c.id).sort()).to.deep.equal([...ids].sort());
  return ids;
}

async function bookkeeping(q: Queue) {
  const [members, counter, seeded, cursor] = await Promise.all([
    q.client.smembers(q.keys.listActiveIds),
    q.client.get(q.keys.listActive),
    q.client.hget(q.keys.meta, 'listActiveSeeded'),
    q.client.hget(q.keys.meta, 'listActiveScanCursor'),
  ]);
  return { members: members.sort(), counter: Number(counter ?? 0), seeded, cursor };
}

describe('list-active healing (real valkey-server)', () => {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  it('a fresh queue starts seeded and consistent: heal finds nothing', async () => {
    const q = h.queue(uniqueQueue());
    const ids = await listClaims(q, 3);
    const r = await upkeep(q).heal({ check: true });
    expect(r.drift).to.equal(false);
    expect(await bookkeeping(q)).to.deep.equal({ members: [...ids].sort(), counter: 3, seeded: '1', cursor: null });
  });

  it('counter too high: --check reports drift and changes nothing; heal re-seeds and corrects it', async () => {
    const q = h.queue(uniqueQueue());
    const ids = await listClaims(q, 2);
    await q.client.set(q.keys.listActive, 7);
    const m = upkeep(q);
    const check = await m.heal({ check: true });
    expect(check.drift).to.equal(true);
    expect(check.reseeded).to.equal(true);
    expect((await bookkeeping(q)).counter).to.equal(7);
    const r = await m.heal();
    expect(r).to.include({ counterBefore: 7, counterAfter: 2, drift: true, reseeded: true, seeded: true });
    expect(await bookkeeping(q)).to.deep.equal({ members: [...ids].sort(), counter: 2, seeded: '1', cursor: null });
    expect((await m.heal({ check: true })).drift).to.equal(false);
  });

  it('stale members (finished, removed or never-claimed jobs) are dropped from a trusted set without a scan', async () => {
    const q = h.queue(uniqueQueue());
    const ids = await listClaims(q, 2);
    const done = await q.add('done', {});
    const [c] = await claimAs(q, 'x');
    expect(c.id).to.equal(done.id);
    await q.client.hset(q.keys.job(done.id), 'state', 'completed');
    await q.client.sadd(q.keys.listActiveIds, done.id, 'no-such-job', 'another-gone');
    await q.client.set(q.keys.listActive, 5);
    const r = await upkeep(q).heal();
    expect(r).to.include({ counterBefore: 5, counterAfter: 2, membersDropped: 3, reseeded: false, drift: true });
    expect(await bookkeeping(q)).to.deep.equal({ members: [...ids].sort(), counter: 2, seeded: '1', cursor: null });
  });

  it('a counter lower than the set is raised to what the set holds', async () => {
    const q = h.queue(uniqueQueue());
    await listClaims(q, 3);
    await q.client.set(q.keys.listActive, 1);
    const r = await upkeep(q).heal();
    expect(r).to.include({ counterBefore: 1, counterAfter: 3, membersDropped: 0, reseeded: false });
  });

  it('a wiped set with its seed marker gone: reclaim falls back to a SCAN, heal re-seeds the set', async () => {
    const q = h.queue(uniqueQueue());
    const ids = await listClaims(q, 3);
    await q.client.del(q.keys.listActiveIds);
    await q.client.hdel(q.keys.meta, 'listActiveSeeded');
    const m = upkeep(q, { lockDuration: 0 });
    const dry = await m.reclaim({ dryRun: true }); // the SCAN fallback still finds every claim
    expect([...dry.redispatched].sort()).to.deep.equal([...ids].sort());
    const r = await m.heal();
    expect(r).to.include({ counterBefore: 3, counterAfter: 3, membersAdded: 3, reseeded: true, seeded: true });
    expect(await bookkeeping(q)).to.deep.equal({ members: [...ids].sort(), counter: 3, seeded: '1', cursor: null });
  });

  it('claims made by an older library (counted, not in the set) are found by the re-seed', async () => {
    const q = h.queue(uniqueQueue());
    const ids = await listClaims(q, 3);
    await q.client.srem(q.keys.listActiveIds, ids[0], ids[1]);
    const r = await upkeep(q).heal();
    expect(r).to.include({ counterBefore: 3, counterAfter: 3, membersAdded: 2, reseeded: true });
    expect((await bookkeeping(q)).members).to.deep.equal([...ids].sort());
  });

  it('the counter never goes below zero', async () => {
    const q = h.queue(uniqueQueue());
    const [id] = await listClaims(q, 1);
    await q.client.set(q.keys.listActive, 0); // drift: the one claim is not counted
    const m = upkeep(q, { lockDuration: 0 });
    const r = await m.reclaimStalled('reclaimer'); // releasing the claim decrements a counter at 0
    expect(r.redispatched).to.deep.equal([id]);
    expect((await bookkeeping(q)).counter).to.equal(0);
    await q.client.set(q.keys.listActive, -4);
    expect((await m.heal()).counterAfter).to.equal(0);
    expect((await bookkeeping(q)).counter).to.equal(0);
  });

  it('healing a queue that does not exist writes nothing', async () => {
    const q = h.queue(uniqueQueue());
    await q.waitUntilReady();
    const r = await upkeep(q).heal();
    expect(r.drift).to.equal(false);
    expect(await q.client.exists(q.keys.meta)).to.equal(0);
  });

  it('a worker heals every 10th promotion tick', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    await listClaims(q, 2);
    await q.client.sadd(q.keys.listActiveIds, 'stale-member');
    await q.client.set(q.keys.listActive, 3);
    h.worker(name, async () => 'ok', { promotionInterval: 20, stalledInterval: 60_000 });
    await waitFor(async () => (await bookkeeping(q)).counter === 2, 'the worker to heal list-active');
    expect((await bookkeeping(q)).members).to.not.include('stale-member');
  });
});

describe('list-active re-seed of a large keyspace (real valkey-server)', function () {
  this.timeout(60_000);
  const server = useServer({ config: ['enable-debug-command yes'] });
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  async function wipedQueueInLargeKeyspace(): Promise<{ q: Queue; ids: string[] }> {
    const q = h.queue(uniqueQueue());
    const ids = await listClaims(q, 3);
    await q.client.del(q.keys.listActiveIds);
    await q.client.hdel(q.keys.meta, 'listActiveSeeded');
    if ((await q.client.dbsize()) < 200_000) await q.client.call('DEBUG', 'POPULATE', '200000', 'pad');
    return { q, ids };
  }

  it('takes several bounded calls, resuming from listActiveScanCursor; trusted only once the scan wrapped', async () => {
    const { q, ids } = await wipedQueueInLargeKeyspace();
    const m = upkeep(q);
    const cursors: string[] = [];
    let step = await m.healListActive();
    while (step.mode === 'scanning') {
      const b = await bookkeeping(q);
      expect(b.cursor).to.equal(step.cursor); // the cursor is kept in meta for the next call
      expect(b.seeded).to.equal(null); // not trusted mid-scan
      expect(cursors).to.not.include(step.cursor);
      cursors.push(step.cursor);
      step = await m.healListActive();
    }
    expect(step.mode).to.equal('seeded');
    expect(cursors.length).to.be.at.least(2); // 500 pages per call cannot cover 200k keys at once
    expect(await bookkeeping(q)).to.deep.equal({ members: [...ids].sort(), counter: 3, seeded: '1', cursor: null });
  });

  it('a worker completes the re-seed over several promotion ticks', async () => {
    const { q, ids } = await wipedQueueInLargeKeyspace();
    h.worker(q.name, async () => 'ok', { promotionInterval: 10, stalledInterval: 60_000 });
    const seen = new Set<string>();
    await waitFor(async () => {
      const [cursor, seeded] = await q.client.hmget(q.keys.meta, 'listActiveScanCursor', 'listActiveSeeded');
      if (cursor) {
        expect(seeded).to.equal(null);
        seen.add(cursor);
      }
      return seeded === '1';
    }, 'the worker to finish the re-seed', 45_000, 5);
    expect(seen.size).to.be.at.least(2);
    expect(await bookkeeping(q)).to.deep.equal({ members: [...ids].sort(), counter: 3, seeded: '1', cursor: null });
    expect((await jobHash(q, ids[0])).state).to.equal('active');
  });
});
