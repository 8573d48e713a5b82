/**
 * Smaller edges (issue 16): a dedup ttl too large to store exactly, numeric custom job ids, a
 * prefix holding glob characters in SCAN patterns, and unbounded job names. Each is refused (or
 * escaped) on both sides: the client's checks and the library's own, for callers that send ARGV
 * directly.
 */
import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { InvalidArgumentError } from '../../src/engine/shared/errors.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { globEscape, listQueues } from '../../src/engine/connecting/discovery.js';
import { encodeJob, MAX_DEDUP_TTL_MS, MAX_JOB_NAME_BYTES } from '../../src/engine/producing/options.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { useServer } from '../helpers/valkey.js';

async function refusal(p: Promise<unknown> | (() => unknown)): Promise<Error> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a refusal, got none');
}

describe('smaller edges', function () {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  describe('dedup ttl', () => {
    it('is bounded to 10 years client side, and the window end is stored as exact digits', async () => {
      const q = h.queue(uniqueQueue('edge-ttl'));
      const err = await refusal(q.add('a', {}, { dedup: { id: 'd', ttl: 9e15 } }));
      expect(err).to.be.instanceOf(InvalidArgumentError);
      expect(err.message).to.match(/dedup\.ttl is 9000000000000000 ms, over the limit of 315576000000 ms \(10 years\)/);
      expect(await q.client.exists(q.keys.dedup)).to.equal(0);

      const first = await q.add('a', { v: 1 }, { dedup: { id: 'd', ttl: MAX_DEDUP_TTL_MS } });
      const entry = String(await q.client.hget(q.keys.dedup, 'd'));
      expect(entry).to.match(/^t:\d+:/, `entry ${entry} holds its window end as digits`);
      const [s] = await q.client.time();
      const end = Number(/^t:(\d+):/.exec(entry)![1]);
      expect(end - Number(s) * 1000).to.be.within(MAX_DEDUP_TTL_MS - 60_000, MAX_DEDUP_TTL_MS + 1000);
      const second = await q.add('a', { v: 2 }, { dedup: { id: 'd', ttl: MAX_DEDUP_TTL_MS } });
      expect(second.id).to.equal(first.id);
      expect((second as unknown as { created: boolean }).created).to.equal(false);
    });

    it('is bounded by the library too (a caller sending ARGV directly)', async () => {
      const q = h.queue(uniqueQueue('edge-ttl-lua'));
      const group = encodeJob('a', {}, { dedup: { id: 'd', ttl: 1000 } });
      group[9] = '9000000000000000';
      const err = await refusal(callFunction(q.client, 'glidemq_add', q.keys.meta, [0, '', 0, 0, 1, ...group]));
      expect(err).to.be.instanceOf(InvalidArgumentError);
      expect(err.message).to.match(/dedupTtl must be a whole number from 0 to 315576000000/);
      expect(await q.client.exists(q.keys.dedup, q.keys.job('1'))).to.equal(0);
    });
  });

  describe('numeric custom job ids', () => {
    it('are refused client side with a typed error naming the fix', async () => {
      const q = h.queue(uniqueQueue('edge-id'));
      const auto = await q.add('a', { v: 1 });
      expect(auto.id).to.equal('1');
      for (const id of ['1', '2', '0', '-1', '007']) {
        const err = await refusal(q.add('a', { v: 2 }, { jobId: id }));
        expect(err, id).to.be.instanceOf(InvalidArgumentError);
        expect(err.message).to.match(/custom ids cannot be whole numbers/);
        expect(err.message).to.contain(`"order-${id}"`);
      }
      expect((await q.getJob('1'))?.data).to.deep.equal({ v: 1 });
      // ids with digits that are not whole numbers stay fine
      for (const id of ['order-2', '2a', '1.5', '+3']) expect((await q.add('a', {}, { jobId: id })).id).to.equal(id);
    });

    it('are refused by the library, before any write of the call', async () => {
      const q = h.queue(uniqueQueue('edge-id-lua'));
      const good = encodeJob('a', {});
      const bad = encodeJob('a', {}, { jobId: 'x' });
      bad[0] = '2';
      const err = await refusal(callFunction(q.client, 'glidemq_add', q.keys.meta, [0, '', 0, 0, 2, ...good, ...bad]));
      expect(err).to.be.instanceOf(InvalidArgumentError);
      expect(err.message).to.match(/glidemq_add: group 2 argument jobId must be .*not a whole number.*got "2"/);
      expect(await q.client.exists(q.keys.job('1'), q.keys.job('2'))).to.equal(0);
    });
  });

  describe('a prefix with glob characters', () => {
    it('escapes *, ?, [, ] and \\ for SCAN MATCH', () => {
      expect(globEscape('a\\b*[x]?')).to.equal('a\\\\b\\*\\[x\\]\\?');
      expect(globEscape('glide')).to.equal('glide');
    });

    it('lists the queues of a prefix like a\\b*[x], and only those', async () => {
      const client = h.queue(uniqueQueue('edge-scan-client')).client;
      const prefix = 'a\\b*[x]';
      await client.hset(`${prefix}:{q1}:meta`, 'paused', '0');
      await client.hset(`${prefix}:{q2}:meta`, 'paused', '0');
      // keys the unescaped pattern would take for its own (or miss its own for)
      await client.hset('ab-zzz-x:{other}:meta', 'paused', '0');
      await client.hset('a\\b-more-[x]:{other2}:meta', 'paused', '0');
      expect(await listQueues(client, prefix)).to.deep.equal(['q1', 'q2']);
      expect(await listQueues(client, 'ab-zzz-x')).to.deep.equal(['other']);
    });

    it('a queue under a prefix with a backslash is listed, and obliterating it leaves a neighbour alone', async () => {
      const name = uniqueQueue('edge-bs');
      const q = new Queue(name, { connection: server().url, prefix: 'p\\b' });
      const neighbour = new Queue(name, { connection: server().url, prefix: 'pb' });
      h.queues.push(q, neighbour);
      await q.add('a', {});
      await neighbour.add('a', {});
      expect(await listQueues(q.client, 'p\\b')).to.include(name);
      expect(await listQueues(q.client, 'pb')).to.include(name);
      await q.obliterate();
      expect(await q.client.keys(`p\\\\b:{${name}}:*`)).to.deep.equal([]);
      expect(await neighbour.getJobCounts()).to.include({ waiting: 1 });
    });
  });

  describe('job names', () => {
    it(`are at most ${MAX_JOB_NAME_BYTES} bytes client side, counted in bytes, with an error that says the fix`, async () => {
      const q = h.queue(uniqueQueue('edge-name'));
      expect((await q.add('n'.repeat(MAX_JOB_NAME_BYTES), {})).id).to.equal('1');
      for (const name of ['n'.repeat(1024 * 1024), 'é'.repeat(MAX_JOB_NAME_BYTES / 2 + 1)]) {
        const err = await refusal(q.add(name, {}));
        expect(err).to.be.instanceOf(InvalidArgumentError);
        expect(err.message).to.match(/job name ".{40}\.\.\." is \d+ bytes, over the limit of 1024 bytes; use a short name/);
      }
      const bulkErr = await refusal(q.addBulk([{ name: 'ok', data: {} }, { name: 'x'.repeat(2000), data: {} }]));
      expect(bulkErr.message).to.match(/^job 2: job name/);
      expect((await q.getJobCounts()).waiting).to.equal(1);
    });

    it('are bounded by the library in glidemq_add', async () => {
      const q = h.queue(uniqueQueue('edge-name-lua'));
      const group = encodeJob('a', {});
      group[1] = 'n'.repeat(1024 * 1024);
      const err = await refusal(callFunction(q.client, 'glidemq_add', q.keys.meta, [0, '', 0, 0, 1, ...group]));
      expect(err).to.be.instanceOf(InvalidArgumentError);
      expect(err.message).to.match(/glidemq_add: group 1 argument name must be a non-empty string of at most 1024 bytes/);
      expect(await q.client.exists(q.keys.job('1'))).to.equal(0);
    });

    it('of scheduler templates are bounded client side and in the stored record', async () => {
      const q = h.queue(uniqueQueue('edge-name-sched'));
      const err = await refusal(q.upsertScheduler('s', { every: 60_000 }, { name: 'n'.repeat(5000) }));
      expect(err).to.be.instanceOf(InvalidArgumentError);
      expect(err.message).to.match(/over the limit of 1024 bytes/);
      const rec = {
        every: 60_000, nextRun: Date.now() + 60_000,
        job: { name: 'n'.repeat(1025), data: '{}', delay: 0, priority: 0, lifo: '0', attempts: 1, opts: '' },
      };
      const luaErr = await refusal(callFunction(q.client, 'glidemq_upsertScheduler', q.keys.meta, ['s', JSON.stringify(rec)]));
      expect(luaErr).to.be.instanceOf(InvalidArgumentError);
      expect(luaErr.message).to.match(/job\.name must be a non-empty string of at most 1024 bytes/);
      expect(await q.client.exists(q.keys.schedulers)).to.equal(0);
      rec.job.name = 'n'.repeat(1024);
      await callFunction(q.client, 'glidemq_upsertScheduler', q.keys.meta, ['s', JSON.stringify(rec)]);
      expect(await q.client.hexists(q.keys.schedulers, 's')).to.equal(1);
    });
  });
});
