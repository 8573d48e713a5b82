import { expect } from 'chai';
import { Redis } from 'ioredis';
import { decodeClaim, type ClaimReply, type Job } from '../../src/engine/jobs/job.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { keyspaceFingerprint } from '../helpers/keyspace.js';

/** Claims `n` jobs for consumer c1 with glidemq_fetch; returns [id, fence] pairs. */
async function claim(client: Redis, meta: string, n: number): Promise<[string, string][]> {
  const r = (await client.fcall('glidemq_fetch', 1, meta, 'c1', n, 30_000, 1)) as ClaimReply[];
  return r.slice(1).map((reply) => {
    const h = decodeClaim(reply);
    return [h.id, h.fence];
  });
}

describe('glidemq_finishMany and result batching (real valkey-server)', () => {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  it('finishes each job as glidemq_finish would: completed, retried, failed, stale, missing', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    await q.waitUntilReady();
    const a = await q.add('a', {});
    const b = await q.add('b', {}, { attempts: 2 });
    const c = await q.add('c', {});
    const d = await q.add('d', {});
    const e = await q.add('e', {});
    const next = await q.add('next', {});
    const claims = new Map(await claim(q.client as Redis, q.keys.meta, 5));
    await q.remove(e.id, { force: true });
    const group = (id: string, fence: string, outcome: string, value: string, retry: number) => [id, fence, outcome, value, retry, '', 3];
    const reply = (await q.client.fcall('glidemq_finishMany', 1, q.keys.meta, 'c1', 5, 5, '0', '', 30_000, 1,
      ...group(a.id, claims.get(a.id)!, 'completed', '"ok"', -1),
      ...group(b.id, claims.get(b.id)!, 'failed', 'boom', 0),
      ...group(c.id, claims.get(c.id)!, 'failed', 'final', -1),
      ...group(d.id, '999', 'completed', '1', -1),
      ...group(e.id, claims.get(e.id) ?? '1', 'completed', '1', -1),
    )) as unknown[];
    expect(reply.slice(0, 5)).to.deep.equal(['completed', 'retried', 'failed', 'stale', 'missing']);
    // five slots asked for one job each: the retried job and the one still waiting come back
    const nextIds = (reply.slice(5) as ClaimReply[]).map((f) => decodeClaim(f).id);
    expect(nextIds.sort()).to.deep.equal([b.id, next.id].sort());
    const ja = await q.getJob(a.id);
    expect(ja?.state).to.equal('completed');
    expect(ja?.returnvalue).to.equal('ok');
    expect((await q.getJob(c.id))?.state).to.equal('failed');
    expect((await q.getJob(c.id))?.failedReason).to.equal('final');
    expect((await q.getJob(d.id))?.state).to.equal('active');
    const pending = (await q.client.xpending(q.keys.stream, 'workers')) as [number];
    expect(pending[0]).to.equal(3); // d still claimed, b and next claimed again
    const minute = String(Math.floor(Date.now() / 60000));
    const base = q.keys.meta.slice(0, -':meta'.length);
    expect(await q.client.hget(`${base}:metrics:completed`, minute)).to.equal('1');
    expect(await q.client.hget(`${base}:metrics:failed`, minute)).to.equal('2');
  });

  it('deletes the stream entries of the jobs it finishes, and only those, with older and newer claims still held', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    await q.waitUntilReady();
    const ids = [];
    for (let i = 0; i < 8; i++) ids.push((await q.add('j', { i })).id);
    const claims = await claim(q.client as Redis, q.keys.meta, 6); // jobs 0..5 claimed, 6 and 7 wait
    const fin = async (picked: [string, string][]) =>
      (await q.client.fcall('glidemq_finishMany', 1, q.keys.meta, 'c1', picked.length, 0, '0', '', 30_000, 1,
        ...picked.flatMap(([id, fence]) => [id, fence, 'completed', '1', -1, '', 1]))) as string[];
    const entryJobs = async () => ((await q.client.xrange(q.keys.stream, '-', '+')) as [string, string[]][]).map((e) => e[1][1]);
    // 0 is still held: 1, 2 and 4 are newer than the oldest pending entry
    expect(await fin([claims[1], claims[2], claims[4]])).to.deep.equal(['completed', 'completed', 'completed']);
    expect(await entryJobs()).to.deep.equal([ids[0], ids[3], ids[5], ids[6], ids[7]]);
    // 0 and 3 finish: both are older than the oldest claim still held (5)
    await fin([claims[0], claims[3]]);
    expect(await entryJobs()).to.deep.equal([ids[5], ids[6], ids[7]]);
    // the last claim: nothing pending afterwards; the waiting entries stay and are delivered next
    await fin([claims[5], claims[5]]); // the repeat is stale and deletes nothing more
    expect(await entryJobs()).to.deep.equal([ids[6], ids[7]]);
    const rest = await claim(q.client as Redis, q.keys.meta, 5);
    expect(rest.map(([id]) => id)).to.deep.equal([ids[6], ids[7]]);
    await fin(rest);
    expect(await q.client.xlen(q.keys.stream)).to.equal(0);
  });

  it('removes the jobs it completes with keep 0 and their logs, and answers a repeat of the call the same', async () => {
    const q = h.queue(uniqueQueue());
    await q.waitUntilReady();
    const jobs = await q.addBulk(Array.from({ length: 3 }, (_, i) => ({ name: 'n', data: { i } })));
    const logs = `${q.keys.job(jobs[1].id)}:logs`;
    await q.client.rpush(logs, 'a line');
    const claims = await claim(q.client as Redis, q.keys.meta, 3);
    // durations over the small numbers read from a table (lua/args.lua ARG.smallNumber) and under it
    const args = claims.flatMap(([id, fence], i) => [id, fence, 'completed', '1', -1, '0', [0, 5000, 1023][i]]);
    const call = () => q.client.fcall('glidemq_finishMany', 1, q.keys.meta, 'c1', 3, 0, '0', '', 30_000, 1, ...args) as Promise<unknown[]>;
    expect(await call()).to.deep.equal(['completed', 'completed', 'completed']);
    for (const j of jobs) expect(await q.client.exists(q.keys.job(j.id)), `job ${j.id}`).to.equal(0);
    expect(await q.client.exists(logs)).to.equal(0);
    expect(await q.client.xlen(q.keys.stream)).to.equal(0);
    // sent again after its reply was lost: the removal records answer, and nothing changes
    const before = await keyspaceFingerprint(q.client as Redis, `${q.keys.base}*`);
    expect(await call()).to.deep.equal(['completed', 'completed', 'completed']);
    expect(await keyspaceFingerprint(q.client as Redis, `${q.keys.base}*`)).to.equal(before);
    const base = q.keys.meta.slice(0, -':meta'.length);
    expect(await q.client.hget(`${base}:metrics:time`, String(Math.floor(Date.now() / 60000)))).to.equal('6023');
  });

  it('refuses a job with an unknown outcome alone: its slot holds the error, the other job is finished', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    await q.waitUntilReady();
    const a = await q.add('a', {});
    const b = await q.add('b', {});
    const claims = new Map(await claim(q.client as Redis, q.keys.meta, 2));
    const before = await q.client.hgetall(q.keys.job(b.id));
    const reply = (await q.client.fcall('glidemq_finishMany', 1, q.keys.meta, 'c1', 2, 0, '0', '', 30_000, 1,
      a.id, claims.get(a.id)!, 'completed', '1', -1, '', 0,
      b.id, claims.get(b.id)!, 'exploded', '1', -1, '', 0)) as unknown[];
    expect(reply[0]).to.equal('completed');
    expect(String(reply[1])).to.match(/^ReplyError: ERR_INVALID glidemq_finishMany: group 2 argument outcome must be/);
    expect((await q.getJob(a.id))?.state).to.equal('completed');
    expect(await q.client.hgetall(q.keys.job(b.id))).to.deep.equal(before);
  });

  it('refuses a job whose key holds another type alone, first in its batch: the jobs after it are finished', async () => {
    const q = h.queue(uniqueQueue());
    await q.waitUntilReady();
    const bad = await q.add('bad', {});
    const a = await q.add('a', {});
    const b = await q.add('b', {});
    const claims = new Map(await claim(q.client as Redis, q.keys.meta, 3));
    // another program replaced the first job's hash with a string: its check raises, the others' do not
    await q.client.del(q.keys.job(bad.id));
    await q.client.set(q.keys.job(bad.id), 'another program wrote this');
    const reply = (await q.client.fcall('glidemq_finishMany', 1, q.keys.meta, 'c1', 3, 0, '0', '', 30_000, 1,
      bad.id, claims.get(bad.id)!, 'completed', '1', -1, '', 0,
      a.id, claims.get(a.id)!, 'completed', '1', -1, '', 0,
      b.id, claims.get(b.id)!, 'failed', 'boom', -1, '', 0)) as unknown[];
    expect(String(reply[0])).to.match(/^ReplyError: ERR_WRONG_TYPE glidemq_finishMany/);
    expect(reply.slice(1)).to.deep.equal(['completed', 'failed']);
    expect(await q.client.get(q.keys.job(bad.id))).to.equal('another program wrote this');
    expect((await q.getJob(a.id))?.state).to.equal('completed');
    expect((await q.getJob(b.id))?.state).to.equal('failed');
  });

  it('a job whose finish is refused fails alone with the reason; the others of its batch complete and nothing stalls', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const N = 6;
    const jobs = await q.addBulk(Array.from({ length: N }, (_, i) => ({ name: 'n', data: { i } })));
    // another program made one job's stored retention one the server refuses (a negative count)
    const bad = jobs[2];
    const opts = JSON.parse((await q.client.hget(q.keys.job(bad.id), 'opts')) ?? '{}');
    await q.client.hset(q.keys.job(bad.id), 'opts', JSON.stringify({ ...opts, removeOnComplete: -5 }));
    const runs = new Map<string, number>();
    const stalled: string[] = [];
    const failed = new Map<string, string>();
    let started = 0;
    let release!: () => void;
    const together = new Promise<void>((r) => (release = r));
    // every result is ready in the same turn: they go to the server in batches of several
    const w = h.worker(name, async (job: Job) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
      if (++started === N) release();
      await together;
      return 'ok';
    }, { concurrency: N, lockDuration: 1000, stalledInterval: 200 });
    w.on('error', () => undefined);
    w.on('stalled', (id: string) => stalled.push(id));
    w.on('failed', (job: Job) => failed.set(job.id, job.failedReason ?? ''));
    await waitFor(() => w.finished.completed === N - 1 && w.finished.failed === 1, 'five completed and one failed', 10000);
    expect([...failed.keys()]).to.deep.equal([bad.id]);
    expect(failed.get(bad.id)).to.match(/refused to store its completed outcome \(.*keep must be a retention rule.*\); the job is failed instead/);
    const stored = await q.getJob(bad.id);
    expect(stored?.state).to.equal('failed');
    expect(stored?.failedReason).to.equal(failed.get(bad.id));
    for (const j of jobs) if (j.id !== bad.id) expect((await q.getJob(j.id))?.state, `job ${j.id}`).to.equal('completed');
    // a stalled check runs every 200 ms with a 1 s lock: give it time to find anything left active
    await new Promise((r) => setTimeout(r, 1500));
    expect(stalled).to.deep.equal([]);
    expect([...runs.values()]).to.deep.equal(Array(N).fill(1));
    const counts = await q.getJobCounts();
    expect(counts.active + counts.waiting).to.equal(0);
  });

  it('refuses a short second group (count says 2, one and a half groups sent) and changes nothing', async () => {
    const q = h.queue(uniqueQueue());
    await q.waitUntilReady();
    const a = await q.add('a', {}, { priority: 2 });
    const b = await q.add('b', {}, { priority: 2 });
    const claims = new Map(await claim(q.client as Redis, q.keys.meta, 2));
    const before = await keyspaceFingerprint(q.client as Redis, `${q.keys.base}*`);
    const err = await q.client.fcall('glidemq_finishMany', 1, q.keys.meta, 'c1', 2, 0, '0', '', 30_000, 1,
      a.id, claims.get(a.id)!, 'completed', '1', -1, '', 0,
      b.id, claims.get(b.id)!, 'completed').then(() => undefined, (e: Error) => e);
    expect(String(err)).to.match(/ERR_INVALID glidemq_finishMany: count is 2/);
    expect(await keyspaceFingerprint(q.client as Redis, `${q.keys.base}*`)).to.equal(before);
    expect((await q.getJob(a.id))?.state).to.equal('active');
  });

  it('refuses to fail a job while the failed set key holds a string, and changes nothing', async () => {
    const q = h.queue(uniqueQueue());
    await q.waitUntilReady();
    const a = await q.add('a', {});
    const [[id, fence]] = await claim(q.client as Redis, q.keys.meta, 1);
    expect(id).to.equal(a.id);
    await q.client.set(q.keys.failed, 'another program wrote this');
    const before = await keyspaceFingerprint(q.client as Redis, `${q.keys.base}*`);
    const err = await q.client.fcall('glidemq_finish', 1, q.keys.meta, id, fence, 'c1', 'failed', 'boom', -1, 1, '', 0, '0', 30_000, 1)
      .then(() => undefined, (e: Error) => e);
    expect(String(err)).to.match(/ERR_WRONG_TYPE .*:failed holds a string/);
    expect(await keyspaceFingerprint(q.client as Redis, `${q.keys.base}*`)).to.equal(before);
    expect(await q.client.hget(q.keys.job(a.id), 'state')).to.equal('active');
  });

  it('retries with a backoff counted on the server clock: the retry is due retryDelay ms after the finish', async () => {
    const q = h.queue(uniqueQueue());
    await q.waitUntilReady();
    const a = await q.add('a', {}, { attempts: 2 });
    const [[id, fence]] = await claim(q.client as Redis, q.keys.meta, 1);
    const [sec, usec] = (await q.client.time()) as [string | number, string | number];
    const serverBefore = Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
    const reply = (await q.client.fcall('glidemq_finish', 1, q.keys.meta, id, fence, 'c1', 'failed', 'boom', 20_000, 0, '', 5, '0', 30_000, 1)) as unknown[];
    expect(reply[0]).to.equal('delayed');
    const score = Number(await q.client.zscore(q.keys.scheduled, a.id));
    expect(score).to.be.within(serverBefore + 20_000, serverBefore + 21_000);
  });

  it('a worker stores results that are ready together in one call, with the same outcomes and events', async () => {
    const name = uniqueQueue();
    const q = h.queue(name);
    const N = 200;
    await q.addBulk(Array.from({ length: N }, (_, i) => ({ name: 'n', data: { i }, opts: { removeOnComplete: i % 2 === 0 } })));
    const admin = new Redis(server().port, '127.0.0.1');
    await admin.config('RESETSTAT');
    const completed: string[] = [];
    const w = h.worker(name, async (job: Job<{ i: number }>) => {
      if (job.data.i % 10 === 3) throw new Error('unlucky');
      return job.data.i;
    }, { concurrency: 20 });
    w.on('completed', (job: Job) => completed.push(job.id));
    await waitFor(() => w.finished.completed + w.finished.failed === N, 'backlog processed', 30000);
    const stats = await admin.info('commandstats');
    await admin.quit();
    const many = Number(/cmdstat_fcall:calls=(\d+)/.exec(stats)?.[1] ?? 0);
    expect(many).to.be.below(N);
    expect(w.finished.failed).to.equal(N / 10);
    expect(completed).to.have.length(N - N / 10);
    const counts = await q.getJobCounts();
    expect(counts.waiting + counts.active).to.equal(0);
    expect(counts.failed).to.equal(N / 10);
    expect(counts.completed).to.equal(N / 2 - N / 10); // odd i are kept; the failed ones are all odd
    expect(await q.client.xlen(q.keys.stream)).to.equal(0);
  });
});
