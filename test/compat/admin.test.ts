/**
 * The admin calls of BullMQ's Queue, called as a BullMQ application calls them (issue 18):
 * clean(grace, limit, type), drain(delayed), obliterate({ force, count }) and the job scheduler
 * calls (upsertJobScheduler, getJobScheduler(s), getJobSchedulersCount, removeJobScheduler).
 * Where glidemq differs on purpose, the test says so: clean never removes an active job (BullMQ's
 * form removes none, the native form refuses), and repeat options glidemq has no equivalent for
 * are refused by name instead of being ignored.
 */
import { expect } from 'chai';
import { JobActiveError, NotSupportedError, type Queue } from '../../src/index.js';
import { HOUR, gate, rejection, useCompat } from '../helpers/compat.js';
import { waitFor } from '../helpers/valkey.js';

describe('BullMQ compatibility: clean, drain, obliterate, job schedulers', function () {
  this.timeout(30000);
  const { redis, queue, worker, serverNow } = useCompat('admin', { promotionInterval: 100 });
  const stateOf = async (q: Queue, id: string) => (await q.getJob(id))?.state;
  /** Seeds a job's age on the server: its creation ts two hours before the server's now. */
  const ageJob = async (q: Queue, id: string) => redis().hset(q.keys.job(id), 'ts', String((await serverNow()) - 2 * HOUR));
  const ids = (jobs: { id: string }[]) => jobs.map((j) => j.id);
  const sorted = (list: string[]) => [...list].sort((a, b) => Number(a) - Number(b));

  describe('clean(grace, limit, type)', () => {
    it('completed and failed: finished more than grace ago, at most limit, returning the ids (limit 0 = all)', async () => {
      const q = queue();
      worker(q, async (job) => {
        if (job.data.fail) throw new Error('boom');
        return 'ok';
      });
      const done = await Promise.all([1, 2, 3].map((n) => q.add('ok', { n })));
      const failed = await Promise.all([1, 2].map((n) => q.add('bad', { n, fail: true })));
      for (const j of done) await waitFor(async () => (await stateOf(q, j.id)) === 'completed', `job ${j.id} completed`);
      for (const j of failed) await waitFor(async () => (await stateOf(q, j.id)) === 'failed', `job ${j.id} failed`);

      expect(await q.clean(HOUR, 0, 'completed')).to.deep.equal([]); // all finished within the hour
      // the grace is measured on the server: a job that finished two hours ago (seeded) is older
      await redis().zadd(q.keys.completed, 'XX', (await serverNow()) - 2 * HOUR, done[0].id);
      expect(await q.clean(HOUR, 0, 'completed')).to.deep.equal([done[0].id]);
      const two = await q.clean(0, 1, 'failed');
      expect(two).to.have.length(1);
      expect(sorted([...two, ...(await q.clean(0, 0, 'failed'))])).to.deep.equal(sorted(ids(failed)));
      expect(sorted(await q.clean(0, 0))).to.deep.equal(sorted(ids(done.slice(1)))); // type defaults to completed
      for (const j of [...done, ...failed]) expect(await q.getJob(j.id)).to.equal(undefined);
    });

    it("'wait' / 'waiting', 'delayed', 'prioritized': older than grace by creation time, as BullMQ", async () => {
      const q = queue();
      const waiting = await Promise.all([1, 2, 3].map((n) => q.add('w', { n })));
      const lifo = await q.add('l', {}, { lifo: true });
      const delayed = await Promise.all([1, 2].map((n) => q.add('d', { n }, { delay: HOUR })));
      const prioritized = await Promise.all([1, 2].map((n) => q.add('p', { n }, { priority: 5 })));

      // all just created: a grace of an hour keeps every one
      for (const type of ['wait', 'waiting', 'delayed', 'prioritized'] as const) expect(await q.clean(HOUR, 0, type)).to.deep.equal([]);
      // a delayed job's age is its creation, not its due time two hours on
      await ageJob(q, delayed[0].id);
      expect(await q.clean(HOUR, 0, 'delayed')).to.deep.equal([delayed[0].id]);
      await ageJob(q, waiting[1].id);
      expect(await q.clean(HOUR, 0, 'wait')).to.deep.equal([waiting[1].id]);

      const two = await q.clean(0, 2, 'wait');
      expect(two).to.have.length(2);
      const rest = await q.clean(0, 0, 'waiting');
      expect(sorted([...two, ...rest])).to.deep.equal(sorted([waiting[0].id, waiting[2].id, lifo.id]));
      expect(sorted(await q.clean(0, 0, 'prioritized'))).to.deep.equal(sorted(ids(prioritized)));
      expect(await q.clean(0, 0, 'delayed')).to.deep.equal([delayed[1].id]);
      const c = await q.getJobCounts();
      expect([c.waiting, c.delayed, c.prioritized]).to.deep.equal([0, 0, 0]);
      expect(await redis().keys(`${q.keys.jobPrefix}*`)).to.deep.equal([]);
    });

    it('group jobs leave their group consistent: the rest of the group runs, and an ordered group is freed', async () => {
      const q = queue();
      const grouped = [];
      for (const n of [1, 2, 3]) grouped.push(await q.add('g', { n }, { group: { id: 'acct-1', maxConcurrency: 1 } }));
      // an ordered group whose line starts with a delayed job: nothing behind it may start
      const first = await q.add('o', { n: 1 }, { delay: HOUR, group: { id: 'acct-2', ordered: true } });
      const behind = await q.add('o', { n: 2 }, { group: { id: 'acct-2', ordered: true } });

      // the first two waiting group jobs, in their group's order; the delayed one is not waiting
      expect(await q.clean(0, 2, 'wait')).to.deep.equal([grouped[0].id, grouped[1].id]);
      expect((await q.getGroup('acct-1'))!.waiting).to.equal(1);
      // removing the delayed head of the ordered group's line frees the job behind it
      expect(await q.clean(0, 0, 'delayed')).to.deep.equal([first.id]);
      const waitingLeft = [grouped[2].id, behind.id];
      expect((await q.getGroup('acct-2'))!.waiting).to.equal(1);
      expect((await q.getJobCounts()).waiting).to.equal(2);

      const ran: string[] = [];
      worker(q, async (job) => {
        ran.push(job.id);
      });
      await waitFor(() => ran.length === waitingLeft.length, 'the jobs left in both groups ran');
      expect(sorted(ran)).to.deep.equal(sorted(waitingLeft));
      expect((await q.getGroup('acct-2'))!.delayed).to.equal(0);
    });

    it("'paused': the waiting jobs of a paused queue (none while it runs), as getJobCounts counts them", async () => {
      const q = queue();
      const waiting = await Promise.all([1, 2].map((n) => q.add('w', { n })));
      const prio = await q.add('p', {}, { priority: 2 });
      const delayed = await q.add('d', {}, { delay: HOUR });
      expect(await q.clean(0, 0, 'paused')).to.deep.equal([]);
      await q.pause();
      expect(await q.clean(0, 0, 'paused')).to.deep.equal(ids(waiting));
      expect(await stateOf(q, prio.id)).to.equal('prioritized');
      expect(await stateOf(q, delayed.id)).to.equal('delayed');
      // BullMQ 6 keeps a paused queue's jobs in its wait list: 'wait' takes them too
      const more = await q.add('w', { n: 3 });
      expect(await q.clean(0, 0, 'wait')).to.deep.equal([more.id]);
      expect(await q.isPaused()).to.equal(true);
    });

    it("'active' removes nothing (glidemq never removes a running job behind its worker; stalled recovery takes back a dead worker's) and the native form refuses it; 'cleaned' is emitted with the ids", async () => {
      const q = queue();
      const hold = gate();
      worker(q, () => hold.promise);
      const running = await q.add('long', {});
      await waitFor(async () => (await stateOf(q, running.id)) === 'active', 'the job is active');
      expect(await q.clean(0, 0, 'active')).to.deep.equal([]);
      const err = await rejection(q.clean('active' as never, 0));
      expect(err).to.be.instanceOf(JobActiveError);
      expect(String(err)).to.match(/active/);
      expect(await stateOf(q, running.id)).to.equal('active');

      const heard: [string[], string][] = [];
      q.on('cleaned', (jobs: string[], type: string) => heard.push([jobs, type]));
      const queued = await q.add('next', {});
      expect(await q.clean(0, 0, 'waiting')).to.deep.equal([queued.id]);
      expect(heard).to.deep.equal([[[queued.id], 'wait']]);
      hold.open();
      await waitFor(async () => (await stateOf(q, running.id)) === 'completed', 'the held job completed');
    });

    it('bad arguments are refused before anything is removed; the native clean(state, grace, opts) form still works', async () => {
      const q = queue();
      const job = await q.add('w', {});
      for (const call of [() => q.clean(-1, 0, 'wait'), () => q.clean(0, -2, 'wait'), () => q.clean(0, 0, 'nope' as 'wait')]) {
        expect(String(await rejection(call()))).to.match(/clean: (grace|limit|state)/);
      }
      expect(await q.clean('wait', 0, { dryRun: true })).to.deep.equal({ ids: [job.id], dryRun: true });
      expect(await stateOf(q, job.id)).to.equal('waiting');
      expect(await q.clean('waiting', 0, { limit: 5 })).to.deep.equal({ ids: [job.id], dryRun: false });
    });
  });

  it('drain() removes waiting and prioritized jobs, keeps delayed ones; drain(true) removes those too', async () => {
    const q = queue();
    await q.add('w', {});
    await q.add('p', {}, { priority: 1 });
    const delayed = await q.add('d', {}, { delay: HOUR });
    await q.drain();
    let c = await q.getJobCounts();
    expect([c.waiting, c.prioritized, c.delayed]).to.deep.equal([0, 0, 1]);
    await q.drain(false);
    expect(await stateOf(q, delayed.id)).to.equal('delayed');
    await q.drain(true);
    c = await q.getJobCounts();
    expect(c.delayed).to.equal(0);
    expect(await q.getJob(delayed.id)).to.equal(undefined);
    // glidemq's object form is still there
    await q.add('w', {});
    expect(await q.drain({ dryRun: true })).to.deep.equal({ removed: 1, dryRun: true });
  });

  it('obliterate() is refused while a job is active (queue left as it was); { force: true, count } deletes every key in batches', async () => {
    const q = queue();
    const hold = gate();
    const w = worker(q, () => hold.promise);
    for (let i = 0; i < 5; i++) await q.add('x', { i }, { delay: HOUR });
    const running = await q.add('long', {});
    await waitFor(async () => (await stateOf(q, running.id)) === 'active', 'the job is active');

    const err = await rejection(q.obliterate());
    expect(err).to.be.instanceOf(JobActiveError);
    expect(String(err)).to.match(/1 active job.*force/);
    expect(await q.isPaused()).to.equal(false);
    expect((await q.getJobCounts()).delayed).to.equal(5);
    expect(String(await rejection(q.obliterate({ count: 0 })))).to.match(/count/);

    await q.obliterate({ force: true, count: 2 });
    // (the live worker's next tick may set up the queue's empty structures again, not its jobs)
    const left = await redis().keys(`${q.keys.base}:*`);
    expect(left.filter((k) => k.startsWith(q.keys.jobPrefix) || k === q.keys.scheduled)).to.deep.equal([]);
    hold.open(); // its worker finds the job gone when it finishes: nothing is re-created
    await w.close();
    expect(await redis().exists(q.keys.job(running.id))).to.equal(0);
    await q.obliterate();
    expect(await redis().keys(`${q.keys.base}:*`)).to.deep.equal([]);
  });

  describe('job schedulers', () => {
    it('upsertJobScheduler twice updates the one scheduler; getJobScheduler(s), count, remove', async () => {
      const q = queue();
      const first = await q.upsertJobScheduler('report', { pattern: '0 3 * * *', tz: 'Europe/Berlin' }, { name: 'nightly', data: { v: 1 } });
      expect(first).to.deep.include({ key: 'report', name: 'nightly', pattern: '0 3 * * *', tz: 'Europe/Berlin' });
      const again = await q.upsertJobScheduler('report', { pattern: '0 3 * * *', tz: 'Europe/Berlin' }, { name: 'nightly', data: { v: 2 }, opts: { attempts: 3 } });
      expect(again.next).to.equal(first.next); // the same timing keeps its next run
      expect(await q.getJobSchedulersCount()).to.equal(1);
      expect(await q.getJobScheduler('report')).to.deep.equal({
        key: 'report',
        name: 'nightly',
        pattern: '0 3 * * *',
        tz: 'Europe/Berlin',
        next: first.next,
        template: { data: { v: 2 }, opts: { attempts: 3 } },
      });
      // a new timing replaces the old one
      const start = (await serverNow()) + HOUR;
      const every = await q.upsertJobScheduler('report', { every: 60_000, startDate: new Date(start) });
      expect(every).to.deep.include({ key: 'report', name: 'report', every: 60_000, startDate: start, next: start });
      expect(every.pattern).to.equal(undefined);
      expect(await q.getJobSchedulersCount()).to.equal(1);

      await q.upsertJobScheduler('soon', { every: 5_000, startDate: start - HOUR / 2 });
      await q.upsertJobScheduler('late', { pattern: '0 0 1 1 *' });
      expect((await q.getJobSchedulers()).map((s) => s.key)).to.deep.equal(['late', 'report', 'soon']); // latest next first
      expect((await q.getJobSchedulers(0, -1, true)).map((s) => s.key)).to.deep.equal(['soon', 'report', 'late']);
      expect((await q.getJobSchedulers(0, 0, true)).map((s) => s.key)).to.deep.equal(['soon']);
      expect(await q.removeJobScheduler('late')).to.equal(true);
      expect(await q.removeJobScheduler('late')).to.equal(false);
      expect(await q.getJobScheduler('late')).to.equal(undefined);
      expect(await q.getJobSchedulersCount()).to.equal(2);
    });

    it('a scheduler with every adds its first job at once (as BullMQ) and then one per interval, which a worker runs', async () => {
      const q = queue();
      const before = await serverNow();
      const s = await q.upsertJobScheduler('tick', { every: 1000 }, { name: 'tick-job', data: { hello: 'world' } });
      expect(s.next).to.be.within(before, await serverNow());
      const ran: { name: string; data: unknown }[] = [];
      worker(q, async (job) => {
        ran.push({ name: job.name, data: job.data });
      });
      await waitFor(() => ran.length >= 2, 'two runs of the scheduler');
      expect(ran[0]).to.deep.equal({ name: 'tick-job', data: { hello: 'world' } });
      expect(ran[1]).to.deep.equal(ran[0]);
      await q.removeJobScheduler('tick');
    });

    it("a pattern's first job at once with immediately; BullMQ's six-field pattern with seconds 0 is its five-field one", async () => {
      const q = queue();
      const before = await serverNow();
      const now = await q.upsertJobScheduler('hourly', { pattern: '0 0 * * * *', immediately: true });
      expect(now.pattern).to.equal('0 * * * *');
      expect(now.next).to.be.within(before, await serverNow());
    });

    it('repeat options glidemq has no equivalent for are refused by name, and nothing is stored', async () => {
      const q = queue();
      const refused: [string, Parameters<Queue['upsertJobScheduler']>[1]][] = [
        ['limit', { every: 1000, limit: 3 }],
        ['endDate', { pattern: '0 * * * *', endDate: Date.now() + HOUR }],
        ['offset', { every: 1000, offset: 10 }],
        ['seconds', { pattern: '*/5 * * * * *' }],
      ];
      for (const [option, repeat] of refused) {
        const err = await rejection(q.upsertJobScheduler('s', repeat));
        expect(err, option).to.be.instanceOf(NotSupportedError);
        expect(String(err)).to.include(option);
      }
      expect(String(await rejection(q.upsertJobScheduler('s', { every: 1000, pattern: '0 * * * *' })))).to.match(/not both/);
      expect(String(await rejection(q.upsertJobScheduler('s', { pattern: '0 * * * *', immediately: true, startDate: Date.now() })))).to.match(
        /not both/,
      );
      expect(await q.getJobSchedulersCount()).to.equal(0);
    });
  });
});
