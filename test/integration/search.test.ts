/**
 * Queue.search (lua/search.lua): the jobs of one state whose failure reason, name or data holds a
 * text, found on the server a bounded step at a time, in every state, paged by a cursor.
 */
import { expect } from 'chai';
import type { Job } from '../../src/engine/jobs/job.js';
import type { Queue } from '../../src/engine/queue/queue.js';
import type { SearchState } from '../../src/engine/inspecting/job-search.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';

/** Every match of a whole search, step by step, and how many steps it took. */
async function searchAll(q: Queue, state: SearchState, grep: string, count: number): Promise<{ ids: string[]; steps: number }> {
  const ids: string[] = [];
  let cursor = '0';
  let steps = 0;
  do {
    const page = await q.search({ state, grep, cursor, count });
    ids.push(...page.jobs.map((j: Job) => j.id));
    cursor = page.cursor;
    steps++;
    expect(steps, 'a search that never ends').to.be.below(1000);
  } while (cursor !== '0');
  return { ids, steps };
}

/**
 * Finishes every waiting job of `q` by hand (a worker without a processor: no read loop to stop
 * at close), failing it with the reason `reasonOf` gives, or completing it when that is undefined.
 */
async function finishByHand(h: Harness, name: string, reasonOf: (job: Job) => string | undefined): Promise<void> {
  const w = h.worker(name, null as never);
  for (let job = await w.getNextJob('hand', { block: false }); job; job = await w.getNextJob('hand', { block: false })) {
    const reason = reasonOf(job);
    if (reason === undefined) await job.moveToCompleted('ok', 'hand', false);
    else await job.moveToFailed(new Error(reason), 'hand');
  }
  await w.close();
}

const sorted = (ids: string[]) => [...ids].sort((a, b) => Number(a) - Number(b));

describe('Queue.search: reason, name and data, bounded and paged on the server', function () {
  this.timeout(30_000);
  // (registered before the server's: mocha runs `after` hooks in order, and clients close faster
  // while their server is still up)
  after(() => h.cleanup());
  const server = useServer();
  const h = new Harness(server);

  it('failed and completed: matches the failure reason, the name and the data, ignoring case, across steps', async () => {
    const name = uniqueQueue('sfail');
    const q = h.queue(name);
    const added = await q.addBulk(Array.from({ length: 12 }, (_, i) => ({ name: i % 3 === 0 ? 'Invoice' : 'mail', data: { n: i, to: i % 4 === 0 ? 'Alice@example.com' : 'bob' } })));
    await finishByHand(h, name, (job) => (job.data.n % 2 === 0 ? `SMTP Timeout on try ${job.data.n}` : undefined));
    expect(await q.getJobCounts()).to.include({ failed: 6, completed: 6 });
    const id = (n: number) => added[n].id;

    // the reason, case ignored, paged three entries at a time
    const reason = await searchAll(q, 'failed', 'smtp timeout', 3);
    expect(sorted(reason.ids)).to.deep.equal([0, 2, 4, 6, 8, 10].map(id));
    expect(reason.steps).to.be.at.least(2);
    // the name, and the data (its JSON text)
    expect(sorted((await searchAll(q, 'failed', 'invoice', 2)).ids)).to.deep.equal([0, 6].map(id));
    expect(sorted((await searchAll(q, 'failed', 'ALICE@', 5)).ids)).to.deep.equal([0, 4, 8].map(id));
    expect(sorted((await searchAll(q, 'completed', '"n":1,', 4)).ids)).to.deep.equal([1].map(id));
    expect(sorted((await searchAll(q, 'completed', 'invoice', 100)).ids)).to.deep.equal([3, 9].map(id));
    // plain text: pattern characters mean themselves
    expect((await searchAll(q, 'failed', 'try .', 100)).ids).to.deep.equal([]);
    expect((await searchAll(q, 'failed', '%', 100)).ids).to.deep.equal([]);
  });

  it('a large set is looked at in bounded steps: each step scans at most `count` entries', async () => {
    const name = uniqueQueue('sbig');
    const q = h.queue(name);
    const added = await q.addBulk(Array.from({ length: 2500 }, (_, i) => ({ name: 'later', data: { code: `c${i}x` }, opts: { delay: 600_000 } })));
    const first = await q.search({ state: 'delayed', grep: 'c1234x', count: 100 });
    expect(first.cursor).to.not.equal('0'); // 100 of 2500 looked at
    const all = await searchAll(q, 'delayed', 'c1234x', 1000);
    expect(all.ids).to.deep.equal([added[1234].id]);
    expect(all.steps).to.equal(3);
    const wide = await searchAll(q, 'delayed', 'c12', 1000); // c12x, c120x..c129x, c1200x..c1299x
    expect(wide.ids).to.have.length(111);
  });

  it('waiting (LIFO list and stream), paused, prioritized, active and waiting-children', async () => {
    const name = uniqueQueue('sstates');
    const q = h.queue(name);
    const plain = await q.addBulk(Array.from({ length: 5 }, (_, i) => ({ name: 'w', data: { tag: i % 2 ? 'needle' : 'hay' } })));
    const lifo = await q.addBulk(Array.from({ length: 3 }, (_, i) => ({ name: i === 1 ? 'needle-lifo' : 'w', data: {}, opts: { lifo: true } })));
    const prio = await q.add('p', { tag: 'needle' }, { priority: 3 });
    await q.add('p', { tag: 'hay' }, { priority: 3 });
    const want = sorted([plain[1].id, plain[3].id, lifo[1].id]);
    // two entries a step: the LIFO list's steps, then the stream's
    expect(sorted((await searchAll(q, 'waiting', 'NEEDLE', 2)).ids)).to.deep.equal(want);
    expect((await searchAll(q, 'paused', 'needle', 2)).ids).to.deep.equal([]); // not paused
    await q.pause();
    expect(sorted((await searchAll(q, 'paused', 'needle', 2)).ids)).to.deep.equal(want);
    expect((await searchAll(q, 'prioritized', 'needle', 1)).ids).to.deep.equal([prio.id]);
    await q.resume();

    // active: stream claims (pending entries) and list claims (priority, LIFO), taken by hand
    const w = h.worker(name, null as never);
    for (let i = 0; i < 10; i++) expect(await w.getNextJob('hand', { block: false })).to.not.equal(undefined);
    expect(await q.getActiveCount()).to.equal(10);
    expect(sorted((await searchAll(q, 'active', 'needle', 2)).ids)).to.deep.equal(sorted([...want, prio.id]));
    expect((await searchAll(q, 'waiting', 'needle', 2)).ids).to.deep.equal([]);

    // waiting-children: a flow parent waiting for its child
    const child = uniqueQueue('schild');
    const node = await h.flowProducer().add({ name: 'report-needle', queueName: name, data: {}, children: [{ name: 'c', queueName: child, data: {} }] });
    expect((await searchAll(q, 'waiting-children', 'needle', 10)).ids).to.deep.equal([node.job.id]);
  });

  it('refuses a bad state, text, count or cursor, naming it', async () => {
    const q = h.queue(uniqueQueue('sbad'));
    const refusal = async (opts: Parameters<Queue['search']>[0]) => (await q.search(opts).then(() => undefined, (e: Error) => e))?.message ?? '';
    expect(await refusal({ state: 'nope' as SearchState, grep: 'x' })).to.match(/state must be one of/);
    expect(await refusal({ state: 'failed', grep: '' })).to.match(/grep must be/);
    expect(await refusal({ state: 'failed', grep: 'x', count: 0 })).to.match(/count must be/);
    expect(await refusal({ state: 'failed', grep: 'x', cursor: 'l5' })).to.match(/cursor/);
    expect(await refusal({ state: 'waiting', grep: 'x', cursor: 'junk' })).to.match(/cursor/);
  });
});
