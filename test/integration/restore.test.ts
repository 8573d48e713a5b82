/**
 * glidemq_restore (lua/restore.lua), the server side of `glidemq import-bullmq`: a job stored in
 * the state it had elsewhere is a glidemq job like any other (a worker runs a restored waiting,
 * prioritized or delayed job; a restored failed job can be retried), it is stored once (a second
 * call writes nothing), and a call with one bad job stores nothing at all.
 */
import { expect } from 'chai';
import { useServer, waitFor } from '../helpers/valkey.js';
import { Harness, uniqueQueue } from '../helpers/engine.js';
import { restoreJobs, type RestoreRecord } from '../../src/engine/administering/job-restore.js';
import type { Queue } from '../../src/engine/queue/queue.js';

function record(id: string, state: RestoreRecord['state'], extra: Partial<RestoreRecord> = {}): RestoreRecord {
  const finished = state === 'completed' || state === 'failed';
  return {
    id, state, name: `n-${id}`, data: JSON.stringify({ id }), runAt: 0, priority: state === 'prioritized' ? 3 : 0,
    attempts: 1, attemptsMade: 0, opts: '', value: state === 'completed' ? '"done"' : state === 'failed' ? 'broke' : '',
    stacktrace: [], processedOn: 0, finishedOn: finished ? 1_700_000_000_000 : 0, logs: [], ...extra,
  };
}

describe('glidemq_restore (real valkey-server)', () => {
  const server = useServer();
  const h = new Harness(server);
  afterEach(() => h.cleanup());

  async function allKeys(q: Queue): Promise<string[]> {
    return (await q.client.keys(`${q.keys.base}*`)).sort();
  }

  it('restored waiting, prioritized and delayed jobs run on a glidemq worker; a restored failed job retries', async () => {
    const name = uniqueQueue('restore');
    const q = h.queue(name);
    await q.waitUntilReady();
    const now = await q.serverTime();
    const stored = await restoreJobs(q.client, q.keys, [
      record('w-1', 'waiting', { logs: ['a line'] }),
      record('p-1', 'prioritized'),
      record('d-1', 'delayed', { runAt: now + 300 }),
      record('f-1', 'failed', { attempts: 3, attemptsMade: 3, stacktrace: ['Error: broke\n    at x'] }),
      record('c-1', 'completed', { attemptsMade: 1, processedOn: 1_699_999_999_000 }),
    ]);
    expect([...stored].sort()).to.deep.equal(['c-1', 'd-1', 'f-1', 'p-1', 'w-1']);
    expect(await q.getJobState('d-1')).to.equal('delayed');
    const failed = (await q.getJob('f-1'))!;
    expect(failed).to.include({ state: 'failed', failedReason: 'broke', attemptsMade: 3, finishedOn: 1_700_000_000_000 });
    expect(failed.stacktrace).to.deep.equal(['Error: broke\n    at x']);
    const completed = (await q.getJob('c-1'))!;
    expect(completed).to.include({ state: 'completed', returnvalue: 'done', processedOn: 1_699_999_999_000 });
    expect((await q.getJobLogs('w-1')).logs).to.deep.equal(['a line']);

    await failed.retry();
    const ran: string[] = [];
    h.worker(name, async (job) => {
      ran.push(job.id);
      return job.data;
    });
    await waitFor(async () => ran.length === 4, 'the four restored jobs to run');
    expect([...ran].sort()).to.deep.equal(['d-1', 'f-1', 'p-1', 'w-1']);
    await waitFor(async () => (await q.getJobState('d-1')) === 'completed', 'the delayed job to complete');
    expect((await q.getJob('f-1'))!.returnvalue).to.deep.equal({ id: 'f-1' });
  });

  it('stores an id once: a second call writes nothing', async () => {
    const q = h.queue(uniqueQueue('restore'));
    await q.waitUntilReady();
    const jobs = [record('c-1', 'completed'), record('w-1', 'waiting', { logs: ['x'] })];
    expect((await restoreJobs(q.client, q.keys, jobs)).size).to.equal(2);
    const keys = await allKeys(q);
    const hash = await q.client.hgetall(q.keys.job('w-1'));
    const again = await restoreJobs(q.client, q.keys, [record('c-1', 'failed'), record('w-1', 'waiting', { logs: ['x'] })]);
    expect(again.size).to.equal(0);
    expect(await allKeys(q)).to.deep.equal(keys);
    expect(await q.client.hgetall(q.keys.job('w-1'))).to.deep.equal(hash);
    expect(await q.client.llen(q.keys.logs('w-1'))).to.equal(1);
    expect(await q.getJobState('c-1')).to.equal('completed');
    expect((await q.getJobCounts()).waiting).to.equal(1);
  });

  it('a parent restored after its child completed in glidemq counts the child done and is queued at once', async () => {
    const name = uniqueQueue('restore');
    const q = h.queue(name);
    await q.waitUntilReady();
    const childKey = q.keys.job('kid-1');
    const parentKey = q.keys.job('top-1');
    await restoreJobs(q.client, q.keys, [record('kid-1', 'completed', { flow: { parents: [parentKey] } })]);
    const stored = await restoreJobs(q.client, q.keys, [record('top-1', 'waiting-children', { flow: { deps: [childKey, q.keys.job('kid-2')] } }), record('kid-2', 'waiting', { flow: { parents: [parentKey] } })]);
    expect([...stored].sort()).to.deep.equal(['kid-2', 'top-1']);
    const parent = (await q.getJob('top-1'))!;
    expect(parent.state).to.equal('waiting-children');
    expect(await parent.getChildrenValues()).to.deep.equal({ [childKey]: 'done' });
    // the child left runs: the parent is queued and runs after it
    const ran: string[] = [];
    h.worker(name, async (job) => {
      ran.push(job.id);
      return job.id;
    });
    await waitFor(async () => (await q.getJobState('top-1')) === 'completed', 'the parent to run after its last child');
    expect(ran).to.deep.equal(['kid-2', 'top-1']);
    // a parent none of whose children is left waits for nothing
    await restoreJobs(q.client, q.keys, [record('top-2', 'waiting-children', { flow: { deps: [childKey] } })]);
    expect(await q.getJobState('top-2')).to.be.oneOf(['waiting', 'active', 'completed']);
  });

  it('a call with one bad job is refused with a coded error naming it, and stores nothing', async () => {
    const q = h.queue(uniqueQueue('restore'));
    await q.waitUntilReady();
    const before = await allKeys(q);
    const bad = [
      [record('ok-1', 'waiting'), record('bad-1', 'failed', { finishedOn: 0 })],
      [record('ok-1', 'waiting'), record('42', 'waiting')],
      [record('ok-1', 'waiting'), record('ok-1', 'completed')],
      [record('ok-1', 'waiting'), record('bad-2', 'delayed')],
      [record('ok-1', 'waiting'), record('bad-3', 'waiting', { flow: { deps: [q.keys.job('ok-1')] } })],
      [record('ok-1', 'waiting'), record('bad-4', 'waiting', { flow: { parents: ['not a key'] } })],
      [record('ok-1', 'waiting'), record('bad-5', 'waiting', { dedup: { id: 'd', mode: 'throttle', ttl: 0 } })],
    ];
    const why = [/bad-1.*finishedOn/, /jobId.*whole number/, /ok-1.*named twice/, /bad-2.*runAt/, /bad-3.*only a waiting-children job has flow.deps/,
      /bad-4.*flow.parents entry must be a job key/, /bad-5.*throttle dedup needs a ttl/];
    for (const [i, call] of bad.entries()) {
      const err = await restoreJobs(q.client, q.keys, call).then(() => undefined, (e: Error) => e);
      expect(err, `call ${i}`).to.be.instanceOf(Error);
      expect(err!.message).to.match(why[i]);
      expect(await allKeys(q)).to.deep.equal(before);
    }
  });
});
