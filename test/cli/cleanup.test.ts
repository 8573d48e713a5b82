import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { decodeClaim, type ClaimReply } from '../../src/engine/jobs/job.js';
import { runCli } from '../helpers/cli.js';
import { uniqueQueue } from '../helpers/engine.js';
import { useServer } from '../helpers/valkey.js';

describe('CLI: drain, clean, obliterate, remove', function () {
  this.timeout(60000);
  const server = useServer();
  const cli = (args: string[]) => runCli(['-u', server().url, ...args]);
  let q: Queue;
  let name: string;
  beforeEach(() => {
    name = uniqueQueue('clean');
    q = new Queue(name, { connection: server().url });
  });
  afterEach(() => q.close());

  async function finish(outcome: 'completed' | 'failed', n: number) {
    // A worker's two calls, made by hand: claim the next job, then finish that claim.
    for (let i = 0; i < n; i++) {
      await q.add('x', {}, { priority: 1 });
      const r = (await q.client.fcall('glidemq_fetch', 1, q.keys.meta, 'c', 1, 30_000, 1)) as ClaimReply[];
      const { id, fence } = decodeClaim(r[1]);
      await q.client.fcall('glidemq_finish', 1, q.keys.meta, id, fence, 'c', outcome, outcome === 'failed' ? 'bad' : '1', -1, 0, '', 1, '0', 30_000, 1);
    }
  }

  it('refuses without --yes when there is no terminal, and changes nothing', async () => {
    await q.add('a', {});
    for (const args of [['drain', name], ['clean', name, '--state', 'completed'], ['obliterate', name], ['remove', name, '1']]) {
      const r = await cli(args);
      expect(r.code, args.join(' ')).to.equal(2);
      expect(r.stderr).to.match(/without --yes/);
    }
    expect((await q.getJobCounts()).waiting).to.equal(1);
  });

  it('drain --dry-run counts, drain removes waiting, prioritized and LIFO jobs, --delayed also delayed ones', async () => {
    await q.add('a', {});
    await q.add('p', {}, { priority: 3 });
    await q.add('l', {}, { lifo: true });
    await q.add('d', {}, { delay: 60_000 });
    const dry = await cli(['drain', name, '--dry-run', '--json']);
    expect(JSON.parse(dry.stdout)).to.deep.equal({ queue: name, removed: 3, dryRun: true });
    expect((await q.getJobCounts()).waiting).to.equal(2);
    const r = await cli(['drain', name, '--yes', '--json']);
    expect(JSON.parse(r.stdout).removed).to.equal(3);
    let c = await q.getJobCounts();
    expect(c.waiting + c.prioritized).to.equal(0);
    expect(c.delayed).to.equal(1);
    await cli(['drain', name, '--delayed', '--yes']);
    c = await q.getJobCounts();
    expect(c.delayed).to.equal(0);
    expect(await q.client.exists(q.keys.job('4'))).to.equal(0);
  });

  it('drain removes group jobs too: the count it reports, what it removes and the waiting count agree', async () => {
    // a full group (its one slot taken) with two jobs waiting behind, an ordered group with a
    // delayed job holding its place ahead of a waiting one, and a plain job
    await q.add('g1', {}, { group: { id: 'g', maxConcurrency: 1 } });
    await q.add('g2', {}, { group: { id: 'g' } });
    await q.add('g3', {}, { group: { id: 'g' } });
    await q.client.fcall('glidemq_fetch', 1, q.keys.meta, 'c', 1, 30_000, 1);
    await q.add('od', {}, { group: { id: 'o', ordered: true }, delay: 60_000 });
    await q.add('o1', {}, { group: { id: 'o' } });
    await q.add('a', {});
    expect(await q.getJobCounts()).to.include({ waiting: 4, active: 1, delayed: 1 });
    const dry = await cli(['drain', name, '--dry-run', '--json']);
    expect(JSON.parse(dry.stdout)).to.deep.equal({ queue: name, removed: 4, dryRun: true });
    const r = await cli(['drain', name, '--yes', '--json']);
    expect(r.code, r.stderr).to.equal(0);
    expect(JSON.parse(r.stdout)).to.deep.equal({ queue: name, removed: 4, dryRun: false });
    expect(await q.getJobCounts()).to.include({ waiting: 0, active: 1, delayed: 1 });
    expect(await q.getGroup('g')).to.include({ waiting: 0, active: 1 });
    expect(await q.getGroup('o')).to.include({ waiting: 0, delayed: 1 });
    const all = await cli(['drain', name, '--delayed', '--yes', '--json']);
    expect(JSON.parse(all.stdout).removed).to.equal(1);
    expect(await q.getGroup('o')).to.include({ waiting: 0, delayed: 0, heldBy: null });
    expect(await q.client.exists(q.keys.groupJobs('g'), q.keys.groupJobs('o'))).to.equal(0);
  });

  it('drain leaves active jobs alone', async () => {
    await q.add('a', {});
    await q.add('b', {});
    await q.client.fcall('glidemq_fetch', 1, q.keys.meta, 'c', 1, 30_000, 1);
    await cli(['drain', name, '--yes']);
    const c = await q.getJobCounts();
    expect(c.active).to.equal(1);
    expect(c.waiting).to.equal(0);
    expect((await q.getJob('1'))?.state).to.equal('active');
  });

  it('clean removes finished jobs past the grace period', async () => {
    await finish('completed', 3);
    await finish('failed', 2);
    const keep = await cli(['clean', name, '--state', 'completed', '--grace', '1h', '--yes', '--json']);
    expect(JSON.parse(keep.stdout).removed).to.deep.equal([]);
    const dry = await cli(['clean', name, '--state', 'failed', '--dry-run', '--json']);
    expect(JSON.parse(dry.stdout).removed).to.have.length(2);
    expect((await q.getJobCounts()).failed).to.equal(2);
    const r = await cli(['clean', name, '--state', 'completed', '--limit', '2', '--yes']);
    expect(r.stdout).to.contain('removed 2 completed jobs');
    expect((await q.getJobCounts()).completed).to.equal(1);
    const bad = await cli(['clean', name, '--state', 'waiting', '--yes']);
    expect(bad.code).to.equal(2);
  });

  it('obliterate deletes every key of the queue, and refuses while jobs are active unless --force', async () => {
    await q.add('a', {});
    await q.add('b', {}, { delay: 60_000 });
    await finish('completed', 1);
    const other = new Queue(uniqueQueue('keep'), { connection: server().url });
    await other.add('z', {});
    await q.client.fcall('glidemq_fetch', 1, q.keys.meta, 'c', 1, 30_000, 1);
    const refused = await cli(['obliterate', name, '--yes']);
    expect(refused.code).to.equal(2);
    expect(refused.stderr).to.match(/1 active job/);
    const dry = await cli(['obliterate', name, '--dry-run', '--json']);
    expect(JSON.parse(dry.stdout).keys).to.be.above(3);
    const r = await cli(['obliterate', name, '--force', '--yes']);
    expect(r.code, r.stderr).to.equal(0);
    expect(await q.client.keys(`${q.keys.base}:*`)).to.deep.equal([]);
    expect((await other.getJobCounts()).waiting).to.equal(1);
    await other.close();
  });

  it('remove deletes jobs by id; an unknown id exits 2', async () => {
    await q.add('a', {});
    await q.add('b', {});
    const r = await cli(['remove', name, '1', '404', '--yes', '--json']);
    expect(r.code).to.equal(2);
    expect(JSON.parse(r.stdout)).to.deep.equal({ queue: name, removed: ['1'], missing: ['404'], dryRun: false });
    expect(await q.getJob('1')).to.equal(undefined);
    expect((await q.getJobCounts()).waiting).to.equal(1);
  });
});
