/**
 * `glidemq import-bullmq` (issue 31): BullMQ queues made in the test by BullMQ itself (the
 * devDependency), with jobs in every state, logs and a job scheduler, copied into glidemq through
 * the CLI. Counts match on both sides, a second run copies nothing, --dry-run writes nothing, and a
 * connected BullMQ worker makes it refuse unless --force. A flow across two queues comes across as a
 * glidemq flow (the parent runs once its last child completes in glidemq, with every child's value),
 * and a dedup id keeps deduplicating glidemq adds.
 */
import { expect } from 'chai';
import { FlowProducer as BullFlowProducer, Queue as BullQueue, Worker as BullWorker } from 'bullmq';
import { Worker } from '../../src/engine/consuming/worker.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { runCli } from '../helpers/cli.js';
import { uniqueQueue } from '../helpers/engine.js';
import { freePort, useServer, waitFor } from '../helpers/valkey.js';

const HOUR = 3_600_000;

describe('CLI: import-bullmq', function () {
  this.timeout(60000);
  const server = useServer();
  const cli = (args: string[]) => runCli(['-u', server().url, ...args]);
  const closers: (() => Promise<unknown>)[] = [];
  let name: string;
  let bull: BullQueue;
  let q: Queue;
  const bullConnection = () => ({ host: '127.0.0.1', port: server().port });

  beforeEach(() => {
    name = uniqueQueue('bullimport');
    bull = new BullQueue(name, { connection: bullConnection() });
    q = new Queue(name, { connection: server().url });
    closers.push(() => bull.close(), () => q.close());
  });
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });

  /** A BullMQ worker that completes 'ok' jobs (logging a line) and fails 'bad' ones, run until both finished, then closed. */
  async function finishSome(): Promise<void> {
    await bull.add('ok', { a: 1 });
    await bull.add('bad', { b: 2 }, { jobId: 'bad-1', attempts: 2, backoff: 0 });
    const w = new BullWorker(
      name,
      async (job) => {
        if (job.name === 'bad') throw new Error(`boom on attempt ${job.attemptsMade + 1}`);
        await job.log('first line');
        await job.log('second line');
        return { sum: 3 };
      },
      { connection: bullConnection() },
    );
    w.on('error', () => undefined);
    await waitFor(async () => {
      const c = await bull.getJobCounts('completed', 'failed');
      return c.completed === 1 && c.failed === 1;
    }, 'the BullMQ worker to finish its two jobs');
    await w.close();
  }

  /** Jobs in every state glidemq copies, made by BullMQ; returns the waiting job's id. */
  async function fill(): Promise<void> {
    await finishSome();
    await bull.add('w', { n: 1 });
    await bull.add('w', { n: 2 }, { jobId: 'order-7' });
    await bull.add('w', { n: 3 }, { jobId: 'tenant 9' });
    await bull.add('p', { n: 4 }, { priority: 5 });
    await bull.add('d', { n: 5 }, { delay: HOUR, jobId: 'later' });
    await bull.upsertJobScheduler('nightly', { pattern: '0 3 * * *' }, { name: 'report', data: { full: true } });
    // an interval's first run waits at once in BullMQ
    await bull.upsertJobScheduler('hourly', { every: HOUR }, { name: 'tick' });
  }

  /** When BullMQ's scheduler `id` runs next. */
  async function bullNext(id: string): Promise<number> {
    return (await bull.getJobScheduler(id))!.next!;
  }

  it('copies every state, logs and the scheduler; counts match; a second run copies nothing', async () => {
    await fill();
    const before = Date.now();
    const r = await cli(['import-bullmq', name, '--json']);
    expect(r.code, r.stderr + r.stdout).to.equal(0);
    const [out] = JSON.parse(r.stdout).queues;
    const expected = { waiting: 3, paused: 0, prioritized: 1, delayed: 1, completed: 1, failed: 1, 'waiting-children': 0, schedulers: 2 };
    expect(out.source).to.deep.equal(expected);
    expect(out.target).to.deep.equal(expected);
    expect(out.imported).to.deep.equal(expected);
    expect(out.logLines).to.equal(2);
    // BullMQ's numeric ids and an id holding whitespace are renamed; custom ids glidemq takes are kept
    expect(out.renamed).to.deep.equal({ as: 'bullmq-<id>', numeric: 3, others: [{ from: 'tenant 9', to: 'bullmq-tenant%209' }] });
    // the schedulers' next runs (one delayed, one waiting) are not copied: the glidemq schedulers add them
    expect(out.skipped.map((s: { id: string }) => s.id).sort()).to.deep.equal([`repeat:hourly:${await bullNext('hourly')}`, `repeat:nightly:${await bullNext('nightly')}`]);

    const completed = (await q.getJob('bullmq-1'))!;
    expect(completed.state).to.equal('completed');
    expect(completed.returnvalue).to.deep.equal({ sum: 3 });
    const bullCompleted = (await bull.getJob('1'))!;
    expect(completed).to.include({ timestamp: bullCompleted.timestamp, processedOn: bullCompleted.processedOn, finishedOn: bullCompleted.finishedOn, attemptsMade: 1 });
    expect((await q.getJobLogs('bullmq-1')).logs).to.deep.equal(['first line', 'second line']);
    const failed = (await q.getJob('bad-1'))!;
    expect(failed.state).to.equal('failed');
    expect(failed.failedReason).to.equal('boom on attempt 2');
    expect(failed.attemptsMade).to.equal(2);
    expect(failed.stacktrace?.length).to.be.greaterThan(0);
    expect(failed.stacktrace?.[0]).to.match(/boom/);
    expect((await q.getJob('order-7'))!.data).to.deep.equal({ n: 2 });
    expect(await q.getJobState('bullmq-tenant%209')).to.equal('waiting');
    const prioritized = (await q.getJobs(['prioritized']))[0];
    expect(prioritized.data).to.deep.equal({ n: 4 });
    const delayed = (await q.getJob('later'))!;
    expect(delayed.state).to.equal('delayed');
    const [runAt] = (await q.client.zmscore(q.keys.scheduled, 'later')).map(Number);
    expect(runAt).to.be.within(before + HOUR - 60_000, before + HOUR + 60_000);
    const scheduler = (await q.getJobScheduler('nightly'))!;
    expect(scheduler.pattern).to.equal('0 3 * * *');
    expect(scheduler.name).to.equal('report');
    expect(scheduler.next).to.equal(await bullNext('nightly'));
    const hourly = (await q.getJobScheduler('hourly'))!;
    expect(hourly.every).to.equal(HOUR);
    // its first run was due already: glidemq runs it at once (the server's now)
    expect(hourly.next).to.be.within(await bullNext('hourly'), Date.now() + 1000);

    const again = await cli(['import-bullmq', name, '--json']);
    expect(again.code, again.stderr).to.equal(0);
    const [second] = JSON.parse(again.stdout).queues;
    expect(Object.values(second.imported).every((n) => n === 0)).to.equal(true);
    expect(second.present).to.equal(9);
    expect(second.target).to.deep.equal(expected);
  });

  it('--dry-run prints what it would copy and writes nothing', async () => {
    await fill();
    const r = await cli(['import-bullmq', name, '--dry-run']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/would import 9 items/);
    expect(r.stdout).to.match(/3 numeric ids .* would be renamed bullmq-<id>, e.g. 1 → bullmq-1/);
    expect(await q.client.keys(`${q.keys.base}*`)).to.deep.equal([]);
  });

  it('a paused BullMQ queue: its jobs count as paused on both sides, and the glidemq queue is paused', async () => {
    await bull.pause();
    await bull.add('w', { n: 1 });
    await bull.add('w', { n: 2 });
    const r = await cli(['import-bullmq', name, '--json']);
    expect(r.code, r.stderr).to.equal(0);
    const [out] = JSON.parse(r.stdout).queues;
    expect(out.source.paused).to.equal(2);
    expect(out.target.paused).to.equal(2);
    expect(await q.isPaused()).to.equal(true);
  });

  it('a scheduler glidemq cannot take (limit) is named, its next run is copied as a job, and the counts differ: exit 1', async () => {
    await bull.upsertJobScheduler('thrice', { every: HOUR, limit: 3 }, { name: 'tick' });
    const r = await cli(['import-bullmq', name, '--json']);
    expect(r.code).to.equal(1);
    expect(r.stderr).to.match(/counts differ/);
    const [out] = JSON.parse(r.stdout).queues;
    expect(out.skipped).to.deep.equal([{ id: 'scheduler thrice', why: 'it uses limit, which glidemq schedulers do not support' }]);
    expect(out.source.schedulers).to.equal(1);
    expect(out.target.schedulers).to.equal(0);
    expect(out.imported.waiting).to.equal(1);
  });

  it('refuses while a BullMQ worker is connected and a job is active; --force copies the rest and leaves the active job', async () => {
    await bull.add('d', { n: 1 }, { delay: HOUR });
    await bull.add('hold', { n: 2 });
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const w = new BullWorker(name, () => held, { connection: bullConnection() });
    w.on('error', () => undefined);
    closers.push(() => w.close(), async () => release());
    await waitFor(async () => (await bull.getActiveCount()) === 1 && (await bull.getWorkersCount()) > 0, 'the BullMQ worker to hold its job');
    const r = await cli(['import-bullmq', name]);
    expect(r.code).to.equal(2);
    expect(r.stderr.trim().split('\n')).to.have.length(1);
    expect(r.stderr).to.match(/BullMQ is working on queue .*worker connection.* and 1 active job .*--force/);
    expect(await q.client.keys(`${q.keys.base}*`)).to.deep.equal([]);
    const forced = await cli(['import-bullmq', name, '--force', '--json']);
    expect(forced.code, forced.stderr).to.equal(0);
    const [out] = JSON.parse(forced.stdout).queues;
    expect(out.activity.active).to.equal(1);
    expect(out.imported).to.include({ delayed: 1, waiting: 0 });
  });

  it('a flow across two queues: the parent waits in glidemq for the child left, with the values of those done, and runs once it completes', async () => {
    const kids = `${name}-kids`;
    const kidsBull = new BullQueue(kids, { connection: bullConnection() });
    const kidsQ = new Queue(kids, { connection: server().url });
    const flows = new BullFlowProducer({ connection: bullConnection() });
    closers.push(() => kidsBull.close(), () => kidsQ.close(), () => flows.close());
    await flows.add({
      name: 'report', queueName: name, data: { top: true }, opts: { jobId: 'report-1' },
      children: [
        { name: 'a', queueName: name, data: { n: 1 }, opts: { jobId: 'part-a' } },
        { name: 'c', queueName: name, data: { n: 3 }, opts: { jobId: 'part-c', ignoreDependencyOnFailure: true } },
        { name: 'b', queueName: kids, data: { n: 2 }, opts: { jobId: 'part-b', delay: HOUR } },
      ],
    });
    // BullMQ runs the two children of the parent's own queue: a completes, c fails (ignored)
    const w = new BullWorker(name, async (job) => {
      if (job.name === 'c') throw new Error('c broke');
      return { from: job.name };
    }, { connection: bullConnection() });
    w.on('error', () => undefined);
    await waitFor(async () => (await bull.getJobCounts('completed', 'failed')).completed === 1 && (await bull.getFailedCount()) === 1, 'the BullMQ worker to run a and c');
    await w.close();
    expect(await bull.getJobState('report-1')).to.equal('waiting-children');

    const r = await cli(['import-bullmq', name, kids, '--json']);
    expect(r.code, r.stderr + r.stdout).to.equal(0);
    const [parents, children] = JSON.parse(r.stdout).queues;
    expect(parents.source).to.include({ 'waiting-children': 1, completed: 1, failed: 1 });
    expect(parents.target).to.deep.equal(parents.source);
    expect(children.target).to.include({ delayed: 1 });
    expect(parents.skipped).to.deep.equal([]);
    expect(parents.linkedQueues).to.deep.equal([kids]);
    expect(children.linkedQueues).to.deep.equal([name]);
    const parent = (await q.getJob('report-1'))!;
    expect(parent.state).to.equal('waiting-children');
    expect(await parent.getDependenciesCount()).to.include({ processed: 1, unprocessed: 1, ignored: 1 });
    expect(await parent.getIgnoredChildrenFailures()).to.deep.equal({ [q.keys.job('part-c')]: 'c broke' });

    // the child left runs in glidemq: its completion queues the parent, which runs with both values
    await (await kidsQ.getJob('part-b'))!.promote();
    const values: Record<string, unknown>[] = [];
    const kidsWorker = new Worker(kids, async (job) => ({ from: job.name }), { connection: server().url });
    const parentWorker = new Worker(name, async (job) => {
      values.push(await job.getChildrenValues());
      return 'done';
    }, { connection: server().url });
    closers.push(() => kidsWorker.close(), () => parentWorker.close());
    await waitFor(async () => (await q.getJobState('report-1')) === 'completed', 'the imported parent to run once its last child completed');
    expect(values).to.deep.equal([{ [q.keys.job('part-a')]: { from: 'a' }, [kidsQ.keys.job('part-b')]: { from: 'b' } }]);
  });

  it('a dedup id comes across: a glidemq add with it is deduplicated while the imported job holds it', async () => {
    await bull.add('x', { n: 1 }, { jobId: 'dd-job', deduplication: { id: 'order-9' } });
    await bull.add('t', { n: 2 }, { jobId: 'tt-job', deduplication: { id: 'tick', ttl: HOUR } });
    const r = await cli(['import-bullmq', name, '--json']);
    expect(r.code, r.stderr + r.stdout).to.equal(0);
    expect(JSON.parse(r.stdout).queues[0].dedupIds).to.equal(2);
    const again = await q.add('x', { n: 3 }, { deduplication: { id: 'order-9' } });
    expect(again.id).to.equal('dd-job');
    const throttled = await q.add('t', { n: 4 }, { deduplication: { id: 'tick', ttl: HOUR } });
    expect(throttled.id).to.equal('tt-job');
    expect(await q.getWaitingCount()).to.equal(2);
    // once the job that held it is gone, the id deduplicates nothing
    await q.remove('dd-job');
    expect((await q.add('x', { n: 5 }, { deduplication: { id: 'order-9' } })).id).to.not.equal('dd-job');
  });

  it('usage errors: one line on stderr, exit 2', async () => {
    const r = await cli(['import-bullmq', 'a', 'b', '--into', 'c']);
    expect(r.code).to.equal(2);
    expect(r.stderr.trim().split('\n')).to.have.length(1);
    expect(r.stderr).to.match(/--into/);
    const tagged = await cli(['import-bullmq', '{emails}']);
    expect(tagged.code).to.equal(2);
    expect(tagged.stderr).to.match(/hash tag.*--into emails/);
    const port = await freePort();
    const away = await cli(['import-bullmq', 'a', '--source', `redis://u:secret@127.0.0.1:${port}`]);
    expect(away.code).to.equal(2);
    expect(away.stderr.trim().split('\n')).to.have.length(1);
    expect(away.stderr).to.match(new RegExp(`BullMQ source: cannot reach redis://u:\\*\\*\\*@127.0.0.1:${port}`));
  });
});
