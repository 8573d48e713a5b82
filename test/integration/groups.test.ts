import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { Queue } from '../../src/engine/queue/queue.js';
import { decodeClaim, type ClaimReply } from '../../src/engine/jobs/job.js';
import { InvalidArgumentError } from '../../src/engine/shared/errors.js';
import { callFunction, ensureLibrary } from '../../src/engine/connecting/library.js';
import { encodeJob } from '../../src/engine/producing/options.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';

type Fields = ClaimReply;

/** A field of a fetched job's flat list; later pairs win, as the worker reads them. */
function field(job: Fields, name: string): string | undefined {
  return decodeClaim(job)[name];
}

/**
 * Drives the library functions directly, as one worker would. Every time they compare is the
 * server's; tests that need time to pass use short real windows, or seed the server's state.
 */
class LibraryCalls {
  constructor(
    private readonly client: Redis,
    private readonly q: Queue,
  ) {}
  async fetch(count: number, consumer = 'c1'): Promise<Fields[]> {
    const r = (await callFunction(this.client, 'glidemq_fetch', this.q.keys.meta, [consumer, count, 30_000, 1])) as unknown[];
    return r.slice(1) as Fields[];
  }
  async finish(job: Fields, outcome: 'completed' | 'failed' = 'completed', retryDelay = -1, consumer = 'c1'): Promise<string> {
    const r = (await callFunction(this.client, 'glidemq_finish', this.q.keys.meta, [
      field(job, 'id')!, field(job, 'fence')!, consumer, outcome, outcome === 'completed' ? 'null' : 'boom',
      retryDelay, 0, '', 0, '0', 30_000, 1,
    ])) as unknown[];
    return String(r[0]);
  }
  async promote(): Promise<[number, number]> {
    return (await callFunction(this.client, 'glidemq_promote', this.q.keys.meta, [1000])) as [number, number];
  }
  async add(n: number, group: object, from = 0): Promise<void> {
    const args = Array.from({ length: n }, (_, i) => encodeJob('j', { i: from + i }, { group: group as never })).flat();
    await callFunction(this.client, 'glidemq_add', this.q.keys.meta, [0, '', 0, 0, n, ...args]);
  }
}

describe('Group state (real valkey-server)', () => {
  const server = useServer();
  const h = new Harness(server);
  let raw: Redis;
  before(async () => {
    raw = server().client();
    await ensureLibrary(raw);
  });
  after(() => raw.quit());
  afterEach(() => h.cleanup());

  it('validates the group option before writing anything', async () => {
    const q = h.queue(uniqueQueue());
    const bad: object[] = [
      { id: '' },
      { id: 'a{b' },
      { id: 'a b' },
      { id: 'a', maxConcurrency: -1 },
      { id: 'a', maxConcurrency: 1.5 },
      { id: 'a', rateMax: 2 },
      { id: 'a', rateDuration: 100 },
      { id: 'a', tokenBucket: { capacity: 2, refillRate: 0 } },
      { id: 'a', tokenBucket: { capacity: 2, refillRate: 1e-9 } },
      { id: 'a', maxConcurrency: 2 ** 60 },
      { id: 'a', ordered: 'yes' },
      { id: 'a', ordered: true, maxConcurrency: 3 },
      { id: 'a', colour: 'red' },
    ];
    for (const group of bad) {
      let err: unknown;
      try {
        await q.add('x', {}, { group: group as never });
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(group)).to.be.instanceOf(InvalidArgumentError);
    }
    let mixed: unknown;
    try {
      await q.add('x', {}, { group: { id: 'a' }, priority: 3 });
    } catch (e) {
      mixed = e;
    }
    expect(mixed).to.be.instanceOf(InvalidArgumentError);
    // the server checks too: a bad spec in the middle of a bulk call writes none of the call
    const good = encodeJob('x', {}, { group: { id: 'a' } });
    const badRaw = [...good.slice(0, 11), '{"id":"a","maxConcurrency":-2}'];
    let luaErr: unknown;
    try {
      await callFunction(raw, 'glidemq_add', q.keys.meta, [0, '', 0, 0, 2, ...good, ...badRaw]);
    } catch (e) {
      luaErr = e;
    }
    expect(luaErr).to.be.instanceOf(InvalidArgumentError);
    expect(String((luaErr as Error).message)).to.match(/maxConcurrency/);
    expect(await raw.exists(q.keys.meta, q.keys.group('a'), q.keys.groupJobs('a'))).to.equal(0);
  });

  it('never runs more than maxConcurrency jobs of a key at once across several workers', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const limits: Record<string, number> = { a: 1, b: 2, c: 3 };
    const running: Record<string, number> = { a: 0, b: 0, c: 0 };
    const peak: Record<string, number> = { a: 0, b: 0, c: 0 };
    const jobs = [];
    for (let i = 0; i < 20; i++) {
      for (const g of Object.keys(limits)) jobs.push({ name: 'j', data: { g, i }, opts: { group: { id: g, maxConcurrency: limits[g] } } });
    }
    await q.addBulk(jobs);
    let done = 0;
    let overStored = false;
    const processor = async (job: { data: { g: string } }) => {
      const g = job.data.g;
      running[g]++;
      peak[g] = Math.max(peak[g], running[g]);
      const state = await q.getGroup(g);
      if (state!.active > limits[g]) overStored = true;
      await new Promise((r) => setTimeout(r, 5 + Math.random() * 10));
      running[g]--;
      done++;
    };
    for (let w = 0; w < 3; w++) h.worker(name, processor, { concurrency: 4 });
    await waitFor(() => done === 60, 'all 60 group jobs');
    // `done` counts processors that returned; their results reach the server a moment later
    await waitFor(async () => (await q.getJobCounts()).completed === 60, 'all 60 results stored');
    expect(peak).to.deep.equal({ a: 1, b: 2, c: 3 });
    expect(overStored, 'stored active count above the limit').to.equal(false);
    for (const g of Object.keys(limits)) {
      const s = await q.getGroup(g);
      expect(s).to.include({ active: 0, waiting: 0 });
      expect(s!.holders).to.deep.equal({});
    }
    const counts = await q.getJobCounts();
    expect(counts).to.include({ waiting: 0, active: 0, completed: 60, listActive: 0 });
  });

  it('starts the jobs of one key in the order they were added; a retried job keeps its place', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const started: number[] = [];
    for (let i = 0; i < 8; i++) {
      await q.add('j', { i }, { group: { id: 'k', ordered: true }, attempts: 2, backoff: 30 });
    }
    let done = 0;
    h.worker(
      name,
      async (job) => {
        started.push(job.data.i);
        if (job.data.i === 2 && job.attemptsMade === 0) throw new Error('transient');
        done++;
      },
      { concurrency: 4, promotionInterval: 20 },
    );
    await waitFor(() => done === 8, 'eight ordered jobs');
    await waitFor(async () => (await q.getJobCounts()).completed === 8, 'all eight results stored');
    expect(started).to.deep.equal([0, 1, 2, 2, 3, 4, 5, 6, 7]);
    expect(await q.getGroup('k')).to.include({ active: 0, heldBy: null, seq: 8 });
  });

  it('a step job of an ordered group holds the group while parked, and resumes before the next job', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const log: string[] = [];
    await q.add('j', { i: 0 }, { group: { id: 's', ordered: true } });
    await q.add('j', { i: 1 }, { group: { id: 's' } });
    h.worker(
      name,
      async (job) => {
        const step = (job.data as { step?: string }).step ?? 'first';
        log.push(`${job.data.i}:${step}`);
        if (job.data.i === 0 && step === 'first') await job.moveToDelayed(Date.now() + 50, 'second');
      },
      { concurrency: 2, promotionInterval: 20 },
    );
    await waitFor(() => log.length === 3, 'both jobs, the first in two steps');
    expect(log).to.deep.equal(['0:first', '0:second', '1:first']);
  });

  it('holds a rate window per key (server time)', async () => {
    const q = h.queue(uniqueQueue());
    const lib = new LibraryCalls(raw, q);
    await lib.add(5, { id: 'r', rateMax: 2, rateDuration: 1000 });
    await lib.add(1, { id: 'free' });
    const first = await lib.fetch(10);
    expect(first.map((j) => field(j, 'grp')).sort()).to.deep.equal(['free', 'r', 'r']);
    for (const j of first) expect(await lib.finish(j)).to.equal('completed');
    const opened = (await q.getGroup('r'))!.windowStart!;
    expect(await lib.fetch(10)).to.have.length(0); // the window holds the rest until it ends
    expect(Number(await raw.zscore(q.keys.timedGroups, 'r'))).to.equal(opened + 1000);
    const [, dueIn] = await lib.promote(); // relative: ms from the server's now
    expect(dueIn).to.be.within(0, 1000);
    expect(await q.getGroup('r')).to.include({ windowStart: opened, windowCount: 2, waiting: 3 });
    const second = (await waitFor(async () => {
      const got = await lib.fetch(10);
      return got.length > 0 ? got : undefined;
    }, 'the next rate window'))!;
    expect(second.map((j) => JSON.parse(field(j, 'data')!).i)).to.deep.equal([2, 3]);
    const reopened = (await q.getGroup('r'))!;
    expect(reopened.windowStart).to.be.at.least(opened + 1000);
    expect(reopened).to.include({ windowCount: 2, waiting: 1 });
    // a window that starts after the server's now (its clock stepped back) holds until it ends
    for (const j of second) await lib.finish(j);
    const later = reopened.windowStart! + 3_600_000;
    await raw.hset(q.keys.group('r'), 'windowStart', later, 'windowCount', 2);
    await raw.zadd(q.keys.timedGroups, 0, 'r'); // due: the next fetch looks at the group again
    expect(await lib.fetch(10)).to.have.length(0);
    expect(Number(await raw.zscore(q.keys.timedGroups, 'r'))).to.equal(later + 1000);
  });

  it('takes one token per start and refills continuously (server time)', async () => {
    const q = h.queue(uniqueQueue());
    const lib = new LibraryCalls(raw, q);
    await lib.add(10, { id: 't', tokenBucket: { capacity: 3, refillRate: 1 } });
    expect(await lib.fetch(10)).to.have.length(3); // the bucket starts full
    let s = await q.getGroup('t');
    expect(s).to.include({ capacity: 3, refillRate: 1, active: 3 });
    expect(s!.tokens).to.be.closeTo(0, 1e-9);
    const emptied = s!.lastRefill!;
    expect(await lib.fetch(10)).to.have.length(0); // one token a second
    expect(Number(await raw.zscore(q.keys.timedGroups, 't'))).to.be.closeTo(emptied + 1000, 1);
    const [, dueIn] = await lib.promote();
    expect(dueIn).to.be.within(0, 1000);
    const refilled = await waitFor(async () => {
      const got = await lib.fetch(10);
      return got.length > 0 ? got : undefined;
    }, 'a token to refill');
    expect(refilled).to.have.length(1);
    // the server's clock moves on a minute (seeded): the bucket refills to capacity, never above
    s = await q.getGroup('t');
    await raw.hset(q.keys.group('t'), 'lastRefill', s!.lastRefill! - 60_000);
    await raw.zadd(q.keys.timedGroups, 0, 't');
    expect(await lib.fetch(10)).to.have.length(3);
    const after = await q.getGroup('t');
    expect(after!.tokens).to.be.closeTo(0, 1e-9);
    expect(after!.lastRefill).to.be.at.least(s!.lastRefill!);
    // lowering the capacity clamps the tokens held
    await raw.hset(q.keys.group('t'), 'tokens', 3);
    await lib.add(1, { id: 't', tokenBucket: { capacity: 1, refillRate: 2 } }, 10);
    s = await q.getGroup('t');
    expect(s).to.include({ capacity: 1, tokens: 1 });
  });

  it('a blocked worker is woken for a group job, and again when a rate window reopens', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const starts: number[] = [];
    h.worker(name, async (job) => void starts.push(job.processedOn!), { blockTimeout: 20_000, concurrency: 2 });
    await waitFor(async () => (await q.getJobCounts()).consumers > 0, 'the worker to block');
    await q.add('j', {}, { group: { id: 'w', rateMax: 1, rateDuration: 150 } });
    await waitFor(() => starts.length === 1, 'the first job without waiting out blockTimeout', 10_000);
    await q.add('j', {}, { group: { id: 'w' } });
    await q.add('j', {}, { group: { id: 'w' } });
    await waitFor(() => starts.length === 3, 'the rate-limited jobs', 10_000);
    expect(starts[1] - starts[0]).to.be.at.least(150);
    expect(starts[2] - starts[1]).to.be.at.least(150);
  });

  it('a slot comes back when a job fails, retries, or is removed while running', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const lib = new LibraryCalls(raw, q);
    const spec = { id: 'f', maxConcurrency: 1 };
    const args = encodeJob('j', {}, { group: spec, attempts: 2 });
    await callFunction(raw, 'glidemq_add', q.keys.meta, [0, '', 0, 0, 1, ...args]);
    await lib.add(2, spec);
    let [job] = await lib.fetch(5);
    expect(await lib.fetch(5)).to.have.length(0); // full
    expect(await lib.finish(job, 'failed', 0)).to.equal('retried');
    [job] = await lib.fetch(5);
    expect(field(job, 'attemptsMade')).to.equal('1'); // the retry went back to the head of the line
    expect(await lib.finish(job, 'failed', 0)).to.equal('failed');
    [job] = await lib.fetch(5);
    expect(await q.remove(field(job, 'id')!, { force: true })).to.equal(true);
    const [last] = await lib.fetch(5);
    expect(last).to.not.equal(undefined);
    expect(await q.getGroup('f')).to.include({ active: 1, waiting: 0 });
    await lib.finish(last);
    expect(await q.getGroup('f')).to.include({ active: 0 });
    expect((await q.getJobCounts()).listActive).to.equal(0);
  });

  it('removing a waiting job takes it out of the line; removing a held retry frees an ordered group', async () => {
    const q = h.queue(uniqueQueue());
    const lib = new LibraryCalls(raw, q);
    const args = encodeJob('j', { i: 0 }, { group: { id: 'o', ordered: true }, attempts: 3 });
    await callFunction(raw, 'glidemq_add', q.keys.meta, [0, '', 0, 0, 1, ...args]);
    await lib.add(3, { id: 'o' }, 1);
    const [head] = await lib.fetch(5);
    expect(await lib.finish(head, 'failed', 10_000)).to.equal('delayed');
    expect(await q.getGroup('o')).to.include({ heldBy: field(head, 'id'), active: 0 });
    expect(await lib.fetch(5)).to.have.length(0); // held by the pending retry
    const waitingIds = await raw.zrange(q.keys.groupJobs('o'), '0', '-1');
    expect(await q.remove(waitingIds[0])).to.equal(true);
    expect((await q.getJobCounts()).waiting).to.equal(2);
    expect(await q.remove(field(head, 'id')!)).to.equal(true);
    const [next] = await lib.fetch(5);
    expect(JSON.parse(field(next, 'data')!).i).to.equal(2);
    expect(await q.getGroup('o')).to.include({ heldBy: null, waiting: 1 });
  });

  it('a holder that no longer holds a claim cannot block its group (self-healing)', async () => {
    const q = h.queue(uniqueQueue());
    const lib = new LibraryCalls(raw, q);
    await lib.add(2, { id: 'x', maxConcurrency: 1 });
    const [job] = await lib.fetch(1);
    // simulate state written by something outside the library: the job is gone, its slot is not
    await raw.del(q.keys.job(field(job, 'id')!));
    await raw.srem(q.keys.listActiveIds, field(job, 'id')!);
    await raw.zadd(q.keys.readyGroups, '0', 'x');
    expect(await lib.fetch(1)).to.have.length(1);
    expect(await q.getGroup('x')).to.include({ active: 1 });
  });

  it('a delayed group job joins its line when the delay ends', async () => {
    const q = h.queue(uniqueQueue());
    const lib = new LibraryCalls(raw, q);
    const delayed = encodeJob('j', { i: 'late' }, { group: { id: 'd' }, delay: 1000 });
    await callFunction(raw, 'glidemq_add', q.keys.meta, [0, '', 0, 0, 1, ...delayed]);
    await lib.add(1, { id: 'd' });
    expect((await q.getJobCounts()).delayed).to.equal(1);
    const [early, dueIn] = await lib.promote(); // not due yet: it says when, relative to the server's now
    expect(early).to.equal(0);
    expect(dueIn).to.be.within(1, 1000);
    await waitFor(async () => (await lib.promote())[0] === 1, 'the delay to end (server time)');
    const got = await lib.fetch(5);
    expect(got.map((j) => JSON.parse(field(j, 'data')!).i)).to.deep.equal([0, 'late']);
  });

  it('the server checks a group spec in full before writing anything', async () => {
    const q = h.queue(uniqueQueue());
    const args = encodeJob('x', {}, { group: { id: 'a' } });
    const at = args.indexOf('{"id":"a"}');
    expect(at).to.be.greaterThan(0);
    const bad: [string, RegExp][] = [
      ['{"id":"a","maxConcurrency":1e300}', /maxConcurrency/],
      ['{"id":"a","maxConcurrency":1e999}', /maxConcurrency/],
      ['{"id":"a","maxConcurrency":"2"}', /maxConcurrency/],
      ['{"id":"a","rateMax":2,"rateDuration":0.5}', /rateDuration/],
      ['{"id":"a","rateDuration":100}', /rateDuration/],
      ['{"id":"a","capacity":2,"refillRate":1e-9}', /refillRate/],
      ['{"id":"a","capacity":2,"refillRate":"fast"}', /refillRate/],
      ['{"id":"a","refillRate":1}', /capacity/],
      ['{"id":"a","ordered":1}', /ordered/],
      ['{"id":"a","colour":"red"}', /unknown group option/],
      ['{"id":"a\\u0001b"}', /group\.id/],
      ['{"id":""}', /group\.id/],
      ['[]', /group/],
    ];
    for (const [spec, what] of bad) {
      const call = [...args];
      call[at] = spec;
      let err: unknown;
      try {
        await callFunction(raw, 'glidemq_add', q.keys.meta, [0, '', 0, 0, 1, ...call]);
      } catch (e) {
        err = e;
      }
      expect(err, spec).to.be.instanceOf(InvalidArgumentError);
      expect((err as Error).message, spec).to.match(what);
    }
    expect(await raw.exists(q.keys.meta, q.keys.id, q.keys.group('a'), q.keys.groupJobs('a'))).to.equal(0);
  });

  it('a group whose keys another program overwrote is skipped by fetch and promotion, and left as it was', async () => {
    const q = h.queue(uniqueQueue());
    const lib = new LibraryCalls(raw, q);
    await lib.add(1, { id: 'x' });
    await lib.add(1, { id: 'y' }, 1);
    await raw.del(q.keys.group('x'));
    await raw.set(q.keys.group('x'), 'not a hash');
    const got = await lib.fetch(5);
    expect(got.map((j) => field(j, 'grp'))).to.deep.equal(['y']);
    expect(await raw.zscore(q.keys.readyGroups, 'x')).to.equal(null);
    expect(await raw.get(q.keys.group('x'))).to.equal('not a hash');
    expect(await raw.zcard(q.keys.groupJobs('x'))).to.equal(1);
    // a timed group whose job line is not a zset: promotion drops it from timed-groups
    await raw.set(q.keys.groupJobs('z'), 'not a zset');
    await raw.zadd(q.keys.timedGroups, 0, 'z');
    expect(await lib.promote()).to.deep.equal([0, -1]);
    expect(await raw.zscore(q.keys.timedGroups, 'z')).to.equal(null);
    expect(await raw.zscore(q.keys.readyGroups, 'z')).to.equal(null);
    expect(await raw.get(q.keys.groupJobs('z'))).to.equal('not a zset');
  });
  it('drain removes group jobs: counts say waiting 4 with group jobs, drain removes them all, the group keys stay consistent and a later add still runs', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const lib = new LibraryCalls(raw, q);
    // one group job runs (its group is then full: in neither ready- nor timed-groups), two wait
    // behind it; one waits in a second group; one plain job waits in the stream
    await lib.add(3, { id: 'g', maxConcurrency: 1 });
    const [running] = await lib.fetch(1);
    await lib.add(1, { id: 'h' }, 3);
    await q.add('plain', {});
    expect(await q.getJobCounts()).to.include({ waiting: 4, active: 1 });
    expect(await raw.zscore(q.keys.readyGroups, 'g')).to.equal(null);
    expect((await q.drain({ dryRun: true })).removed).to.equal(4);
    expect(await q.getJobCounts()).to.include({ waiting: 4 }); // a dry run changes nothing
    expect((await q.drain()).removed).to.equal(4);
    const c = await q.getJobCounts();
    expect(c).to.include({ waiting: 0, active: 1, listActive: 1 });
    expect(await raw.hget(q.keys.meta, 'groupWaiting')).to.equal('0');
    expect(await raw.exists(q.keys.groupJobs('g'), q.keys.groupJobs('h'))).to.equal(0);
    expect(await raw.zrange(q.keys.readyGroups, '0', '-1')).to.deep.equal([]);
    expect(await raw.zrange(q.keys.timedGroups, '0', '-1')).to.deep.equal([]);
    // the running job keeps its slot and its claim
    const id = field(running, 'id')!;
    expect(await q.getGroup('g')).to.deep.include({ active: 1, holders: { [id]: 'c1' }, waiting: 0 });
    expect((await q.getJob(id))?.state).to.equal('active');
    expect(await lib.finish(running)).to.equal('completed');
    expect(await q.getGroup('g')).to.deep.include({ active: 0, holders: {}, waiting: 0 });
    // the groups still run what is added to them next
    const done: string[] = [];
    h.worker(name, async (job) => {
      done.push(job.name);
    });
    await q.add('next-g', {}, { group: { id: 'g' } });
    await q.add('next-h', {}, { group: { id: 'h' } });
    await waitFor(() => done.length === 2, 'the jobs added after the drain to run');
    expect(done.sort()).to.deep.equal(['next-g', 'next-h']);
  });

  it('getJobs lists the waiting group jobs that getJobCounts counts and drain removes, in their order', async () => {
    const q = h.queue(uniqueQueue());
    const lib = new LibraryCalls(raw, q);
    await q.add('lifo', {}, { lifo: true });
    await q.add('plain', {});
    await q.add('g1', {}, { group: { id: 'g', maxConcurrency: 1 } });
    await q.add('g2', {}, { group: { id: 'g' } });
    await q.add('o-delayed', {}, { group: { id: 'o', ordered: true }, delay: 60_000 });
    await q.add('o1', {}, { group: { id: 'o' } });
    // the LIFO job is fetched first; a fetched (active) job is not waiting
    expect((await lib.fetch(1)).map((j) => field(j, 'name'))).to.deep.equal(['lifo']);
    await q.add('p', {}, { priority: 2 });
    const counts = await q.getJobCounts();
    // asc true: the order they run in (BullMQ's default, asc false, lists the newest first)
    const waiting = (await q.getJobs('waiting', 0, -1, true)).map((j) => j.name);
    expect(waiting).to.deep.equal(['plain', 'g1', 'g2', 'o1']);
    expect(counts).to.include({ waiting: waiting.length, delayed: 1, prioritized: 1, active: 1 });
    // pages of the same list
    expect((await q.getJobs('waiting', 1, 2, true)).map((j) => j.name)).to.deep.equal(['g1', 'g2']);
    expect((await q.getJobs('waiting', -1, -1, true)).map((j) => j.name)).to.deep.equal(['o1']);
    expect((await q.getJobs('waiting', 0, 0)).map((j) => j.name)).to.deep.equal(['o1']);
    expect((await q.getJobs('delayed')).map((j) => j.name)).to.deep.equal(['o-delayed']);
    expect((await q.drain({ dryRun: true })).removed).to.equal(counts.waiting + counts.prioritized);
    expect((await q.drain()).removed).to.equal(counts.waiting + counts.prioritized);
    expect(await q.getJobs('waiting')).to.deep.equal([]);
    expect(await q.getJobCounts()).to.include({ waiting: 0, prioritized: 0, delayed: 1, active: 1 });
  });

  it('clean removes finished group jobs and leaves their group as it is', async () => {
    const q = h.queue(uniqueQueue());
    const lib = new LibraryCalls(raw, q);
    await lib.add(3, { id: 'g', maxConcurrency: 1 });
    const [a] = await lib.fetch(1);
    await lib.finish(a);
    const [b] = await lib.fetch(1);
    await lib.finish(b, 'failed');
    const [running] = await lib.fetch(1);
    await lib.add(1, { id: 'g' }, 3);
    const before = await q.getGroup('g');
    expect(before).to.include({ active: 1, waiting: 1 });
    expect(await q.clean('completed', 0)).to.deep.include({ ids: [field(a, 'id')] });
    expect(await q.clean('failed', 0)).to.deep.include({ ids: [field(b, 'id')] });
    expect(await q.getJobCounts()).to.include({ completed: 0, failed: 0, waiting: 1, active: 1 });
    expect(await q.getGroup('g')).to.deep.equal(before);
    expect(await raw.exists(q.keys.job(field(a, 'id')!), q.keys.job(field(b, 'id')!))).to.equal(0);
    await lib.finish(running);
    const [last] = await lib.fetch(1);
    expect(JSON.parse(field(last, 'data')!).i).to.equal(3);
  });
});
