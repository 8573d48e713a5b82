/**
 * `glidemq workers`, the worker column of `pel`, and the oldest waiting age (and live workers) in
 * `stats` and `queues`, on a real server with real worker processes.
 */
import { expect } from 'chai';
import { hostname } from 'node:os';
import type { Job } from '../../src/engine/jobs/job.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { Worker } from '../../src/engine/consuming/worker.js';
import type { WorkerInfo } from '../../src/engine/consuming/worker-registry.js';
import { runCli } from '../helpers/cli.js';
import { uniqueQueue } from '../helpers/engine.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { killedAfterEach, processorPath, WorkerProcess } from '../helpers/worker-spawn.js';

/** Every line of `text` at most `width` characters (the tables fit the terminal). */
function widest(text: string): number {
  return Math.max(0, ...text.split('\n').map((l) => [...l].length));
}

describe('CLI: workers, pel worker names, oldest waiting age', function () {
  this.timeout(60_000);
  const server = useServer();
  const cli = (args: string[], env: Record<string, string> = {}) => runCli(['-u', server().url, '--prefix', prefix, ...args], { env });
  let prefix: string;
  const queues: Queue[] = [];
  const workers: Worker[] = [];
  const procs = killedAfterEach();
  beforeEach(() => {
    prefix = uniqueQueue('wp');
  });
  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.close(true)));
    await Promise.all(queues.splice(0).map((q) => q.close()));
  });

  const queue = (name: string) => {
    const q = new Queue(name, { connection: server().url, prefix });
    queues.push(q);
    return q;
  };
  const spawnWorker = async (name: string, processor: string, options: object = {}) => {
    const p = new WorkerProcess({ url: server().url, queue: name, prefix, processor: processorPath(processor), options: { registryTtl: 500, ...options } });
    procs.push(p);
    await p.waitReady();
    return p;
  };

  it('workers lists the live workers of a queue and of every queue; --json; a killed one is gone', async () => {
    const a = uniqueQueue('wa');
    const b = uniqueQueue('wb');
    queue(a);
    queue(b);
    const pa = await spawnWorker(a, 'echo.mjs', { concurrency: 4 });
    const pb = await spawnWorker(b, 'echo.mjs');

    const one = await cli(['workers', a, '--json']);
    expect(one.code, one.stderr).to.equal(0);
    const listed = JSON.parse(one.stdout) as WorkerInfo[];
    expect(listed).to.have.length(1);
    expect(listed[0]).to.include({ host: hostname(), pid: pa.proc.pid, queue: a, concurrency: 4, running: 0 });
    // the keys CLI.md names for workers --json (times on the server's clock)
    expect(listed[0]).to.include.all.keys('queue', 'host', 'pid', 'concurrency', 'running', 'startedAt', 'lastSeen', 'version');
    expect(listed[0].lastSeen).to.be.a('number').and.at.least(listed[0].startedAt);
    expect(listed[0].version).to.be.a('string').and.not.equal('');

    const all = JSON.parse((await cli(['workers', '--json'])).stdout) as WorkerInfo[];
    expect(all.map((w) => [w.queue, w.pid])).to.deep.equal([[a, pa.proc.pid], [b, pb.proc.pid]].sort((x, y) => String(x[0]).localeCompare(String(y[0]))));

    const text = await cli(['workers']);
    expect(text.code).to.equal(0);
    // (a heading may wrap inside its column to fit 80: each of its words is there)
    for (const head of ['host', 'pid', 'queue', 'conc', 'running', 'started', 'last', 'seen', 'version']) expect(text.stdout).to.contain(head);
    expect(text.stdout).to.contain(String(pa.proc.pid)).and.contain(String(pb.proc.pid));
    expect(text.stdout).to.match(/2 workers, 0 of 5 slots busy/);
    expect(widest(text.stdout)).to.be.at.most(80);
    expect(widest((await cli(['workers'], { COLUMNS: '120' })).stdout)).to.be.at.most(120);

    await pb.kill();
    await waitFor(async () => (JSON.parse((await cli(['workers', '--json'])).stdout) as WorkerInfo[]).length === 1, 'the killed worker to expire');
    const none = await cli(['workers', b]);
    expect(none.code).to.equal(0);
    expect(none.stdout).to.contain(`no live workers on ${b}`);
  });

  it('workers of a queue that never existed warns on stderr, exits 0 and writes no key', async () => {
    const r = await cli(['workers', 'nosuchqueue']);
    expect(r.code).to.equal(0);
    expect(r.stderr).to.contain('does not exist');
    const q = queue('nosuchqueue');
    expect(await q.client.keys(`${prefix}:*`)).to.deep.equal([]);
    // bad input: one line on stderr, exit 2
    for (const args of [['workers', 'a', 'b'], ['workers', 'bad{name']]) {
      const bad = await cli(args);
      expect(bad.code, args.join(' ')).to.equal(2);
      expect(bad.stderr.trim().split('\n')).to.have.length(1);
    }
  });

  it('pel names the live worker behind each claim (host:pid), and none once it is dead', async () => {
    const name = uniqueQueue('pel');
    const q = queue(name);
    const p = await spawnWorker(name, 'hang.mjs', { lockDuration: 60_000 });
    await q.add('stream-job', {});
    await q.add('prio-job', {}, { priority: 1 });
    await waitFor(async () => (await q.getActiveCount()) === 1, 'a claim');
    const [info] = await q.getWorkers();

    const j = await cli(['pel', name, '--json']);
    expect(j.code, j.stderr).to.equal(0);
    const doc = JSON.parse(j.stdout) as { stream: { consumer: string; worker: unknown }[]; list: { consumer: string; worker: unknown }[] };
    const claims = [...doc.stream, ...doc.list];
    expect(claims).to.have.length(1);
    expect(claims[0].consumer).to.equal(info.id);
    expect(claims[0].worker).to.deep.equal({ host: hostname(), pid: p.proc.pid });

    const t = await cli(['pel', name]);
    expect(t.stdout).to.contain(`${hostname()}:${p.proc.pid}`);
    expect(widest(t.stdout)).to.be.at.most(80);

    await p.kill();
    await waitFor(async () => (await q.getWorkers()).length === 0, 'the dead worker to expire');
    const after = JSON.parse((await cli(['pel', name, '--json'])).stdout) as typeof doc;
    expect([...after.stream, ...after.list][0].worker).to.equal(null);
    const dead = await cli(['pel', name]);
    expect(dead.stdout, dead.stdout).to.match(/│ gone +│/);
  });

  it('stats shows the oldest waiting age, the live workers and the global concurrency limit', async () => {
    const name = uniqueQueue('st');
    const q = queue(name);
    expect(JSON.parse((await cli(['stats', name, '--json'])).stdout)).to.include({ oldestWaitingMs: null, workers: 0, globalConcurrency: null });
    const job = await q.add('a', {});
    await waitFor(async () => {
      const [s, us] = await q.client.time();
      return Number(s) * 1000 + Number(us) / 1000 >= job.timestamp + 1200;
    }, 'the job to wait over a second by the server clock');
    const w = new Worker(uniqueQueue('other'), async () => 1, { connection: server().url, prefix, concurrency: 2 });
    workers.push(w);
    // a worker of this queue that takes nothing: paused before it starts
    const held = new Worker(name, async () => 1, { connection: server().url, prefix, concurrency: 3, autorun: false });
    workers.push(held);
    await held.pause(true);
    held.run().catch(() => undefined); // settles at close
    await held.waitUntilReady();
    await q.setGlobalConcurrency(7);

    const j = JSON.parse((await cli(['stats', name, '--json'])).stdout) as { oldestWaitingMs: number; workers: number; globalConcurrency: number };
    expect(j.oldestWaitingMs).to.be.within(1200, 30_000);
    expect(j.workers).to.equal(1);
    expect(j.globalConcurrency).to.equal(7);
    const t = await cli(['stats', name]);
    expect(t.stdout).to.match(/oldest waiting: \d+(\.\d)?s/);
    expect(t.stdout).to.contain('live workers: 1 worker (3 slots)');
    expect(t.stdout).to.contain('global concurrency 7');
    expect(widest(t.stdout)).to.be.at.most(80);
  });

  it('queues shows each queue\'s oldest waiting age and live workers, and fits 80 and 120 columns', async () => {
    const busy = uniqueQueue('qa-with-a-rather-long-queue-name');
    const idle = uniqueQueue('qb');
    const q = queue(busy);
    await q.add('a', {});
    await q.add('b', {}, { priority: 2 });
    await q.pause();
    await queue(idle).add('c', {}, { delay: 60_000 });
    await spawnWorker(idle, 'echo.mjs');

    const j = JSON.parse((await cli(['queues', '--json'])).stdout) as { name: string; oldestWaitingMs: number | null; workers: number; waiting: number }[];
    const byName = new Map(j.map((r) => [r.name, r]));
    expect(byName.get(busy)!.oldestWaitingMs).to.be.a('number').and.at.least(0);
    expect(byName.get(busy)!.workers).to.equal(0);
    expect(byName.get(idle)).to.include({ oldestWaitingMs: null, workers: 1 });

    const t = await cli(['queues']);
    expect(t.code).to.equal(0);
    for (const head of ['queue', 'wait', 'active', 'delay', 'prio', 'done', 'failed', 'workers', 'oldest']) expect(t.stdout).to.contain(head);
    expect(t.stdout).to.contain('(paused)');
    expect(widest(t.stdout)).to.be.at.most(80);
    const wide = await cli(['queues'], { COLUMNS: '120' });
    expect(widest(wide.stdout)).to.be.at.most(120);
    expect(wide.stdout).to.contain(busy); // at 120 the long name is whole
  });

  it('job --json shows the failure stacks of a failed job', async () => {
    const name = uniqueQueue('stk');
    const q = queue(name);
    const w = new Worker(name, async (job: Job) => {
      throw new Error(`nope ${job.attemptsMade}`);
    }, { connection: server().url, prefix });
    workers.push(w);
    const job = await q.add('x', {}, { attempts: 2 });
    await waitFor(async () => (await q.getJobState(job.id)) === 'failed', 'the job to fail');
    const r = await cli(['job', name, job.id, '--json']);
    expect(r.code, r.stderr).to.equal(0);
    const doc = JSON.parse(r.stdout) as { stacktrace?: string[] };
    expect(doc.stacktrace).to.have.length(2);
    expect(doc.stacktrace![1]).to.match(/^Error: nope 1\n/);
  });
});
