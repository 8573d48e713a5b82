import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import type { Job } from '../../src/engine/jobs/job.js';
import { useCliSuite } from '../helpers/cli-suite.js';
import { uniqueQueue } from '../helpers/engine.js';
import { waitFor } from '../helpers/valkey.js';
import { inParallel } from '../helpers/parallel.js';

/** Every line of `text` fits `width` columns. */
function expectFits(text: string, width: number): void {
  for (const line of text.split('\n')) expect(Array.from(line).length, `line wider than ${width}: ${line}`).to.be.at.most(width);
}

/** The id column of a jobs table, top to bottom. */
function idsOf(table: string): string[] {
  return table
    .split('\n')
    .filter((l) => l.startsWith('│') && !/│ id\s/.test(l))
    .map((l) => l.split('│')[1].trim());
}

describe('CLI: jobs, retry, promote, export', function () {
  this.timeout(60000);
  let name: string;
  let q: Queue;
  const { cli, harness: h } = useCliSuite('jobs', (made) => ({ q, name } = made), { env: { TZ: 'UTC' } });

  /** Adds `n` jobs named by `names` (cycled) and lets a worker fail each with `reason(data)`. */
  async function failJobs(n: number, names: string[] = ['default'], reason = (i: number) => `boom ${i}`): Promise<Job[]> {
    const jobs = await q.addBulk(Array.from({ length: n }, (_, i) => ({ name: names[i % names.length], data: { i } })));
    const w = h.worker(name, async (job) => {
      throw new Error(reason(job.data.i));
    });
    await waitFor(async () => (await q.getFailedCount()) === n, `${n} failed jobs`);
    await w.close();
    return jobs;
  }

  /** Makes failed job `id` look as if it failed `agoMs` before now (its hash and its set agree). */
  async function failedAgo(id: string, agoMs: number): Promise<void> {
    const [s] = await q.client.time();
    const at = Number(s) * 1000 - agoMs;
    await q.client.hset(q.keys.job(id), 'finishedOn', String(at));
    await q.client.zadd(q.keys.failed, at, id);
  }

  it('lists each state newest first with the columns of that state', async () => {
    await q.add('a', { n: 1 });
    await q.add('b', { n: 2 });
    await q.add('p', {}, { priority: 2 });
    await q.add('d', {}, { delay: 3_600_000, jobId: 'later' });
    const waiting = await cli(['jobs', name, '--state', 'waiting']);
    expect(waiting.code, waiting.stderr).to.equal(0);
    expect(waiting.stdout).to.match(/│ id\s+│ name\s+│\s+age │ attempts │/);
    expect(idsOf(waiting.stdout)).to.deep.equal(['2', '1']);
    expect(waiting.stdout).to.match(/showing 1-2 of 2 waiting jobs/);
    const prioritized = await cli(['jobs', name, '--state', 'prioritized']);
    expect(idsOf(prioritized.stdout)).to.deep.equal(['3']);
    const delayed = await cli(['jobs', name, '--state', 'delayed']);
    expect(delayed.stdout).to.match(/│ runs at \(\+00:00\)\s+│/);
    const runAt = new Date(Number(await q.client.zscore(q.keys.scheduled, 'later'))).toISOString();
    // the time of day, with the date when it is not today
    const shown = runAt.slice(0, 10) === new Date().toISOString().slice(0, 10) ? runAt.slice(11, 16) : `${runAt.slice(0, 10)} ${runAt.slice(11, 16)}`;
    expect(delayed.stdout).to.match(new RegExp(`│ later\\s+│ d\\s+│.*│ ${shown}\\s+│`));
    const failed = await cli(['jobs', name, '--state', 'failed']);
    expect(failed.code).to.equal(0);
    expect(failed.stdout).to.match(/no failed jobs in /);
  });

  it('failed jobs show attempts and the reason; completed ones when they finished', async () => {
    await failJobs(2, ['mail'], (i) => `smtp refused ${i}`);
    const r = await cli(['jobs', name, '--state', 'failed']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/│ reason\s+│/);
    expect(r.stdout).to.match(/│ 2\s+│ mail\s+│\s+\S+ │\s+1\/1 │ smtp refused 1\s+│/);
    expect(idsOf(r.stdout)).to.deep.equal(['2', '1']);
    await q.add('ok', {});
    const w = h.worker(name, async () => 'done');
    await waitFor(async () => (await q.getCompletedCount()) === 1, 'a completed job');
    await w.close();
    const c = await cli(['jobs', name, '--state', 'completed']);
    expect(c.stdout).to.match(/│ finished\s+│/);
    expect(c.stdout).to.match(/│ 3\s+│ ok\s+│.* ago\s+│/);
  });

  it('active and paused jobs are listed', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    await q.add('long', {});
    const w = h.worker(name, () => held);
    await waitFor(async () => (await q.getActiveCount()) === 1, 'an active job');
    const active = await cli(['jobs', name, '--state', 'active']);
    expect(active.stdout).to.match(/│ started\s+│/);
    expect(idsOf(active.stdout)).to.deep.equal(['1']);
    release();
    await waitFor(async () => (await q.getCompletedCount()) === 1, 'the job completed');
    await w.close();
    await q.pause();
    await q.add('held', {});
    const paused = await cli(['jobs', name, '--state', 'paused']);
    expect(idsOf(paused.stdout)).to.deep.equal(['2']);
  });

  it('--name, --limit, --page and --offset page through the matches', async () => {
    await q.addBulk(Array.from({ length: 7 }, (_, i) => ({ name: i % 2 ? 'odd' : 'even', data: { i } })));
    // ids 1..7; newest first: 7 6 5 4 3 2 1; even names are ids 1 3 5 7
    const p1 = await cli(['jobs', name, '--state', 'waiting', '--limit', '3']);
    expect(idsOf(p1.stdout)).to.deep.equal(['7', '6', '5']);
    expect(p1.stdout).to.match(/showing 1-3 of 7 waiting jobs; next: --page 2/);
    const p3 = await cli(['jobs', name, '--state', 'waiting', '--limit', '3', '--page', '3']);
    expect(idsOf(p3.stdout)).to.deep.equal(['1']);
    expect(p3.stdout).not.to.match(/next:/);
    const off = await cli(['jobs', name, '--state', 'waiting', '--limit', '2', '--offset', '1']);
    expect(idsOf(off.stdout)).to.deep.equal(['6', '5']);
    expect(off.stdout).to.match(/next: --offset 3/);
    const even = await cli(['jobs', name, '--state', 'waiting', '--name', 'even', '--limit', '3']);
    expect(idsOf(even.stdout)).to.deep.equal(['7', '5', '3']);
    expect(even.stdout).to.match(/showing 1-3 waiting jobs named even; next: --page 2/);
    const even2 = await cli(['jobs', name, '--state', 'waiting', '-n', 'even', '--limit', '3', '--page', '2']);
    expect(idsOf(even2.stdout)).to.deep.equal(['1']);
    const beyond = await cli(['jobs', name, '--state', 'waiting', '--page', '9']);
    expect(beyond.code).to.equal(0);
    expect(beyond.stdout).to.match(/no more waiting jobs in .* \(after the first 160\)/);
    const none = await cli(['jobs', name, '--state', 'waiting', '--name', 'nobody']);
    expect(none.stdout).to.match(/no waiting jobs named nobody in /);
  });

  it('--since keeps failed jobs that failed within the span, and waiting jobs added within it', async () => {
    await failJobs(4);
    await failedAgo('1', 3 * 3_600_000);
    await failedAgo('2', 2 * 3_600_000);
    const recent = await cli(['jobs', name, '--state', 'failed', '--since', '1h']);
    expect(recent.code, recent.stderr).to.equal(0);
    expect(idsOf(recent.stdout)).to.deep.equal(['4', '3']);
    expect(recent.stdout).to.match(/failed jobs finished in the last 1h/);
    expect(idsOf((await cli(['jobs', name, '--state', 'failed', '--since', '150m'])).stdout)).to.deep.equal(['4', '3', '2']);
    // the application's timestamp is the job's added time (its age column and --since agree)
    await q.add('old', {}, { timestamp: Date.now() - 2 * 86_400_000 });
    await q.add('new', {});
    const added = await cli(['jobs', name, '--state', 'waiting', '--since', '1d']);
    expect(idsOf(added.stdout)).to.deep.equal(['6']);
    const all = await cli(['jobs', name, '--state', 'waiting']);
    expect(all.stdout).to.match(/│ 5\s+│ old\s+│\s+2d( \d\dh)? │/);
  });

  it('--json prints one job per line (NDJSON) with every field', async () => {
    await failJobs(3, ['x', 'y']);
    const r = await cli(['jobs', name, '--state', 'failed', '--json', '--limit', '2']);
    expect(r.code, r.stderr).to.equal(0);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((j) => j.id)).to.deep.equal(['3', '2']);
    expect(lines[0]).to.include({ name: 'x', state: 'failed', failedReason: 'boom 2', attemptsMade: 1 });
    expect(lines[0].data).to.deep.equal({ i: 2 });
    // the keys CLI.md names for jobs --json (failedReason for failed jobs)
    for (const j of lines) {
      expect(j).to.include.all.keys('id', 'name', 'state', 'attemptsMade', 'timestamp', 'failedReason');
      expect(j.timestamp).to.equal((await q.getJob(j.id))?.timestamp);
    }
    await q.add('later', {}, { delay: 60_000 });
    const d = await cli(['jobs', name, '--state', 'delayed', '--json']);
    const delayed = JSON.parse(d.stdout.trim());
    // ... and runAt for delayed ones
    expect(delayed).to.include.all.keys('id', 'name', 'state', 'attemptsMade', 'timestamp', 'runAt');
    expect(delayed).to.include({ name: 'later', state: 'delayed', attemptsMade: 0 });
    expect(delayed.runAt).to.equal(Number(await q.client.zscore(q.keys.scheduled, delayed.id)));
    const empty = await cli(['jobs', name, '--state', 'completed', '--json']);
    expect(empty.stdout).to.equal('');
  });

  it('tables fit 80 columns (and 120 with COLUMNS=120): long reasons, names and ids are cut with …', async () => {
    const long = 'connection refused by upstream mail relay after 3 retries; '.repeat(8);
    await failJobs(2, ['a-rather-long-job-name-for-notifications'], (i) => `${long} ${i}`);
    await q.add('n'.repeat(60), {}, { delay: 60_000, jobId: `job-${'x'.repeat(60)}` });
    for (const state of ['failed', 'delayed']) {
      const r = await cli(['jobs', name, '--state', state]);
      expect(r.code, r.stderr).to.equal(0);
      expectFits(r.stdout, 80);
      expect(r.stdout).to.include('…');
      expect(r.stdout.split('\n').filter((l) => l.startsWith('│ ')).length).to.equal(state === 'failed' ? 3 : 2); // no wrapped rows
    }
    const wide = await cli(['jobs', name, '--state', 'failed'], { env: { COLUMNS: '120' } });
    expectFits(wide.stdout, 120);
    expect(Math.max(...wide.stdout.split('\n').map((l) => l.length))).to.be.above(80);
    const json = await cli(['jobs', name, '--state', 'failed', '--json']);
    expect(JSON.parse(json.stdout.split('\n')[0]).failedReason).to.equal(`${long} 1`);
  });

  it('bad usage exits 2 with one line', async () => {
    const cases: [string[], RegExp][] = [
      [['jobs', name], /required option '-s, --state <state>'/],
      [['jobs', name, '--state', 'done'], /--state must be one of waiting, active, delayed, prioritized, completed, failed, paused, waiting-children, got "done"/],
      [['jobs', name, '--state', 'failed', '--limit', '0'], /--limit must be a whole number from 1/],
      [['jobs', name, '--state', 'failed', '--page', '0'], /--page must be a whole number from 1/],
      [['jobs', name, '--state', 'failed', '--page', '2', '--offset', '3'], /give --page or --offset, not both/],
      [['jobs', name, '--state', 'failed', '--since', 'lately'], /--since: "lately" is not a duration/],
      [['retry', name], /give the ids of the jobs to retry, or --all-failed/],
      [['retry', name, '1', '--all-failed'], /give job ids or --all-failed, not both/],
      [['retry', name, '1', '--since', '1h'], /--since selects jobs for --all-failed/],
      [['retry', name, '--all-failed', '--since', 'x'], /--since: "x" is not a duration/],
      [['promote', name], /give the ids of the jobs to promote, or --all/],
      [['promote', name, '1', '--all'], /give job ids or --all, not both/],
      [['promote', name, '1', '--name', 'x'], /--name selects jobs for --all/],
      [['export', name], /required option '-s, --state <state>'/],
      [['export', name, '--state', 'nope'], /--state must be one of/],
      [['export', name, '--state', 'waiting-children'], /--state waiting-children cannot be exported: a flow's parent added back as a plain job would run without its children/],
    ];
    await inParallel(cases, async ([args, message]) => {
      const r = await cli(args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(2);
      expect(r.stderr, args.join(' ')).to.match(message);
      expect(r.stderr.trim().split('\n'), args.join(' ')).to.have.length(1);
    });
  });

  it('retry <ids>: --dry-run changes nothing; unknown and wrong-state ids are named on stderr, exit 2 (an unknown id) or 1', async () => {
    await failJobs(3);
    await q.add('waits', {}); // id 4
    const dry = await cli(['retry', name, '1', '2', '--dry-run']);
    expect(dry.code, dry.stderr).to.equal(0);
    expect(dry.stdout).to.match(/would retry 2 failed jobs \(1, 2\)/);
    expect(await q.getFailedCount()).to.equal(3);
    const r = await cli(['retry', name, '1', '2', 'nope', '4']);
    expect(r.code).to.equal(2);
    expect(r.stdout).to.match(/: retried 2 failed jobs \(1, 2\)/);
    const errs = r.stderr.trim().split('\n');
    expect(errs).to.have.length(2);
    expect(errs[0]).to.match(/job nope not found in queue/);
    expect(errs[1]).to.match(/job 4 is waiting, not failed/);
    expect(await q.getJobState('1')).to.equal('waiting');
    expect(await q.getJobState('2')).to.equal('waiting');
    expect(await q.getJobState('3')).to.equal('failed');
    expect((await q.getJob('1'))?.attemptsMade).to.equal(0); // all its attempts again (the CLI spec)
    const json = await cli(['retry', name, '3', '1', '--json']);
    expect(json.code).to.equal(1);
    expect(JSON.parse(json.stdout)).to.deep.equal({ queue: name, dryRun: false, retried: ['3'], problems: [{ id: '1', reason: 'job 1 is waiting, not failed' }] });
  });

  it('retry --all-failed with --since and --name, and --dry-run', async () => {
    await failJobs(6, ['mail', 'sms']); // mail: 1 3 5; sms: 2 4 6
    await failedAgo('1', 2 * 3_600_000);
    const dry = await cli(['retry', name, '--all-failed', '--name', 'mail', '--dry-run', '--json']);
    expect(JSON.parse(dry.stdout)).to.deep.equal({ queue: name, dryRun: true, retried: ['5', '3', '1'], problems: [] });
    expect(await q.getFailedCount()).to.equal(6);
    const recent = await cli(['retry', name, '--all-failed', '--name', 'mail', '--since', '1h']);
    expect(recent.code, recent.stderr).to.equal(0);
    expect(recent.stdout).to.match(/retried 2 failed jobs \(5, 3\)/);
    expect(await q.getJobState('1')).to.equal('failed');
    const rest = await cli(['retry', name, '--all-failed']);
    expect(rest.stdout).to.match(/retried 4 failed jobs \(6, 4, 2, 1\)/);
    expect(await q.getFailedCount()).to.equal(0);
    const none = await cli(['retry', name, '--all-failed']);
    expect(none.code).to.equal(0);
    expect(none.stdout).to.match(/no failed jobs to retry/);
  });

  it('retry --all-failed over more jobs than a page, the summary capped', async () => {
    await failJobs(250);
    const r = await cli(['retry', name, '--all-failed']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout.split('\n').every((l) => l.length <= 80), r.stdout).to.equal(true); // wrapped to the width, lines after the first indented
    expect(r.stdout.replace(/\n {2}/g, ' ')).to.match(/retried 250 failed jobs \(250, 249, .*, 241, … 240 more \(--json lists them all\)\)/);
    expect(await q.getFailedCount()).to.equal(0);
    expect(await q.getWaitingCount()).to.equal(250);
  });

  it('promote <ids> and --all, with --dry-run and --name', async () => {
    await q.add('digest', {}, { delay: 3_600_000 }); // 1
    await q.add('digest', {}, { delay: 3_600_000 }); // 2
    await q.add('report', {}, { delay: 3_600_000 }); // 3
    await q.add('now', {}); // 4
    const dry = await cli(['promote', name, '1', '--dry-run']);
    expect(dry.stdout).to.match(/would promote 1 delayed job \(1\)/);
    expect(await q.getJobState('1')).to.equal('delayed');
    const one = await cli(['promote', name, '1', '4', 'ghost']);
    expect(one.code).to.equal(2);
    expect(one.stdout).to.match(/promoted 1 delayed job \(1\)/);
    expect(one.stderr).to.match(/job 4 is waiting, not delayed/);
    expect(one.stderr).to.match(/job ghost not found/);
    expect(await q.getJobState('1')).to.equal('waiting');
    const named = await cli(['promote', name, '--all', '--name', 'report', '--json']);
    expect(named.code, named.stderr).to.equal(0);
    expect(JSON.parse(named.stdout)).to.deep.equal({ queue: name, dryRun: false, promoted: ['3'], problems: [] });
    const all = await cli(['promote', name, '--all']);
    expect(all.stdout).to.match(/promoted 1 delayed job \(2\)/);
    expect(await q.getDelayedCount()).to.equal(0);
    const none = await cli(['promote', name, '--all']);
    expect(none.stdout).to.match(/no delayed jobs to promote/);
  });

  it('export round trip: enqueue --ndjson --envelope into another queue adds the same names, data and options', async () => {
    await q.add('resize', { w: 64, tags: ['a', 'ü'] }, { priority: 4, attempts: 3, backoff: { type: 'exponential', delay: 500 } });
    await q.add('lifo', { n: 2 }, { lifo: true, removeOnComplete: true, keepLogs: 5 });
    await q.add('plain', 42);
    await q.add('grouped', { g: 1 }, { group: { id: 'cust-7' }, removeOnFail: { count: 10 } });
    await q.add('custom', { c: 1 }, { jobId: 'order-9' });
    await q.add('skip', {}, { delay: 600_000 }); // delayed: not in the waiting export
    const states = ['waiting', 'prioritized'];
    const target = uniqueQueue('imported');
    const t = h.queue(target);
    for (const state of states) {
      const out = await cli(['export', name, '--state', state]);
      expect(out.code, out.stderr).to.equal(0);
      const imported = await cli(['enqueue', target, '--ndjson', '--envelope'], { input: out.stdout });
      expect(imported.code, imported.stderr).to.equal(0);
    }
    const shape = (j: Job) => ({ name: j.name, data: j.data, opts: { ...j.opts }, group: j.groupId });
    const before = (await q.getJobs(['waiting', 'prioritized'], 0, -1, true)).map(shape);
    const after = (await t.getJobs(['waiting', 'prioritized'], 0, -1, true)).map(shape);
    expect(after).to.have.length(5);
    expect(after).to.deep.equal(before);
    // no job id unless --keep-ids: the custom id was not carried
    expect(await t.getJob('order-9')).to.equal(undefined);
    const lines = (await cli(['export', name, '--state', 'waiting'])).stdout.trim().split('\n').map((l) => JSON.parse(l));
    for (const l of lines) expect(Object.keys(l)).to.deep.equal(['name', 'data', 'opts']);
    expect(lines.find((l) => l.name === 'grouped').opts).to.deep.equal({ removeOnFail: { count: 10 }, group: { id: 'cust-7' } });
  });

  it('export --keep-ids carries custom ids (a second import adds nothing); a delayed job carries the delay it has left', async () => {
    await q.add('custom', { c: 1 }, { jobId: 'order-9' });
    await q.add('auto', { a: 1 });
    await q.add('later', { l: 1 }, { delay: 3_600_000 });
    const out = await cli(['export', name, '--state', 'waiting', '--keep-ids']);
    const lines = out.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines).to.deep.equal([
      { name: 'custom', data: { c: 1 }, opts: { jobId: 'order-9' } },
      { name: 'auto', data: { a: 1 }, opts: {} },
    ]);
    const again = await cli(['enqueue', name, '--ndjson', '--envelope'], { input: out.stdout });
    expect(again.code, again.stderr).to.equal(0);
    expect(again.stderr).to.match(/1 job already existed/);
    const delayed = await cli(['export', name, '--state', 'delayed']);
    const d = JSON.parse(delayed.stdout);
    expect(d.name).to.equal('later');
    expect(d.opts.delay).to.be.within(3_500_000, 3_600_000);
    const target = uniqueQueue('later');
    const t = h.queue(target);
    expect((await cli(['enqueue', target, '--ndjson', '--envelope'], { input: delayed.stdout })).code).to.equal(0);
    const copy = (await t.getJobs('delayed'))[0];
    const [orig] = await q.getJobs('delayed');
    const origRun = Number(await q.client.zscore(q.keys.scheduled, orig.id));
    const copyRun = Number(await t.client.zscore(t.keys.scheduled, copy.id));
    expect(Math.abs(copyRun - origRun)).to.be.below(60_000);
  });

  it('export of failed jobs with --name and --since, oldest first', async () => {
    await failJobs(4, ['mail', 'sms']); // mail: 1 3; sms: 2 4
    await failedAgo('1', 2 * 3_600_000);
    const r = await cli(['export', name, '--state', 'failed', '--name', 'mail']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout.trim().split('\n').map((l) => JSON.parse(l).data.i)).to.deep.equal([0, 2]);
    const recent = await cli(['export', name, '--state', 'failed', '--name', 'mail', '--since', '1h']);
    expect(recent.stdout.trim().split('\n').map((l) => JSON.parse(l).data.i)).to.deep.equal([2]);
    const none = await cli(['export', name, '--state', 'completed']);
    expect(none.code).to.equal(0);
    expect(none.stdout).to.equal('');
  });

  it('a queue that never existed: a warning, nothing listed, no key left behind', async () => {
    const ghost = uniqueQueue('ghost');
    const r = await cli(['jobs', ghost, '--state', 'failed']);
    expect(r.code).to.equal(0);
    expect(r.stderr).to.match(/queue "ghost-[0-9a-f]+" does not exist/);
    const e = await cli(['export', ghost, '--state', 'waiting']);
    expect(e.code).to.equal(0);
    expect(e.stdout).to.equal('');
    expect(await q.client.keys(`glide:{${ghost}}*`)).to.deep.equal([]);
  });
});
