/**
 * QueueEvents and job.waitUntilFinished as a BullMQ application uses them: `new QueueEvents(name,
 * { connection })`, listeners `(args, id)` with BullMQ's argument shapes, waitUntilFinished(qe, ttl).
 * Also what glidemq adds: the per-job events (active, completed with its value, retries-exhausted,
 * drained) are written only while a QueueEvents listens (lua/events.lua); a listener that throws
 * becomes an `error` event and the read loop goes on (issue 16); the reader survives a reconnect
 * and a server restart.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { GlideMQError, JobNotFoundError, Queue, QueueEvents, Worker, ListenerError } from '../../src/index.js';
import { useCompat } from '../helpers/compat.js';
import { uniqueQueue } from '../helpers/engine.js';
import { claimAs } from '../helpers/recovery.js';
import { TestServer, waitFor } from '../helpers/valkey.js';

type Seen = { event: string; args: any; id: string };

/** Every event of `qe` named in `names`, in order, with its arguments and entry id. */
function record(qe: QueueEvents, names: string[]): Seen[] {
  const seen: Seen[] = [];
  for (const event of names) {
    if (event === 'drained') qe.on('drained', (id: string) => seen.push({ event, args: undefined, id }));
    else qe.on(event, (args: unknown, id: string) => seen.push({ event, args, id }));
  }
  return seen;
}

const ALL = ['added', 'waiting', 'active', 'progress', 'completed', 'failed', 'retries-exhausted', 'retrying', 'delayed',
  'removed', 'stalled', 'drained', 'paused', 'resumed', 'cleaned', 'deduplicated', 'debounced'];

/** Stream ids in increasing order. */
function increasing(ids: string[]): boolean {
  const key = (id: string) => id.split('-').map(BigInt);
  for (let i = 1; i < ids.length; i++) {
    const [a, b] = [key(ids[i - 1]), key(ids[i])];
    if (a[0] > b[0] || (a[0] === b[0] && a[1] >= b[1])) return false;
  }
  return true;
}

describe('BullMQ compatibility: QueueEvents and job.waitUntilFinished', function () {
  this.timeout(30000);
  const { redis, connection, queue, worker, closeLater } = useCompat('qe');
  const events = (q: Queue, opts: Record<string, unknown> = {}) => {
    const qe = new QueueEvents(q.name, { connection: connection(), blockingTimeout: 1000, ...opts });
    closeLater(() => qe.close());
    return qe;
  };
  const rawEvents = async (q: Queue) =>
    ((await redis().xrange(q.keys.events, '-', '+')) as [string, string[]][]).map(([, f]) => f[1]);

  it("a job's life: added {jobId, name}, waiting, active {prev}, progress {data}, completed {returnvalue, prev}, drained; ids are the entries'", async () => {
    const q = queue();
    const qe = events(q);
    const seen = record(qe, ALL);
    await qe.waitUntilReady();
    const job = await q.add('double', { n: 21 });
    worker(q, async (j) => {
      await j.updateProgress({ pct: 50 });
      return { doubled: j.data.n * 2 };
    });
    await waitFor(() => seen.some((s) => s.event === 'drained'), 'drained after the only job');
    expect(seen.map((s) => s.event)).to.deep.equal(['added', 'waiting', 'active', 'progress', 'completed', 'drained']);
    const [added, waiting, active, progress, completed] = seen.map((s) => s.args);
    expect(added).to.deep.equal({ jobId: job.id, name: 'double' });
    expect(waiting).to.deep.equal({ jobId: job.id });
    expect(active).to.deep.equal({ jobId: job.id, prev: 'waiting' });
    expect(progress).to.deep.equal({ jobId: job.id, data: { pct: 50 } });
    expect(completed).to.deep.equal({ jobId: job.id, returnvalue: { doubled: 42 }, prev: 'active' });
    const streamIds = ((await redis().xrange(q.keys.events, '-', '+')) as [string, string[]][]).map(([id]) => id);
    for (const s of seen) expect(streamIds).to.include(s.id);
    expect(increasing([...new Set(seen.map((s) => s.id))])).to.equal(true);
  });

  it('failed attempts: retrying then waiting {prev} or delayed {delay: due time}; the last failed {failedReason, prev} and retries-exhausted {attemptsMade}', async () => {
    const q = queue();
    const qe = events(q);
    const seen = record(qe, ALL);
    await qe.waitUntilReady();
    const plain = await q.add('plain', {}, { attempts: 2 });
    const backoff = await q.add('backoff', {}, { attempts: 2, backoff: { type: 'fixed', delay: 300 } });
    const before = Date.now();
    worker(q, async () => {
      throw new Error('boom');
    });
    await waitFor(() => seen.filter((s) => s.event === 'retries-exhausted').length === 2, 'both jobs to use up their attempts');
    const args = (id: string, event: string) => seen.filter((s) => s.args?.jobId === id && s.event === event).map((s) => s.args);
    const of = (id: string) => seen.filter((s) => s.args?.jobId === id).map((s) => s.event);
    expect(of(plain.id)).to.deep.equal(['added', 'waiting', 'active', 'retrying', 'waiting', 'active', 'failed', 'retries-exhausted']);
    // promotion of the backoff's delay emits 'waiting' with prev 'delayed', as BullMQ's QueueEvents does
    expect(of(backoff.id)).to.deep.equal(['added', 'waiting', 'active', 'retrying', 'delayed', 'waiting', 'active', 'failed', 'retries-exhausted']);
    expect(args(backoff.id, 'waiting')[1]).to.deep.equal({ jobId: backoff.id, prev: 'delayed' });
    expect(args(plain.id, 'waiting')[1]).to.deep.equal({ jobId: plain.id, prev: 'active' });
    expect(args(plain.id, 'retrying')[0]).to.deep.equal({ jobId: plain.id, failedReason: 'boom' });
    const delay = args(backoff.id, 'delayed')[0].delay as number;
    expect(delay).to.be.a('number');
    // the due time on the server's clock: the failure's time + 300 ms (the machine's clock is the server's here)
    expect(delay).to.be.within(before + 300 - 50, Date.now() + 300 + 50);
    expect(args(plain.id, 'failed')[0]).to.deep.equal({ jobId: plain.id, failedReason: 'boom', prev: 'active' });
    expect(args(plain.id, 'retries-exhausted')[0]).to.deep.equal({ jobId: plain.id, attemptsMade: '2' });
  });

  it('an UnrecoverableError with attempts left fails without retries-exhausted (as BullMQ)', async () => {
    const { UnrecoverableError } = await import('../../src/index.js');
    const q = queue();
    const qe = events(q);
    const seen = record(qe, ['failed', 'retries-exhausted', 'retrying']);
    await qe.waitUntilReady();
    const job = await q.add('x', {}, { attempts: 3 });
    worker(q, async () => {
      throw new UnrecoverableError('no point');
    });
    await waitFor(() => seen.some((s) => s.event === 'failed'), 'the failure');
    const rest = await job.waitUntilFinished(qe).catch((e: Error) => e.message);
    expect(rest).to.equal('no point');
    expect(seen.map((s) => s.event)).to.deep.equal(['failed']);
  });

  it('delayed {jobId, delay: due time} on add; removed {jobId}; deduplicated {jobId, deduplicationId}', async () => {
    const q = queue();
    const qe = events(q);
    const seen = record(qe, ALL);
    await qe.waitUntilReady();
    const later = await q.add('later', {}, { delay: 60_000 });
    const first = await q.add('once', {}, { dedup: { id: 'd-1' } });
    const again = await q.add('once', {}, { dedup: { id: 'd-1' } });
    expect(again.id).to.equal(first.id);
    await q.remove(later.id);
    await waitFor(() => seen.some((s) => s.event === 'deduplicated') && seen.some((s) => s.event === 'removed'), 'removed and deduplicated');
    const delayed = seen.find((s) => s.event === 'delayed')!;
    expect(delayed.args).to.deep.equal({ jobId: later.id, delay: later.timestamp + 60_000 });
    expect(seen.find((s) => s.event === 'removed')!.args).to.deep.include({ jobId: later.id });
    expect(seen.find((s) => s.event === 'deduplicated')!.args).to.deep.include({ jobId: first.id, deduplicationId: 'd-1' });
    // the first add of the dedup id is an add like any other
    expect(seen.filter((s) => s.event === 'added').map((s) => s.args.jobId)).to.deep.equal([later.id, first.id]);
  });

  it('stalled {jobId}: a claim whose worker died is reclaimed, and the job then completes', async () => {
    const q = queue();
    const qe = events(q);
    const seen = record(qe, ['stalled', 'completed', 'active']);
    await qe.waitUntilReady();
    const job = await q.add('orphan', {});
    await claimAs(q, 'dead-worker');
    worker(q, async () => 'rescued', { lockDuration: 300, stalledInterval: 100 });
    expect(await job.waitUntilFinished(qe, 10_000)).to.equal('rescued');
    expect(seen.find((s) => s.event === 'stalled')!.args).to.deep.equal({ jobId: job.id });
    expect(seen.map((s) => s.event)).to.deep.equal(['active', 'stalled', 'active', 'completed']);
  });

  it('paused and resumed ({}, id)', async () => {
    const q = queue();
    const qe = events(q);
    const seen = record(qe, ['paused', 'resumed']);
    await qe.waitUntilReady();
    await q.pause();
    await q.resume();
    await waitFor(() => seen.length === 2, 'paused and resumed');
    expect(seen.map((s) => [s.event, s.args])).to.deep.equal([['paused', {}], ['resumed', {}]]);
  });

  it('cleaned {count}: an entry as the clean path writes it arrives with BullMQ\'s shape', async () => {
    // glidemq_clean (lua/remove.lua) writes no 'cleaned' entry yet: the entry is written here as it
    // would write it, so the translation is shown
    const q = queue();
    const qe = events(q);
    const seen = record(qe, ['cleaned']);
    await qe.waitUntilReady();
    const id = await redis().xadd(q.keys.events, '*', 'event', 'cleaned', 'jobId', '', 'count', '3');
    await waitFor(() => seen.length === 1, 'cleaned');
    expect(seen[0]).to.deep.equal({ event: 'cleaned', args: { count: '3' }, id });
  });

  it("lastEventId: a QueueEvents reads from the id it is given ('$' by default: only what comes after it)", async () => {
    const q = queue();
    await q.pause();
    const late = events(q);
    const fromStart = events(q, { lastEventId: '0' });
    const lateSeen = record(late, ['paused', 'resumed']);
    const startSeen = record(fromStart, ['paused', 'resumed']);
    await Promise.all([late.waitUntilReady(), fromStart.waitUntilReady()]);
    await q.resume();
    await waitFor(() => lateSeen.length === 1 && startSeen.length === 2, 'the resume, and the pause before it');
    expect(lateSeen.map((s) => s.event)).to.deep.equal(['resumed']);
    expect(startSeen.map((s) => s.event)).to.deep.equal(['paused', 'resumed']);
  });

  it('autorun: false reads nothing until run(); a second run() rejects; close() ends run()', async () => {
    const q = queue();
    const qe = events(q, { autorun: false });
    const seen = record(qe, ['paused']);
    await qe.waitUntilReady();
    await q.pause();
    const running = qe.run();
    let refused: unknown;
    await qe.run().catch((e) => (refused = e));
    expect(refused).to.be.instanceOf(Error);
    await qe.waitUntilReady();
    await q.resume();
    await q.pause();
    await waitFor(() => seen.length === 1, 'the pause after run()');
    await qe.close();
    await running;
  });

  it('close() while it is still starting leaves no connection behind', async () => {
    const q = queue();
    await q.waitUntilReady();
    const clients = async () => String(await redis().client('LIST')).trim().split('\n').length;
    const before = await clients();
    const qe = new QueueEvents(q.name, { connection: connection(), blockingTimeout: 1000 });
    const ready = qe.waitUntilReady().then(() => 'ready', (e: GlideMQError) => e.code);
    await qe.close();
    expect(await ready).to.be.oneOf(['ready', 'ERR_CLOSED']);
    await waitFor(async () => (await clients()) === before, 'its connections to close');
    // and a second close is the same close
    await qe.close();
  });

  it('the per-job events are written only while a QueueEvents listens (the hot path pays nothing otherwise)', async () => {
    const q = queue();
    worker(q, async () => 'r');
    const quiet = await q.add('quiet', {});
    await waitFor(async () => (await q.getJob(quiet.id))?.state === 'completed', 'the unwatched job');
    expect(await rawEvents(q)).to.deep.equal(['added']);
    expect(await redis().hget(q.keys.meta, 'eventsUntil')).to.equal(null);
    const qe = events(q, { presenceTtl: 1000 });
    await qe.waitUntilReady();
    // the presence is the server's now + ttl
    const [s, us] = await redis().time();
    const until = Number(await redis().hget(q.keys.meta, 'eventsUntil'));
    expect(until - (Number(s) * 1000 + Math.floor(Number(us) / 1000))).to.be.within(0, 1000);
    const watched = await q.add('watched', {});
    expect(await watched.waitUntilFinished(qe, 5000)).to.equal('r');
    const raw = await rawEvents(q);
    expect(raw.slice(0, 2)).to.deep.equal(['added', 'added']);
    expect(raw).to.include.members(['active', 'completed']);
    // closed: the presence lapses within its ttl, and the per-job events stop
    await qe.close();
    await waitFor(async () => {
      const [s2] = await redis().time();
      return Number(s2) * 1000 > Number(await redis().hget(q.keys.meta, 'eventsUntil')) + 1000;
    }, 'the presence to lapse', 5000, 100);
    const n = (await rawEvents(q)).length;
    const after = await q.add('after', {});
    await waitFor(async () => (await q.getJob(after.id))?.state === 'completed', 'the job after the lapse');
    expect((await rawEvents(q)).slice(n)).to.deep.equal(['added']);
  });

  it('a listener that throws arrives as an error event, the other listeners run, and the read loop goes on (issue 16)', async () => {
    const q = queue();
    const qe = events(q);
    const errors: unknown[] = [];
    qe.on('error', (err) => errors.push(err));
    const seen: string[] = [];
    qe.on('paused', () => {
      throw new Error('listener bug');
    });
    qe.on('paused', () => seen.push('paused'));
    qe.on('resumed', async () => {
      throw new Error('async listener bug');
    });
    qe.on('resumed', () => seen.push('resumed'));
    await qe.waitUntilReady();
    await q.pause();
    await q.resume();
    await waitFor(() => errors.length === 2 && seen.length === 2, 'both listener errors');
    expect(errors.map((e) => (e as ListenerError).event)).to.deep.equal(['paused', 'resumed']);
    expect(errors.every((e) => e instanceof ListenerError)).to.equal(true);
    expect(((errors[0] as ListenerError).cause as Error).message).to.equal('listener bug');
    // the loop still reads
    await q.pause();
    await waitFor(() => seen.length === 3, 'the next event after the throws');
    const job = await q.add('still', {});
    await q.resume();
    worker(q, async () => 'fine');
    expect(await job.waitUntilFinished(qe, 5000)).to.equal('fine');
  });

  describe('job.waitUntilFinished(queueEvents, ttl?)', () => {
    it('resolves to the return value; rejects with an Error whose message is the failedReason', async () => {
      const q = queue();
      const qe = events(q);
      await qe.waitUntilReady();
      worker(q, async (j) => {
        if (j.data.fail) throw new Error(`failed ${j.data.n}`);
        return { n: j.data.n };
      });
      const ok = await q.add('ok', { n: 1 });
      const bad = await q.add('bad', { n: 2, fail: true }, { attempts: 2 });
      const [r1, r2] = await Promise.allSettled([ok.waitUntilFinished(qe), bad.waitUntilFinished(qe)]);
      expect(r1).to.deep.equal({ status: 'fulfilled', value: { n: 1 } });
      expect(r2.status).to.equal('rejected');
      expect((r2 as PromiseRejectedResult).reason).to.be.instanceOf(Error);
      expect((r2 as PromiseRejectedResult).reason.message).to.equal('failed 2');
      expect((await q.getJob(bad.id))?.attemptsMade).to.equal(2);
    });

    it('a job that finished before the call answers from its stored state', async () => {
      const q = queue();
      worker(q, async (j) => {
        if (j.data.fail) throw new Error('stored failure');
        return 'stored value';
      });
      const ok = await q.add('ok', {});
      const bad = await q.add('bad', { fail: true });
      await waitFor(async () => (await q.getJob(bad.id))?.state === 'failed' && (await q.getJob(ok.id))?.state === 'completed', 'both finished');
      // a QueueEvents started after both finished: no event of theirs will come
      const qe = events(q);
      expect(await ok.waitUntilFinished(qe)).to.equal('stored value');
      expect(await bad.waitUntilFinished(qe).catch((e: Error) => e.message)).to.equal('stored failure');
    });

    it('ttl: a job that does not finish in time rejects with a timeout error', async () => {
      const q = queue();
      const qe = events(q);
      const job = await q.add('nobody-runs-me', {});
      const started = Date.now();
      const err = await job.waitUntilFinished(qe, 300).catch((e) => e);
      expect(Date.now() - started).to.be.at.least(290);
      expect(err).to.be.instanceOf(GlideMQError);
      expect((err as GlideMQError).code).to.equal('ERR_TIMEOUT');
      expect((err as Error).message).to.contain(`job ${job.id}`);
    });

    it('removeOnComplete: the outcome comes from the event even when the job is gone by the time its state is read', async () => {
      const q = queue();
      const qe = events(q);
      await qe.waitUntilReady();
      worker(q, async (j) => j.data.n * 10, { concurrency: 10 });
      const jobs = await q.addBulk(Array.from({ length: 50 }, (_, n) => ({ name: 'gone', data: { n }, opts: { removeOnComplete: true } })));
      const results = await Promise.all(jobs.map((j) => j.waitUntilFinished(qe, 10_000)));
      expect(results).to.deep.equal(jobs.map((_, n) => n * 10));
    });

    it('a job that does not exist rejects with JobNotFoundError; close() rejects what still waits', async () => {
      const q = queue();
      const qe = events(q);
      const ghost = await q.add('ghost', {});
      await q.remove(ghost.id);
      const err = await ghost.waitUntilFinished(qe).catch((e) => e);
      expect(err).to.be.instanceOf(JobNotFoundError);
      const waiting = await q.add('never-run', {});
      const pending = waiting.waitUntilFinished(qe).catch((e) => e);
      await qe.waitUntilReady();
      await qe.close();
      const closed = await pending;
      expect(closed).to.be.instanceOf(GlideMQError);
      expect((closed as GlideMQError).code).to.equal('ERR_CLOSED');
    });
  });

  it('survives a reconnect: after its connections are killed it reads on from the last event it delivered', async () => {
    const q = queue();
    const qe = events(q);
    const seen = record(qe, ['paused', 'resumed']);
    await qe.waitUntilReady();
    await q.pause();
    await waitFor(() => seen.length === 1, 'the first event');
    // every client but the admin's and the queue's: the QueueEvents' blocking read and its command connection
    const mine = new Set([String(await redis().client('ID')), String(await (q.client as Redis).client('ID'))]);
    const list = String(await redis().client('LIST')).trim().split('\n');
    let killed = 0;
    for (const line of list) {
      const id = /\bid=(\d+)/.exec(line)?.[1];
      if (id && !mine.has(id)) killed += Number(await redis().client('KILL', 'ID', id));
    }
    expect(killed, 'the blocking read and the command connection').to.equal(2);
    await q.resume();
    await q.pause();
    await q.resume();
    await waitFor(() => seen.length === 4, 'the events after the kill', 10_000);
    expect(seen.map((s) => s.event)).to.deep.equal(['paused', 'resumed', 'paused', 'resumed']);
    expect(increasing(seen.map((s) => s.id))).to.equal(true);
  });

  /** A server of this test's own (it is restarted), a queue and a QueueEvents on it. */
  async function restartable(persistence: 'none' | 'aof-always') {
    const own = await new TestServer({ persistence }).start();
    closeLater(() => own.stop());
    const conn = { host: '127.0.0.1', port: own.port };
    const name = uniqueQueue('restart');
    const q = new Queue(name, { connection: conn });
    closeLater(() => q.close());
    const qe = new QueueEvents(name, { connection: conn, blockingTimeout: 1000 });
    closeLater(() => qe.close());
    qe.on('error', () => undefined);
    const probe = own.client();
    closeLater(async () => probe.disconnect());
    const startWorker = (result: string) => {
      const w = new Worker(name, async () => result, { connection: conn, blockTimeout: 1000 });
      w.on('error', () => undefined);
      closeLater(() => w.close(true));
    };
    return { own, q, qe, probe, startWorker };
  }

  it('survives a server restart: a wait pending across it settles, and the events after it arrive', async function () {
    this.timeout(60000);
    const { own, q, qe, startWorker } = await restartable('aof-always');
    const seen = record(qe, ['completed', 'paused']);
    await qe.waitUntilReady();
    await q.pause();
    await waitFor(() => seen.length === 1, 'the pause before the restart');
    const job = await q.add('across', {});
    const pending = job.waitUntilFinished(qe, 30_000);
    await own.restart();
    await q.resume();
    startWorker('after restart');
    expect(await pending).to.equal('after restart');
    await waitFor(() => seen.some((s) => s.event === 'completed'), 'its completed event');
    expect(seen.map((s) => s.event)).to.deep.equal(['paused', 'completed']);
    expect(seen[1].args).to.deep.equal({ jobId: job.id, returnvalue: 'after restart', prev: 'active' });
  });

  it('survives a server restart that lost the data: its presence is registered again, and a lost job rejects', async function () {
    this.timeout(60000);
    const { own, q, qe, probe, startWorker } = await restartable('none');
    const seen = record(qe, ['completed']);
    await qe.waitUntilReady();
    const lost = await q.add('lost', {});
    const pending = lost.waitUntilFinished(qe, 30_000).catch((e) => e);
    await own.restart();
    // the job went with the data: the wait looks again once reconnected, and says so
    expect(await pending).to.be.instanceOf(JobNotFoundError);
    await waitFor(async () => (await probe.hget(q.keys.meta, 'eventsUntil')) !== null, 'the presence registered again', 15_000, 100);
    startWorker('after restart');
    const fresh = await q.add('fresh', {});
    expect(await fresh.waitUntilFinished(qe, 10_000)).to.equal('after restart');
    await waitFor(() => seen.length === 1, 'its completed event');
    expect(seen[0].args).to.deep.equal({ jobId: fresh.id, returnvalue: 'after restart', prev: 'active' });
  });
});
