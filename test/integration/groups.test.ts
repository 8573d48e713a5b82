import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { Queue } from '../../src/engine/queue.js';
import { decodeClaim, type ClaimReply } from '../../src/engine/job.js';
import { InvalidArgumentError } from '../../src/engine/errors.js';
import { callFunction, ensureLibrary } from '../../src/engine/library.js';
import { encodeJob } from '../../src/engine/options.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';

type Fields = ClaimReply;

/** A field of a fetched job's flat list; later pairs win, as the worker reads them. */
function field(job: Fields, name: string): string | undefined {
  return decodeClaim(job)[name];
}

/** Drives the library with a clock the test moves: every function takes `now` from ARGV. */
class ManualClock {
  constructor(
    private readonly client: Redis,
    private readonly q: Queue,
    public now: number,
  ) {}
  async fetch(count: number, consumer = 'c1'): Promise<Fields[]> {
    const r = (await callFunction(this.client, 'glidemq_fetch', this.q.keys.meta, [consumer, this.now, count])) as unknown[];
    return r.slice(1) as Fields[];
  }
  async finish(job: Fields, outcome: 'completed' | 'failed' = 'completed', retryDelay = -1, consumer = 'c1'): Promise<string> {
    const r = (await callFunction(this.client, 'glidemq_finish', this.q.keys.meta, [
      field(job, 'id')!, field(job, 'fence')!, consumer, this.now, outcome, outcome === 'completed' ? 'null' : 'boom',
      retryDelay, 0, '', 0,
    ])) as unknown[];
    return String(r[0]);
  }
  async promote(): Promise<[number, number]> {
    return (await callFunction(this.client, 'glidemq_promote', this.q.keys.meta, [this.now, 1000])) as [number, number];
  }
  async add(n: number, group: object, from = 0): Promise<void> {
    const args = Array.from({ length: n }, (_, i) => encodeJob('j', { i: from + i }, { group: group as never })).flat();
    await callFunction(this.client, 'glidemq_add', this.q.keys.meta, [this.now, 0, n, ...args]);
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
      await callFunction(raw, 'glidemq_add', q.keys.meta, [Date.now(), 0, 2, ...good, ...badRaw]);
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

  it('holds a rate window per key (moved clock)', async () => {
    const q = h.queue(uniqueQueue());
    const clock = new ManualClock(raw, q, 1_000_000);
    await clock.add(5, { id: 'r', rateMax: 2, rateDuration: 1000 });
    await clock.add(1, { id: 'free' });
    const first = await clock.fetch(10);
    expect(first.map((j) => field(j, 'grp')).sort()).to.deep.equal(['free', 'r', 'r']);
    for (const j of first) expect(await clock.finish(j)).to.equal('completed');
    clock.now += 999;
    expect(await clock.fetch(10)).to.have.length(0);
    expect(await raw.zscore(q.keys.timedGroups, 'r')).to.equal('1001000');
    expect((await clock.promote())[1]).to.equal(1_001_000);
    expect(await q.getGroup('r')).to.include({ windowStart: 1_000_000, windowCount: 2, waiting: 3 });
    clock.now += 1;
    const second = await clock.fetch(10);
    expect(second).to.have.length(2);
    expect(second.map((j) => JSON.parse(field(j, 'data')!).i)).to.deep.equal([2, 3]);
    expect(await q.getGroup('r')).to.include({ windowStart: 1_001_000, windowCount: 2 });
    // a clock that goes backwards does not open a new window
    clock.now -= 5000;
    expect(await clock.fetch(10)).to.have.length(0);
    clock.now = 1_002_000;
    expect(await clock.fetch(10)).to.have.length(1);
  });

  it('takes one token per start and refills continuously (moved clock)', async () => {
    const q = h.queue(uniqueQueue());
    const clock = new ManualClock(raw, q, 5_000_000);
    await clock.add(10, { id: 't', tokenBucket: { capacity: 3, refillRate: 2 } });
    expect(await clock.fetch(10)).to.have.length(3); // the bucket starts full
    let s = await q.getGroup('t');
    expect(s).to.include({ capacity: 3, refillRate: 2, active: 3 });
    expect(s!.tokens).to.be.closeTo(0, 1e-9);
    clock.now += 400; // 0.8 tokens
    expect(await clock.fetch(10)).to.have.length(0);
    expect(Number(await raw.zscore(q.keys.timedGroups, 't'))).to.equal(5_000_500);
    clock.now += 100; // 1.0
    expect(await clock.fetch(10)).to.have.length(1);
    clock.now += 60_000; // refills to capacity, never above
    expect(await clock.fetch(10)).to.have.length(3);
    s = await q.getGroup('t');
    expect(s!.tokens).to.be.closeTo(0, 1e-9);
    expect(s!.lastRefill).to.equal(5_060_500);
    // lowering the capacity clamps the tokens held
    clock.now += 60_000;
    await clock.add(1, { id: 't', tokenBucket: { capacity: 1, refillRate: 2 } }, 10);
    s = await q.getGroup('t');
    expect(s).to.include({ capacity: 1 });
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
    const clock = new ManualClock(raw, q, 7_000_000);
    const spec = { id: 'f', maxConcurrency: 1 };
    const args = encodeJob('j', {}, { group: spec, attempts: 2 });
    await callFunction(raw, 'glidemq_add', q.keys.meta, [clock.now, 0, 1, ...args]);
    await clock.add(2, spec);
    let [job] = await clock.fetch(5);
    expect(await clock.fetch(5)).to.have.length(0); // full
    expect(await clock.finish(job, 'failed', 0)).to.equal('retried');
    [job] = await clock.fetch(5);
    expect(field(job, 'attemptsMade')).to.equal('1'); // the retry went back to the head of the line
    expect(await clock.finish(job, 'failed', 0)).to.equal('failed');
    [job] = await clock.fetch(5);
    expect(await q.remove(field(job, 'id')!, { force: true })).to.equal(true);
    const [last] = await clock.fetch(5);
    expect(last).to.not.equal(undefined);
    expect(await q.getGroup('f')).to.include({ active: 1, waiting: 0 });
    await clock.finish(last);
    expect(await q.getGroup('f')).to.include({ active: 0 });
    expect((await q.getJobCounts()).listActive).to.equal(0);
  });

  it('removing a waiting job takes it out of the line; removing a held retry frees an ordered group', async () => {
    const q = h.queue(uniqueQueue());
    const clock = new ManualClock(raw, q, 9_000_000);
    const args = encodeJob('j', { i: 0 }, { group: { id: 'o', ordered: true }, attempts: 3 });
    await callFunction(raw, 'glidemq_add', q.keys.meta, [clock.now, 0, 1, ...args]);
    await clock.add(3, { id: 'o' }, 1);
    const [head] = await clock.fetch(5);
    expect(await clock.finish(head, 'failed', 10_000)).to.equal('delayed');
    expect(await q.getGroup('o')).to.include({ heldBy: field(head, 'id'), active: 0 });
    expect(await clock.fetch(5)).to.have.length(0); // held by the pending retry
    const waitingIds = await raw.zrange(q.keys.groupJobs('o'), '0', '-1');
    expect(await q.remove(waitingIds[0])).to.equal(true);
    expect((await q.getJobCounts()).waiting).to.equal(2);
    expect(await q.remove(field(head, 'id')!)).to.equal(true);
    const [next] = await clock.fetch(5);
    expect(JSON.parse(field(next, 'data')!).i).to.equal(2);
    expect(await q.getGroup('o')).to.include({ heldBy: null, waiting: 1 });
  });

  it('a holder that no longer holds a claim cannot block its group (self-healing)', async () => {
    const q = h.queue(uniqueQueue());
    const clock = new ManualClock(raw, q, 11_000_000);
    await clock.add(2, { id: 'x', maxConcurrency: 1 });
    const [job] = await clock.fetch(1);
    // simulate state written by something outside the library: the job is gone, its slot is not
    await raw.del(q.keys.job(field(job, 'id')!));
    await raw.srem(q.keys.listActiveIds, field(job, 'id')!);
    await raw.zadd(q.keys.readyGroups, '0', 'x');
    expect(await clock.fetch(1)).to.have.length(1);
    expect(await q.getGroup('x')).to.include({ active: 1 });
  });

  it('a delayed group job joins its line when the delay ends', async () => {
    const q = h.queue(uniqueQueue());
    const clock = new ManualClock(raw, q, 13_000_000);
    const delayed = encodeJob('j', { i: 'late' }, { group: { id: 'd' }, delay: 500 });
    await callFunction(raw, 'glidemq_add', q.keys.meta, [clock.now, 0, 1, ...delayed]);
    await clock.add(1, { id: 'd' });
    expect((await q.getJobCounts()).delayed).to.equal(1);
    clock.now += 500;
    expect((await clock.promote())[0]).to.equal(1);
    const got = await clock.fetch(5);
    expect(got.map((j) => JSON.parse(field(j, 'data')!).i)).to.deep.equal([0, 'late']);
  });
});
