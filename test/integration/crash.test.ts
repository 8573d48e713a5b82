/**
 * Crashes of real worker processes (SIGKILL mid-job): what DURABILITY.md "Worker Crash Behavior"
 * promises. The dead worker's claim stays in Valkey (a pending entry for stream jobs, a list-active
 * claim for priority/LIFO jobs); another worker's scheduler reclaims it after the lock duration.
 */
import { expect } from 'chai';
import type { Job } from '../../src/engine/jobs/job.js';
import type { Queue } from '../../src/engine/queue/queue.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { jobHash, STALLED_REASON } from '../helpers/recovery.js';
import { killedAfterEach, processorPath, WorkerProcess } from '../helpers/worker-spawn.js';

// short enough for fast tests, long enough that a healthy worker's heartbeat (every 500 ms) is never late on a busy machine
const FAST = { lockDuration: 1000, stalledInterval: 500, blockTimeout: 1000 };

describe('worker processes killed mid-job (real valkey-server)', function () {
  this.timeout(60_000);
  const server = useServer();
  const h = new Harness(server);
  const procs = killedAfterEach();
  afterEach(() => h.cleanup());

  function launch(queue: string, processor: string, options: object = {}): WorkerProcess {
    const p = new WorkerProcess({ url: server().url, queue, processor: processorPath(processor), options: { ...FAST, ...options } });
    procs.push(p);
    return p;
  }

  async function spawnWorker(queue: string, processor: string, options: object = {}): Promise<WorkerProcess> {
    const p = launch(queue, processor, options);
    await p.waitReady();
    return p;
  }

  for (const kind of ['stream', 'priority', 'lifo', 'group'] as const) {
    it(`a ${kind} job of a killed worker is redispatched and completed by another worker, stalledCount 1`, async () => {
      const name = uniqueQueue(kind);
      const q = h.queue(name);
      const victim = await spawnWorker(name, 'hang.mjs');
      const opts = kind === 'priority' ? { priority: 2 } : kind === 'lifo' ? { lifo: true } : kind === 'group' ? { group: { id: 'g', maxConcurrency: 1 } } : {};
      const job = await q.add('work', { kind }, opts);
      await waitFor(() => victim.started.includes(job.id), 'the worker process to start the job');
      await victim.kill();
      expect((await jobHash(q, job.id)).state).to.equal('active'); // not lost just because its worker died

      const ranBy: string[] = [];
      const rescuer = h.worker(name, async (j: Job) => {
        ranBy.push(j.id);
        return 'rescued';
      }, FAST);
      await waitFor(async () => (await jobHash(q, job.id)).state === 'completed', 'the job to be reclaimed and completed');
      const done = await q.getJob(job.id);
      expect(done!.stalledCount).to.equal(1);
      expect(done!.returnvalue).to.equal('rescued');
      expect(ranBy).to.deep.equal([job.id]);
      expect(rescuer.finished.completed).to.equal(1);
      const counts = await q.getJobCounts();
      expect([counts.active, counts.listActive, counts.waiting, counts.prioritized]).to.deep.equal([0, 0, 0, 0]);
    });
  }

  it('a processor that always crashes its process ends with the job failed: "job stalled more than maxStalledCount"', async () => {
    const name = uniqueQueue('crashy');
    const q = h.queue(name);
    const job = await q.add('poison', {});
    const spawned: WorkerProcess[] = [];
    // keep one worker process alive at a time; each one that takes the job dies with it
    await waitFor(async () => {
      if ((await jobHash(q, job.id)).state === 'failed') return true;
      // (a process may take the job, and die, before it even reports that it runs)
      if (!spawned.some((p) => p.alive)) spawned.push(launch(name, 'crash-self.mjs'));
      return false;
    }, 'the job to fail after repeated crashes', 45_000, 50);
    const failed = await q.getJob(job.id);
    expect(failed!.state).to.equal('failed');
    expect(failed!.failedReason).to.equal(STALLED_REASON);
    expect(failed!.stalledCount).to.equal(2); // default maxStalledCount 1: one redispatch, then failure
    expect(spawned.filter((p) => p.started.includes(job.id)).length).to.equal(2);
    expect(await q.client.zscore(q.keys.failed, job.id)).to.not.equal(null);
  });

  it('claims a killed worker prefetched and never started come back with no stall; the ones it ran count one', async () => {
    const name = uniqueQueue('prefetch');
    const q = h.queue(name);
    // fast jobs teach the worker that a job takes less than a round trip: it claims ahead with its
    // finishes; then held jobs fill its two slots, and more wait claimed in its prefetch when it dies
    await q.addBulk(Array.from({ length: 40 }, () => ({ name: 'fast', data: {} })));
    const held = await q.addBulk(Array.from({ length: 6 }, () => ({ name: 'held', data: { hold: true } })));
    const victim = await spawnWorker(name, 'instant-or-hold.mjs', { concurrency: 2 });
    const hashes = () => Promise.all(held.map((j) => jobHash(q, j.id)));
    // two run (their start reported: no mark left), the others it holds wait marked not started
    // (ns = their fence)
    await waitFor(async () => {
      const active = (await hashes()).filter((x) => x.state === 'active');
      const marked = active.filter((x) => x.ns === x.fence).length;
      return active.length - marked === 2 && marked > 0;
    }, 'two held jobs running and more prefetched, marked not started');
    const ran = held.filter((j) => victim.started.includes(j.id)).map((j) => j.id);
    expect(ran).to.have.length(2);
    await victim.kill();

    const rescuer = h.worker(name, () => 'rescued', { ...FAST, concurrency: 4 });
    await waitFor(async () => (await hashes()).every((x) => x.state === 'completed'), 'every held job completed by the rescuer', 30_000);
    for (const j of held) {
      const hash = await jobHash(q, j.id);
      // the two the victim ran stalled once; the two it only held, and the two nobody claimed, never
      expect(hash.stalledCount ?? '0', `job ${j.id}`).to.equal(ran.includes(j.id) ? '1' : '0');
    }
    expect(rescuer.finished.completed).to.equal(6);
    const counts = await q.getJobCounts();
    expect([counts.active, counts.waiting, counts.failed]).to.deep.equal([0, 0, 0]);
  });

  it('200 jobs over 4 worker processes, two killed mid-run: every job completes, duplicates only from the killed ones', async () => {
    const name = uniqueQueue('fleet');
    const q = h.queue(name);
    const workers = [];
    for (let i = 0; i < 4; i++) workers.push(await spawnWorker(name, 'slow.mjs', { concurrency: 4 }));
    const jobs = await q.addBulk(
      Array.from({ length: 200 }, (_, i) => ({
        name: 'unit',
        data: { ms: 20 + (i % 5) * 5 },
        opts: i % 8 === 0 ? { priority: 1 + (i % 3) } : i % 8 === 1 ? { lifo: true } : {},
      })),
    );
    const [k1, k2, ...survivors] = workers;
    // kill two while they are busy: each has jobs started that it has not finished
    await waitFor(() => k1.started.length > 10 && k2.started.length > 10, 'the victims to be busy');
    await waitFor(() => k1.started.length > k1.completed.length && k2.started.length > k2.completed.length, 'victims mid-job');
    await Promise.all([k1.kill(), k2.kill()]);
    const inFlight = new Set([...k1.started, ...k2.started].filter((id) => ![...k1.completed, ...k2.completed].includes(id)));
    expect(inFlight.size).to.be.greaterThan(0);

    await waitFor(async () => (await q.getJobCounts()).completed === 200, 'all 200 jobs to complete', 45_000, 50);
    for (const j of jobs) expect((await jobHash(q, j.id)).state, `job ${j.id}`).to.equal('completed');
    const starts = new Map<string, number>();
    for (const w of workers) for (const id of w.started) starts.set(id, (starts.get(id) ?? 0) + 1);
    expect(starts.size).to.equal(200); // none lost, none never started
    const duplicates = [...starts].filter(([, n]) => n > 1).map(([id]) => id);
    for (const id of duplicates) expect(inFlight.has(id), `duplicate ${id} was in flight on a killed worker`).to.equal(true);
    for (const id of duplicates) expect((await q.getJob(id))!.stalledCount, `duplicate ${id}`).to.equal(1);
    // only claims of the killed workers stalled: each held at most `concurrency` (4) of them (some
    // it may not have reported: taken by a finish or read whose reply never arrived)
    let stalled = 0;
    for (const j of jobs) {
      const n = (await q.getJob(j.id))!.stalledCount;
      expect(n, `job ${j.id}`).to.be.at.most(1);
      stalled += n;
    }
    expect(stalled).to.be.at.least(duplicates.length).and.at.most(8);
    expect(survivors.every((w) => w.alive)).to.equal(true);
    const counts = await q.getJobCounts();
    expect([counts.waiting, counts.active, counts.listActive, counts.prioritized, counts.failed]).to.deep.equal([0, 0, 0, 0, 0]);
  });

  it('a kill between a list pop and its activation loses nothing: they are one function call', async () => {
    // glidemq_fetch / glidemq_activate / glidemq_finish pop a priority or LIFO job and write its
    // claim (state active, owner, list-active-ids, counter) in the same FCALL, which Valkey runs
    // atomically. A process killed at any moment either never reached the server with that call
    // (the job is still in its list) or the claim exists (stalled recovery finds it). Killing workers
    // at many different moments, then looking at every job, shows no third state.
    const name = uniqueQueue('pops');
    const q = h.queue(name);
    const jobs = await q.addBulk(
      Array.from({ length: 120 }, (_, i) => ({ name: 'list', data: { ms: 5 }, opts: i % 2 ? { priority: 1 + (i % 7) } : { lifo: true } })),
    );
    // a job can be caught by several of the kills: allow it that many stalls, so all complete
    const stalls = { maxStalledCount: 20 };
    for (let round = 0; round < 8; round++) {
      const w = await spawnWorker(name, 'slow.mjs', { concurrency: 3, ...stalls });
      const before = w.started.length;
      await waitFor(() => w.started.length > before + round, 'the worker to be popping jobs');
      await w.kill();
      await expectEveryJobAccountedFor(q, jobs.map((j) => j.id));
    }
    h.worker(name, async () => 'ok', { ...FAST, ...stalls });
    await waitFor(async () => (await q.getJobCounts()).completed === 120, 'every job completed after the kills', 45_000, 50);
    const c = await q.getJobCounts();
    expect([c.active, c.listActive, c.prioritized, c.waiting]).to.deep.equal([0, 0, 0, 0]);
  });
});

/** Every job is in exactly one structure that leads to it being run or kept: none is outside all of them. */
async function expectEveryJobAccountedFor(q: Queue, ids: string[]): Promise<void> {
  const k = q.keys;
  const [prioritized, lifo, claimed, completed] = await Promise.all([
    q.client.zrange(k.prioritized, '0', '-1'),
    q.client.lrange(k.lifo, 0, -1),
    q.client.smembers(k.listActiveIds),
    q.client.zrange(k.completed, '0', '-1'),
  ]);
  const where = new Map<string, string[]>();
  const note = (list: string[], label: string) => list.forEach((id) => where.set(id, [...(where.get(id) ?? []), label]));
  note(prioritized, 'prioritized');
  note(lifo, 'lifo');
  note(claimed, 'claimed');
  note(completed, 'completed');
  for (const id of ids) {
    const places = where.get(id) ?? [];
    expect(places.length, `job ${id} is in ${JSON.stringify(places)}`).to.equal(1);
    const state = (await jobHash(q, id)).state;
    const expected = { prioritized: 'prioritized', lifo: 'waiting', claimed: 'active', completed: 'completed' }[places[0]];
    expect(state, `job ${id} (${places[0]})`).to.equal(expected);
  }
  expect(Number(await q.client.get(k.listActive))).to.equal(claimed.length);
}
