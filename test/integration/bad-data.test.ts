/**
 * Bad data in the engine: a processor that returns what JSON cannot hold, job hashes that are
 * corrupt or were written by another program, and keys of the wrong type where glidemq keeps its
 * structures. Each job with bad data fails with a clear reason (or is skipped); the worker never
 * crashes and goes on with the other jobs; a refused call writes nothing; errors are typed.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import { WrongTypeError } from '../../src/engine/shared/errors.js';
import { keyspaceFingerprint } from '../helpers/keyspace.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { uniqueQueue } from '../helpers/engine.js';

describe('bad data: processors and job hashes', function () {
  this.timeout(30000);
  const server = useServer();
  let admin: Redis;
  const open: { close(): Promise<void> }[] = [];
  before(() => {
    admin = server().client();
  });
  after(() => admin.disconnect());
  afterEach(async () => {
    for (const o of open.splice(0).reverse()) await o.close();
  });

  function queue(name: string): Queue {
    const q = new Queue(name, { connection: server().url });
    open.push(q);
    return q;
  }

  function worker(name: string, processor: (job: any) => unknown, errors: unknown[] = []): Worker {
    const w = new Worker(name, async (job) => processor(job), { connection: server().url, concurrency: 2, blockTimeout: 300 });
    w.on('error', (e) => errors.push(e));
    open.push({ close: () => w.close(true) });
    return w;
  }

  it('a return value JSON cannot hold fails that job with the reason; the worker goes on', async () => {
    const name = uniqueQueue('ret');
    const q = queue(name);
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    const results: Record<string, () => unknown> = {
      bigint: () => 10n,
      circular: () => circular,
      fn: () => () => 1,
      symbol: () => Symbol('s'),
      fine: () => ({ ok: true }),
    };
    for (const kind of Object.keys(results)) await q.add(kind, {}, { attempts: 3 });
    worker(name, (job) => results[job.name]());
    await waitFor(async () => {
      const c = await q.getJobCounts();
      return c.completed + c.failed === 5;
    }, 'every job finished');
    const failed = await q.getJobs('failed');
    const reasons = Object.fromEntries(failed.map((j) => [j.name, j.failedReason]));
    expect(Object.keys(reasons).sort()).to.deep.equal(['bigint', 'circular', 'fn', 'symbol']);
    expect(reasons.bigint).to.match(/cannot be stored as JSON.*BigInt/);
    expect(reasons.circular).to.match(/cannot be stored as JSON.*circular/i);
    expect(reasons.fn).to.match(/returned a function, which cannot be stored as JSON/);
    expect(reasons.symbol).to.match(/returned a symbol/);
    // unrecoverable: no attempt is spent on retrying a value that can never be stored
    for (const j of failed) expect(j.attemptsMade).to.equal(1);
    expect((await q.getJobs('completed')).map((j) => j.name)).to.deep.equal(['fine']);
  });

  it('job data that is not JSON, or a hash missing its fields, fails that job with the reason', async () => {
    const name = uniqueQueue('corrupt');
    const q = queue(name);
    const broken = await q.add('broken-json', { a: 1 });
    const noData = await q.add('no-data', { a: 1 });
    const noName = await q.add('no-name', { a: 1 }, { priority: 1 });
    const good = await q.add('good', { a: 1 });
    await admin.hset(q.keys.job(broken.id), 'data', '{"a": 1,');
    await admin.hdel(q.keys.job(noData.id), 'data');
    await admin.hdel(q.keys.job(noName.id), 'name');
    const ran: string[] = [];
    worker(name, (job) => {
      ran.push(job.id);
      return 1;
    });
    await waitFor(async () => {
      const c = await q.getJobCounts();
      return c.completed + c.failed === 4;
    }, 'every job finished');
    expect(ran).to.deep.equal([good.id]);
    expect((await q.getJob(broken.id))!.failedReason).to.match(/data is not valid JSON/);
    expect((await q.getJob(noData.id))!.failedReason).to.match(/no data field/);
    expect((await q.getJob(noName.id))!.failedReason).to.match(/no name field/);
  });

  it('a hash another program wrote, and stream entries naming it, are skipped, never run', async () => {
    const name = uniqueQueue('foreign');
    const q = queue(name);
    await q.add('first', {});
    // another program: a hash of its own under a glidemq job key, a stream entry for it, an entry with no id
    await admin.hset(q.keys.job('foreign-1'), 'owner', 'someone-else', 'payload', '\u0000\u00ff binary');
    await admin.xadd(q.keys.stream, '*', 'id', 'foreign-1');
    await admin.xadd(q.keys.stream, '*', 'hello', 'world');
    await admin.xadd(q.keys.stream, '*', 'id', 'does-not-exist');
    await admin.set(q.keys.job('wrong-type'), 'a string where a hash belongs');
    await admin.xadd(q.keys.stream, '*', 'id', 'wrong-type');
    await admin.zadd(q.keys.prioritized, 1, 'wrong-type');
    await admin.lpush(q.keys.lifo, 'wrong-type');
    const last = await q.add('last', {});
    const ran: string[] = [];
    const errors: unknown[] = [];
    worker(name, (job) => void ran.push(job.name), errors);
    await waitFor(() => ran.includes('last'), 'the job after the foreign entries');
    await waitFor(async () => (await q.getJobCounts()).active === 0, 'nothing left claimed');
    expect(ran.sort()).to.deep.equal(['first', 'last']);
    expect((await q.getJob(last.id))!.state).to.equal('completed');
    expect(await admin.hget(q.keys.job('foreign-1'), 'owner'), 'the foreign hash is left as it was').to.equal('someone-else');
    expect(await admin.get(q.keys.job('wrong-type'))).to.equal('a string where a hash belongs');
    expect(errors).to.deep.equal([]);
  });
});

describe('bad data: refused adds write nothing', function () {
  this.timeout(30000);
  const server = useServer();
  let admin: Redis;
  let q: Queue;
  before(async () => {
    admin = server().client();
    q = new Queue(uniqueQueue('refuse'), { connection: server().url, maxPayloadBytes: 1024 });
    await q.add('seed', {});
  });
  after(async () => {
    await q.close();
    admin.disconnect();
  });

  const keyspace = () => keyspaceFingerprint(admin);

  const refusals: [string, () => Promise<unknown>, RegExp][] = [
    ['a bulk whose third job has a bad priority', () => q.addBulk([{ name: 'a', data: {} }, { name: 'b', data: {} }, { name: 'c', data: {}, opts: { priority: -1 } }]), /job 3: priority/],
    ['an oversized payload', () => q.add('big', { s: 'x'.repeat(2000) }), /over the limit of 1024 bytes/],
    ['a bulk with one oversized payload', () => q.addBulk([{ name: 'a', data: {} }, { name: 'big', data: { s: 'x'.repeat(2000) } }]), /job 2: payload/],
    ['data JSON cannot hold', () => q.add('bigint', { n: 1n }), /cannot be serialised to JSON/],
    ['a negative delay', () => q.add('d', {}, { delay: -1 }), /delay/],
    // any other type name is a custom one (the worker's backoffStrategy): only a non-name is refused
    ['a backoff type that is not a name', () => q.add('b', {}, { backoff: { type: '' as 'fixed', delay: 1 } }), /backoff type/],
    ['a backoff jitter above 1', () => q.add('b', {}, { backoff: { type: 'fixed', delay: 1, jitter: 2 } }), /jitter/],
    ['a job id with a colon', () => q.add('i', {}, { jobId: 'a:b' }), /job id "a:b" is invalid/],
    ['a job id with a control character', () => q.add('i', {}, { jobId: 'a\u0007b' }), /is invalid/],
    ['zero attempts', () => q.add('z', {}, { attempts: 0 }), /attempts/],
  ];
  for (const [what, call, message] of refusals) {
    it(`${what}: a typed error, nothing written`, async () => {
      const before = await keyspace();
      let err: unknown;
      await call().catch((e) => (err = e));
      expect(err, 'refused').to.be.instanceOf(Error);
      expect((err as { usage?: boolean }).usage, 'a usage error').to.equal(true);
      expect((err as Error).message).to.match(message);
      expect(await keyspace()).to.equal(before);
    });
  }

  it('binary-looking and non-BMP text in job data and return values round-trips exactly', async () => {
    const name = uniqueQueue('bin');
    const bq = new Queue(name, { connection: server().url });
    const data = { nul: '\u0000', ff: '\u00ff\u00fe', lone: '\ud800', emoji: '\u{1F600}', ctrl: '\u0007\u001b[31m', nested: [{ k: '\uffff' }] };
    const job = await bq.add('bin', data);
    const w = new Worker(name, async (j) => ({ back: j.data }), { connection: server().url, blockTimeout: 300 });
    try {
      await waitFor(async () => (await bq.getJob(job.id))?.state === 'completed', 'completed');
      const done = (await bq.getJob(job.id))!;
      expect(done.data).to.deep.equal(data);
      expect(done.returnvalue).to.deep.equal({ back: data });
    } finally {
      await w.close();
      await bq.close();
    }
  });
});

describe('bad data: keys of the wrong type', function () {
  this.timeout(30000);
  const server = useServer();
  let admin: Redis;
  before(() => {
    admin = server().client();
  });
  after(() => admin.disconnect());

  const snapshot = () => keyspaceFingerprint(admin);

  for (const [label, shape] of [
    ['stream', 'stream'],
    ['scheduled', 'zset'],
    ['prioritized', 'zset'],
    ['lifo', 'list'],
    ['meta', 'hash'],
  ] as const) {
    it(`a string at the ${label} key: add is refused naming the key, and writes nothing`, async () => {
      const name = uniqueQueue('wt');
      const q = new Queue(name, { connection: server().url });
      try {
        await q.add('warmup', {});
        const key = (q.keys as unknown as Record<string, string>)[label];
        await admin.del(key);
        await admin.set(key, 'x');
        const before = await snapshot();
        const opts = label === 'scheduled' ? { delay: 1000 } : label === 'prioritized' ? { priority: 1 } : label === 'lifo' ? { lifo: true } : {};
        let err: unknown;
        await q.add('refused', {}, opts).catch((e) => (err = e));
        expect(err).to.be.instanceOf(WrongTypeError);
        expect((err as Error).message).to.contain(key);
        expect((err as Error).message).to.match(new RegExp(`holds a string.*${shape}`));
        expect(await snapshot(), 'nothing was written').to.equal(before);
      } finally {
        await q.close();
      }
    });
  }

  it('a worker on a queue whose stream is a string reports a typed error naming it, and recovers once it is fixed', async () => {
    const name = uniqueQueue('wtw');
    const q = new Queue(name, { connection: server().url });
    const errors: Error[] = [];
    let ran = 0;
    await q.add('before', {});
    await admin.del(q.keys.stream);
    await admin.set(q.keys.stream, 'x');
    const w = new Worker(name, async () => void ran++, { connection: server().url, blockTimeout: 200 });
    w.on('error', (e) => errors.push(e));
    try {
      await waitFor(() => errors.length >= 2, 'errors reported');
      expect(errors[0]).to.be.instanceOf(WrongTypeError);
      expect(errors[0].message).to.contain(q.keys.stream);
      const seen = errors.length;
      await new Promise((r) => setTimeout(r, 600));
      expect(errors.length - seen, 'it backs off instead of spinning').to.be.below(6);
      await admin.del(q.keys.stream);
      await q.add('after', {});
      await waitFor(() => ran >= 1, 'the worker processing again after the key was fixed', 15000);
    } finally {
      await w.close(true);
      await q.close();
    }
  });

  it('stats on a queue with a wrong-type key is a typed error naming the key', async () => {
    const name = uniqueQueue('wts');
    const q = new Queue(name, { connection: server().url });
    try {
      await q.add('a', {});
      await admin.del(q.keys.completed);
      await admin.sadd(q.keys.completed, 'x');
      let err: unknown;
      await q.getJobCounts().catch((e) => (err = e));
      expect(err).to.be.instanceOf(WrongTypeError);
      expect((err as Error).message).to.contain(q.keys.completed);
    } finally {
      await q.close();
    }
  });
});
