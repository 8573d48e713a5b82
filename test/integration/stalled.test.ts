/**
 * Stalled recovery inside one process: claims held by a consumer that never comes back (a worker
 * that died after glidemq_fetch), the fence that makes a stale worker's late finish a no-op, pause,
 * removed jobs, dry runs. Crashes of real worker processes are in crash.test.ts.
 */
import { expect } from 'chai';
import { decodeClaim, type ClaimReply, type Job } from '../../src/engine/jobs/job.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { claimAheadAs, claimAs, finishAs, jobHash, reportStarted, STALLED_REASON, termsArgs, upkeep } from '../helpers/recovery.js';

const LOCK = 300;
/** The terms of the dead workers' claims below (lua/activate.lua): their lock is LOCK. */
const DEAD = { lockDuration: LOCK };

describe('stalled recovery (real valkey-server)', () => {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  for (const kind of ['stream', 'priority', 'lifo', 'group'] as const) {
    // a group of one: the redispatched job can be taken again only if the stall freed its slot
    const opts =
      kind === 'priority' ? { priority: 5 } : kind === 'lifo' ? { lifo: true } : kind === 'group' ? { group: { id: 'tenant-1', maxConcurrency: 1 } } : {};

    it(`redispatches a stalled ${kind} job once, then fails it with the spec's reason`, async () => {
      const q = h.queue(uniqueQueue());
      const job = await q.add('work', { kind }, opts);
      const m = upkeep(q, { lockDuration: LOCK });
      const [first] = await claimAs(q, 'dead-1', 1, DEAD);
      expect(first.id).to.equal(job.id);
      // a claim younger than the lock duration is not touched
      expect((await m.reclaimStalled('reclaimer')).redispatched).to.deep.equal([]);
      expect((await jobHash(q, job.id)).state).to.equal('active');

      const r1 = await waitFor(async () => {
        const r = await m.reclaimStalled('reclaimer');
        return r.redispatched.length ? r : undefined;
      }, 'the stalled claim to be redispatched');
      expect(r1!.redispatched).to.deep.equal([job.id]);
      let hash = await jobHash(q, job.id);
      expect(hash.state).to.equal(kind === 'priority' ? 'prioritized' : 'waiting');
      expect(hash.stalledCount).to.equal('1');
      expect(hash.owner).to.equal(undefined);
      const counts = await q.getJobCounts();
      expect(counts.active).to.equal(0);
      expect(counts.listActive).to.equal(0);

      const [second] = await claimAs(q, 'dead-2', 1, DEAD);
      expect(second.id).to.equal(job.id);
      expect(second.fence).to.not.equal(first.fence);
      const r2 = await waitFor(async () => {
        const r = await m.reclaimStalled('reclaimer');
        return r.failed.length ? r : undefined;
      }, 'the twice stalled job to fail');
      expect(r2!.failed).to.deep.equal([job.id]);
      hash = await jobHash(q, job.id);
      expect(hash.state).to.equal('failed');
      expect(hash.failedReason).to.equal(STALLED_REASON);
      expect(hash.stalledCount).to.equal('2');
      expect(await q.client.zscore(q.keys.failed, job.id)).to.not.equal(null);
      const after = await q.getJobCounts();
      expect(after.active + after.waiting + after.prioritized).to.equal(0);
    });
  }

  for (const kind of ['stream', 'priority'] as const) {
    const opts = kind === 'priority' ? { priority: 5 } : {};

    it(`gives a prefetched ${kind} claim no processor took back without a stall, once per attempt`, async () => {
      const q = h.queue(uniqueQueue());
      const job = await q.add('work', { kind }, opts);
      const m = upkeep(q, { lockDuration: LOCK });
      const [first] = await claimAheadAs(q, 'dead-1', 1, DEAD);
      expect(first.id).to.equal(job.id);
      expect((await jobHash(q, job.id)).ns).to.equal(first.fence);
      const r1 = await waitFor(async () => {
        const r = await m.reclaimStalled('reclaimer');
        return r.returned.length ? r : undefined;
      }, 'the unstarted claim to be given back');
      expect(r1).to.deep.include({ returned: [job.id], redispatched: [], failed: [] });
      let hash = await jobHash(q, job.id);
      expect(hash.state).to.equal(kind === 'priority' ? 'prioritized' : 'waiting');
      expect(hash.stalledCount).to.equal(undefined);
      expect(hash.owner).to.equal(undefined);
      expect((await q.getJobCounts()).active).to.equal(0);

      // the same attempt prefetched again is not marked: a job that kills its worker before the
      // start is reported still counts its stalls
      const [second] = await claimAheadAs(q, 'dead-2', 1, DEAD);
      expect(second.id).to.equal(job.id);
      expect((await jobHash(q, job.id)).ns).to.not.equal(second.fence);
      const r2 = await waitFor(async () => {
        const r = await m.reclaimStalled('reclaimer');
        return r.redispatched.length ? r : undefined;
      }, 'the second claim to count a stall');
      expect(r2).to.deep.include({ returned: [], redispatched: [job.id] });
      hash = await jobHash(q, job.id);
      expect(hash.stalledCount).to.equal('1');
    });
  }

  it('a prefetched claim whose start was reported counts a stall like any other', async () => {
    const q = h.queue(uniqueQueue());
    const job = await q.add('work', {});
    const m = upkeep(q, { lockDuration: LOCK });
    const [claim] = await claimAheadAs(q, 'dead-1', 1, DEAD);
    // a report of an older fence changes nothing; the claim's own clears the mark
    await reportStarted(q, 'dead-1', [{ id: job.id, fence: String(Number(claim.fence) - 1) }]);
    expect((await jobHash(q, job.id)).ns).to.equal(claim.fence);
    await reportStarted(q, 'dead-1', [claim]);
    expect((await jobHash(q, job.id)).ns).to.equal(undefined);
    const r = await waitFor(async () => {
      const x = await m.reclaimStalled('reclaimer');
      return x.redispatched.length ? x : undefined;
    }, 'the started claim to be reclaimed');
    expect(r).to.deep.include({ returned: [], redispatched: [job.id] });
    expect((await jobHash(q, job.id)).stalledCount).to.equal('1');
  });

  it('a finish clears the marks: the next attempt of a job given back unstarted is marked again', async () => {
    const q = h.queue(uniqueQueue());
    const job = await q.add('work', {}, { attempts: 3 });
    const m = upkeep(q, { lockDuration: LOCK });
    await claimAheadAs(q, 'dead-1', 1, DEAD);
    await waitFor(async () => (await m.reclaimStalled('reclaimer')).returned.length > 0, 'given back');
    expect((await jobHash(q, job.id)).nsr).to.equal('1');
    const [c] = await claimAs(q, 'w');
    const r = (await callFunction(q.client, 'glidemq_finish', q.keys.meta, [job.id, c.fence, 'w', 'failed', 'boom', 0, 1, '', 1, '1', ...termsArgs()])) as unknown[];
    expect(r[0]).to.equal('retried');
    const next = decodeClaim(r[1] as ClaimReply);
    expect(next.id).to.equal(job.id);
    const hash = await jobHash(q, job.id);
    expect(hash.nsr).to.equal(undefined);
    expect(hash.ns).to.equal(next.fence);
  });

  it('a late finish by the worker that lost the claim is a no-op it can see (stale)', async () => {
    const q = h.queue(uniqueQueue());
    const job = await q.add('work', {});
    const [claim] = await claimAs(q, 'slow-worker', 1, DEAD);
    const m = upkeep(q, { lockDuration: LOCK });
    await waitFor(async () => (await m.reclaimStalled('reclaimer')).redispatched.length === 1, 'redispatch');
    // the old owner finishes while the job waits again
    expect(await finishAs(q, 'slow-worker', job.id, claim.fence)).to.equal('stale');
    expect((await jobHash(q, job.id)).state).to.equal('waiting');
    // another worker runs it to completion; the old owner's second try changes nothing either
    const [fresh] = await claimAs(q, 'healthy');
    expect(await finishAs(q, 'healthy', job.id, fresh.fence, '"by healthy"')).to.equal('completed');
    expect(await finishAs(q, 'slow-worker', job.id, claim.fence, '"too late"')).to.equal('stale');
    const hash = await jobHash(q, job.id);
    expect(hash.state).to.equal('completed');
    expect(hash.returnvalue).to.equal('"by healthy"');
    expect(hash.stalledCount).to.equal('1');
    expect(await q.client.zcard(q.keys.completed)).to.equal(1);
  });

  it('real workers: the one that stalled cannot complete the job the other one finished', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    // A's heartbeat never reaches the server (as when its event loop is blocked past its lock), so
    // B's check finds A's claim stalled by A's own lock
    const a = h.worker(name, async () => {
      await gate;
      return 'from A';
    }, { lockDuration: LOCK, stalledInterval: 60_000 });
    (a as unknown as { lockKeeper: { heartbeat: () => Promise<boolean> } }).lockKeeper.heartbeat = async () => true;
    const lost: string[] = [];
    a.on('lost', (j: Job, status: string) => lost.push(`${j.id}:${status}`));
    const job = await q.add('work', {});
    await waitFor(async () => (await jobHash(q, job.id)).state === 'active', 'A to take the job');
    const b = h.worker(name, async () => 'from B', { lockDuration: LOCK, stalledInterval: LOCK });
    const stalled: string[] = [];
    b.on('stalled', (id: string, _prev: string, what: string) => stalled.push(`${id}:${what}`));
    await waitFor(async () => (await jobHash(q, job.id)).state === 'completed', 'B to complete the reclaimed job');
    release();
    await waitFor(() => lost.length === 1, 'A to learn its finish was stale');
    expect(lost).to.deep.equal([`${job.id}:stale`]);
    expect(stalled).to.deep.equal([`${job.id}:redispatched`]);
    const done = await q.getJob(job.id);
    expect(done!.returnvalue).to.equal('from B');
    expect(done!.stalledCount).to.equal(1);
    expect(a.finished.completed).to.equal(0);
  });

  it('a running job whose worker heartbeats is never reclaimed', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const w = h.worker(name, async () => {
      await gate;
      return 'done';
    }, { lockDuration: 800, stalledInterval: 100 });
    let ticks = 0;
    const reclaim = w.maintenance.reclaimStalled.bind(w.maintenance);
    w.maintenance.reclaimStalled = async (c: string) => {
      const r = await reclaim(c);
      ticks++;
      return r;
    };
    const job = await q.add('long', {});
    await waitFor(async () => (await jobHash(q, job.id)).state === 'active', 'job taken');
    const t0 = ticks;
    await waitFor(() => ticks >= t0 + 25, 'stalled recovery to run for several lock durations', 20_000);
    expect((await jobHash(q, job.id)).stalledCount).to.equal(undefined);
    release();
    await waitFor(async () => (await jobHash(q, job.id)).state === 'completed', 'job completed');
  });

  it('does not reclaim while the queue is paused, and does once it is resumed', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const stream = await q.add('s', {});
    const prio = await q.add('p', {}, { priority: 1 });
    await claimAs(q, 'dead', 2, DEAD);
    await q.pause();
    const m = upkeep(q, { lockDuration: LOCK });
    const idle = async () => (await m.listClaims({ minIdle: LOCK })).stream.length === 1;
    await waitFor(idle, 'the claims to be idle past the lock duration');
    const r = await m.reclaim();
    expect(r.paused).to.equal(true);
    expect(await m.reclaimStalled('reclaimer')).to.deep.equal({ redispatched: [], failed: [], returned: [], consumersRemoved: 0, failedJobs: [] });
    // and a worker's scheduler leaves it alone too
    const w = h.worker(name, async () => 'ok', { lockDuration: LOCK, stalledInterval: 100 });
    let ticks = 0;
    const reclaim = w.maintenance.reclaimStalled.bind(w.maintenance);
    w.maintenance.reclaimStalled = async (c: string) => {
      const out = await reclaim(c);
      ticks++;
      return out;
    };
    await waitFor(() => ticks >= 3, 'the worker to run stalled recovery a few times');
    for (const id of [stream.id, prio.id]) {
      const hash = await jobHash(q, id);
      expect(hash.state).to.equal('active');
      expect(hash.stalledCount).to.equal(undefined);
    }
    await q.resume();
    await waitFor(async () => (await q.getJobCounts()).completed === 2, 'both jobs reclaimed and completed after resume');
    expect((await q.getJob(stream.id))!.stalledCount).to.equal(1);
    expect((await q.getJob(prio.id))!.stalledCount).to.equal(1);
  });

  it('a list claim whose lockedAt lies in the future (a clock ahead wrote it) ages from the first reclaim that sees it', async () => {
    const q = h.queue(uniqueQueue());
    const job = await q.add('p', {}, { priority: 1 });
    await claimAs(q, 'dead-ahead', 1, DEAD);
    const serverMs = async () => {
      const [s, us] = (await q.client.time()) as [string | number, string | number];
      return Number(s) * 1000 + Math.floor(Number(us) / 1000);
    };
    const ahead = (await serverMs()) + 5 * 60_000;
    await q.client.hset(q.keys.job(job.id), 'lockedAt', String(ahead));
    const m = upkeep(q, { lockDuration: LOCK });
    expect((await m.listClaims()).list.map((c) => [c.jobId, c.idleMs])).to.deep.equal([[job.id, 0]]);
    expect((await m.reclaim({ dryRun: true })).redispatched).to.deep.equal([]);
    expect((await jobHash(q, job.id)).lockedAt).to.equal(String(ahead)); // a dry run writes nothing
    // not reclaimed (age 0), but no longer immune: its lock now ages from the server's now
    expect((await m.reclaimStalled('reclaimer')).redispatched).to.deep.equal([]);
    const clamped = Number((await jobHash(q, job.id)).lockedAt);
    expect(clamped).to.be.below(ahead);
    const r = await waitFor(async () => {
      const out = await m.reclaimStalled('reclaimer');
      return out.redispatched.length ? out : undefined;
    }, 'the claim to be reclaimed a lock duration later');
    expect(r!.redispatched).to.deep.equal([job.id]);
    expect((await serverMs()) - clamped).to.be.at.least(LOCK);
    expect((await jobHash(q, job.id)).stalledCount).to.equal('1');
  });

  it('a reclaim refused because a key it would write holds another type changes nothing', async () => {
    const q = h.queue(uniqueQueue());
    await q.add('s', {});
    await q.add('p', {}, { priority: 1 });
    await claimAs(q, 'dead', 2);
    await q.client.set(q.keys.failed, 'written by another program');
    const dump = async () => {
      const keys = (await q.client.keys(`${q.keys.base}:*`)).sort();
      return Promise.all(keys.map(async (key) => [key, (await q.client.dumpBuffer(key))?.toString('hex')]));
    };
    const before = await dump();
    const m = upkeep(q, { lockDuration: 0, maxStalledCount: 0 });
    const err = await m.reclaim().then(
      () => undefined,
      (e: Error & { code?: string }) => e,
    );
    expect(err?.code).to.equal('ERR_WRONG_TYPE');
    expect(err?.message).to.include(`${q.keys.failed} holds a string`);
    expect(await dump()).to.deep.equal(before);
  });

  it('drops pending entries and list claims of removed jobs without re-creating them', async () => {
    const q = h.queue(uniqueQueue());
    const a = await q.add('s', {});
    const b = await q.add('p', {}, { priority: 1 });
    await claimAs(q, 'dead', 2);
    // remove the hashes behind the claims' backs, as a crash halfway through some cleanup would
    await q.client.del(q.keys.job(a.id), q.keys.job(b.id));
    const m = upkeep(q, { lockDuration: 0 });
    const r = await m.reclaim();
    expect(r.redispatched).to.deep.equal([]);
    expect(r.failed).to.deep.equal([]);
    expect(r.dropped).to.equal(1);
    expect(await q.client.exists(q.keys.job(a.id), q.keys.job(b.id))).to.equal(0);
    expect(await q.client.xlen(q.keys.stream)).to.equal(0);
    const pend = (await q.client.xpending(q.keys.stream, 'workers')) as [number];
    expect(pend[0]).to.equal(0);
    // the list claim of a vanished job is bookkeeping for heal, never a job to redispatch
    expect(await q.client.zcard(q.keys.prioritized)).to.equal(0);
  });

  it('an entry delivered but never activated (a worker died between read and activation) counts a stall', async () => {
    const q = h.queue(uniqueQueue());
    const job = await q.add('s', {});
    await q.waitUntilReady();
    // a blocking XREADGROUP delivered it; the worker died before glidemq_activate
    await q.client.xreadgroup('GROUP', 'workers', 'dead', 'COUNT', 1, 'STREAMS', q.keys.stream, '>');
    const m = upkeep(q, { lockDuration: LOCK });
    const claims = await m.listClaims();
    expect(claims.stream.map((c) => [c.jobId, c.state])).to.deep.equal([[job.id, 'waiting']]);
    await waitFor(async () => (await m.reclaimStalled('reclaimer')).redispatched.length === 1, 'redispatch');
    const hash = await jobHash(q, job.id);
    expect(hash.state).to.equal('waiting');
    expect(hash.stalledCount).to.equal('1');
    const [claim] = await claimAs(q, 'healthy');
    expect(claim.id).to.equal(job.id);
  });

  it('dry run lists the candidates and changes nothing', async () => {
    const q = h.queue(uniqueQueue());
    const s1 = await q.add('s', {});
    const l1 = await q.add('l', {}, { lifo: true });
    const again = await q.add('again', {}, { priority: 3 });
    await q.client.hset(q.keys.job(again.id), 'stalledCount', '1');
    await claimAs(q, 'dead', 3);
    const m = upkeep(q, { lockDuration: 0 });
    const before = await snapshot(q);
    const r = await m.reclaim({ dryRun: true });
    expect(r.dryRun).to.equal(true);
    expect([...r.redispatched].sort()).to.deep.equal([s1.id, l1.id].sort());
    expect(r.failed).to.deep.equal([again.id]);
    expect(await snapshot(q)).to.deep.equal(before);
  });

  it('walks a pending entries list longer than one call in bounded steps', async () => {
    const q = h.queue(uniqueQueue());
    await q.addBulk(Array.from({ length: 1500 }, (_, i) => ({ name: 'bulk', data: { i } })));
    await claimAs(q, 'dead', 1500);
    const m = upkeep(q, { lockDuration: 0 });
    const first = await m.reclaimStalled('reclaimer');
    expect(first.redispatched.length).to.equal(1000); // 10 pages of 100 per call
    const second = await m.reclaimStalled('reclaimer');
    expect(second.redispatched.length).to.equal(500);
    const counts = await q.getJobCounts();
    expect(counts.waiting).to.equal(1500);
    expect(counts.active).to.equal(0);
  });
});


describe('a job failed by a stalled check is failed as its processor would fail it (real valkey-server)', () => {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());
  /** A dead worker's claims whose lock ran out and that allow no stall: the next check fails them. */
  const FAIL_AT_ONCE = { lockDuration: 0, maxStalledCount: 0 };

  /** Fails `ids` through a worker's own stalled check; resolves with its 'failed' events. */
  async function failByWorkerCheck(name: string, ids: string[], opts: object = {}) {
    const seen: { job: Job; err: Error; prev: string }[] = [];
    const w = h.worker(name, async () => 'unused', { stalledInterval: 100, ...opts });
    w.on('failed', (job: Job, err: Error, prev: string) => seen.push({ job, err, prev }));
    await waitFor(() => ids.every((id) => seen.some((e) => e.job.id === id)), 'the worker check to fail the jobs');
    return { w, seen };
  }

  it("removeOnFail: true removes it, and the checking worker emits 'failed' (job, error, 'active')", async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const job = await q.add('work', { n: 1 }, { removeOnFail: true });
    await claimAs(q, 'dead', 1, FAIL_AT_ONCE);
    const { seen } = await failByWorkerCheck(name, [job.id]);
    expect(seen).to.have.length(1);
    expect(seen[0].prev).to.equal('active');
    expect(seen[0].err).to.be.instanceOf(Error);
    expect(seen[0].err.message).to.equal(STALLED_REASON);
    expect(seen[0].job).to.deep.include({ id: job.id, name: 'work', state: 'failed', failedReason: STALLED_REASON, stalledCount: 1 });
    expect(seen[0].job.data).to.deep.equal({ n: 1 });
    expect(await q.client.exists(q.keys.job(job.id))).to.equal(0);
    expect(await q.client.zscore(q.keys.failed, job.id)).to.equal(null);
    // announced as any failure is
    const events = (await q.client.xrange(q.keys.events, '-', '+')) as [string, string[]][];
    expect(events.some(([, f]) => f[1] === 'failed' && f[3] === job.id)).to.equal(true);
  });

  it('removeOnFail: { count: 1 } keeps only the newest failed job; a list claim too', async () => {
    const q = h.queue(uniqueQueue());
    const a = await q.add('a', {}, { removeOnFail: { count: 1 } });
    await claimAs(q, 'dead', 1, FAIL_AT_ONCE);
    const m = upkeep(q);
    expect((await m.reclaimStalled('checker')).failed).to.deep.equal([a.id]);
    expect((await jobHash(q, a.id)).state).to.equal('failed');
    const b = await q.add('b', {}, { removeOnFail: { count: 1 }, priority: 1 });
    await claimAs(q, 'dead', 1, FAIL_AT_ONCE);
    expect((await m.reclaimStalled('checker')).failed).to.deep.equal([b.id]);
    expect(await q.client.zrange(q.keys.failed, '0', '-1')).to.deep.equal([b.id]);
    expect(await q.client.exists(q.keys.job(a.id))).to.equal(0);
    expect((await jobHash(q, b.id)).failedReason).to.equal(STALLED_REASON);
  });

  it("the checking worker's removeOnFail applies to a job that names none; the job's own wins", async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const plain = await q.add('plain', {});
    const kept = await q.add('kept', {}, { removeOnFail: false });
    await claimAs(q, 'dead', 2, FAIL_AT_ONCE);
    await failByWorkerCheck(name, [plain.id, kept.id], { removeOnFail: true });
    expect(await q.client.exists(q.keys.job(plain.id))).to.equal(0);
    expect((await jobHash(q, kept.id)).state).to.equal('failed');
  });

  it('the failed metric counts it', async () => {
    const q = h.queue(uniqueQueue());
    await q.add('s', {});
    await q.add('p', {}, { priority: 1 });
    await claimAs(q, 'dead', 2, FAIL_AT_ONCE);
    expect((await upkeep(q).reclaim()).failed).to.have.length(2);
    const metrics = await q.getMetrics({ minutes: 2 });
    expect(metrics.failed).to.equal(2);
    expect(metrics.completed).to.equal(0);
  });

  it("a 'failed' listener that throws breaks neither the check nor the worker: it arrives as an error", async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const first = await q.add('first', {});
    const second = await q.add('second', {}, { priority: 1 });
    await claimAs(q, 'dead', 2, FAIL_AT_ONCE);
    const errors: unknown[] = [];
    const failed: string[] = [];
    const w = h.worker(name, async () => 'ok', { stalledInterval: 100 });
    w.on('failed', (job: Job) => {
      failed.push(job.id);
      throw new Error('listener bug');
    });
    w.on('error', (e: unknown) => errors.push(e));
    // both failures of the one check are emitted, each throw reported
    await waitFor(() => failed.length === 2 && errors.length === 2, 'both stalled failures and their listener errors');
    expect([...failed].sort()).to.deep.equal([first.id, second.id].sort());
    expect((errors[0] as Error).name).to.equal('ListenerError');
    // and the worker goes on
    const third = await q.add('third', {});
    await waitFor(async () => (await jobHash(q, third.id)).state === 'completed', 'the worker to run a job');
  });
});

async function snapshot(q: import('../../src/engine/queue/queue.js').Queue) {
  const k = q.keys;
  const ids = await q.client.keys(`${k.jobPrefix}*`);
  const hashes: Record<string, unknown> = {};
  for (const key of ids.sort()) hashes[key] = await q.client.hgetall(key);
  return {
    hashes,
    // id, consumer and delivery count (idle time moves on by itself)
    pending: ((await q.client.xpending(k.stream, 'workers', '-', '+', 100)) as unknown[][]).map((p) => [p[0], p[1], p[3]]),
    stream: await q.client.xrange(k.stream, '-', '+'),
    set: (await q.client.smembers(k.listActiveIds)).sort(),
    counter: await q.client.get(k.listActive),
    failed: await q.client.zrange(k.failed, '0', '-1'),
    prioritized: await q.client.zrange(k.prioritized, '0', '-1'),
    lifo: await q.client.lrange(k.lifo, 0, -1),
  };
}
