import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { InvalidArgumentError } from '../../src/engine/shared/errors.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { encodeJob } from '../../src/engine/producing/options.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { TestServer, useServer, waitFor } from '../helpers/valkey.js';

/** The server's clock (TIME) in ms: dedup windows open and close on it. */
async function serverMs(q: Queue): Promise<number> {
  const [s, us] = await q.client.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** When the window of a dedup entry ends (server ms; 0 = no end). */
async function windowEnd(q: Queue, dedupId: string): Promise<number> {
  const v = await q.client.hget(q.keys.dedup, dedupId);
  return Number(/^\w:(\d+):/.exec(String(v))?.[1]);
}

/** Waits until the server's clock has passed `ms`. */
function serverPassed(q: Queue, ms: number): Promise<boolean> {
  return waitFor(async () => (await serverMs(q)) > ms, `the server's clock to pass ${ms}`);
}

describe('deduplication', function () {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  function queue(label: string): Queue {
    return h.queue(uniqueQueue(label));
  }

  async function jobIds(q: Queue): Promise<string[]> {
    return (await q.client.keys(`${q.keys.jobPrefix}*`)).map((k) => k.slice(q.keys.jobPrefix.length)).sort();
  }

  it('simple: blocks while the earlier job is unfinished, then lets a new one in', async () => {
    const q = queue('dedup-simple');
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

  it('simple with a ttl: the window ends even if the job never finishes (server time)', async () => {
    const q = queue('dedup-simple-ttl');
    const d = { id: 'a', ttl: 400, mode: 'simple' as const };
    const first = await q.add('x', {}, { dedup: d });
    // the window is the server's: from the job's ts (the server's time of the add), ttl long
    expect(await windowEnd(q, 'a')).to.equal(first.timestamp + 400);
    expect((await q.add('x', {}, { dedup: d })).deduplicated).to.equal('blocked');
    await serverPassed(q, first.timestamp + 400);
    const later = await q.add('x', {}, { dedup: d });
    expect(later.created).to.equal(true);
    expect(later.id).to.not.equal(first.id);
  });

  it('a removed job no longer blocks its simple dedup id', async () => {
    const q = queue('dedup-removed');
    const first = await q.add('x', {}, { dedup: { id: 'r' } });
    await q.remove(first.id);
    expect((await q.add('x', {}, { dedup: { id: 'r' } })).created).to.equal(true);
  });

  it('throttle: blocks for the ttl from the first add, finished or not', async () => {
    const q = queue('dedup-throttle');
    const d = { id: 't', ttl: 800 }; // a ttl alone means throttle
    const w = h.worker(q.name, async () => 'ok');
    await waitFor(async () => (await q.getJobCounts()).consumers > 0, 'the worker to start reading');
    const first = await q.add('ping', {}, { dedup: d });
    await waitFor(() => w.finished.completed === 1, 'the first job to complete');
    const blocked = await q.add('ping', {}, { dedup: d });
    // (a safety net for a very slow run: the window must still have been open at that add)
    expect(blocked.timestamp).to.be.below(first.timestamp + 800);
    expect(blocked).to.include({ id: first.id, created: false, deduplicated: 'blocked' });
    await serverPassed(q, first.timestamp + 800);
    const next = await q.add('ping', {}, { dedup: d });
    expect(next.created).to.equal(true);
    // the new add opened a new window
    expect(await windowEnd(q, 't')).to.equal(next.timestamp + 800);
    expect((await q.add('ping', {}, { dedup: d })).id).to.equal(next.id);
  });

  it('debounce: a new add replaces the delayed job’s data and restarts its delay', async () => {
    const q = queue('dedup-debounce');
    const d = { id: 'doc-3', mode: 'debounce' as const, ttl: 600 };
    const first = await q.add('reindex', { v: 1 }, { delay: 10_000, dedup: d });
    expect(Number(await q.client.zscore(q.keys.scheduled, first.id))).to.equal(first.timestamp + 10_000);
    await serverPassed(q, first.timestamp + 300);
    const second = await q.add('reindex', { v: 2 }, { delay: 10_000, dedup: d });
    expect(second).to.include({ id: first.id, created: false, deduplicated: 'debounced', state: 'delayed' });
    const job = await q.getJob(first.id);
    expect(job?.data).to.deep.equal({ v: 2 });
    expect(job?.state).to.equal('delayed');
    // the delay restarted at the second add, on the server's clock
    expect(Number(await q.client.zscore(q.keys.scheduled, first.id))).to.equal(second.timestamp + 10_000);
    expect(await jobIds(q)).to.deep.equal([first.id]);
    // the window restarted with the second add: after the first window's end it still absorbs adds
    expect(await windowEnd(q, 'doc-3')).to.equal(second.timestamp + 600);
    await serverPassed(q, first.timestamp + 600);
    const third = await q.add('reindex', { v: 3 }, { delay: 10_000, dedup: d });
    expect(third.timestamp).to.be.below(second.timestamp + 600); // (a safety net for a very slow run)
    expect(third.id).to.equal(first.id);
    expect((await q.getJob(first.id))?.data).to.deep.equal({ v: 3 });

    // once the job left the delayed state, a new add is a new job (nothing is dropped)
    await q.client.zadd(q.keys.scheduled, '0', first.id); // due now: promotion moves it on
    await callFunction(q.client, 'glidemq_promote', q.keys.meta, [100]);
    expect((await q.getJob(first.id))?.state).to.equal('waiting');
    const fresh = await q.add('reindex', { v: 4 }, { delay: 10_000, dedup: d });
    expect(fresh.created).to.equal(true);
    expect(fresh.id).to.not.equal(first.id);
  });

  it('debounce never replaces the data of a job that already ran (a parked step job or a retry)', async () => {
    const q = queue('dedup-debounce-ran');
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
    const q = queue('dedup-bulk');
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
    const q = queue('dedup-bad');
    const cases: [Parameters<Queue['add']>[2], RegExp][] = [
      [{ dedup: { id: 'x', mode: 'throttle' } }, /throttle needs a ttl/],
      [{ dedup: { id: 'x', mode: 'debounce' } }, /debounce needs a delay/],
      [{ dedup: { id: '' } }, /dedup.id must be a non-empty string/],
      [{ dedup: { id: 'x', mode: 'sometimes' as 'simple' } }, /simple, throttle, extend or debounce/],
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
    await callFunction(q.client, 'glidemq_add', q.keys.meta, [0, '', 0, 0, 2, ...good, ...bad]).catch((e) => (err = e));
    expect(err).to.be.instanceOf(InvalidArgumentError);
    expect(String((err as Error).message)).to.match(/job #2 of the call: throttle dedup needs a ttl/);
    expect(await q.client.exists(q.keys.dedup, q.keys.job('1'))).to.equal(0);
  });

  it('expired entries are removed: overwritten when met, and swept by the promotion tick', async () => {
    const q = queue('dedup-sweep');
    const added = await q.addBulk(Array.from({ length: 250 }, (_, i) => ({ name: 'x', data: {}, opts: { dedup: { id: `t${i}`, ttl: 300 } } })));
    const finished = await q.add('x', {}, { dedup: { id: 'simple-done' } });
    const open = await q.add('x', {}, { dedup: { id: 'throttle-open', ttl: 3_600_000 } });
    expect(await q.client.hlen(q.keys.dedup)).to.equal(252);
    await serverPassed(q, Math.max(...added.map((j) => j.timestamp)) + 300);
    // met by an add: the expired entry is replaced by the new window
    const again = await q.add('x', {}, { dedup: { id: 't0', ttl: 300 } });
    expect(again.created).to.equal(true);
    const w = h.worker(q.name, async () => 'ok', { promotionInterval: 20, concurrency: 10 });
    await waitFor(async () => (await q.getJob(finished.id))?.state === 'completed', 'the simple job to complete');
    // bounded steps (100 fields each): several ticks work the hash off (t0's new window ends too)
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
