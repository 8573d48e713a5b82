import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { InvalidArgumentError } from '../../src/engine/shared/errors.js';
import { callFunction } from '../../src/engine/connecting/library.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { TestServer, useServer, waitFor } from '../helpers/valkey.js';

const MIN = 60_000;
const DAY = 24 * 60 * MIN;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Succeeds unless data.fail is set; takes data.ms of processing time. */
async function processor(job: Job) {
  await sleep(job.data.ms ?? 0);
  if (job.data.fail) throw new Error('boom');
  return 'ok';
}

/** The server's clock (TIME) in ms: metrics minutes and the retention window are counted on it. */
async function serverMs(q: Queue): Promise<number> {
  const [s, us] = await q.client.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

async function serverMinute(q: Queue): Promise<number> {
  return Math.floor((await serverMs(q)) / MIN);
}

/** Writes one minute's buckets directly, as recordMetrics would have (no clock is moved). */
async function seedMinute(q: Queue, minute: number, completed: number, failed: number, ms: number): Promise<void> {
  const c = q.client;
  const m = String(minute);
  if (completed) await c.hset(q.keys.metrics('completed'), m, String(completed));
  if (failed) await c.hset(q.keys.metrics('failed'), m, String(failed));
  await c.hset(q.keys.metrics('time'), m, String(ms));
  await c.zadd(q.keys.metrics('minutes'), m, m);
}

describe('metrics', function () {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  async function metricKeys(q: Queue) {
    const c = q.client;
    return {
      completed: await c.hgetall(q.keys.metrics('completed')),
      failed: await c.hgetall(q.keys.metrics('failed')),
      time: await c.hgetall(q.keys.metrics('time')),
      minutes: await c.zrange(q.keys.metrics('minutes'), '0', '-1'),
    };
  }

  it('counts completed and failed attempts and processing time in the server\'s minutes', async () => {
    const name = uniqueQueue('metrics');
    const q = h.queue(name);
    const first = await serverMinute(q);
    await q.addBulk([
      { name: 'ok', data: { ms: 30 } },
      { name: 'ok', data: { ms: 30 } },
      { name: 'bad', data: { fail: true } },
      { name: 'retry', data: { fail: true }, opts: { attempts: 2 } },
    ]);
    const w = h.worker(name, processor);
    await waitFor(async () => (await q.getJobCounts()).failed === 2, 'the jobs to finish');
    await waitFor(() => w.finished.completed === 2, 'the completed jobs');
    const last = await serverMinute(q);
    // every finish went into a minute of the server's clock
    const stored = (await metricKeys(q)).minutes.map(Number);
    for (const minute of stored) expect(minute).to.be.within(first, last);

    // the default range is the hour up to the server's now
    const recent = await q.getMetrics();
    expect(recent.minutes).to.have.length(60);
    expect(recent.to / MIN).to.be.within(last, last + 1);
    expect(recent.from).to.equal(recent.to - 59 * MIN);
    expect(recent.completed).to.equal(2);
    expect(recent.failed).to.equal(3);
    expect(recent.processingMs).to.be.at.least(60);
    expect(recent.avgMs).to.equal(Math.round(recent.processingMs / 5));
    expect((await q.getMetrics({ minutes: 5 })).minutes).to.have.length(5);

    // an explicit range: a dense series, one entry per minute, oldest first
    const seeded = first - 3;
    await seedMinute(q, seeded, 4, 1, 100);
    const m = await q.getMetrics({ from: (first - 5) * MIN, to: first * MIN + 59_999 });
    expect(m.minutes).to.have.length(6);
    expect(m.minutes[0]).to.deep.equal({ minute: (first - 5) * MIN, completed: 0, failed: 0, processingMs: 0, avgMs: 0 });
    expect(m.minutes[2]).to.deep.equal({ minute: seeded * MIN, completed: 4, failed: 1, processingMs: 100, avgMs: 20 });
    expect(m.completed).to.be.at.least(4);
  });

  it('trims buckets older than 24 hours when a new minute gets its first bucket', async () => {
    const name = uniqueQueue('metrics-trim');
    const q = h.queue(name);
    const now = await serverMinute(q);
    // two minutes out of the window, two inside it (with a margin of minutes for a slow run)
    for (const minute of [now - 2000, now - 1441, now - 1430, now - 720]) await seedMinute(q, minute, 1, 0, 5);
    const w = h.worker(name, processor, { promotionInterval: 60_000 });
    await q.add('ok', {});
    await waitFor(() => w.finished.completed === 1, 'the job');
    const keys = await metricKeys(q);
    const kept = keys.minutes.map(Number);
    expect(kept.slice(0, 2)).to.deep.equal([now - 1430, now - 720]);
    expect(kept.slice(2).every((minute) => minute >= now)).to.equal(true);
    expect(Object.keys(keys.completed).map(Number).sort()).to.deep.equal(kept);
    expect(Object.keys(keys.time).map(Number).sort()).to.deep.equal(kept);
    const all = await q.getMetrics({ from: 0 });
    expect(all.completed).to.equal(3);
    expect(all.minutes).to.have.length(1440);
  });

  it('trims a quiet queue from the promotion tick', async () => {
    const name = uniqueQueue('metrics-quiet');
    const q = h.queue(name);
    const now = await serverMinute(q);
    await seedMinute(q, now - 1500, 1, 1, 10);
    await seedMinute(q, now - 1441, 0, 2, 10);
    expect((await metricKeys(q)).minutes).to.have.length(2);
    h.worker(name, processor, { promotionInterval: 30 }); // nothing runs: only the tick can trim
    await waitFor(async () => (await metricKeys(q)).minutes.length === 0, 'the tick to trim the old minutes');
    expect(await metricKeys(q)).to.deep.equal({ completed: {}, failed: {}, time: {}, minutes: [] });
  });

  it('reads nothing outside the window even before a trim ran', async () => {
    const q = h.queue(uniqueQueue('metrics-read'));
    const now = await serverMinute(q);
    await seedMinute(q, now - 1441, 7, 0, 10);
    await seedMinute(q, now - 1430, 2, 0, 10);
    // a range that asks for the old minute: the server's retention window still excludes it
    const m = await q.getMetrics({ from: (now - 1445) * MIN, to: (now - 1420) * MIN });
    expect(m.minutes).to.have.length(26);
    expect(m.completed).to.equal(2);
    expect((await metricKeys(q)).minutes).to.have.length(2); // still stored: no worker ticked
  });

  it('gives each metrics key a TTL of the window plus a minute, for a queue no worker serves any more', async () => {
    const name = uniqueQueue('metrics-ttl');
    const q = h.queue(name);
    const w = h.worker(name, processor);
    await q.addBulk([{ name: 'ok', data: {} }, { name: 'bad', data: { fail: true } }]);
    await waitFor(() => w.finished.completed + w.finished.failed === 2, 'two jobs to finish');
    for (const kind of ['completed', 'failed', 'time', 'minutes']) {
      const ttl = await q.client.pttl(q.keys.metrics(kind));
      expect(ttl, kind).to.be.within(DAY + MIN - 30_000, DAY + MIN);
    }
  });

  it('refuses a range that runs backwards, here and in the library', async () => {
    const q = h.queue(uniqueQueue('metrics-bad'));
    let err: unknown;
    await q.getMetrics({ from: 2000, to: 1000 }).catch((e) => (err = e));
    expect(String(err)).to.match(/from is after to/);
    let luaErr: unknown;
    await q.waitUntilReady();
    await callFunction(q.client, 'glidemq_getMetrics', q.keys.meta, [2000, 1000, 60]).catch((e) => (luaErr = e));
    expect(luaErr).to.be.instanceOf(InvalidArgumentError);
    expect(String((luaErr as Error).message)).to.match(/glidemq_getMetrics: from is after to/);
    luaErr = undefined;
    await callFunction(q.client, 'glidemq_getMetrics', q.keys.meta, ['', 'nan', 60]).catch((e) => (luaErr = e));
    expect(String((luaErr as Error).message)).to.match(/glidemq_getMetrics: to must be/);
  });
});

describe('metrics: durability', function () {
  this.timeout(60_000);

  it('the per-minute buckets survive a server SIGKILL unchanged', async () => {
    const server = await new TestServer({ persistence: 'aof-always' }).start();
    const h = new Harness(() => server);
    try {
      const name = uniqueQueue('metrics-restart');
      const q = h.queue(name);
      const w = h.worker(name, processor);
      await q.addBulk([{ name: 'a', data: { ms: 5 } }, { name: 'b', data: { fail: true } }, { name: 'c', data: {} }]);
      await waitFor(() => w.finished.completed + w.finished.failed === 3, 'three jobs to finish');
      await h.cleanup();
      const q1 = h.queue(name);
      const now = await serverMs(q1);
      const range = { from: now - 10 * MIN, to: now };
      const before = await q1.getMetrics(range);
      expect(before.completed).to.equal(2);
      expect(before.failed).to.equal(1);
      await h.cleanup();

      await server.kill();
      await server.start();

      const q2 = h.queue(name);
      expect(await q2.getMetrics(range)).to.deep.equal(before);
    } finally {
      await h.cleanup();
      await server.stop();
    }
  });
});
