import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import type { Redis } from 'ioredis';
import { InvalidArgumentError, PayloadTooLargeError, WrongTypeError } from '../../src/engine/shared/errors.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { encodeJob } from '../../src/engine/producing/options.js';
import { useServer } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { keyspaceFingerprint } from '../helpers/keyspace.js';

/** The server's clock (TIME) in ms. */
async function serverMs(q: Queue): Promise<number> {
  const [s, us] = await q.client.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

describe('Queue (real valkey-server)', () => {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  it('stores the job hash with payload and metadata, and counts it as waiting', async () => {
    const q = h.queue(uniqueQueue());
    const job = await q.add('email', { to: 'ann' }, { attempts: 3, backoff: { type: 'fixed', delay: 10 } });
    const stored = await q.getJob(job.id);
    expect(stored?.name).to.equal('email');
    expect(stored?.data).to.deep.equal({ to: 'ann' });
    expect(stored?.state).to.equal('waiting');
    expect(stored?.opts.attempts).to.equal(3);
    expect(stored?.opts.backoff).to.deep.equal({ type: 'fixed', delay: 10 });
    const counts = await q.getJobCounts();
    expect(counts.waiting).to.equal(1);
    expect(counts.active).to.equal(0);
  });

  it('a duplicate custom job id adds nothing and returns the existing id', async () => {
    const q = h.queue(uniqueQueue());
    const first = await q.add('a', { v: 1 }, { jobId: 'order-7' });
    const second = await q.add('a', { v: 2 }, { jobId: 'order-7' });
    expect(first.id).to.equal('order-7');
    expect(second.id).to.equal('order-7');
    expect((second as unknown as { created: boolean }).created).to.equal(false);
    expect((await q.getJob('order-7'))?.data).to.deep.equal({ v: 1 });
    expect((await q.getJobCounts()).waiting).to.equal(1);
  });

  it('auto ids skip numbers a job already took (custom ids cannot be whole numbers now; an older queue may hold some)', async () => {
    const q = h.queue(uniqueQueue());
    await q.client.hset(q.keys.job('1'), 'name', 'a', 'data', '{}', 'ts', '0', 'state', 'completed');
    const next = await q.add('a', {});
    expect(next.id).to.equal('2');
  });

  it('validates priority, attempts, delay and payload size before writing anything', async () => {
    const name = uniqueQueue();
    const q = new Queue(name, { connection: server().url, maxPayloadBytes: 100 });
    h.queues.push(q);
    for (const bad of [-1, 2097153, 1.5, Number.NaN]) {
      let err: unknown;
      try {
        await q.add('a', {}, { priority: bad });
      } catch (e) {
        err = e;
      }
      expect(err, `priority ${bad}`).to.be.instanceOf(InvalidArgumentError);
    }
    await q.add('a', {}, { priority: 2097152 });
    let tooLarge: unknown;
    try {
      await q.add('a', { blob: 'x'.repeat(200) });
    } catch (e) {
      tooLarge = e;
    }
    expect(tooLarge).to.be.instanceOf(PayloadTooLargeError);
    expect(String((tooLarge as Error).message)).to.match(/over the limit of 100 bytes/);
    let bulkErr: unknown;
    try {
      await q.addBulk([{ name: 'a', data: {} }, { name: 'b', data: { blob: 'x'.repeat(200) } }]);
    } catch (e) {
      bulkErr = e;
    }
    expect((bulkErr as { index?: number }).index).to.equal(2);
    const counts = await q.getJobCounts();
    expect(counts.prioritized + counts.waiting).to.equal(1); // only the valid max-priority job
  });

  it('addBulk writes many jobs in pipelined chunks, in order', async () => {
    const q = h.queue(uniqueQueue());
    const jobs = await q.addBulk(Array.from({ length: 1000 }, (_, i) => ({ name: 'b', data: { i } })));
    expect(jobs).to.have.length(1000);
    expect(jobs[0].id).to.equal('1');
    expect(jobs[999].id).to.equal('1000');
    expect((await q.getJobCounts()).waiting).to.equal(1000);
  });

  it('getJobs lists jobs by state', async () => {
    const q = h.queue(uniqueQueue());
    await q.add('w', {});
    await q.add('d', {}, { delay: 60_000 });
    await q.add('p', {}, { priority: 5 });
    expect((await q.getJobs('waiting')).map((j) => j.name)).to.deep.equal(['w']);
    expect((await q.getJobs('delayed')).map((j) => j.name)).to.deep.equal(['d']);
    expect((await q.getJobs('prioritized')).map((j) => j.name)).to.deep.equal(['p']);
  });

  it('removes a waiting job, and a removed job is never re-created by promotion', async () => {
    const q = h.queue(uniqueQueue());
    const a = await q.add('a', {});
    const d = await q.add('d', {}, { delay: 1 });
    expect(await q.remove(a.id)).to.equal(true);
    expect(await q.remove(d.id)).to.equal(true);
    expect(await q.getJob(a.id)).to.equal(undefined);
    // a leftover scheduled id, due now: promotion drops it and never re-creates the job
    await q.client.zadd(q.keys.scheduled, '0', d.id);
    await q.client.fcall('glidemq_promote', 1, q.keys.meta, 100);
    expect(await q.client.exists(q.keys.job(d.id))).to.equal(0);
    const counts = await q.getJobCounts();
    expect(counts.waiting + counts.delayed).to.equal(0);
  });

  it('stamps jobs with the server\'s time, and counts delays from it', async () => {
    const q = h.queue(uniqueQueue());
    await q.waitUntilReady();
    const before = await serverMs(q);
    const job = await q.add('a', {});
    const [bulk] = await q.addBulk([{ name: 'b', data: {}, opts: { delay: 60_000 } }]);
    const after = await serverMs(q);
    expect(job.timestamp).to.be.within(before, after);
    expect((await q.getJob(job.id))?.timestamp).to.equal(job.timestamp);
    expect(bulk.timestamp).to.be.within(job.timestamp, after);
    expect((await q.getJob(bulk.id))?.timestamp).to.equal(bulk.timestamp);
    expect(Number(await q.client.zscore(q.keys.scheduled, bulk.id))).to.equal(bulk.timestamp + 60_000);
  });

  it('glidemq_add checks every argument and the type of every key it writes before writing anything', async () => {
    const q = h.queue(uniqueQueue());
    await q.add('seed', {}, { jobId: 'seed' }); // a queue that exists
    const c = q.client as Redis;
    const pattern = `*{${q.name}}*`;
    const refused = async (args: (string | number)[], code: new (...a: never[]) => Error, why: RegExp) => {
      const before = await keyspaceFingerprint(c, pattern);
      let err: unknown;
      await callFunction(c, 'glidemq_add', q.keys.meta, args).catch((e) => (err = e));
      expect(err, String(why)).to.be.instanceOf(code);
      expect(String((err as Error).message), String(why)).to.match(why);
      expect(await keyspaceFingerprint(c, pattern), String(why)).to.equal(before);
    };
    const ok = encodeJob('ok', {});
    const job = (opts: Parameters<typeof encodeJob>[2], edit: Record<number, string | number> = {}) => {
      const g = encodeJob('j', { v: 1 }, opts);
      for (const [i, v] of Object.entries(edit)) g[Number(i)] = v;
      return g;
    };
    // arguments: the first bad one is named, with its job; a good first job is not written either
    await refused([0, '', 0, 0, 2, ...ok, ...job({}, { 3: 'nan' })], InvalidArgumentError, /glidemq_add: group 2 argument delay must be/);
    await refused([0, '', 0, 0, 2, ...ok, ...job({}, { 4: 2097153 })], InvalidArgumentError, /priority must be a whole number from 0 to 2097152/);
    await refused([0, '', 0, 0, 2, ...ok, ...job({}, { 5: 'yes' })], InvalidArgumentError, /lifo must be/);
    await refused([0, '', 0, 0, 2, ...ok, ...job({}, { 6: 0 })], InvalidArgumentError, /attempts must be/);
    await refused([0, '', 0, 0, 2, ...ok, ...job({}, { 7: '[1]' })], InvalidArgumentError, /opts must be '' or a JSON object/);
    await refused([0, '', 0, 0, 2, ...ok, ...job({}, { 0: 'a:b' })], InvalidArgumentError, /jobId must be/);
    await refused([0, '', 0, 0, 2, ...ok, ...job({}, { 1: '' })], InvalidArgumentError, /name must be a non-empty string/);
    await refused([0, '', 0, 0, 2, ...ok, ...job({}, { 10: 'sometimes', 8: 'd' })], InvalidArgumentError, /dedupMode must be '' \(no dedup\), simple, throttle, extend or debounce/);
    await refused([0, '', 0, 0, 2, ...ok, ...job({}, { 9: 500 })], InvalidArgumentError, /job #2 of the call: dedupMode and dedupTtl need a dedupId/);
    await refused([0, '', 0, 0, 2, ...ok, ...job({ priority: 3 }, { 5: '1' })], InvalidArgumentError, /job #2 of the call: a job cannot be both prioritized and LIFO/);
    await refused([0, '', 0, 0, 2, ...ok, ...job({ jobId: 'x' }, { 11: '{"id":"g","maxConcurrency":-1}' })], InvalidArgumentError, /job x: groupSpec: group.maxConcurrency/);
    await refused([0, '', 0, 0, 3, ...ok, ...ok], InvalidArgumentError, /count is 3, so expected 5 arguments then groups of 12/);
    await refused([0, '', 0, 0, 1, ...ok, 'extra'], InvalidArgumentError, /count is 1/);
    await refused(['nan', '', 0, 0, 1, ...ok], InvalidArgumentError, /maxPayload must be/);
    await refused([5, '', 0, 0, 2, ...ok, ...job({})], PayloadTooLargeError, /job #2 of the call: data is 7 bytes, over the limit of 5 bytes/);
    await refused([0, 'p1', 0, 0, 1, ...ok], InvalidArgumentError, /producer, seq and answeredBelow go together/);
    await refused([0, 'p1', 3, 4, 1, ...ok], InvalidArgumentError, /producer, seq and answeredBelow go together/);
    await refused([0, '', 2, 1, 1, ...ok], InvalidArgumentError, /producer, seq and answeredBelow go together/);
    await refused([0, 'a b', 1, 1, 1, ...ok], InvalidArgumentError, /producer must be '' or a producer id/);
    // keys another program wrote with another type: each refuses the whole call, naming the key
    await c.set(q.keys.producer('p1'), 'x');
    await refused([0, 'p1', 1, 1, 1, ...ok], WrongTypeError, /:producer:p1 holds a string/);
    await c.del(q.keys.producer('p1'));
    await c.set(q.keys.prioritized, 'x');
    await refused([0, '', 0, 0, 2, ...ok, ...job({ priority: 1 })], WrongTypeError, /:prioritized holds a string/);
    await c.del(q.keys.prioritized);
    await c.set(q.keys.job('custom'), 'x');
    await refused([0, '', 0, 0, 2, ...ok, ...job({ jobId: 'custom' })], WrongTypeError, /:job:custom holds a string/);
    await c.del(q.keys.job('custom'));
    await c.set(q.keys.dedup, 'x');
    await refused([0, '', 0, 0, 2, ...ok, ...job({ dedup: { id: 'd' } })], WrongTypeError, /:dedup holds a string/);
    await c.del(q.keys.dedup);
    await c.hset(q.keys.dedup, 'd', 's:0:gone');
    await c.set(q.keys.job('gone'), 'x');
    await refused([0, '', 0, 0, 2, ...ok, ...job({ dedup: { id: 'd' } })], WrongTypeError, /:job:gone holds a string/);
    await c.del(q.keys.job('gone'), q.keys.dedup);
    await c.set(q.keys.groupJobs('g'), 'x');
    await refused([0, '', 0, 0, 2, ...ok, ...job({ group: { id: 'g' } })], WrongTypeError, /holds a string/);
    await c.del(q.keys.groupJobs('g'));
    await c.set(q.keys.scheduled, 'x');
    await refused([0, '', 0, 0, 2, ...ok, ...job({ delay: 10 })], WrongTypeError, /:scheduled holds a string/);
    await c.del(q.keys.scheduled);
    // and with the keys put right, the same call goes through
    const r = (await callFunction(c, 'glidemq_add', q.keys.meta, [0, '', 0, 0, 2, ...ok, ...job({ delay: 10, jobId: 'custom' })])) as unknown[];
    expect(r.slice(3)).to.deep.equal(['custom', 1]);
  });

  it('refuses queue names that would break the hash tag', () => {
    for (const bad of ['a{b', 'a}b', 'a:b', '', 'a b']) {
      expect(() => new Queue(bad, { connection: server().url }), bad).to.throw(InvalidArgumentError);
    }
  });
});
