import { expect } from 'chai';
import { Queue } from '../../src/engine/queue.js';
import { InvalidArgumentError } from '../../src/engine/errors.js';
import { callFunction } from '../../src/engine/library.js';
import { encodeJob } from '../../src/engine/options.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { TestServer, useServer, waitFor } from '../helpers/valkey.js';

/** A clock the test moves by setting `offset`. */
function movableClock() {
  const clock = { offset: 0, now: () => Date.now() + clock.offset };
  return clock;
}

describe('deduplication', function () {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  function queueWithClock(label: string) {
    const clock = movableClock();
    const q = new Queue(uniqueQueue(label), { connection: server().url, clock: clock.now });
    h.queues.push(q);
    return { q, clock };
  }

  async function jobIds(q: Queue): Promise<string[]> {
    return (await q.client.keys(`${q.keys.jobPrefix}*`)).map((k) => k.slice(q.keys.jobPrefix.length)).sort();
  }

  it('simple: blocks while the earlier job is unfinished, then lets a new one in', async () => {
    const { q } = queueWithClock('dedup-simple');
    const first = await q.add('sync', { v: 1 }, { dedup: { id: 'user-7' } });
    expect(first.created).to.equal(true);
    const second = await q.add('sync', { v: 2 }, { dedup: { id: 'user-7' } });
    expect(second.created).to.equal(false);
    expect(second.deduplicated).to.equal('blocked');
    expect(second.id).to.equal(first.id);
    expect(await jobIds(q)).to.deep.equal([first.id]);
    expect((await q.getJob(first.id))?.data).to.deep.equal({ v: 1 });
    // another id is independent
    expect((await q.add('sync', {}, { dedup: { id: 'user-8' } })).created).to.equal(true);

    const w = h.worker(q.name, async () => 'ok');
    await waitFor(() => w.finished.completed === 2, 'both jobs to complete');
    const third = await q.add('sync', { v: 3 }, { dedup: { id: 'user-7' } });
    expect(third.created).to.equal(true);
    expect(third.id).to.not.equal(first.id);
  });

  it('simple with a ttl: the window ends even if the job never finishes', async () => {
    const { q, clock } = queueWithClock('dedup-simple-ttl');
    const first = await q.add('x', {}, { dedup: { id: 'a', ttl: 5000, mode: 'simple' } });
    expect((await q.add('x', {}, { dedup: { id: 'a', ttl: 5000, mode: 'simple' } })).deduplicated).to.equal('blocked');
    clock.offset = 5001;
    const later = await q.add('x', {}, { dedup: { id: 'a', ttl: 5000, mode: 'simple' } });
    expect(later.created).to.equal(true);
    expect(later.id).to.not.equal(first.id);
  });

  it('a removed job no longer blocks its simple dedup id', async () => {
    const { q } = queueWithClock('dedup-removed');
    const first = await q.add('x', {}, { dedup: { id: 'r' } });
    await q.remove(first.id);
    expect((await q.add('x', {}, { dedup: { id: 'r' } })).created).to.equal(true);
  });

  it('throttle: blocks for the ttl from the first add, finished or not', async () => {
    const { q, clock } = queueWithClock('dedup-throttle');
    const first = await q.add('ping', {}, { dedup: { id: 't', ttl: 60_000 } }); // a ttl alone means throttle
    const w = h.worker(q.name, async () => 'ok', { clock: clock.now });
    await waitFor(() => w.finished.completed === 1, 'the first job to complete');
    clock.offset = 59_000;
    const blocked = await q.add('ping', {}, { dedup: { id: 't', ttl: 60_000 } });
    expect(blocked).to.include({ id: first.id, created: false, deduplicated: 'blocked' });
    clock.offset = 60_001;
    const next = await q.add('ping', {}, { dedup: { id: 't', ttl: 60_000 } });
    expect(next.created).to.equal(true);
    // the new add opened a new window
    expect((await q.add('ping', {}, { dedup: { id: 't', ttl: 60_000 } })).id).to.equal(next.id);
  });

  it('debounce: a new add replaces the delayed job’s data and restarts its delay', async () => {
    const { q, clock } = queueWithClock('dedup-debounce');
    const d = { id: 'doc-3', mode: 'debounce' as const };
    const first = await q.add('reindex', { v: 1 }, { delay: 10_000, dedup: d });
    const t0 = Number(await q.client.zscore(q.keys.scheduled, first.id));
    clock.offset = 4000;
    const second = await q.add('reindex', { v: 2 }, { delay: 10_000, dedup: d });
    expect(second).to.include({ id: first.id, created: false, deduplicated: 'debounced', state: 'delayed' });
    const job = await q.getJob(first.id);
    expect(job?.data).to.deep.equal({ v: 2 });
    expect(job?.state).to.equal('delayed');
    const t1 = Number(await q.client.zscore(q.keys.scheduled, first.id));
    expect(t1 - t0).to.be.within(3900, 4500);
    expect(await jobIds(q)).to.deep.equal([first.id]);
    // the window restarted with the second add: 9 s later it still absorbs adds
    clock.offset = 13_000;
    expect((await q.add('reindex', { v: 3 }, { delay: 10_000, dedup: d })).id).to.equal(first.id);
    expect((await q.getJob(first.id))?.data).to.deep.equal({ v: 3 });

    // once the job left the delayed state, a new add is a new job (nothing is dropped)
    await callFunction(q.client, 'glidemq_promote', q.keys.meta, [Date.now() + 60_000, 100]);
    expect((await q.getJob(first.id))?.state).to.equal('waiting');
    const fresh = await q.add('reindex', { v: 4 }, { delay: 10_000, dedup: d });
    expect(fresh.created).to.equal(true);
    expect(fresh.id).to.not.equal(first.id);
  });

  it('debounce never replaces the data of a job that already ran (a parked step job or a retry)', async () => {
    const { q } = queueWithClock('dedup-debounce-ran');
    const d = { id: 'ran', mode: 'debounce' as const };
    const first = await q.add('walk', { v: 1 }, { delay: 50, dedup: d });
    const w = h.worker(q.name, async (job) => {
      await job.moveToDelayed(Date.now() + 3_600_000, 'two');
    }, { promotionInterval: 10 });
    await waitFor(async () => (await q.getJob(first.id))?.data.step === 'two', 'the job to run and park itself');
    await w.close();
    const next = await q.add('walk', { v: 2 }, { delay: 50, dedup: d });
    expect(next.created).to.equal(true);
    expect(next.id).to.not.equal(first.id);
    expect((await q.getJob(first.id))?.data).to.deep.equal({ v: 1, step: 'two' });
  });

  it('deduplicates within one bulk call too', async () => {
    const { q } = queueWithClock('dedup-bulk');
    const jobs = await q.addBulk([
      { name: 'a', data: { n: 1 }, opts: { dedup: { id: 'same' } } },
      { name: 'a', data: { n: 2 }, opts: { dedup: { id: 'same' } } },
      { name: 'a', data: { n: 3 } },
    ]);
    expect(jobs.map((j) => j.created)).to.deep.equal([true, false, true]);
    expect(jobs[1].id).to.equal(jobs[0].id);
    expect(jobs[1].deduplicated).to.equal('blocked');
  });

  it('refuses bad dedup options with messages naming them, before writing anything', async () => {
    const { q } = queueWithClock('dedup-bad');
    const cases: [Parameters<Queue['add']>[2], RegExp][] = [
      [{ dedup: { id: 'x', mode: 'throttle' } }, /throttle needs a ttl/],
      [{ dedup: { id: 'x', mode: 'debounce' } }, /debounce needs a delay/],
      [{ dedup: { id: '' } }, /dedup.id must be a non-empty string/],
      [{ dedup: { id: 'x', mode: 'sometimes' as 'simple' } }, /simple, throttle or debounce/],
      [{ dedup: { id: 'x', ttl: -1 } }, /dedup.ttl/],
    ];
    for (const [opts, why] of cases) {
      let err: unknown;
      await q.add('x', {}, opts).catch((e) => (err = e));
      expect(err, String(why)).to.be.instanceOf(InvalidArgumentError);
      expect(String((err as Error).message)).to.match(why);
    }
    // the server checks too: one bad job refuses the whole call
    const good = encodeJob('ok', {}, { dedup: { id: 'g' } });
    const bad = encodeJob('bad', {});
    bad.splice(8, 3, 'y', 0, 'throttle');
    let err: unknown;
    await callFunction(q.client, 'glidemq_add', q.keys.meta, [Date.now(), 0, 2, ...good, ...bad]).catch((e) => (err = e));
    expect(err).to.be.instanceOf(InvalidArgumentError);
    expect(String((err as Error).message)).to.match(/job #2 of the call: throttle dedup needs a ttl/);
    expect(await q.client.exists(q.keys.dedup, q.keys.job('1'))).to.equal(0);
  });

  it('expired entries are removed: overwritten when met, and swept by the promotion tick', async () => {
    const { q, clock } = queueWithClock('dedup-sweep');
    for (let i = 0; i < 250; i++) await q.add('x', {}, { dedup: { id: `t${i}`, ttl: 1000 } });
    const finished = await q.add('x', {}, { dedup: { id: 'simple-done' } });
    const open = await q.add('x', {}, { dedup: { id: 'throttle-open', ttl: 3_600_000 } });
    expect(await q.client.hlen(q.keys.dedup)).to.equal(252);
    clock.offset = 2000;
    // met by an add: the expired entry is replaced by the new window
    const again = await q.add('x', {}, { dedup: { id: 't0', ttl: 1000 } });
    expect(again.created).to.equal(true);
    const w = h.worker(q.name, async () => 'ok', { clock: clock.now, promotionInterval: 20, concurrency: 10 });
    await waitFor(async () => (await q.getJob(finished.id))?.state === 'completed', 'the simple job to complete');
    clock.offset = 4000;
    // bounded steps (100 fields each): several ticks work the hash off
    await waitFor(async () => (await q.client.hlen(q.keys.dedup)) === 1, 'the sweep to remove what is over');
    const left = await q.client.hgetall(q.keys.dedup);
    expect(Object.keys(left)).to.deep.equal(['throttle-open']);
    expect(left['throttle-open']).to.match(new RegExp(`^t:\\d+:${open.id}$`));
    await w.close();
  });
});

describe('deduplication: durability', function () {
  this.timeout(60_000);

  it('unexpired windows still block duplicates after a server SIGKILL', async () => {
    const server = await new TestServer({ persistence: 'aof-always' }).start();
    const h = new Harness(() => server);
    try {
      const name = uniqueQueue('dedup-restart');
      const q = h.queue(name);
      const simple = await q.add('s', {}, { dedup: { id: 'simple' } });
      const throttle = await q.add('t', {}, { dedup: { id: 'throttle', ttl: 3_600_000 } });
      const debounce = await q.add('d', { v: 1 }, { delay: 3_600_000, dedup: { id: 'debounce', mode: 'debounce' } });
      const before = await q.client.hgetall(q.keys.dedup);
      await h.cleanup();

      await server.kill();
      await server.start();

      const q2 = h.queue(name);
      expect(await q2.client.hgetall(q2.keys.dedup)).to.deep.equal(before);
      expect(await q2.add('s', {}, { dedup: { id: 'simple' } })).to.include({ id: simple.id, deduplicated: 'blocked' });
      expect(await q2.add('t', {}, { dedup: { id: 'throttle', ttl: 3_600_000 } })).to.include({ id: throttle.id, deduplicated: 'blocked' });
      const d = await q2.add('d', { v: 2 }, { delay: 3_600_000, dedup: { id: 'debounce', mode: 'debounce' } });
      expect(d).to.include({ id: debounce.id, deduplicated: 'debounced' });
      expect((await q2.getJob(debounce.id))?.data).to.deep.equal({ v: 2 });
      expect((await q2.getJobCounts()).waiting).to.equal(2);
    } finally {
      await h.cleanup();
      await server.stop();
    }
  });
});
