/**
 * The operator's second day (issue 32): `glidemq jobs --grep` (Queue.search on the server, paged),
 * the running job ids `glidemq workers` shows, and `workers --quiet|--stop <id>` obeyed by a running
 * `glidemq worker` within one refresh. One server for the file; short lock durations.
 */
import { expect } from 'chai';
import { join } from 'node:path';
import type { Job } from '../../src/engine/jobs/job.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import type { WorkerInfo } from '../../src/engine/consuming/worker-registry.js';
import { runCli, startCli, type RunningCli } from '../helpers/cli.js';
import { REPO_ROOT } from '../helpers/fixtures.js';
import { uniqueQueue } from '../helpers/engine.js';
import { useServer, waitFor } from '../helpers/valkey.js';

const processor = (file: string) => join(REPO_ROOT, 'fixtures', 'processors', file);

describe('CLI: jobs --grep, and workers: running ids, --quiet, --stop', function () {
  this.timeout(30_000);
  const queues: Queue[] = [];
  const workers: Worker[] = [];
  const children: RunningCli[] = [];
  // (registered before the server's: mocha runs `after` hooks in order, and clients close at once
  // while their server is still up, where they wait out a timeout once it is gone)
  after(async () => {
    children.forEach((c) => c.kill('SIGKILL'));
    await Promise.all(workers.map((w) => w.close(true)));
    await Promise.all(queues.map((q) => q.close()));
  });
  const server = useServer();
  const prefix = uniqueQueue('day2');
  const cli = (args: string[]) => runCli(['-u', server().url, '--prefix', prefix, ...args]);
  const queue = (name: string) => {
    const q = new Queue(name, { connection: server().url, prefix });
    queues.push(q);
    return q;
  };

  it('jobs --state failed --grep matches reason, name and data, with --json and paging', async () => {
    const name = uniqueQueue('grep');
    const q = queue(name);
    const added = await q.addBulk(Array.from({ length: 9 }, (_, i) => ({ name: i === 4 ? 'Refund' : 'charge', data: { card: i === 7 ? 'VISA-4242' : 'mc' } })));
    const w = new Worker(name, async (job: Job) => {
      throw new Error(Number(job.id) % 3 === 0 ? 'Gateway TIMEOUT' : 'declined');
    }, { connection: server().url, prefix, concurrency: 3 });
    workers.push(w);
    await waitFor(async () => (await q.getJobCounts()).failed === 9, 'every job to fail');
    const timedOut = added.filter((j) => Number(j.id) % 3 === 0).map((j) => j.id).sort();

    const json = await cli(['jobs', name, '--state', 'failed', '--grep', 'timeout', '--json']);
    expect(json.code, json.stderr).to.equal(0);
    const lines = json.stdout.trim().split('\n').map((l) => JSON.parse(l) as { id: string; failedReason: string; state: string });
    expect(lines.map((l) => l.id).sort()).to.deep.equal(timedOut);
    expect(lines.every((l) => l.failedReason === 'Gateway TIMEOUT' && l.state === 'failed')).to.equal(true);
    // the data (the name and the reason: test/integration/search.test.ts)
    expect(JSON.parse((await cli(['jobs', name, '-s', 'failed', '-g', 'visa-42', '--json'])).stdout).id).to.equal(added[7].id);

    // a page of 2, then the rest
    const first = await cli(['jobs', name, '--state', 'failed', '--grep', 'TimeOut', '--limit', '2']);
    expect(first.code, first.stderr).to.equal(0);
    expect(first.stdout).to.contain('matching "TimeOut"').and.contain('next: --page 2');
    const second = await cli(['jobs', name, '--state', 'failed', '--grep', 'timeout', '--limit', '2', '--page', '2', '--json']);
    const paged = [...first.stdout.matchAll(/^│ (\d+) /gm)].map((m) => m[1]);
    const rest = second.stdout.trim().split('\n').map((l) => (JSON.parse(l) as { id: string }).id);
    expect([...paged, ...rest].sort()).to.deep.equal(timedOut);
    const none = await cli(['jobs', name, '--state', 'failed', '--grep', 'no such text']);
    expect(none.code).to.equal(0);
    expect(none.stdout).to.contain('no failed jobs matching "no such text"');
  });

  it('workers shows a few of each worker\'s running job ids, then how many more', async () => {
    const name = uniqueQueue('ids');
    const q = queue(name);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const w = new Worker(name, () => held, { connection: server().url, prefix, concurrency: 5, registryTtl: 300 });
    workers.push(w);
    const jobs = await q.addBulk(Array.from({ length: 5 }, () => ({ name: 'hold', data: {} })));
    await waitFor(async () => (await q.getWorkers())[0]?.jobs.length === 5, 'the registry to list the running jobs');
    const listed = JSON.parse((await cli(['workers', name, '--json'])).stdout) as WorkerInfo[];
    expect([...listed[0].jobs].sort()).to.deep.equal(jobs.map((j) => j.id).sort());
    expect(listed[0]).to.include({ running: 5, request: null });
    const text = await cli(['workers', name]);
    expect(text.code, text.stderr).to.equal(0);
    expect(text.stdout, text.stdout).to.match(new RegExp(`^pid ${process.pid}: running \\d+, \\d+, \\d+ \\+2 more$`, 'm'));
    release();
  });

  it('--quiet makes a running `glidemq worker` take no new job within one refresh, --stop makes it finish and exit 0; an unknown id exits 2', async () => {
    const name = uniqueQueue('ctl');
    const q = queue(name);
    const child = startCli(['-u', server().url, '--prefix', prefix, 'worker', processor('slow.mjs'), '-q', name, '--sandbox', 'none', '--lock-duration', '400ms']);
    children.push(child);
    await waitFor(() => child.stderr().includes('worker started') || child.stderr().includes('Error'), 'the worker to start');
    const long = await q.add('long', { ms: 2500 }); // runs through the quiet checks below
    await waitFor(async () => (await q.getJobState(long.id)) === 'active', 'the long job to run');
    const [info] = await q.getWorkers();

    const quiet = await cli(['workers', '--quiet', info.id, '--json']);
    expect(quiet.code, quiet.stderr).to.equal(0);
    expect(JSON.parse(quiet.stdout)).to.deep.equal({ asked: info.id });
    await waitFor(() => child.stderr().includes('asked to go quiet'), 'the worker to say it goes quiet');
    const after = [await q.add('short', { ms: 1 }), await q.add('short', { ms: 1 })];
    // two refreshes later (each would have been a chance to take them), they still wait
    const seen = (await q.getWorkers())[0].lastSeen;
    await waitFor(async () => ((await q.getWorkers())[0]?.lastSeen ?? Infinity) > seen + 300, 'two more refreshes');
    for (const j of after) expect(await q.getJobState(j.id)).to.equal('waiting');
    const listed = JSON.parse((await cli(['workers', name, '--json'])).stdout) as WorkerInfo[];
    expect(listed[0]).to.include({ request: 'quiet' });
    expect(listed[0].jobs).to.deep.equal([long.id]);
    expect((await cli(['workers', name])).stdout).to.contain('(quiet)');

    const stop = await cli(['workers', name, '--stop', info.id]);
    expect(stop.code, stop.stderr).to.equal(0);
    expect(stop.stdout).to.contain(`asked worker ${info.id}`);
    const exit = await child.exited;
    expect(exit.code, exit.stderr).to.equal(0);
    expect(exit.stderr).to.contain('asked to stop').and.contain('exited: asked to stop (glidemq workers --stop)');
    expect(await q.getJobState(long.id)).to.equal('completed'); // it finished its running job
    for (const j of after) expect(await q.getJobState(j.id)).to.equal('waiting');

    for (const args of [['workers', '--stop', info.id], ['workers', name, '--quiet', 'no-such-worker']]) {
      const unknown = await cli(args);
      expect(unknown.code, args.join(' ')).to.equal(2);
      expect(unknown.stderr.trim().split('\n'), unknown.stderr).to.have.length(1);
      expect(unknown.stderr).to.contain('no live worker with id');
    }
  });
});
