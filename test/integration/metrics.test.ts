import { expect } from 'chai';
import { Queue } from '../../src/engine/queue.js';
import type { Job } from '../../src/engine/job.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { TestServer, useServer, waitFor } from '../helpers/valkey.js';

const MIN = 60_000;
const DAY = 24 * 60 * MIN;

/** A clock the test moves: a fixed start (on a minute boundary) plus real elapsed time plus an offset. */
function movableClock(start: number) {
  const realStart = Date.now();
  const clock = { offset: 0, now: () => start + clock.offset + Math.min(Date.now() - realStart, 10_000) };
  return clock;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Succeeds unless data.fail is set; takes data.ms of processing time. */
async function processor(job: Job) {
  await sleep(job.data.ms ?? 0);
  if (job.data.fail) throw new Error('boom');
  return 'ok';
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

  it('counts completed and failed attempts and processing time per minute', async () => {
    const start = Math.floor(Date.now() / MIN) * MIN - 10 * MIN;
    const clock = movableClock(start);
    const name = uniqueQueue('metrics');
    const q = new Queue(name, { connection: server().url, clock: clock.now });
    h.queues.push(q);
    await q.addBulk([
      { name: 'ok', data: { ms: 30 } },
      { name: 'ok', data: { ms: 30 } },
      { name: 'bad', data: { fail: true } },
      { name: 'retry', data: { fail: true }, opts: { attempts: 2 } },
    ]);
    const w = h.worker(name, processor, { clock: clock.now });
    await waitFor(async () => (await q.getJobCounts()).failed === 2, 'the first minute of jobs to finish');
    clock.offset = 2 * MIN;
    await q.add('ok', { ms: 10 });
    await waitFor(() => w.finished.completed === 3, 'the third completed job');

    const m = await q.getMetrics({ from: start, to: start + 5 * MIN });
    expect(m.minutes).to.have.length(6);
    expect(m.minutes[0]).to.include({ minute: start, completed: 2, failed: 3 });
    expect(m.minutes[0].processingMs).to.be.at.least(60);
    expect(m.minutes[1]).to.deep.equal({ minute: start + MIN, completed: 0, failed: 0, processingMs: 0, avgMs: 0 });
    expect(m.minutes[2]).to.include({ minute: start + 2 * MIN, completed: 1, failed: 0 });
    expect(m.minutes[2].processingMs).to.be.at.least(10);
    expect(m.completed).to.equal(3);
    expect(m.failed).to.equal(3);
    expect(m.avgMs).to.equal(Math.round(m.processingMs / 6));
    // the default range is the hour up to now
    const recent = await q.getMetrics();
    expect(recent.minutes).to.have.length(60);
    expect(recent.completed).to.equal(3);
  });

  it('trims buckets older than 24 hours when a new minute starts (moved clock, no waiting)', async () => {
    const start = Math.floor(Date.now() / MIN) * MIN - 2 * DAY;
    const clock = movableClock(start);
    const name = uniqueQueue('metrics-trim');
    const q = new Queue(name, { connection: server().url, clock: clock.now });
    h.queues.push(q);
    const w = h.worker(name, processor, { clock: clock.now, promotionInterval: 60_000 });
    for (const offset of [0, 5 * MIN, 12 * 60 * MIN]) {
      clock.offset = offset;
      const before = w.finished.completed;
      await q.add('ok', {});
      await waitFor(() => w.finished.completed === before + 1, `the job at +${offset / MIN} min`);
    }
    expect((await metricKeys(q)).minutes).to.have.length(3);
    // 24 h and 1 minute after the first bucket: that one is out of the window, the others are not
    clock.offset = DAY + 30_000;
    await q.add('ok', {});
    await waitFor(() => w.finished.completed === 4, 'the job a day later');
    const startMinute = start / MIN;
    const keys = await metricKeys(q);
    expect(keys.minutes.map(Number)).to.deep.equal([startMinute + 5, startMinute + 720, startMinute + 1440]);
    expect(Object.keys(keys.completed).map(Number).sort()).to.deep.equal([startMinute + 5, startMinute + 720, startMinute + 1440]);
    expect(Object.keys(keys.time).map(Number).sort()).to.deep.equal([startMinute + 5, startMinute + 720, startMinute + 1440]);
    const all = await q.getMetrics({ from: start - DAY, to: clock.now() });
    expect(all.completed).to.equal(3);
    expect(all.minutes).to.have.length(1440);
  });

  it('trims a quiet queue from the promotion tick', async () => {
    const start = Math.floor(Date.now() / MIN) * MIN - 3 * DAY;
    const clock = movableClock(start);
    const name = uniqueQueue('metrics-quiet');
    const q = new Queue(name, { connection: server().url, clock: clock.now });
    h.queues.push(q);
    const w = h.worker(name, processor, { clock: clock.now, promotionInterval: 30 });
    await q.addBulk([{ name: 'ok', data: {} }, { name: 'bad', data: { fail: true } }]);
    await waitFor(() => w.finished.completed + w.finished.failed === 2, 'two jobs to finish');
    expect((await metricKeys(q)).minutes).to.have.length(1);
    clock.offset = DAY + MIN; // nothing runs any more: only the tick can trim
    await waitFor(async () => (await metricKeys(q)).minutes.length === 0, 'the tick to trim the old minute');
    expect(await metricKeys(q)).to.deep.equal({ completed: {}, failed: {}, time: {}, minutes: [] });
  });

  it('reads nothing outside the window even before a trim ran', async () => {
    const start = Math.floor(Date.now() / MIN) * MIN - 3 * DAY;
    const clock = movableClock(start);
    const name = uniqueQueue('metrics-read');
    const q = new Queue(name, { connection: server().url, clock: clock.now });
    h.queues.push(q);
    const w = h.worker(name, processor, { clock: clock.now });
    await q.add('ok', {});
    await waitFor(() => w.finished.completed === 1, 'the job to finish');
    await w.close();
    clock.offset = DAY + MIN;
    const m = await q.getMetrics({ from: start, to: clock.now() });
    expect(m.completed).to.equal(0);
    expect((await metricKeys(q)).minutes).to.have.length(1); // still stored: no worker ticked since
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

  it('refuses a range that runs backwards', async () => {
    const q = h.queue(uniqueQueue('metrics-bad'));
    let err: unknown;
    await q.getMetrics({ from: 2000, to: 1000 }).catch((e) => (err = e));
    expect(String(err)).to.match(/from is after to/);
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
      const range = { from: Date.now() - 10 * MIN, to: Date.now() };
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
