import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { InvalidArgumentError } from '../../src/engine/shared/errors.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { nextCronTime, parseCron } from '../../src/engine/scheduling/cron.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { TestServer, useServer, waitFor } from '../helpers/valkey.js';

const MIN = 60_000;
const HOUR = 60 * MIN;

/** The server's clock (TIME) in ms: schedulers come due and are stamped on it. */
async function serverMs(q: Queue): Promise<number> {
  const [s, us] = await q.client.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

/** Rewrites fields of a stored scheduler record directly (seeding server state; no clock moves). */
async function seedRecord(q: Queue, name: string, patch: Record<string, number>): Promise<Record<string, unknown>> {
  const rec = { ...JSON.parse(String(await q.client.hget(q.keys.schedulers, name))), ...patch };
  await q.client.hset(q.keys.schedulers, name, JSON.stringify(rec));
  return rec;
}

/**
 * Makes a scheduler due now (its nextRun 1 ms before the server's now; an interval's slots are
 * anchored there too, as if it had been created one interval earlier); returns that nextRun.
 */
async function makeDue(q: Queue, name: string): Promise<number> {
  const nextRun = (await serverMs(q)) - 1;
  const stored = JSON.parse(String(await q.client.hget(q.keys.schedulers, name))) as Record<string, unknown>;
  // one write: a worker's promotion tick may fire the slot as soon as nextRun is due, and a second
  // read-modify-write would then put back the record as it was before that fire
  await seedRecord(q, name, stored.every !== undefined ? { nextRun, anchor: nextRun } : { nextRun });
  return nextRun;
}

describe('schedulers', function () {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  function setup(label: string): { q: Queue } {
    return { q: h.queue(uniqueQueue(label)) };
  }

  async function jobsAdded(q: Queue): Promise<number> {
    return (await q.client.keys(`${q.keys.jobPrefix}*`)).length;
  }

  function fire(q: Queue, ...triples: (string | number)[]): Promise<unknown> {
    return callFunction(q.client, 'glidemq_fireSchedulers', q.keys.meta, triples);
  }

  it('stores a definition with its next run (server time); lists and removes it', async () => {
    const { q } = setup('sched-api');
    await q.waitUntilReady();
    const before = await serverMs(q);
    const every = await q.upsertScheduler('heartbeat', { every: '5m' }, { data: { ping: true }, opts: { attempts: 3, priority: 2 } });
    const after = await serverMs(q);
    expect(every).to.include({ name: 'heartbeat', every: 300_000 });
    // stamped and anchored by the server
    expect(every.createdAt).to.be.within(before, after);
    expect(every.updatedAt).to.equal(every.createdAt);
    expect(every.nextRun).to.equal(every.createdAt + 300_000);
    expect(every.template).to.deep.equal({ name: 'heartbeat', data: { ping: true }, opts: { priority: 2, attempts: 3 } });
    const cron = await q.upsertScheduler('nightly', { pattern: '30 2 * * *', tz: 'Europe/Berlin' }, { name: 'report', data: { kind: 'daily' } });
    expect(cron).to.include({ name: 'nightly', pattern: '30 2 * * *', tz: 'Europe/Berlin' });
    expect(cron.nextRun).to.equal(nextCronTime(parseCron('30 2 * * *'), cron.createdAt, 'Europe/Berlin'));

    const raw = JSON.parse(String(await q.client.hget(q.keys.schedulers, 'nightly')));
    expect(raw).to.include({ name: 'nightly', nextRun: cron.nextRun, pattern: '30 2 * * *', timing: 'cron:30 2 * * *@Europe/Berlin' });

    const list = await q.getSchedulers();
    expect(list.map((s) => s.name)).to.deep.equal([every.nextRun < cron.nextRun ? 'heartbeat' : 'nightly', every.nextRun < cron.nextRun ? 'nightly' : 'heartbeat']);
    expect(await q.getScheduler('nightly')).to.deep.equal(cron);
    expect(await q.removeScheduler('nightly')).to.equal(true);
    expect(await q.removeScheduler('nightly')).to.equal(false);
    expect((await q.getSchedulers()).map((s) => s.name)).to.deep.equal(['heartbeat']);
  });

  it('refuses bad definitions with messages naming the problem', async () => {
    const { q } = setup('sched-bad');
    const cases: [Parameters<Queue['upsertScheduler']>, RegExp][] = [
      [['x', {}], /either a cron pattern or an interval \(every\), not neither/],
      [['x', { pattern: '* * * * *', every: 1000 }], /not both/],
      [['x', { pattern: '61 * * * *' }], /minute field "61"/],
      [['x', { pattern: '* * * * *', tz: 'Nowhere/City' }], /unknown time zone/],
      [['x', { every: 10 }], /at least 1000 ms/],
      [['x', { every: 'soon' }], /every/],
      [['x', { every: 5000, tz: 'UTC' }], /only applies to a cron pattern/],
      [['x', { every: 5000 }, { opts: { jobId: 'fixed' } }], /fixed jobId/],
      [['', { every: 5000 }], /needs a name/],
      [['é'.repeat(129), { every: 5000 }], /at most 256 bytes/],
    ];
    for (const [args, why] of cases) {
      let err: unknown;
      await q.upsertScheduler(...args).catch((e) => (err = e));
      expect(err, String(why)).to.be.instanceOf(InvalidArgumentError);
      expect(String((err as Error).message)).to.match(why);
    }
    // the library checks the record too, field by field, before writing anything
    const job = { name: 'j', data: '{}', delay: 0, priority: 0, lifo: '0', attempts: 1, opts: '' };
    const records: [unknown, RegExp][] = [
      [{ every: 10, nextRun: 0, job }, /every must be a whole number of ms from 1000/],
      [{ every: 5000, pattern: '* * * * *', nextRun: 0, job }, /not both/],
      [{ pattern: '* * * * *', nextRun: -5, job }, /nextRun must be/],
      [{ every: 5000, nextRun: 0, job: { ...job, priority: 3, lifo: '1' } }, /both prioritized and LIFO/],
      [{ every: 5000, nextRun: 0, job: { ...job, attempts: 0 } }, /job.attempts/],
      [{ every: 5000, nextRun: 0, job: { ...job, opts: '[1]' } }, /job.opts/],
      [{ every: 5000, nextRun: 0 }, /job must be an object/],
    ];
    await q.waitUntilReady();
    for (const [rec, why] of records) {
      let err: unknown;
      await callFunction(q.client, 'glidemq_upsertScheduler', q.keys.meta, ['x', JSON.stringify(rec)]).catch((e) => (err = e));
      expect(err, String(why)).to.be.instanceOf(InvalidArgumentError);
      expect(String((err as Error).message)).to.match(/glidemq_upsertScheduler: scheduler x: record: /);
      expect(String((err as Error).message)).to.match(why);
    }
    expect(await q.client.exists(q.keys.schedulers)).to.equal(0);
  });

  it('a worker fires a due interval once and moves its next run to the next slot (server time)', async () => {
    const { q } = setup('sched-every');
    const seen: unknown[] = [];
    h.worker(q.name, async (job) => void seen.push(job.data), { promotionInterval: 20 });
    await waitFor(async () => (await q.getJobCounts()).consumers > 0, 'the worker to start reading');
    const s = await q.upsertScheduler('tick', { every: 1000 }, { data: { n: 1 } });
    await waitFor(() => seen.length === 1, 'the first run');
    const after = await q.getScheduler('tick');
    expect(after).to.include({ lastRun: s.nextRun, nextRun: s.nextRun + 1000 });
    expect(seen).to.deep.equal([{ n: 1 }]);
    await waitFor(() => seen.length === 2, 'the second run');
    expect(await q.getScheduler('tick')).to.include({ lastRun: s.nextRun + 1000, nextRun: s.nextRun + 2000 });
  });

  it('several workers never fire one slot twice', async () => {
    const { q } = setup('sched-race');
    await q.upsertScheduler('once', { every: MIN });
    const ran: string[] = [];
    for (let i = 0; i < 4; i++) h.worker(q.name, async (job) => void ran.push(job.id), { promotionInterval: 5 });
    for (let slot = 1; slot <= 5; slot++) {
      const due = await makeDue(q, 'once');
      await waitFor(async () => (await q.getScheduler('once'))?.lastRun === due, `slot ${slot} to fire`);
    }
    await waitFor(() => ran.length === 5, 'five runs to complete');
    expect(new Set(ran).size).to.equal(5);
    expect(await jobsAdded(q)).to.equal(5);
  });

  it('the compare-and-set refuses a slot that was already fired, or is not due on the server', async () => {
    const { q } = setup('sched-cas');
    const s = await q.upsertScheduler('cas', { every: MIN });
    // not due yet on the server's clock: nothing fires, whatever the caller says
    const notDue = (await fire(q, 'cas', s.nextRun, 0)) as (string | number)[];
    expect(notDue.slice(0, 2)).to.deep.equal(['cas', '']);
    expect(Number(notDue[2])).to.be.within(MIN - 5000, MIN); // how long until it is due
    expect(await jobsAdded(q)).to.equal(0);
    const due = await makeDue(q, 'cas');
    const first = (await fire(q, 'cas', due, 123)) as (string | number)[];
    const second = (await fire(q, 'cas', due, 123)) as (string | number)[];
    expect(first[0]).to.equal('cas');
    expect(first[1]).to.not.equal('');
    expect(second.slice(0, 2)).to.deep.equal(['cas', '']);
    expect(await jobsAdded(q)).to.equal(1);
    // an interval's next slot is the server's: the next anchor + k * every after its now (123 ignored)
    const rec = (await q.getScheduler('cas'))!;
    expect(rec.lastRun).to.equal(due);
    expect(rec.nextRun).to.equal(due + MIN);
    expect(Number(first[2])).to.be.within(MIN - 1000, MIN);
    // a name sent twice in one call fires once
    const again = await makeDue(q, 'cas');
    const twice = (await fire(q, 'cas', again, 0, 'cas', again, 0)) as (string | number)[];
    expect([twice[1] !== '', twice[4]]).to.deep.equal([true, '']);
    expect(await jobsAdded(q)).to.equal(2);
    // bad arguments are refused before anything is written
    for (const args of [['cas', again, 'nan'], ['cas', again], ['', again, 0], ['cas', -1, 0]]) {
      let err: unknown;
      await fire(q, ...args).catch((e) => (err = e));
      expect(err, JSON.stringify(args)).to.be.instanceOf(InvalidArgumentError);
      expect(String((err as Error).message)).to.match(/^glidemq_fireSchedulers: /);
    }
  });

  it('a cron next run that is not after the server\'s now is refused: the slot stays due', async () => {
    const { q } = setup('sched-cron-cas');
    await q.upsertScheduler('c', { pattern: '0 9 * * *' });
    const due = await makeDue(q, 'c');
    const now = await serverMs(q);
    // a client whose clock runs behind the server's computed a "next" slot the server already passed
    expect(await fire(q, 'c', due, now - 1000)).to.deep.equal(['c', '', 0]);
    expect(await fire(q, 'c', due, 0)).to.deep.equal(['c', '', 0]);
    expect((await q.getScheduler('c'))?.nextRun).to.equal(due);
    expect(await jobsAdded(q)).to.equal(0);
    const next = nextCronTime(parseCron('0 9 * * *'), now, undefined)!;
    const r = (await fire(q, 'c', due, next)) as (string | number)[];
    expect(r[1]).to.not.equal('');
    expect(await q.getScheduler('c')).to.include({ lastRun: due, nextRun: next });
  });

  it('after downtime it fires what came due once, not once per missed slot', async () => {
    const { q } = setup('sched-downtime');
    await q.upsertScheduler('missed', { every: MIN });
    // as if created 10.5 minutes ago and never fired since: ten slots passed with no worker running
    const anchor = (await serverMs(q)) - 10 * MIN - 30_000;
    await seedRecord(q, 'missed', { anchor, createdAt: anchor, nextRun: anchor + MIN });
    const ran: string[] = [];
    h.worker(q.name, async (job) => void ran.push(job.id), { promotionInterval: 20 });
    await waitFor(() => ran.length === 1, 'the missed run');
    const after = await q.getScheduler('missed');
    expect(after?.lastRun).to.equal(anchor + MIN);
    expect(after?.nextRun).to.equal(anchor + 11 * MIN);
    expect(after!.nextRun).to.be.greaterThan(await serverMs(q));
    expect(await jobsAdded(q)).to.equal(1);
  });

  it('fires a due cron pattern, then moves it to its next wall-clock slot in the time zone', async () => {
    const { q } = setup('sched-cron');
    const s = await q.upsertScheduler('nine', { pattern: '0 9 * * *', tz: 'America/New_York' }, { name: 'morning' });
    const wall = new Intl.DateTimeFormat('en-US', { timeZone: 'America/New_York', hour: 'numeric', minute: 'numeric', hourCycle: 'h23' });
    expect(wall.format(new Date(s.nextRun))).to.equal('09:00');
    const due = await makeDue(q, 'nine');
    const names: string[] = [];
    h.worker(q.name, async (job) => void names.push(job.name), { promotionInterval: 20 });
    await waitFor(() => names.length === 1, 'the due run');
    expect(names).to.deep.equal(['morning']);
    const after = (await q.getScheduler('nine'))!;
    expect(after.lastRun).to.equal(due);
    // the next slot after the server's now: the 09:00 the definition started with
    expect(after.nextRun).to.equal(s.nextRun);
    expect(wall.format(new Date(after.nextRun))).to.equal('09:00');
    expect(after.nextRun - (await serverMs(q))).to.be.within(0, 25 * HOUR);
  });

  it('upserting the same timing keeps the next run; a new timing or template takes effect', async () => {
    const { q } = setup('sched-upsert');
    const s = await q.upsertScheduler('u', { every: MIN }, { data: { v: 1 } });
    const same = await q.upsertScheduler('u', { every: 60_000 }, { data: { v: 2 } });
    expect(same.nextRun).to.equal(s.nextRun);
    expect(same.createdAt).to.equal(s.createdAt);
    expect(same.updatedAt).to.be.at.least(s.updatedAt);
    expect(same.template.data).to.deep.equal({ v: 2 });
    const changed = await q.upsertScheduler('u', { every: 2 * MIN }, { data: { v: 3 } });
    expect(changed.nextRun).to.equal(changed.updatedAt + 2 * MIN);
    expect(changed.createdAt).to.equal(s.createdAt);
    const seen: unknown[] = [];
    h.worker(q.name, async (job) => void seen.push(job.data), { promotionInterval: 20 });
    await makeDue(q, 'u');
    await waitFor(() => seen.length === 1, 'the run with the new template');
    expect(seen).to.deep.equal([{ v: 3 }]);
  });

  it('adds jobs with the template options (priority, delay)', async () => {
    const { q } = setup('sched-opts');
    await q.upsertScheduler('p', { every: MIN }, { data: {}, opts: { priority: 4, delay: 3_600_000 } });
    const w = h.worker(q.name, async () => 'ok', { promotionInterval: 20 });
    await makeDue(q, 'p');
    const id = await waitFor(async () => (await q.getScheduler('p'))?.lastJobId, 'the run');
    const job = await q.getJob(String(id));
    expect(job?.state).to.equal('delayed');
    expect(job?.opts).to.include({ priority: 4, delay: 3_600_000 });
    await w.close();
  });
});

describe('schedulers: durability', function () {
  this.timeout(60_000);

  it('definitions survive a server SIGKILL; a worker afterwards fires what came due once', async () => {
    const server = await new TestServer({ persistence: 'aof-always' }).start();
    const h = new Harness(() => server);
    try {
      const name = uniqueQueue('sched-restart');
      const q = h.queue(name);
      await q.upsertScheduler('every', { every: MIN }, { data: { a: 1 } });
      await q.upsertScheduler('cron', { pattern: '*/5 * * * *', tz: 'Asia/Tokyo' }, { name: 'five', opts: { attempts: 2 } });
      // both came due 30 minutes ago, with no worker running since
      const ago = (await serverMs(q)) - 30 * MIN;
      await seedRecord(q, 'every', { anchor: ago - MIN, nextRun: ago });
      await seedRecord(q, 'cron', { nextRun: ago });
      const before = await q.client.hgetall(q.keys.schedulers);
      await h.cleanup();

      await server.kill();
      await server.start();

      const q2 = h.queue(name);
      expect(await q2.client.hgetall(q2.keys.schedulers)).to.deep.equal(before);
      // the worker comes back: each scheduler fires its missed run once
      const ran: string[] = [];
      h.worker(name, async (job) => void ran.push(job.name), { promotionInterval: 20 });
      await waitFor(() => ran.length === 2, 'both missed runs');
      expect(ran.sort()).to.deep.equal(['every', 'five']);
      const after = await q2.getSchedulers();
      const now = await serverMs(q2);
      for (const s of after) {
        expect(s.lastRun).to.equal(ago);
        expect(s.nextRun).to.be.greaterThan(now - 1000);
      }
      expect((await q2.client.keys(`${q2.keys.jobPrefix}*`)).length).to.equal(2);
    } finally {
      await h.cleanup();
      await server.stop();
    }
  });
});
