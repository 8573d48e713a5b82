/**
 * A client resends the commands that were unanswered when its connection dropped, so every
 * function may run twice for one request. A repeated call must never break the claim the first
 * run made: the pending entry stays, so the job is run or reclaimed, never lost.
 */
import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { decodeClaim, type ClaimReply } from '../../src/engine/jobs/job.js';
import { CONSUMER_GROUP } from '../../src/engine/shared/keys.js';
import { useServer } from '../helpers/valkey.js';
import { uniqueQueue } from '../helpers/engine.js';

/** The claims' terms (lua/activate.lua): a lock of 0 ms and maxStalledCount 0. */
const TERMS = [0, 0];

describe('faults: a call repeated after its reply was lost', function () {
  const server = useServer();
  let queue: Queue;
  beforeEach(async () => {
    queue = new Queue(uniqueQueue('rep'), { connection: server().url });
    await queue.waitUntilReady();
  });
  afterEach(async () => {
    await queue.close();
  });

  async function delivered(consumer: string): Promise<[string, string]> {
    await callFunction(queue.client, 'glidemq_fetch', queue.keys.meta, [consumer, 0, 0, 0]); // creates the group
    const job = await queue.add('t', {});
    const r = (await queue.client.xreadgroup('GROUP', CONSUMER_GROUP, consumer, 'COUNT', 1, 'STREAMS', queue.keys.stream, '>')) as [string, [string, string[]][]][];
    const [sid] = r[0][1][0];
    return [sid, job.id];
  }

  async function pendingIds(): Promise<string[]> {
    const p = (await queue.client.xpending(queue.keys.stream, CONSUMER_GROUP, '-', '+', 10)) as [string][];
    return p.map((e) => e[0]);
  }

  it('glidemq_activate repeated by the same worker keeps the pending entry and hands the claim over again', async () => {
    const [sid, id] = await delivered('w1');
    const args = ['w1', 1, ...TERMS, '', 1, sid, id];
    const first = (await callFunction(queue.client, 'glidemq_activate', queue.keys.meta, args)) as unknown[];
    expect(first).to.have.length(2);
    const again = (await callFunction(queue.client, 'glidemq_activate', queue.keys.meta, args)) as unknown[];
    expect(again, 'the repeat returns the claim, since the worker never saw the first reply').to.have.length(2);
    expect((again[1] as unknown[])[1], 'the same claim: a worker that gets both runs it once').to.equal((first[1] as unknown[])[1]);
    expect(await pendingIds()).to.deep.equal([sid]);
    const h = await queue.client.hgetall(queue.keys.job(id));
    expect(h.state).to.equal('active');
    expect(h.owner).to.equal('w1');
    expect(h.sid).to.equal(sid);
  });

  it('glidemq_activate for another consumer leaves a live claim and its entry alone', async () => {
    const [sid, id] = await delivered('w1');
    await callFunction(queue.client, 'glidemq_activate', queue.keys.meta, ['w1', 1, ...TERMS, '', 1, sid, id]);
    const other = (await callFunction(queue.client, 'glidemq_activate', queue.keys.meta, ['w2', 1, ...TERMS, '', 1, sid, id])) as unknown[];
    expect(other).to.have.length(1);
    expect(await pendingIds()).to.deep.equal([sid]);
    expect((await queue.client.hgetall(queue.keys.job(id))).owner).to.equal('w1');
  });

  it('a repeated activate while paused does not hand back (and so drop) the live claim', async () => {
    const [sid, id] = await delivered('w1');
    await callFunction(queue.client, 'glidemq_activate', queue.keys.meta, ['w1', 1, ...TERMS, '', 1, sid, id]);
    await queue.pause();
    await callFunction(queue.client, 'glidemq_activate', queue.keys.meta, ['w1', 1, ...TERMS, '', 1, sid, id]);
    expect(await pendingIds()).to.deep.equal([sid]);
    expect((await queue.client.hgetall(queue.keys.job(id))).state).to.equal('active');
  });

  it('glidemq_finish repeated after it completed the job answers completed again and changes nothing', async () => {
    const [sid, id] = await delivered('w1');
    const act = (await callFunction(queue.client, 'glidemq_activate', queue.keys.meta, ['w1', 1, ...TERMS, '', 1, sid, id])) as ClaimReply[];
    const { fence } = decodeClaim(act[1]);
    const args = [id, fence, 'w1', 'completed', '"ok"', -1, 0, '', 1, '0', ...TERMS];
    const first = (await callFunction(queue.client, 'glidemq_finish', queue.keys.meta, args)) as unknown[];
    expect(first[0]).to.equal('completed');
    const before = await queue.client.hgetall(queue.keys.job(id));
    const again = (await callFunction(queue.client, 'glidemq_finish', queue.keys.meta, args)) as unknown[];
    expect(again[0]).to.equal('completed');
    expect(await queue.client.hgetall(queue.keys.job(id))).to.deep.equal(before);
    const c = await queue.getJobCounts();
    expect([c.completed, c.active, c.waiting]).to.deep.equal([1, 0, 0]);
  });

  it('a finish that arrives after a stall failed its claim is stale, not a repeat', async () => {
    const [sid, id] = await delivered('w1');
    const act = (await callFunction(queue.client, 'glidemq_activate', queue.keys.meta, ['w1', 1, ...TERMS, '', 1, sid, id])) as ClaimReply[];
    const { fence } = decodeClaim(act[1]);
    // its terms (TERMS): lock 0 and maxStalledCount 0, so the first stall fails the job
    const r = (await callFunction(queue.client, 'glidemq_reclaimStalled', queue.keys.meta, ['w2', 0, 0, 60000, 0, '0-0', ''])) as unknown[];
    expect(r[2]).to.deep.equal([id]);
    const late = (await callFunction(queue.client, 'glidemq_finish', queue.keys.meta, [id, fence, 'w1', 'completed', '"ok"', -1, 0, '', 1, '0', ...TERMS])) as unknown[];
    expect(late[0]).to.equal('stale');
    expect((await queue.client.hgetall(queue.keys.job(id))).state).to.equal('failed');
  });
});
