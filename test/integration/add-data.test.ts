/**
 * glidemq_addData (lua/add.lua), the bulk path of addBulk and `enqueue --ndjson`: jobs that share
 * their name and options, only their data sent. Shown: it stores each job exactly as glidemq_add
 * stores one with the same options; its reply (ids as runs) and an id of the counter that a job
 * already holds; once-only calls; refusals that write nothing; and Queue.addBulk over a bulk that
 * mixes such runs with custom ids, dedup and groups, every caller getting its own job's id.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { Queue } from '../../src/engine/queue/queue.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { encodeJob, type BulkJob, type JobOptions } from '../../src/engine/producing/options.js';
import { useServer } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { keyspaceFingerprint } from '../helpers/keyspace.js';

/** glidemq_addData's arguments for `datas` with the options of encodeJob's group `g`. */
function addDataArgs(g: (string | number)[], producer: [string, number, number], datas: string[], maxPayload = 0): (string | number)[] {
  return [maxPayload, ...producer, g[1], g[3], g[4], g[5], g[6], g[7], datas.length, ...datas];
}

/** A job's hash without what differs between two adds of the same job (its time and entry id). */
async function jobFields(c: Redis, q: Queue, id: string): Promise<Record<string, string>> {
  const h = await c.hgetall(q.keys.job(id));
  delete h.ts;
  delete h.sid;
  return h;
}

/** Where job `id` waits: stream, scheduled, prioritized or lifo (and how many are there). */
async function placement(c: Redis, q: Queue, id: string): Promise<string[]> {
  const out: string[] = [];
  const entries = await c.xrange(q.keys.stream, '-', '+');
  if (entries.some(([, f]) => f[1] === id)) out.push('stream');
  if ((await c.zscore(q.keys.scheduled, id)) !== null) out.push('scheduled');
  if ((await c.zscore(q.keys.prioritized, id)) !== null) out.push('prioritized');
  if ((await c.lrange(q.keys.lifo, 0, -1)).includes(id)) out.push('lifo');
  return out;
}

/** The events stream's entries as field lists without their ids. */
async function events(c: Redis, q: Queue): Promise<string[][]> {
  return (await c.xrange(q.keys.events, '-', '+')).map(([, f]) => f);
}

describe('glidemq_addData: many jobs that share their options, only their data sent', function () {
  this.timeout(60000);
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  const OPTIONS: [string, JobOptions][] = [
    ['no options', {}],
    ['attempts, backoff and retention', { attempts: 3, backoff: { type: 'fixed', delay: 1000 }, removeOnComplete: true }],
    ['a delay', { delay: 3_600_000 }],
    ['a priority', { priority: 7 }],
    ['LIFO', { lifo: true }],
  ];
  for (const [what, opts] of OPTIONS) {
    it(`stores a job as glidemq_add stores it: ${what}`, async () => {
      const one = h.queue(uniqueQueue('one'));
      const many = h.queue(uniqueQueue('many'));
      await one.waitUntilReady();
      await many.waitUntilReady();
      const c = one.client as Redis;
      const g = encodeJob('mail', { to: 'ann' }, opts);
      await callFunction(c, 'glidemq_add', one.keys.meta, [0, '', 0, 0, 1, ...g]);
      const reply = (await callFunction(c, 'glidemq_addData', many.keys.meta, addDataArgs(g, ['', 0, 0], [String(g[2]), '{"to":"bob"}']))) as number[];
      expect(reply.slice(1)).to.deep.equal([1, 2]);
      expect(await jobFields(c, many, '1')).to.deep.equal(await jobFields(c, one, '1'));
      expect((await jobFields(c, many, '2')).data).to.equal('{"to":"bob"}');
      expect(await placement(c, many, '1')).to.deep.equal(await placement(c, one, '1'));
      expect(await placement(c, many, '2')).to.deep.equal(await placement(c, one, '1'));
      const stored = (await c.hget(many.keys.job('1'), 'ts')) ?? '';
      expect(Number(stored)).to.equal(reply[0]);
      const first = await events(c, one);
      expect(await events(c, many)).to.deep.equal([first[0], first[0].map((f) => (f === '1' ? '2' : f))]);
    });
  }

  it('answers with the ids as runs; an id of the counter that a job already holds is skipped, that job untouched', async () => {
    const q = h.queue(uniqueQueue());
    await q.waitUntilReady();
    const c = q.client as Redis;
    const g = encodeJob('j', {});
    // a job an older version stored under the numeric custom id '3'
    await c.hset(q.keys.job('3'), 'name', 'old', 'data', '{"old":true}', 'ts', '1', 'state', 'waiting');
    const reply = (await callFunction(c, 'glidemq_addData', q.keys.meta, addDataArgs(g, ['', 0, 0], ['{"n":1}', '{"n":2}', '{"n":3}', '{"n":4}']))) as number[];
    // ids 1, 2, then 3 is taken (5 is the counter's next free id after 4), then 4
    expect(reply.slice(1)).to.deep.equal([1, 2, 5, 5, 4, 4]);
    expect(await c.hget(q.keys.job('3'), 'data')).to.equal('{"old":true}');
    expect(await c.hget(q.keys.job('5'), 'data')).to.equal('{"n":3}');
    expect(await c.hget(q.keys.job('4'), 'data')).to.equal('{"n":4}');
    expect(await c.xlen(q.keys.stream)).to.equal(4);
    // Queue.addBulk reads such a reply into each job's own id
    await c.hset(q.keys.job('7'), 'name', 'old', 'data', '{}', 'ts', '1', 'state', 'waiting');
    const jobs = await q.addBulk(Array.from({ length: 20 }, (_, i) => ({ name: 'j', data: { i } })));
    // 6, then 7 is taken (26 is the counter's next free id after 25), then 8..25
    expect(jobs.map((j) => j.id)).to.deep.equal(['6', '26', ...Array.from({ length: 18 }, (_, i) => String(i + 8))]);
    for (const j of jobs) expect(await c.hget(q.keys.job(j.id), 'data')).to.equal(JSON.stringify(j.data));
  });

  it('a call number already run is answered with its first reply and writes nothing', async () => {
    const q = h.queue(uniqueQueue());
    await q.waitUntilReady();
    const c = q.client as Redis;
    const g = encodeJob('j', {});
    const args = addDataArgs(g, ['pd', 1, 1], ['{"a":1}', '{"a":2}']);
    const first = await callFunction(c, 'glidemq_addData', q.keys.meta, args);
    const before = await keyspaceFingerprint(c, `${q.keys.meta.slice(0, -5)}*`);
    const again = await callFunction(c, 'glidemq_addData', q.keys.meta, args);
    expect(again).to.deep.equal(first);
    expect(await keyspaceFingerprint(c, `${q.keys.meta.slice(0, -5)}*`)).to.equal(before);
    // the next call says call 1 was answered: its reply goes
    await callFunction(c, 'glidemq_addData', q.keys.meta, addDataArgs(g, ['pd', 2, 2], ['{"a":3}']));
    expect(await c.hgetall(q.keys.producer('pd'))).to.have.all.keys('2', 'low');
  });

  it('refuses before any write: data over maxPayload (naming its place), priority with LIFO, a count that does not match', async () => {
    const q = h.queue(uniqueQueue());
    await q.waitUntilReady();
    const c = q.client as Redis;
    await q.add('seed', {});
    const before = await keyspaceFingerprint(c, `${q.keys.meta.slice(0, -5)}*`);
    const g = encodeJob('j', {});
    const refusals: [(string | number)[], RegExp][] = [
      [addDataArgs(g, ['', 0, 0], ['{}', JSON.stringify({ x: 'y'.repeat(100) })], 50), /^ERR_TOO_LARGE: glidemq_addData: job #2 of the call: data is \d+ bytes, over the limit of 50/],
      [[0, '', 0, 0, 'j', 0, 5, '1', 1, '', 1, '{}'], /^ERR_INVALID: glidemq_addData: a job cannot be both prioritized and LIFO/],
      [[0, '', 0, 0, 'j', 0, 0, '0', 1, '', 3, '{}', '{}'], /^ERR_INVALID: glidemq_addData: count is 3/],
      [[0, 'pd', 0, 0, 'j', 0, 0, '0', 1, '', 1, '{}'], /^ERR_INVALID: glidemq_addData: producer, seq and answeredBelow go together/],
    ];
    for (const [args, says] of refusals) {
      let err: unknown;
      try {
        await callFunction(c, 'glidemq_addData', q.keys.meta, args);
      } catch (e) {
        err = e;
      }
      const e = err as { code?: string; message?: string } | undefined;
      expect(`${e?.code}: ${e?.message}`, String(args.slice(0, 12))).to.match(says);
      expect(await keyspaceFingerprint(c, `${q.keys.meta.slice(0, -5)}*`)).to.equal(before);
    }
  });

  it('glidemq_add and glidemq_addData refuse stored options that finish, retention or job.log would refuse, naming the option, before any write', async () => {
    const q = h.queue(uniqueQueue());
    await q.waitUntilReady();
    const c = q.client as Redis;
    await q.add('seed', {});
    const before = await keyspaceFingerprint(c, `${q.keys.meta.slice(0, -5)}*`);
    const bad: [string, RegExp][] = [
      ['{"removeOnComplete":1e17}', /removeOnComplete must be true, false, a whole number from 0 to 2\^53 - 1/],
      ['{"removeOnFail":{"count":1e17}}', /removeOnFail\.count must be a whole number from 0 to 2\^53 - 1/],
      ['{"removeOnFail":{"age":1e13}}', /removeOnFail\.age must be a number of seconds from 0 to 9007199254740/],
      ['{"removeOnComplete":"all"}', /removeOnComplete must be/],
      ['{"keepLogs":2.5}', /keepLogs must be a whole number from 0 to 2\^53 - 1/],
      ['{"backoff":{"type":"fixed","delay":1e300}}', /backoff\.delay must be a number of ms from 0 to 2\^53 - 1/],
      ['{"backoff":{"type":"fixed","delay":5,"jitter":2}}', /backoff\.jitter must be a number from 0 to 1/],
      ['{"backoff":5}', /backoff must be \{type, delay\?, jitter\?\}/],
      ['{"timestamp":-1}', /timestamp must be a time in ms/],
    ];
    const g = encodeJob('j', {});
    for (const [opts, says] of bad) {
      const add = [0, '', 0, 0, 1, g[0], g[1], g[2], g[3], g[4], g[5], g[6], opts, g[8], g[9], g[10], g[11]];
      const addData = [0, '', 0, 0, 'j', 0, 0, '0', 1, opts, 1, '{}'];
      for (const [fn, args] of [['glidemq_add', add], ['glidemq_addData', addData]] as const) {
        let err: unknown;
        try {
          await callFunction(c, fn, q.keys.meta, args);
        } catch (e) {
          err = e;
        }
        const e = err as { code?: string; message?: string } | undefined;
        expect(`${e?.code}: ${e?.message}`, `${fn} ${opts}`).to.match(/^ERR_INVALID: /).and.to.match(says);
        expect(await keyspaceFingerprint(c, `${q.keys.meta.slice(0, -5)}*`)).to.equal(before);
      }
    }
    // the largest values are stored, and other fields the client keeps pass unread
    const good = JSON.stringify({ removeOnComplete: Number.MAX_SAFE_INTEGER, removeOnFail: { age: 9007199254740, count: 0 }, keepLogs: 3, backoff: { type: 'custom' }, own: [1] });
    await callFunction(c, 'glidemq_addData', q.keys.meta, [0, '', 0, 0, 'j', 0, 0, '0', 1, good, 1, '{}']);
  });

  it('addBulk over runs of alike jobs mixed with custom ids, dedup, groups and other options: each job gets its own id, in order', async () => {
    const q = h.queue(uniqueQueue());
    const existing = await q.add('x', { pre: true }, { jobId: 'taken' });
    const bulk: BulkJob[] = [
      ...Array.from({ length: 40 }, (_, i) => ({ name: 'a', data: { run: 1, i } })),
      { name: 'a', data: { custom: true }, opts: { jobId: 'order-1' } },
      { name: 'a', data: { again: true }, opts: { jobId: 'taken' } },
      ...Array.from({ length: 5 }, (_, i) => ({ name: 'a', data: { short: i } })), // a short run rides along
      { name: 'd', data: { d: 1 }, opts: { dedup: { id: 'd1' } } },
      { name: 'd', data: { d: 2 }, opts: { dedup: { id: 'd1' } } },
      { name: 'g', data: { g: 1 }, opts: { group: { id: 'g1' } } },
      ...Array.from({ length: 600 }, (_, i) => ({ name: 'b', data: { run: 2, i }, opts: { attempts: 2 } })),
      ...Array.from({ length: 30 }, (_, i) => ({ name: 'c', data: { run: 3, i }, opts: { delay: 60_000 } })),
    ];
    const jobs = await q.addBulk(bulk);
    expect(jobs).to.have.length(bulk.length);
    const c = q.client as Redis;
    expect(jobs[40].id).to.equal('order-1');
    expect(jobs[41]).to.include({ id: existing.id, created: false });
    expect(jobs[48].deduplicated).to.equal('blocked');
    expect(jobs[48].id).to.equal(jobs[47].id);
    const created = jobs.filter((j) => j.created);
    expect(new Set(created.map((j) => j.id)).size).to.equal(created.length);
    for (const [i, j] of jobs.entries()) {
      if (!j.created) continue;
      const f = await c.hmget(q.keys.job(j.id), 'name', 'data', 'attempts', 'state');
      const state = bulk[i].opts?.group ? f[3] : j.state; // (a group job's state is its group's business)
      expect(f, `job ${i}`).to.deep.equal([bulk[i].name, JSON.stringify(bulk[i].data), bulk[i].opts?.attempts ? '2' : null, state]);
    }
    expect(jobs[bulk.length - 1].state).to.equal('delayed');
    // a run takes consecutive ids from the counter, in the order of the bulk
    expect(jobs.slice(0, 40).map((j) => j.id)).to.deep.equal(Array.from({ length: 40 }, (_, i) => String(i + 1)));
    const ids = await q.addBulkIds([{ name: 'a', data: {} }, { name: 'a', data: {}, opts: { jobId: 'taken' } }]);
    expect([...ids.codes]).to.deep.equal([1, 0]);
    expect(ids.ids[1]).to.equal('taken');
  });
});
