import { expect } from 'chai';
import { Queue } from '../../src/engine/queue.js';
import { InvalidArgumentError } from '../../src/engine/errors.js';
import { callFunction } from '../../src/engine/library.js';
import { nextCronTime, parseCron } from '../../src/engine/cron.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { TestServer, useServer, waitFor } from '../helpers/valkey.js';

const MIN = 60_000;

/** A clock the test moves by setting `offset` (shared by the queue and its workers). */
function movableClock() {
  const clock = { offset: 0, now: () => Date.now() + clock.offset };
  return clock;
}

describe('schedulers', function () {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  function setup(label: string) {
    const clock = movableClock();
    const q = new Queue(uniqueQueue(label), { connection: server().url, clock: clock.now });
    h.queues.push(q);
    return { q, clock };
  }

  async function jobsAdded(q: Queue): Promise<number> {
    return (await q.client.keys(`${q.keys.jobPrefix}*`)).length;
  }

  it('stores a definition with its next run; lists and removes it', async () => {
    const { q } = setup('sched-api');
    const before = Date.now();
    const every = await q.upsertScheduler('heartbeat', { every: '5m' }, { data: { ping: true }, opts: { attempts: 3, priority: 2 } });
    expect(every).to.include({ name: 'heartbeat', every: 300_000 });
    expect(every.nextRun).to.be.within(before + 300_000, Date.now() + 300_000);
    expect(every.template).to.deep.equal({ name: 'heartbeat', data: { ping: true }, opts: { priority: 2, attempts: 3 } });
    const cron = await q.upsertScheduler('nightly', { pattern: '30 2 * * *', tz: 'Europe/Berlin' }, { name: 'report', data: { kind: 'daily' } });
    expect(cron).to.include({ name: 'nightly', pattern: '30 2 * * *', tz: 'Europe/Berlin' });
    expect(cron.nextRun).to.equal(nextCronTime(parseCron('30 2 * * *'), cron.createdAt, 'Europe/Berlin'));

    const raw = JSON.parse(String(await q.client.hget(q.keys.schedulers, 'nightly')));
    expect(raw).to.include({ name: 'nightly', nextRun: cron.nextRun, pattern: '30 2 * * *' });

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
    ];
    for (const [args, why] of cases) {
      let err: unknown;
      await q.upsertScheduler(...args).catch((e) => (err = e));
      expect(err, String(why)).to.be.instanceOf(InvalidArgumentError);
      expect(String((err as Error).message)).to.match(why);
    }
    expect(await q.client.exists(q.keys.schedulers)).to.equal(0);
  });

  it('a worker fires a due interval once and moves its next run to the next slot', async () => {
    const { q, clock } = setup('sched-every');
    const s = await q.upsertScheduler('tick', { every: MIN }, { data: { n: 1 } });
    const seen: unknown[] = [];
    h.worker(q.name, async (job) => void seen.push(job.data), { clock: clock.now, promotionInterval: 20 });
    clock.offset = MIN;
    await waitFor(() => seen.length === 1, 'the first run');
    const after = await q.getScheduler('tick');
    expect(after).to.include({ lastRun: s.nextRun, nextRun: s.nextRun + MIN });
    expect(seen).to.deep.equal([{ n: 1 }]);
    clock.offset = 2 * MIN + 1000;
    await waitFor(() => seen.length === 2, 'the second run');
    expect((await q.getScheduler('tick'))?.nextRun).to.equal(s.nextRun + 2 * MIN);
  });

  it('several workers never fire one slot twice', async () => {
    const { q, clock } = setup('sched-race');
    const s = await q.upsertScheduler('once', { every: MIN });
    const ran: string[] = [];
    for (let i = 0; i < 4; i++) h.worker(q.name, async (job) => void ran.push(job.id), { clock: clock.now, promotionInterval: 5 });
    for (let slot = 1; slot <= 5; slot++) {
      clock.offset = slot * MIN;
      await waitFor(async () => (await q.getScheduler('once'))?.nextRun === s.nextRun + slot * MIN, `slot ${slot} to fire`);
    }
    await waitFor(() => ran.length === 5, 'five runs to complete');
    expect(new Set(ran).size).to.equal(5);
    expect(await jobsAdded(q)).to.equal(5);
  });

  it('the compare-and-set refuses a slot that was already fired', async () => {
    const { q } = setup('sched-cas');
    const s = await q.upsertScheduler('cas', { every: MIN });
    const fire = () => callFunction(q.client, 'glidemq_fireSchedulers', q.keys.meta, [Date.now(), 'cas', s.nextRun, s.nextRun + MIN]);
    const first = (await fire()) as string[];
    const second = (await fire()) as string[];
    expect(first[0]).to.equal('cas');
    expect(first[1]).to.not.equal('');
    expect(second).to.deep.equal(['cas', '']);
    expect(await jobsAdded(q)).to.equal(1);
    let err: unknown;
    await callFunction(q.client, 'glidemq_fireSchedulers', q.keys.meta, [Date.now(), 'cas', s.nextRun + MIN, s.nextRun]).catch((e) => (err = e));
    expect(err).to.be.instanceOf(InvalidArgumentError);
  });

  it('after downtime it fires what came due once, not once per missed slot', async () => {
    const { q, clock } = setup('sched-downtime');
    const s = await q.upsertScheduler('missed', { every: MIN });
    clock.offset = 10 * MIN + 30_000; // ten slots passed with no worker running
    const ran: string[] = [];
    h.worker(q.name, async (job) => void ran.push(job.id), { clock: clock.now, promotionInterval: 20 });
    await waitFor(() => ran.length === 1, 'the missed run');
    const after = await q.getScheduler('missed');
    expect(after?.lastRun).to.equal(s.nextRun);
    expect(after?.nextRun).to.equal(s.createdAt + 11 * MIN);
    expect(after!.nextRun).to.be.greaterThan(clock.now());
    expect(await jobsAdded(q)).to.equal(1);
  });

  it('fires a cron pattern at its wall-clock time in the time zone, then the next day', async () => {
    const { q, clock } = setup('sched-cron');
    const s = await q.upsertScheduler('nine', { pattern: '0 9 * * *', tz: 'America/New_York' }, { name: 'morning' });
    const wall = new Intl.DateTimeFormat('en-US', { timeZone: 'America/New_York', hour: 'numeric', minute: 'numeric', hourCycle: 'h23' });
    expect(wall.format(new Date(s.nextRun))).to.equal('09:00');
    const names: string[] = [];
    h.worker(q.name, async (job) => void names.push(job.name), { clock: clock.now, promotionInterval: 20 });
    clock.offset = s.nextRun - Date.now() + 500;
    await waitFor(() => names.length === 1, 'the 09:00 run');
    expect(names).to.deep.equal(['morning']);
    const next = (await q.getScheduler('nine'))!.nextRun;
    expect(wall.format(new Date(next))).to.equal('09:00');
    expect(next - s.nextRun).to.be.within(23 * 60 * MIN, 25 * 60 * MIN); // a day (23 or 25 h across DST)
  });

  it('upserting the same timing keeps the next run; a new timing or template takes effect', async () => {
    const { q, clock } = setup('sched-upsert');
    const s = await q.upsertScheduler('u', { every: MIN }, { data: { v: 1 } });
    clock.offset = 30_000;
    const same = await q.upsertScheduler('u', { every: 60_000 }, { data: { v: 2 } });
    expect(same.nextRun).to.equal(s.nextRun);
    expect(same.createdAt).to.equal(s.createdAt);
    expect(same.template.data).to.deep.equal({ v: 2 });
    const changed = await q.upsertScheduler('u', { every: 2 * MIN }, { data: { v: 3 } });
    expect(changed.nextRun).to.be.within(clock.now() + 2 * MIN - 1000, clock.now() + 2 * MIN);
    const seen: unknown[] = [];
    h.worker(q.name, async (job) => void seen.push(job.data), { clock: clock.now, promotionInterval: 20 });
    clock.offset = 30_000 + 2 * MIN;
    await waitFor(() => seen.length === 1, 'the run with the new template');
    expect(seen).to.deep.equal([{ v: 3 }]);
  });

  it('adds jobs with the template options (priority, delay)', async () => {
    const { q, clock } = setup('sched-opts');
    await q.upsertScheduler('p', { every: MIN }, { data: {}, opts: { priority: 4, delay: 3_600_000 } });
    const w = h.worker(q.name, async () => 'ok', { clock: clock.now, promotionInterval: 20 });
    clock.offset = MIN;
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
      const every = await q.upsertScheduler('every', { every: MIN }, { data: { a: 1 } });
      await q.upsertScheduler('cron', { pattern: '*/5 * * * *', tz: 'Asia/Tokyo' }, { name: 'five', opts: { attempts: 2 } });
      const before = await q.client.hgetall(q.keys.schedulers);
      await h.cleanup();

      await server.kill();
      await server.start();

      const q2 = h.queue(name);
      expect(await q2.client.hgetall(q2.keys.schedulers)).to.deep.equal(before);
      // the worker comes back 30 minutes later: each scheduler fires its missed run once
      const offset = 30 * MIN;
      const ran: string[] = [];
      h.worker(name, async (job) => void ran.push(job.name), { clock: () => Date.now() + offset, promotionInterval: 20 });
      await waitFor(() => ran.length === 2, 'both missed runs');
      expect(ran.sort()).to.deep.equal(['every', 'five']);
      const after = await q2.getSchedulers();
      for (const s of after) expect(s.nextRun).to.be.greaterThan(Date.now() + offset - 1000);
      expect(after.find((s) => s.name === 'every')?.lastRun).to.equal(every.nextRun);
      expect((await q2.client.keys(`${q2.keys.jobPrefix}*`)).length).to.equal(2);
    } finally {
      await h.cleanup();
      await server.stop();
    }
  });
});
