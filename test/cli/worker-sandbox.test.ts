import { expect } from 'chai';
import { join } from 'node:path';
import { Queue } from '../../src/engine/queue/queue.js';
import { spawn } from 'node:child_process';
import { GLIDEMQ_BIN, NO_PROFILE, runCli } from '../helpers/cli.js';
import { REPO_ROOT } from '../helpers/fixtures.js';
import { uniqueQueue } from '../helpers/engine.js';
import { useServer, waitFor } from '../helpers/valkey.js';
import { inParallel } from '../helpers/parallel.js';

const processor = (file: string) => join(REPO_ROOT, 'fixtures', 'processors', file);
const ACTS = processor('sandbox-acts.mjs');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('CLI: worker runs its script sandboxed (--sandbox process|thread|none)', function () {
  this.timeout(60000);
  const server = useServer();
  const cli = (args: string[]) => runCli(['-u', server().url, ...args], { timeoutMs: 40000 });
  let q: Queue;
  let name: string;
  beforeEach(() => {
    name = uniqueQueue('sbx');
    q = new Queue(name, { connection: server().url });
  });
  afterEach(() => q.close());

  it('runs the script in a child process of the worker by default, and ends it when the worker exits', async () => {
    const job = await q.add('a', {});
    const r = await cli(['worker', ACTS, '-q', name, '--exit-when-idle']);
    expect(r.code, r.stderr).to.equal(0);
    const ran = (await q.getJob(job.id))!.returnvalue as { pid: number; ppid: number; threadId: number };
    // its parent is the worker, not this test (which started the worker)
    expect(ran.ppid).to.not.equal(process.pid);
    expect(ran.threadId).to.equal(0);
    expect(alive(ran.pid)).to.equal(false);
  });

  it('--sandbox thread runs it in a worker thread; --sandbox none in the worker itself', async () => {
    const a = await q.add('a', {});
    const thread = await cli(['worker', ACTS, '-q', name, '--exit-when-idle', '--sandbox', 'thread']);
    expect(thread.code, thread.stderr).to.equal(0);
    expect(((await q.getJob(a.id))!.returnvalue as { threadId: number }).threadId).to.be.greaterThan(0);
    const b = await q.add('b', {});
    const none = await cli(['worker', ACTS, '-q', name, '--exit-when-idle', '--sandbox', 'none']);
    expect(none.code, none.stderr).to.equal(0);
    const ran = (await q.getJob(b.id))!.returnvalue as { ppid: number; threadId: number };
    expect(ran).to.include({ ppid: process.pid, threadId: 0 });
  });

  it('a script that exits fails its job saying so, and the worker goes on with the next job', async () => {
    const bad = await q.add('bad', { act: 'exit' });
    const good = await q.add('good', {});
    const r = await cli(['worker', ACTS, '-q', name, '--exit-when-idle', '--json']);
    expect(r.code, r.stderr).to.equal(0);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.find((l) => l.id === bad.id)).to.include({ status: 'failed' });
    expect((await q.getJob(bad.id))!.failedReason).to.match(/its sandbox process \d+ exited with code 3 while running it/);
    expect(lines.find((l) => l.id === good.id)).to.include({ status: 'completed' });
  });

  it('--concurrency sizes the pool: that many children at most', async () => {
    await q.addBulk(Array.from({ length: 6 }, (_, i) => ({ name: 's', data: { act: 'slow', ms: 400, i } })));
    const r = await cli(['worker', ACTS, '-q', name, '--exit-when-idle', '--concurrency', '3']);
    expect(r.code, r.stderr).to.equal(0);
    const jobs = await q.getJobs(['completed']);
    expect(jobs).to.have.length(6);
    const pids = new Set(jobs.map((j) => (j.returnvalue as { pid: number }).pid));
    expect(pids.size).to.be.within(1, 3);
  });

  it('a Ctrl-C to the whole process group stops the worker gracefully: its child finishes the running job', async () => {
    const job = await q.add('slow', { act: 'slow', ms: 1500 });
    // a group of its own, as a terminal's foreground job is, so the signal goes to the worker and its children
    const env = { ...process.env, GLIDEMQ_URL: undefined, GLIDEMQ_PASSWORD: undefined, ...NO_PROFILE, NO_COLOR: '1' };
    const worker = spawn(process.execPath, [GLIDEMQ_BIN, '-u', server().url, 'worker', ACTS, '-q', name], { cwd: REPO_ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    worker.stderr!.on('data', (d) => (stderr += d));
    worker.stdout!.resume();
    const exited = new Promise<number | null>((resolve) => worker.once('close', (code) => resolve(code)));
    try {
      await waitFor(async () => (await q.getJob(job.id))?.processedOn !== undefined && stderr.includes('worker started'), 'the job runs');
      process.kill(-worker.pid!, 'SIGINT');
      expect(await exited, stderr).to.equal(0);
    } finally {
      if (worker.exitCode === null) process.kill(-worker.pid!, 'SIGKILL');
    }
    const done = (await q.getJob(job.id))!;
    expect(done.state, done.failedReason).to.equal('completed');
  });

  it('bad input: a script that does not load or exports no function, an unknown mode, --sandbox with --broadcast (exit 2, one line)', async () => {
    const cases: [string[], RegExp][] = [
      [['worker', processor('no-function.mjs'), '-q', name], /processor script .*no-function\.mjs exports no function/],
      [['worker', processor('no-function.mjs'), '-q', name, '--sandbox', 'thread'], /processor script .*no-function\.mjs exports no function/],
      [['worker', join(REPO_ROOT, 'fixtures', 'valkey', 'none.conf'), '-q', name], /processor script .*none\.conf cannot be loaded/],
      [['worker', ACTS, '-q', name, '--sandbox', 'vm'], /--sandbox must be process, thread or none, got "vm"/],
      [['worker', ACTS, '--broadcast', 'b', '--subscription', 's', '--sandbox', 'thread'], /--sandbox applies only with --queue/],
    ];
    await inParallel(cases, async ([args, says]) => {
      const r = await cli(args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(2);
      expect(r.stderr.trim().split('\n'), args.join(' ')).to.have.length(1);
      expect(r.stderr).to.match(says);
    });
  });

  it('--help explains --sandbox with examples', async () => {
    const r = await cli(['worker', '--help']);
    expect(r.code).to.equal(0);
    expect(r.stdout).to.match(/--sandbox <mode>/);
    expect(r.stdout).to.contain('--sandbox thread --concurrency 4');
  });
});
