/**
 * An ordered group keeps its order across delays (issue 17): a job added to an ordered group with a
 * delay takes its place in the group's line when it is added and holds it through its delay, so
 * a job added after it never starts before it has run and completed (or failed for good). Several
 * delayed jobs keep the order they were added in, whatever their due times. A delayed job of a
 * plain group blocks nothing. Removing or draining a delayed job that holds its place frees the
 * group. Against a real valkey-server; every time compared is the server's.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import type { Job } from '../../src/engine/jobs/job.js';
import { decodeClaim, type ClaimReply } from '../../src/engine/jobs/job.js';
import { callFunction, ensureLibrary } from '../../src/engine/connecting/library.js';
import type { Queue } from '../../src/engine/queue/queue.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { useServer, waitFor } from '../helpers/valkey.js';

const ORDERED = { id: 'o', ordered: true };

/** A processor that logs `start <name>` and `end <name>` (a job named 'fail-once' fails its first attempt). */
function logging(log: string[]) {
  return async (job: Job) => {
    log.push(`start ${job.name}`);
    // a turn of the event loop between start and end, so another slot could start meanwhile
    await new Promise((r) => setTimeout(r, 5));
    log.push(`end ${job.name}`);
    if (job.name.startsWith('fail-once') && job.attemptsMade === 0) throw new Error('first attempt fails');
  };
}

/** The log of jobs run one after another, each to its end, in this order. */
function oneAtATime(names: string[]): string[] {
  return names.flatMap((n) => [`start ${n}`, `end ${n}`]);
}

describe('Ordered groups keep their order across delays (real valkey-server)', function () {
  this.timeout(30000);
  const server = useServer();
  const h = new Harness(server);
  let raw: Redis;
  before(async () => {
    raw = server().client();
    await ensureLibrary(raw);
  });
  after(() => raw.quit());
  afterEach(() => h.cleanup());

  const fetch = async (q: Queue, consumer = 'c1'): Promise<ClaimReply[]> =>
    ((await callFunction(raw, 'glidemq_fetch', q.keys.meta, [consumer, 5, 30_000, 1])) as unknown[]).slice(1) as ClaimReply[];
  const promote = async (q: Queue): Promise<number> => ((await callFunction(raw, 'glidemq_promote', q.keys.meta, [1000])) as number[])[0];

  it('an ordered group keeps its order across delays: a job added first with delay 500 runs and completes before a job added second without delay starts', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const first = await q.add('first', {}, { group: ORDERED, delay: 500 });
    const second = await q.add('second', {}, { group: ORDERED });
    // the delayed job holds its place at the head of the line: the second waits behind it
    expect(await q.getGroup('o')).to.include({ waiting: 1, delayed: 1, heldBy: first.id, seq: 2 });
    expect(await q.getJobCounts()).to.include({ waiting: 1, delayed: 1 });
    const log: string[] = [];
    h.worker(name, logging(log), { concurrency: 4, promotionInterval: 50 });
    await waitFor(async () => (await q.getJobCounts()).completed === 2, 'both jobs completed');
    expect(log).to.deep.equal(oneAtATime(['first', 'second']));
    expect((await q.getJob(second.id))?.state).to.equal('completed');
    expect(await q.getGroup('o')).to.include({ waiting: 0, delayed: 0, active: 0, heldBy: null });
  });

  it('several delayed jobs of an ordered group run in the order they were added, not the order they fall due', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const plan: [string, number][] = [
      ['d600', 600], ['d100', 100], ['now-1', 0], ['d300', 300], ['d1', 1], ['now-2', 0], ['fail-once-d50', 50], ['now-3', 0],
    ];
    for (const [n, delay] of plan) await q.add(n, {}, { group: ORDERED, delay, attempts: 2, backoff: 100 });
    expect(await q.getGroup('o')).to.include({ waiting: 3, delayed: 5 });
    const log: string[] = [];
    h.worker(name, logging(log), { concurrency: 4, promotionInterval: 20 });
    await waitFor(async () => (await q.getJobCounts()).completed === plan.length, 'every job completed');
    // the failed first attempt keeps its place too: its retry runs before the job added after it
    const expected = oneAtATime(plan.map(([n]) => n));
    const at = expected.indexOf('end fail-once-d50');
    expected.splice(at + 1, 0, 'start fail-once-d50', 'end fail-once-d50');
    expect(log).to.deep.equal(expected);
    expect(await q.getGroup('o')).to.include({ waiting: 0, delayed: 0, active: 0, heldBy: null, seq: plan.length });
  });

  it('on promotion a delayed job becomes startable in its place, ahead of the jobs added after it', async () => {
    const q = h.queue(uniqueQueue());
    const d = await q.add('d', {}, { group: ORDERED, delay: 1 });
    await q.add('b', {}, { group: ORDERED });
    await q.add('c', {}, { group: ORDERED });
    // not due yet, or due but not promoted: nothing starts (the line starts with a delayed job)
    expect(await fetch(q)).to.have.length(0);
    expect(await raw.zscore(q.keys.readyGroups, 'o')).to.equal(null);
    await waitFor(async () => (await promote(q)) === 1, 'the delayed job promoted');
    expect(await q.getGroup('o')).to.include({ waiting: 3, delayed: 0, heldBy: null });
    expect(await q.getJobCounts()).to.include({ waiting: 3, delayed: 0 });
    const [claim] = await fetch(q);
    expect(decodeClaim(claim).id).to.equal(d.id);
    expect(await fetch(q, 'c2')).to.have.length(0); // one at a time
  });

  it('a delayed job of a plain group blocks nothing', async () => {
    const q = h.queue(uniqueQueue());
    const plain = { id: 'p', maxConcurrency: 1 };
    const d = await q.add('d', {}, { group: plain, delay: 60_000 });
    const b = await q.add('b', {}, { group: plain });
    expect(await q.getGroup('p')).to.include({ waiting: 1, delayed: 0, heldBy: null });
    const [claim] = await fetch(q);
    expect(decodeClaim(claim).id).to.equal(b.id);
    expect((await q.getJob(d.id))?.state).to.equal('delayed');
    expect(await raw.zrange(q.keys.groupJobs('p'), '0', '-1')).to.deep.equal([]);
  });

  it('removing a delayed job that holds its place frees the ordered group', async () => {
    const q = h.queue(uniqueQueue());
    const d = await q.add('d', {}, { group: ORDERED, delay: 60_000 });
    const b = await q.add('b', {}, { group: ORDERED });
    expect(await fetch(q)).to.have.length(0);
    expect(await q.remove(d.id)).to.equal(true);
    expect(await q.getGroup('o')).to.include({ waiting: 1, delayed: 0, heldBy: null });
    expect(await raw.zscore(q.keys.readyGroups, 'o')).to.not.equal(null);
    const [claim] = await fetch(q);
    expect(decodeClaim(claim).id).to.equal(b.id);
    expect(await q.getJobCounts()).to.include({ waiting: 0, delayed: 0, active: 1 });
  });

  it('drain --delayed removes a delayed job that holds its place, and the group runs what is added next', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    await q.add('d1', {}, { group: ORDERED, delay: 60_000 });
    await q.add('b', {}, { group: ORDERED });
    await q.add('d2', {}, { group: ORDERED, delay: 60_000 });
    // without --delayed only the waiting job goes; the delayed ones keep their places
    expect((await q.drain()).removed).to.equal(1);
    expect(await q.getGroup('o')).to.include({ waiting: 0, delayed: 2 });
    expect((await q.drain({ delayed: true })).removed).to.equal(2);
    expect(await q.getGroup('o')).to.include({ waiting: 0, delayed: 0, heldBy: null, active: 0 });
    expect(await raw.exists(q.keys.groupJobs('o'))).to.equal(0);
    expect(await q.getJobCounts()).to.include({ waiting: 0, delayed: 0 });
    const log: string[] = [];
    h.worker(name, logging(log), { promotionInterval: 50 });
    await q.add('after', {}, { group: ORDERED });
    await waitFor(() => log.includes('end after'), 'the job added after the drain to run');
  });

  it('a job added while the delayed one runs still waits for it to complete', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    await q.add('first', {}, { group: ORDERED, delay: 50 });
    const log: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    h.worker(
      name,
      async (job: Job) => {
        log.push(`start ${job.name}`);
        if (job.name === 'first') await gate;
        log.push(`end ${job.name}`);
      },
      { concurrency: 4, promotionInterval: 20 },
    );
    await waitFor(() => log.includes('start first'), 'the delayed job to start');
    await q.add('second', {}, { group: ORDERED });
    expect(await fetch(q, 'other')).to.have.length(0); // the group's one slot is taken
    release();
    await waitFor(() => log.includes('end second'), 'the second job to run');
    expect(log).to.deep.equal(oneAtATime(['first', 'second']));
  });
});
