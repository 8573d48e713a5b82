import { expect } from 'chai';
import { join } from 'node:path';
import { Queue } from '../../src/engine/queue/queue.js';
import { runCli } from '../helpers/cli.js';
import { REPO_ROOT } from '../helpers/fixtures.js';
import { uniqueQueue } from '../helpers/engine.js';
import { freePort, useServer } from '../helpers/valkey.js';
import { inParallel } from '../helpers/parallel.js';

const processor = (file: string) => join(REPO_ROOT, 'fixtures', 'processors', file);

describe('CLI: enqueue, worker, stats, job, queues', function () {
  this.timeout(60000);
  const server = useServer();
  const cli = (args: string[], input?: string) => runCli(['-u', server().url, ...args], { input });
  let q: Queue;
  let name: string;
  beforeEach(() => {
    name = uniqueQueue('cli');
    q = new Queue(name, { connection: server().url });
  });
  afterEach(() => q.close());

  it('enqueue prints the id; --json prints {id, queue, name}', async () => {
    const a = await cli(['enqueue', name, '{"to":"ann"}']);
    expect(a.code).to.equal(0);
    expect(a.stdout.trim()).to.equal('1');
    const b = await cli(['enqueue', name, '{}', '-n', 'mail', '--priority', '3', '--json']);
    expect(b.code).to.equal(0);
    expect(JSON.parse(b.stdout)).to.include({ id: '2', queue: name, name: 'mail' });
    expect((await q.getJob('1'))?.data).to.deep.equal({ to: 'ann' });
    expect((await q.getJob('2'))?.opts.priority).to.equal(3);
  });

  it('enqueue options: delay, lifo, job id, attempts, backoff', async () => {
    const r = await cli(['enqueue', name, '{}', '--delay', '2m', '--job-id', 'x1', '--attempts', '4', '--backoff', 'exponential:500']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout.trim()).to.equal('x1');
    const job = await q.getJob('x1');
    expect(job?.state).to.equal('delayed');
    expect(job?.opts.attempts).to.equal(4);
    expect(job?.opts.backoff).to.deep.equal({ type: 'exponential', delay: 500 });
    const again = await cli(['enqueue', name, '{"other":1}', '--job-id', 'x1']);
    expect(again.stdout.trim()).to.equal('x1');
    const lifo = await cli(['enqueue', name, '{}', '--lifo']);
    expect((await q.getJob(lifo.stdout.trim()))?.opts.lifo).to.equal(true);
  });

  it('enqueue --ndjson adds every line, and --envelope reads name/data/opts', async () => {
    const r = await cli(['enqueue', name, '--ndjson'], '{"n":1}\n{"n":2}\n\n{"n":3}\n');
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout.trim().split('\n')).to.deep.equal(['1', '2', '3']);
    const e = await cli(['enqueue', name, '--ndjson', '--envelope', '--json'], '{"name":"resize","data":{"w":64},"opts":{"priority":2}}\n');
    expect(e.code, e.stderr).to.equal(0);
    const out = JSON.parse(e.stdout.trim());
    expect(out).to.include({ id: '4', queue: name, name: 'resize' });
    expect((await q.getJob('4'))?.opts.priority).to.equal(2);
  });

  it('bad input exits 2 with one line and writes nothing', async () => {
    const cases: [string[], string | undefined, RegExp][] = [
      [['enqueue', name, '{bad'], undefined, /data is not valid JSON/],
      [['enqueue', name, '--ndjson'], '{"ok":1}\n{"ok":2}\n{broken\n', /line 3: not valid JSON/],
      [['enqueue', name, '--ndjson', '--envelope'], '{"name":"a"}\n{"name":"b","opts":{"priority":-1}}\n', /line 2: .*priority/],
      [['enqueue', 'bad{queue', '{}'], undefined, /invalid queue name "bad\{queue"/],
      [['enqueue', 'bad:queue', '{}'], undefined, /invalid queue name "bad:queue"/],
      [['enqueue', name, '{}', '--priority', '0'], undefined, /--priority must be a whole number from 1 to 2097152/],
      [['enqueue', name, '{}', '--delay', 'soon'], undefined, /--delay: "soon" is not a duration/],
      [['enqueue', name, '{}', '--bogus'], undefined, /unknown option '--bogus'/],
      [['enqueue', name, '--ndjson'], `{"small":1}\n${JSON.stringify({ blob: 'x'.repeat(600 * 1024) })}\n`, /line 2: payload is \d+ bytes, over the limit of/],
      [['enqueue', name, JSON.stringify({ blob: 'x'.repeat(100 * 1024) }), '--job-id', 'a:b'], undefined, /job id "a:b" is invalid/],
    ];
    await inParallel(cases, async ([args, input, message]) => {
      const r = await cli(args, input);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(2);
      expect(r.stderr, args.join(' ')).to.match(message);
      expect(r.stderr).not.to.match(/\n\s+at /); // no stack trace
    });
    const counts = await q.getJobCounts();
    expect(counts.waiting + counts.prioritized + counts.delayed).to.equal(0);
  });

  it('an unreachable server: exit 2, one line naming the host, password hidden', async () => {
    const port = await freePort();
    const r = await runCli(['-u', `redis://user:s3cret@127.0.0.1:${port}`, 'stats', 'q']);
    expect(r.code).to.equal(2);
    expect(r.stderr).to.contain(`redis://user:***@127.0.0.1:${port}`);
    expect(r.stderr).not.to.contain('s3cret');
    expect(r.stderr.trim().split('\n')).to.have.length(1);
  });

  it('worker processes jobs with an ESM or CommonJS processor and prints one line per job', async () => {
    await q.addBulk([{ name: 'a', data: { n: 1 } }, { name: 'b', data: { n: 2 } }]);
    const r = await cli(['worker', processor('echo.mjs'), '--queue', name, '--exit-when-idle']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout.trim().split('\n')).to.have.length(2);
    expect(r.stdout).to.match(/✓ 1 a/);
    expect((await q.getJob('1'))?.returnvalue).to.deep.equal({ echoed: { n: 1 } });
    await q.add('c', { n: 3 });
    const cjs = await cli(['worker', processor('echo.cjs'), '--queue', name, '--exit-when-idle', '--json']);
    expect(cjs.code, cjs.stderr).to.equal(0);
    const line = JSON.parse(cjs.stdout.trim());
    expect(line).to.include({ id: '3', status: 'completed' });
    expect(line.durationMs).to.be.a('number');
    expect((await q.getJob('3'))?.returnvalue).to.deep.equal({ echoed: { n: 3 }, cjs: true });
  });

  it('worker --max-jobs stops after that many; --fail-fast exits 1 on a failed job', async () => {
    await q.addBulk(Array.from({ length: 5 }, (_, i) => ({ name: 'm', data: { i } })));
    const r = await cli(['worker', processor('echo.mjs'), '-q', name, '--max-jobs', '2', '--json']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout.trim().split('\n').length).to.be.at.least(2);
    const counts = await q.getJobCounts();
    expect(counts.completed).to.be.at.least(2);
    expect(counts.completed).to.be.below(5);
    const other = uniqueQueue('ff');
    const q2 = new Queue(other, { connection: server().url });
    await q2.add('x', {});
    const ff = await cli(['worker', processor('always-fail.mjs'), '-q', other, '--fail-fast', '--json']);
    await q2.close();
    expect(ff.code).to.equal(1);
    expect(JSON.parse(ff.stdout.trim())).to.include({ status: 'failed', failedReason: 'this processor always fails' });
  });

  it('worker: a processor that throws the package\'s UnrecoverableError fails the job with no retry', async () => {
    const other = uniqueQueue('unrec');
    const q2 = new Queue(other, { connection: server().url });
    const job = await q2.add('x', {}, { attempts: 3 });
    const r = await cli(['worker', processor('unrecoverable.mjs'), '-q', other, '--exit-when-idle', '--json']);
    const stored = await q2.getJob(job.id);
    await q2.close();
    expect(r.code, r.stderr).to.equal(0);
    expect(stored?.failedReason).to.equal(`job ${job.id}: the input can never work`);
    expect(stored?.attemptsMade).to.equal(1);
    expect(stored?.state).to.equal('failed');
  });

  it('worker refuses a missing script or one that exports no function (exit 2, names the path)', async () => {
    const missing = await cli(['worker', processor('nope.mjs'), '-q', name]);
    expect(missing.code).to.equal(2);
    expect(missing.stderr).to.contain('nope.mjs does not exist');
    const noFn = await cli(['worker', processor('no-function.mjs'), '-q', name]);
    expect(noFn.code).to.equal(2);
    expect(noFn.stderr).to.contain('no-function.mjs exports no function');
    const noQueue = await cli(['worker', processor('echo.mjs')]);
    expect(noQueue.code).to.equal(2);
    expect(noQueue.stderr).to.contain('--queue');
  });

  it('stats prints counts per state; --json has exactly the documented keys', async () => {
    await q.add('w', {});
    await q.add('d', {}, { delay: 60_000 });
    await q.add('p', {}, { priority: 1 });
    const t = await cli(['stats', name]);
    expect(t.code).to.equal(0);
    expect(t.stdout).to.match(/waiting\s+│\s+1/);
    const j = await cli(['stats', name, '--json']);
    expect(JSON.parse(j.stdout)).to.deep.equal({ waiting: 1, active: 0, delayed: 1, prioritized: 1, completed: 0, failed: 0, paused: 0, consumers: 0, globalConcurrency: null, oldestWaitingMs: JSON.parse(j.stdout).oldestWaitingMs, workers: 0 });
  });

  it('job shows one job; an unknown job exits 2', async () => {
    await q.add('mail', { to: 'bo' }, { attempts: 2 });
    const j = await cli(['job', name, '1', '--json']);
    expect(j.code).to.equal(0);
    const doc = JSON.parse(j.stdout);
    expect(doc).to.include({ id: '1', name: 'mail', state: 'waiting', attemptsMade: 0, stalledCount: 0, returnvalue: null, failedReason: null });
    expect(doc.data).to.deep.equal({ to: 'bo' });
    const t = await cli(['job', name, '1']);
    expect(t.stdout).to.match(/state\s+│\s+waiting/);
    const missing = await cli(['job', name, '404']);
    expect(missing.code).to.equal(2);
    expect(missing.stderr).to.contain(`job 404 not found in queue ${name}`);
  });

  it('queues lists the queues under the prefix', async () => {
    await q.add('a', {});
    const r = await cli(['queues', '--json']);
    expect(r.code).to.equal(0);
    const names = (JSON.parse(r.stdout) as { name: string }[]).map((x) => x.name);
    expect(names).to.include(name);
    const other = await cli(['queues', '--prefix', 'nothing-here']);
    expect(other.stdout).to.contain('no queues');
  });

  it('pause and resume from the command line', async () => {
    await q.add('a', {});
    expect((await cli(['pause', name])).code).to.equal(0);
    expect(await q.isPaused()).to.equal(true);
    const s = await cli(['stats', name, '--json']);
    expect(JSON.parse(s.stdout).paused).to.equal(1);
    expect((await cli(['resume', name, '--json'])).stdout).to.contain('"running"');
    expect(await q.isPaused()).to.equal(false);
  });

  it('every command has --help with examples', async () => {
    await inParallel(['enqueue', 'worker', 'stats', 'job', 'queues', 'pause', 'resume'], async (cmd) => {
      const r = await runCli([cmd, '--help']);
      expect(r.code, cmd).to.equal(0);
      expect(r.stdout, cmd).to.contain('Examples:');
    });
  });
});
