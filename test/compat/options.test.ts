/**
 * Job, queue and worker options as a BullMQ application gives them (issue 18): defaultJobOptions,
 * removeOnComplete/removeOnFail as KeepJobs ({ age } in seconds, { age, count } applying both, on
 * the job and on the Worker), deduplication { id, ttl, extend, replace }, timestamp, a custom
 * backoff type with settings.backoffStrategy, sizeLimit and the Worker's maxStalledCount check.
 * Where glidemq differs on purpose, the test says so.
 */
import { expect } from 'chai';
import { BackoffStrategyError, InvalidArgumentError, PayloadTooLargeError, Queue, type Job, type WorkerOptions } from '../../src/index.js';
import { HOUR, rejection, useCompat } from '../helpers/compat.js';
import { uniqueQueue } from '../helpers/engine.js';
import { waitFor } from '../helpers/valkey.js';

describe('BullMQ compatibility: job and worker options', function () {
  this.timeout(30000);
  const { redis, connection, queue, worker, serverNow } = useCompat('opts', { promotionInterval: 50 });
  const stateOf = async (q: Queue, id: string) => (await q.getJob(id))?.state;
  const finished = (q: Queue, id: string, state = 'completed') => waitFor(async () => (await stateOf(q, id)) === state, `job ${id} ${state}`);
  /** Moves a finished job's finish time back by `ms` on the server, as time passing would. */
  const finishedAgo = async (q: Queue, id: string, ms: number, set: 'completed' | 'failed' = 'completed') => {
    const at = (await serverNow()) - ms;
    await redis().zadd(set === 'completed' ? q.keys.completed : q.keys.failed, 'XX', at, id);
    await redis().hset(q.keys.job(id), 'finishedOn', String(at));
  };

  describe('defaultJobOptions', () => {
    it("every add and addBulk gets them; a job's own options win, merged shallowly as BullMQ merges", async () => {
      const q = queue({
        defaultJobOptions: { attempts: 3, backoff: { type: 'exponential', delay: 100, jitter: 0.5 }, removeOnComplete: true, priority: 5 },
      });
      const plain = await q.add('plain', {});
      const own = await q.add('own', {}, { attempts: 1, backoff: { type: 'fixed', delay: 7 }, priority: 1 });
      const [bulkPlain, bulkOwn] = await q.addBulk([
        { name: 'bulk', data: {} },
        { name: 'bulk-own', data: {}, opts: { removeOnComplete: false } },
      ]);
      const stored = async (id: string) => (await q.getJob(id))!.opts;
      expect(await stored(plain.id)).to.deep.include({ attempts: 3, priority: 5, removeOnComplete: true });
      expect((await stored(plain.id)).backoff).to.deep.equal({ type: 'exponential', delay: 100, jitter: 0.5 });
      // shallow: the job's backoff replaces the default's whole (no jitter carried over)
      expect(await stored(own.id)).to.deep.include({ attempts: 1, priority: 1 });
      expect((await stored(own.id)).backoff).to.deep.equal({ type: 'fixed', delay: 7 });
      expect(plain.opts.attempts).to.equal(3);
      expect(await stored(bulkPlain.id)).to.deep.include({ attempts: 3, priority: 5, removeOnComplete: true });
      expect(await stored(bulkOwn.id)).to.deep.include({ attempts: 3, removeOnComplete: false });
      expect(q.defaultJobOptions).to.deep.include({ attempts: 3, priority: 5 });
      // the defaults apply at run time too: removeOnComplete true removes, the job's false keeps
      worker(q, async () => 'ok');
      await finished(q, bulkOwn.id);
      await waitFor(async () => (await q.getJob(plain.id)) === undefined, 'the defaulted job removed on completion');
      expect(await q.getJob(bulkPlain.id)).to.equal(undefined);
    });

    it('a bad default is refused when the queue is made, naming defaultJobOptions and the option', async () => {
      const err = await rejection(() => new Queue(uniqueQueue('opts'), { connection: connection(), defaultJobOptions: { attempts: 0 } }));
      expect(err).to.be.instanceOf(InvalidArgumentError);
      expect(err.message).to.match(/defaultJobOptions: attempts must be a whole number from 1 to 9007199254740991, got 0/);
    });
  });

  describe('removeOnComplete / removeOnFail as KeepJobs', () => {
    it('{ age } counts seconds: a job finished 10 s ago is kept by { age: 3600 } (the old millisecond reading removed it), one finished 2 h ago goes', async () => {
      const q = queue();
      worker(q, async () => 'ok');
      const recent = await q.add('a', {}, { removeOnComplete: { age: 3600 } });
      const old = await q.add('b', {}, { removeOnComplete: { age: 3600 } });
      await finished(q, old.id);
      await finishedAgo(q, recent.id, 10_000);
      await finishedAgo(q, old.id, 2 * HOUR);
      const next = await q.add('c', {}, { removeOnComplete: { age: 3600 } }); // retention runs at each finish
      await finished(q, next.id);
      expect(await stateOf(q, recent.id)).to.equal('completed');
      expect(await q.getJob(old.id)).to.equal(undefined);
    });

    it('{ age: 1 } removes a job once more than a second has passed on the server and another job finishes', async () => {
      const q = queue();
      worker(q, async () => 'ok');
      const first = await q.add('a', {}, { removeOnComplete: { age: 1, count: 5 } });
      await finished(q, first.id);
      const at = (await q.getJob(first.id))!.finishedOn!;
      await waitFor(async () => (await serverNow()) > at + 1000, 'a second past the first finish on the server');
      const second = await q.add('b', {}, { removeOnComplete: { age: 1, count: 5 } });
      await finished(q, second.id);
      // count 5 would keep it: age applies as well
      expect(await q.getJob(first.id)).to.equal(undefined);
    });

    it('{ age, count } keeps only the jobs that satisfy both: count applies though age would keep them', async () => {
      const q = queue();
      worker(q, async () => 'ok');
      const jobs = await q.addBulk([1, 2, 3].map((n) => ({ name: 'n', data: { n }, opts: { removeOnComplete: { age: 3600, count: 1 } } })));
      await finished(q, jobs[2].id);
      await waitFor(async () => (await q.getJobCounts()).completed === 1, 'one completed job kept');
      expect(await stateOf(q, jobs[2].id)).to.equal('completed');
      const tight = queue();
      worker(tight, async () => 'ok');
      const two = await tight.addBulk([1, 2].map((n) => ({ name: 'n', data: { n }, opts: { removeOnComplete: { age: 1, count: 1 } } })));
      await finished(tight, two[1].id);
      expect(await tight.getJob(two[0].id)).to.equal(undefined);
    });

    it('the Worker-level rules read the same: { age, count } for completed jobs, { age } in seconds for failed ones', async () => {
      const q = queue();
      worker(q, async (job) => {
        if (job.name === 'fail') throw new Error('boom');
        return 'ok';
      }, { removeOnComplete: { age: 3600, count: 2 }, removeOnFail: { age: 3600 } });
      const [a, b] = await q.addBulk([{ name: 'ok', data: { n: 1 } }, { name: 'ok', data: { n: 2 } }]);
      const f1 = await q.add('fail', {});
      await finished(q, b.id);
      await finished(q, f1.id, 'failed');
      await finishedAgo(q, a.id, 2 * HOUR); // past the age, within the count
      await finishedAgo(q, f1.id, 10_000, 'failed');
      const c = await q.add('ok', { n: 3 });
      const f2 = await q.add('fail', {});
      await finished(q, c.id);
      await finished(q, f2.id, 'failed');
      expect(await q.getJob(a.id)).to.equal(undefined);
      expect(await stateOf(q, b.id)).to.equal('completed');
      expect(await stateOf(q, f1.id)).to.equal('failed'); // 10 s < 3600 s
    });

    it('an age that is not a number of seconds is refused, naming the unit', async () => {
      const q = queue();
      const err = await rejection(q.add('x', {}, { removeOnComplete: { age: -1 } }));
      expect(err).to.be.instanceOf(InvalidArgumentError);
      expect(err.message).to.match(/removeOnComplete\.age must be a number of seconds/);
    });
  });

  describe('deduplication { id, ttl, extend, replace }', () => {
    it('{ id }: a duplicate is refused while the first job is unfinished, then a new job is added', async () => {
      const q = queue();
      const first = await q.add('d', { v: 1 }, { deduplication: { id: 'order-1' } });
      const dup = await q.add('d', { v: 2 }, { deduplication: { id: 'order-1' } });
      expect(dup.id).to.equal(first.id);
      expect(dup.deduplicated).to.equal('blocked');
      worker(q, async () => 'ok');
      await finished(q, first.id);
      const after = await q.add('d', { v: 3 }, { deduplication: { id: 'order-1' } });
      expect(after.id).to.not.equal(first.id);
      expect(after.created).to.equal(true);
    });

    it('{ id, ttl }: refused for ttl ms, even after the first job finished', async () => {
      const q = queue();
      worker(q, async () => 'ok');
      const first = await q.add('d', {}, { deduplication: { id: 'mail', ttl: HOUR } });
      await finished(q, first.id);
      const dup = await q.add('d', {}, { deduplication: { id: 'mail', ttl: HOUR } });
      expect(dup.id).to.equal(first.id);
      expect(dup.deduplicated).to.equal('blocked');
    });

    it('{ id, ttl, extend }: each refused duplicate restarts the ttl; without extend the window ends ttl after the first add', async () => {
      const q = queue();
      const TTL = 2000;
      const extended = await q.add('d', {}, { deduplication: { id: 'ext', ttl: TTL, extend: true } });
      const plain = await q.add('d', {}, { deduplication: { id: 'plain', ttl: TTL } });
      const t0 = extended.timestamp; // the server's time of the add
      await waitFor(async () => (await serverNow()) >= t0 + TTL / 2, 'half the ttl');
      expect((await q.add('d', {}, { deduplication: { id: 'ext', ttl: TTL, extend: true } })).deduplicated).to.equal('blocked');
      expect((await q.add('d', {}, { deduplication: { id: 'plain', ttl: TTL } })).deduplicated).to.equal('blocked');
      await waitFor(async () => (await serverNow()) > t0 + TTL + 100, 'past the first window');
      const again = await q.add('d', {}, { deduplication: { id: 'ext', ttl: TTL, extend: true } });
      expect(again.id).to.equal(extended.id);
      expect(again.deduplicated).to.equal('blocked');
      const fresh = await q.add('d', {}, { deduplication: { id: 'plain', ttl: TTL } });
      expect(fresh.id).to.not.equal(plain.id);
      expect(fresh.created).to.equal(true);
    });

    it('{ id, replace } with a delay: the delayed job takes the new data and its delay restarts (same id)', async () => {
      const q = queue();
      const first = await q.add('d', { v: 1 }, { delay: HOUR, deduplication: { id: 'deb', replace: true } });
      const second = await q.add('d', { v: 2 }, { delay: HOUR, deduplication: { id: 'deb', replace: true } });
      // glidemq keeps the delayed job's id and options (BullMQ 6.7 replaces the job's record)
      expect(second.id).to.equal(first.id);
      expect(second.deduplicated).to.equal('debounced');
      const stored = await q.getJob(first.id);
      expect(stored?.data).to.deep.equal({ v: 2 });
      expect(stored?.state).to.equal('delayed');
    });

    it('dedup (glidemq) and deduplication (BullMQ) together are refused, naming both; an id is required', async () => {
      const q = queue();
      const both = await rejection(q.add('d', {}, { dedup: { id: 'a' }, deduplication: { id: 'a' } }));
      expect(both).to.be.instanceOf(InvalidArgumentError);
      expect(both.message).to.match(/dedup .*deduplication/);
      const noId = await rejection(q.add('d', {}, { deduplication: { id: '' } }));
      expect(noId.message).to.match(/deduplication\.id must be a non-empty string/);
    });
  });

  describe('timestamp', () => {
    it('is the job.timestamp the application gave; delays still count from the server clock', async () => {
      const q = queue();
      const long = Date.UTC(2020, 0, 1);
      const job = await q.add('t', {}, { timestamp: long, delay: HOUR });
      expect(job.timestamp).to.equal(long);
      const stored = await q.getJob(job.id);
      expect(stored?.timestamp).to.equal(long);
      // a timestamp years back does not make the delay due: the job waits its hour from now
      const due = Number(await redis().zscore(q.keys.scheduled, job.id));
      expect(due).to.be.greaterThan((await serverNow()) + HOUR - 60_000);
      const plain = await q.add('t', {});
      expect(plain.timestamp).to.be.closeTo(await serverNow(), 60_000);
      // the processor sees it too
      let seen = 0;
      worker(q, async (j) => {
        seen = j.timestamp;
      });
      const run = await q.add('t', {}, { timestamp: long });
      await finished(q, run.id);
      expect(seen).to.equal(long);
    });
  });

  describe("backoff { type: 'custom' } with settings.backoffStrategy", () => {
    it('the strategy gets (attemptsMade, type, err, job) and its ms decide each retry; the job then completes', async () => {
      const q = queue();
      const calls: [number, string, string, string][] = [];
      const states: string[] = [];
      const w = worker(q, async (job) => {
        if (job.attemptsMade < 2) throw new Error(`fail ${job.attemptsMade}`);
        return 'done';
      }, {
        settings: {
          backoffStrategy: (attemptsMade: number, type: string, err: Error, job: Job) => {
            calls.push([attemptsMade, type, err.message, job.id]);
            return attemptsMade === 1 ? 50 : 0;
          },
        },
      });
      w.on('failed', (job: Job) => states.push(String(job.state)));
      const job = await q.add('c', {}, { attempts: 3, backoff: { type: 'custom' } });
      await finished(q, job.id);
      expect(calls).to.deep.equal([[1, 'custom', 'fail 0', job.id], [2, 'custom', 'fail 1', job.id]]);
      expect(states).to.deep.equal(['delayed', 'waiting']); // 50 ms: delayed; 0: at once
      expect((await q.getJob(job.id))?.attemptsMade).to.equal(3);
    });

    it('-1 fails the job now, with attempts left', async () => {
      const q = queue();
      worker(q, async () => {
        throw new Error('no point');
      }, { settings: { backoffStrategy: () => -1 } });
      const job = await q.add('c', {}, { attempts: 5, backoff: { type: 'give-up' } });
      await finished(q, job.id, 'failed');
      const stored = await q.getJob(job.id);
      expect(stored?.attemptsMade).to.equal(1);
      expect(stored?.failedReason).to.equal('no point');
    });

    it('a strategy that throws is reported as error and the job fails with the reason; the worker goes on', async () => {
      const q = queue();
      const errors: unknown[] = [];
      const w = worker(q, async (job) => {
        if (job.name === 'bad') throw new Error('boom');
        return 'fine';
      }, {
        settings: {
          backoffStrategy: () => {
            throw new Error('strategy bug');
          },
        },
      });
      w.on('error', (err: unknown) => errors.push(err));
      const bad = await q.add('bad', {}, { attempts: 3, backoff: { type: 'custom' } });
      await finished(q, bad.id, 'failed');
      const stored = await q.getJob(bad.id);
      expect(stored?.failedReason).to.match(/^boom \(not retried: settings\.backoffStrategy failed for backoff type "custom": strategy bug\)$/);
      expect(stored?.attemptsMade).to.equal(1);
      expect(errors.some((e) => e instanceof BackoffStrategyError && /job \S+: not retried/.test((e as Error).message))).to.equal(true);
      const good = await q.add('good', {});
      await finished(q, good.id);
    });

    it('a custom type with no strategy on the worker fails the job with a reason that says what to give', async () => {
      const q = queue();
      const errors: unknown[] = [];
      const w = worker(q, async () => {
        throw new Error('boom');
      });
      w.on('error', (err: unknown) => errors.push(err));
      const job = await q.add('c', {}, { attempts: 2, backoff: { type: 'linear', delay: 10 } });
      await finished(q, job.id, 'failed');
      expect((await q.getJob(job.id))?.failedReason).to.match(/boom \(not retried: its backoff type "linear" is not fixed or exponential, and the worker has no settings\.backoffStrategy/);
      expect(errors.some((e) => e instanceof BackoffStrategyError)).to.equal(true);
    });

    it('a backoffStrategy that is not a function is refused by the Worker', async () => {
      const q = queue();
      const err = await rejection(() => worker(q, async () => 'x', { settings: { backoffStrategy: 5 as never }, autorun: false }));
      expect(err).to.be.instanceOf(InvalidArgumentError);
      expect(err.message).to.match(/settings\.backoffStrategy must be a function/);
    });
  });

  describe('sizeLimit', () => {
    it("data over the job's sizeLimit is refused, naming the job, the size and the limit; within it is added", async () => {
      const q = queue();
      const err = await rejection(q.add('upload', { blob: 'x'.repeat(100) }, { sizeLimit: 50 }));
      expect(err).to.be.instanceOf(PayloadTooLargeError);
      expect(err.message).to.match(/job "upload": data is 111 bytes of JSON, over its sizeLimit of 50 bytes/);
      expect((await q.getJobCounts()).waiting).to.equal(0);
      expect((await q.add('upload', { blob: 'x' }, { sizeLimit: 50 })).created).to.equal(true);
      const bulk = await rejection(q.addBulk([{ name: 'ok', data: {} }, { name: 'big', data: { b: 'y'.repeat(60) }, opts: { sizeLimit: 50 } }]));
      expect(bulk.message).to.match(/job 2: job "big": data is \d+ bytes of JSON, over its sizeLimit of 50 bytes/);
      const limited = queue({ defaultJobOptions: { sizeLimit: 10 } });
      expect((await rejection(limited.add('d', { long: 'text' }))).message).to.match(/sizeLimit of 10 bytes/);
    });
  });

  describe('the job add and addBulk return', () => {
    const OPTS = {
      keepLogs: 2,
      backoff: { type: 'fixed', delay: 50 },
      removeOnComplete: 3,
      removeOnFail: { age: 60, count: 4 },
      timestamp: 1_700_000_000_000,
      attempts: 2,
      delay: 60_000,
    };
    /** Logs three lines through the handle: keepLogs 2 keeps the newest two. */
    const logThrough = async (q: Queue, job: Job) => {
      for (const line of ['one', 'two', 'three']) await job.log(line);
      return (await q.getJobLogs(job.id)).logs;
    };

    it("add(): job.opts holds what was stored (keepLogs, backoff, removeOn*), as getJob reads it; job.log keeps keepLogs lines", async () => {
      const q = queue();
      const job = await q.add('a', {}, OPTS);
      const stored = (await q.getJob(job.id))!;
      expect(job.opts).to.deep.equal(stored.opts);
      expect(job.opts).to.deep.include({ keepLogs: 2, removeOnComplete: 3, removeOnFail: { age: 60, count: 4 } });
      expect(job.opts.backoff).to.deep.equal({ type: 'fixed', delay: 50 });
      expect(await logThrough(q, job)).to.deep.equal(['two', 'three']);
    });

    it('addBulk(): each job holds what was stored, for runs of alike jobs and for mixed ones', async () => {
      const q = queue({ defaultJobOptions: { removeOnComplete: true } });
      const alike = Array.from({ length: 20 }, (_, i) => ({ name: 'same', data: { i }, opts: OPTS }));
      const mixed = [
        { name: 'x', data: {}, opts: { keepLogs: 2, backoff: 'exponential:100' } },
        { name: 'y', data: {}, opts: { removeOnFail: false, jobId: 'custom-y' } },
      ];
      const jobs = await q.addBulk([...alike, ...mixed]);
      for (const job of jobs) expect(job.opts, `job ${job.id}`).to.deep.equal((await q.getJob(job.id))!.opts);
      expect(jobs[0].opts).to.deep.include({ keepLogs: 2, removeOnComplete: 3 });
      expect(jobs[20].opts).to.deep.include({ keepLogs: 2, removeOnComplete: true, backoff: { type: 'exponential', delay: 100 } });
      expect(jobs[21].opts).to.deep.include({ removeOnFail: false, removeOnComplete: true });
      expect(await logThrough(q, jobs[0])).to.deep.equal(['two', 'three']);
      expect(await logThrough(q, jobs[20])).to.deep.equal(['two', 'three']);
    });
  });

  describe("jobId: ''", () => {
    it('gets the next id from the queue, as BullMQ does (add, addBulk and the defaults)', async () => {
      const q = queue();
      const a = await q.add('a', {}, { jobId: '' });
      const [b, c] = await q.addBulk([{ name: 'b', data: {}, opts: { jobId: '' } }, { name: 'c', data: {}, opts: { jobId: '' } }]);
      expect([a.id, b.id, c.id]).to.deep.equal(['1', '2', '3']);
      expect([a.created, b.created, c.created]).to.deep.equal([true, true, true]);
      expect((await q.getJob('2'))?.name).to.equal('b');
    });
  });

  describe('priority: 0', () => {
    it('means no priority, as BullMQ reads it (and changePriority here): the job waits in the stream, and may be LIFO', async () => {
      const q = queue();
      const none = await q.add('none', {}, { priority: 0 });
      const lifo = await q.add('lifo', {}, { priority: 0, lifo: true });
      expect([none.state, lifo.state]).to.deep.equal(['waiting', 'waiting']);
      expect(await q.getJobState(none.id)).to.equal('waiting');
      expect((await q.getJob(lifo.id))?.opts).to.deep.include({ priority: 0, lifo: true });
      expect((await rejection(q.add('neg', {}, { priority: -1 }))).message).to.match(/priority must be a whole number from 1 \(served first\) to 2097152, or 0 for none, got -1/);
    });
  });

  describe('every option is checked at add as finish, retry, retention and logs take it', () => {
    const MAX = Number.MAX_SAFE_INTEGER;
    const refusedAt = async (q: Queue, opts: Record<string, unknown>, pattern: RegExp) => {
      const err = await rejection(q.add('bad', {}, opts));
      expect(err, JSON.stringify(opts)).to.be.instanceOf(InvalidArgumentError);
      expect(err.message, JSON.stringify(opts)).to.match(pattern);
      const bulk = await rejection(q.addBulk([{ name: 'ok', data: {} }, { name: 'bad', data: {}, opts }]));
      expect(bulk.message, JSON.stringify(opts)).to.match(/^job 2: /);
    };

    it('numbers past 2^53 - 1 are refused at add, naming the option, whatever form the option takes', async () => {
      const q = queue();
      await refusedAt(q, { removeOnComplete: 1e17 }, /removeOnComplete must be .*whole number.* 9007199254740991.*got 100000000000000000/);
      await refusedAt(q, { removeOnFail: 1e17 }, /removeOnFail must be .*whole number.* 9007199254740991/);
      await refusedAt(q, { removeOnComplete: { count: 1e17 } }, /removeOnComplete\.count must be a whole number from 0 to 9007199254740991/);
      await refusedAt(q, { keepLogs: 1e17 }, /keepLogs must be a whole number from 0 to 9007199254740991/);
      await refusedAt(q, { attempts: 1e17 }, /attempts must be a whole number from 1 to 9007199254740991/);
      await refusedAt(q, { delay: 1e17 }, /delay must be a number of ms from 0 to 9007199254740991/);
      await refusedAt(q, { backoff: 1e17 }, /backoff must be a number of ms from 0 to 9007199254740991/);
      await refusedAt(q, { backoff: { type: 'fixed', delay: 1e300 } }, /backoff delay must be a number of ms from 0 to 9007199254740991/);
      await refusedAt(q, { backoff: { type: 'exponential', delay: 10, jitter: '0.5' } }, /backoff jitter must be a number from 0 to 1/);
      await refusedAt(q, { timestamp: 1e300 }, /timestamp must be a time in ms since the epoch, from 0 to 9007199254740991/);
      const w = await rejection(() => worker(q, async () => 'x', { autorun: false, removeOnComplete: 1e17 }));
      expect(w.message).to.match(/removeOnComplete must be .*whole number/);
      expect(await q.getJobCounts()).to.deep.include({ waiting: 0, delayed: 0 });
    });

    it('a job an older version stored with removeOnComplete: 1e17 still completes (kept), its finish not refused', async () => {
      const q = queue();
      const old = await q.add('old', {});
      const olderFailed = await q.add('older-failed', {});
      await redis().hset(q.keys.job(old.id), 'opts', '{"removeOnComplete":1e17,"removeOnFail":{"count":1e17}}');
      await redis().hset(q.keys.job(olderFailed.id), 'opts', '{"removeOnFail":{"count":1e17,"age":60}}');
      worker(q, async (job) => {
        if (job.name === 'older-failed') throw new Error('no');
        return 'ok';
      });
      await finished(q, old.id);
      await finished(q, olderFailed.id, 'failed');
    });

    it('the largest values add accepts are taken by finish, retry, retention and job.log', async () => {
      const q = queue();
      const kept = await q.add('kept', {}, { removeOnComplete: MAX, keepLogs: MAX });
      const counted = await q.add('counted', {}, { removeOnComplete: { count: MAX, age: Math.floor(MAX / 1000) } });
      const retried = await q.add('retried', {}, { attempts: MAX, backoff: { type: 'exponential', delay: MAX }, removeOnFail: MAX });
      const failed = await q.add('failed', {}, { removeOnFail: MAX });
      expect(await kept.log('line')).to.equal(1);
      worker(q, async (job) => {
        if (job.name === 'retried' || job.name === 'failed') throw new Error('no');
        return 'ok';
      });
      await finished(q, kept.id);
      await finished(q, counted.id);
      await finished(q, failed.id, 'failed');
      await finished(q, retried.id, 'delayed');
      expect((await q.getJob(retried.id))?.attemptsMade).to.equal(1);
    });
  });

  describe('Worker option checks', () => {
    it('maxStalledCount: no negative or fractional value; lockDuration and stalledInterval > 0', async () => {
      const q = queue();
      const refused = async (opts: Partial<WorkerOptions>, pattern: RegExp) => {
        const err = await rejection(() => worker(q, async () => 'x', { autorun: false, ...opts }));
        expect(err).to.be.instanceOf(InvalidArgumentError);
        expect(err.message).to.match(pattern);
      };
      await refused({ maxStalledCount: -1 }, /maxStalledCount must be a whole number >= 0, got -1/);
      await refused({ maxStalledCount: 1.5 }, /maxStalledCount must be a whole number >= 0, got 1.5/);
      await refused({ lockDuration: 0 }, /lockDuration must be a positive number/);
      await refused({ stalledInterval: -5 }, /stalledInterval must be a positive number/);
      const zero = worker(q, async () => 'x', { autorun: false, maxStalledCount: 0 });
      expect(zero.settings.maxStalledCount).to.equal(0);
    });
  });
});
