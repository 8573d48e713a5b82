import { expect } from 'chai';
import { CONSUMER_GROUP } from '../../src/engine/shared/keys.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { runCli } from '../helpers/cli.js';
import { useCliSuite } from '../helpers/cli-suite.js';
import { uniqueQueue } from '../helpers/engine.js';
import { freePort, waitFor } from '../helpers/valkey.js';
import { inParallel } from '../helpers/parallel.js';

/** One queue's result, an entry of the report's `queues`. */
interface CheckJson {
  check: string;
  queue: string;
  ok: boolean;
  actual: number;
  threshold: number;
  rule: string;
  details: Record<string, any>;
}

/** What --json prints (CLI.md): the check, whether every queue passed, one result per queue. */
interface ReportJson {
  check: string;
  ok: boolean;
  queues: CheckJson[];
}

describe('CLI: check (health checks)', function () {
  this.timeout(60000);
  let q: Queue;
  let name: string;
  const { server, cli, harness } = useCliSuite('chk', (made) => ({ q, name } = made));
  /** The --json report of `args` (['check', what, ...]), its exit code and ok checked. */
  const report = async (args: string[]) => {
    const r = await cli(['--json', ...args]);
    expect(r.code, r.stderr).to.be.oneOf([0, 1]);
    const parsed = JSON.parse(r.stdout) as ReportJson;
    expect(Object.keys(parsed)).to.deep.equal(['check', 'ok', 'queues']);
    expect(parsed.check).to.equal(args[args.indexOf('check') + 1]);
    expect(parsed.ok, 'ok: every queue passed').to.equal(parsed.queues.every((q) => q.ok));
    expect(r.code, 'exit code follows ok').to.equal(parsed.ok ? 0 : 1);
    for (const q of parsed.queues) expect(q).to.include.all.keys('queue', 'ok', 'actual', 'threshold', 'rule', 'details');
    return parsed;
  };
  /** The one queue's result of a check naming one queue. */
  const json = async (args: string[]) => {
    const r = await report(args);
    expect(r.queues).to.have.length(1);
    return r.queues[0];
  };

  /** One line, saying the actual figure and the threshold. */
  const oneLine = (r: { stdout: string }, re: RegExp) => {
    const lines = r.stdout.trim().split('\n');
    expect(lines).to.have.length(1);
    expect(lines[0]).to.match(re);
  };

  it('backlog: waiting (paused too) and prioritized jobs against --max; delayed ones not counted', async () => {
    await q.add('a', {});
    await q.add('b', {});
    await q.add('p', {}, { priority: 3 });
    await q.add('d', {}, { delay: 60_000 });
    const pass = await cli(['check', 'backlog', name, '--max', '3']);
    expect(pass.code, pass.stderr).to.equal(0);
    oneLine(pass, new RegExp(`^pass  backlog ${name}: 3 jobs ready to run \\(max 3\\)$`));
    const fail = await cli(['check', 'backlog', name, '--max', '2']);
    expect(fail.code).to.equal(1);
    oneLine(fail, /^FAIL  backlog .*: 3 jobs ready to run \(max 2\)$/);
    await q.pause();
    const paused = await json(['check', 'backlog', name, '--max', '2']);
    expect(paused).to.deep.include({ check: 'backlog', queue: name, ok: false, actual: 3, threshold: 2, rule: '<=' });
    expect(paused.details).to.deep.equal({ waiting: 2, prioritized: 1, delayed: 1, paused: true });
  });

  it('latency: the age of the oldest waiting job against --max', async () => {
    const empty = await cli(['check', 'latency', name, '--max', '0']);
    expect(empty.code, empty.stderr).to.equal(0);
    oneLine(empty, /^pass  latency .*: no job waits \(max 0ms\)$/);
    await q.add('a', {});
    await waitFor(async () => ((await q.getOldestWaitingAge()) ?? 0) > 30, 'the job to wait over 30 ms');
    const fail = await json(['check', 'latency', name, '--max', '20ms']);
    expect(fail.ok).to.equal(false);
    expect(fail.actual).to.be.above(20);
    expect(fail.threshold).to.equal(20);
    const pass = await cli(['check', 'latency', name, '--max', '1h']);
    expect(pass.code).to.equal(0);
    oneLine(pass, /^pass  latency .*: the oldest waiting job has waited \d.* \(max 1h\)$/);
  });

  it('stuck: claims idle past --older whose worker is not in the registry; a live worker\'s claim is not', async () => {
    // job 1 is claimed by a consumer no worker registered (a worker that died)
    await q.add('orphan', {});
    await q.client.xgroup('CREATE', q.keys.stream, CONSUMER_GROUP, '0', 'MKSTREAM').catch(() => undefined);
    const read = await q.client.xreadgroup('GROUP', CONSUMER_GROUP, 'ghost-worker', 'COUNT', 1, 'STREAMS', q.keys.stream, '>');
    expect(read).to.not.equal(null);
    // job 2 runs in a live worker until released
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    harness.worker(name, async () => held);
    await q.add('running', {});
    await waitFor(async () => (await q.getJobState('2')) === 'active' && (await q.getWorkers()).length === 1, 'job 2 running in a registered worker');
    try {
      const fresh = await cli(['check', 'stuck', name]); // default --older: the lock duration (30s)
      expect(fresh.code, fresh.stderr).to.equal(0);
      oneLine(fresh, /^pass  stuck .*: 0 claims idle over 30s without a live worker \(max 0\)$/);
      // both claims idle past --older 50ms (the server's idle time, as the check reads it)
      await waitFor(async () => {
        const pending = (await q.client.xpending(q.keys.stream, CONSUMER_GROUP, '-', '+', 10)) as [string, string, number, number][];
        return pending.length === 2 && pending.every((p) => Number(p[2]) > 60);
      }, 'both claims idle over 60 ms');
      const r = await json(['check', 'stuck', name, '--older', '50ms']);
      expect(r).to.deep.include({ ok: false, actual: 1, threshold: 0 });
      expect(r.details.olderMs).to.equal(50);
      expect(r.details.liveWorkers).to.equal(1);
      expect(r.details.claimsOlder, 'the live worker\'s claim was looked at').to.equal(2);
      expect(r.details.claims).to.have.length(1);
      expect(r.details.claims[0]).to.include({ jobId: '1', consumer: 'ghost-worker', kind: 'stream' });
      const text = await cli(['check', 'stuck', name, '--older', '50ms']);
      expect(text.code).to.equal(1);
      oneLine(text, /^FAIL  stuck .*: 1 claim idle over 50ms without a live worker \(max 0\): 1 \(.*, ghost-worker\)$/);
    } finally {
      release();
    }
  });

  it('stuck: a flow parent still in waiting-children although its children all finished (what a crash between the two could leave)', async () => {
    await q.add('child', {}, { jobId: 'kid' });
    const w = harness.worker(name, async () => 'ok');
    await waitFor(async () => (await q.getJobState('kid')) === 'completed', 'the child completed');
    await w.close();
    // the parent waits for a child that completed: its settlement never reached the parent (written
    // by hand: the engine settles and moves a parent in one step, so only a crash could leave this)
    await q.add('parent', {}, { jobId: 'boss', delay: 3_600_000 });
    await q.client.zrem(q.keys.scheduled, 'boss');
    await q.client.hset(q.keys.job('boss'), 'state', 'waiting-children');
    await q.client.zadd(q.keys.waitingChildren, (await q.serverTime()) - 5000, 'boss');
    await q.client.sadd(q.keys.deps('boss'), q.keys.job('kid'));
    const young = await cli(['check', 'stuck', name]); // the default --older (30s) is longer than both
    expect(young.code, young.stderr).to.equal(0);
    oneLine(young, /^pass  stuck .*: 0 claims idle over 30s without a live worker \(max 0\)$/);
    await waitFor(async () => (await q.serverTime()) - Number(await q.client.hget(q.keys.job('kid'), 'finishedOn')) > 60, 'the child finished over 60 ms ago');
    const r = await json(['check', 'stuck', name, '--older', '50ms']);
    expect(r).to.deep.include({ ok: false, actual: 1, threshold: 0 });
    expect(r.details).to.deep.include({ stuckClaims: 0, stuckParents: 1, parentsWaiting: 1, parentsUnchecked: 0 });
    expect(r.details.parents).to.have.length(1);
    expect(r.details.parents[0]).to.deep.include({ jobId: 'boss', reason: 'children-finished', children: [q.keys.job('kid')] });
    const text = await cli(['check', 'stuck', name, '--older', '50ms']);
    expect(text.code).to.equal(1);
    oneLine(text, /^FAIL  stuck .*: 0 claims idle over 50ms without a live worker \(max 0\); 1 parent still waiting for children that all settled \(max 0\): boss \(\d+(\.\d)?s\)$/);
  });

  it('failed: failed attempts in the --since window against --max', async () => {
    harness.worker(name, async () => {
      throw new Error('boom');
    });
    await q.add('f1', {});
    await q.add('f2', {});
    await waitFor(async () => (await q.getFailedCount()) === 2, 'two failed jobs');
    const fail = await json(['check', 'failed', name, '--max', '1', '--since', '5m']);
    expect(fail).to.deep.include({ ok: false, actual: 2, threshold: 1 });
    expect(fail.details.minutes).to.equal(5);
    const pass = await cli(['check', 'failed', name, '--max', '2', '--since', '90s']);
    expect(pass.code, pass.stderr).to.equal(0);
    oneLine(pass, /^pass  failed .*: 2 failed attempts in the last 2 minutes \(max 2\)$/);
    const dflt = await json(['check', 'failed', name, '--max', '0']); // --since defaults to 1h
    expect(dflt.details.minutes).to.equal(60);
  });

  it('workers: live workers in the registry against --min', async () => {
    const none = await cli(['check', 'workers', name]);
    expect(none.code).to.equal(1);
    oneLine(none, /^FAIL  workers .*: 0 live workers \(min 1\)$/);
    harness.worker(name, async () => undefined);
    harness.worker(name, async () => undefined);
    await waitFor(async () => (await q.getWorkers()).length === 2, 'two registered workers');
    const two = await json(['check', 'workers', name, '--min', '2']);
    expect(two).to.deep.include({ ok: true, actual: 2, threshold: 2, rule: '>=' });
    expect(two.details.workers).to.have.length(2);
    expect((await cli(['check', 'workers', name, '--min', '3'])).code).to.equal(1);
  });

  it('a queue never used: a warning on stderr, the check still made', async () => {
    const ghost = uniqueQueue('ghost');
    const r = await cli(['check', 'backlog', ghost, '--max', '0']);
    expect(r.code).to.equal(0);
    expect(r.stderr).to.match(new RegExp(`queue "${ghost}" does not exist`));
  });

  it('several queues: one line each; exit 1 when any fails, --json lists them all', async () => {
    const other = uniqueQueue('chk');
    const q2 = harness.queue(other);
    await q.add('a', {});
    for (let i = 0; i < 3; i++) await q2.add('b', {});
    const text = await cli(['check', 'backlog', name, other, '--max', '2']);
    expect(text.code, text.stderr).to.equal(1);
    expect(text.stderr).to.equal('');
    expect(text.stdout.trim().split('\n')).to.deep.equal([
      `pass  backlog ${name}: 1 job ready to run (max 2)`,
      `FAIL  backlog ${other}: 3 jobs ready to run (max 2)`,
    ]);
    const r = await report(['check', 'backlog', name, other, '--max', '2']);
    expect(r.ok).to.equal(false);
    expect(r.queues.map((x) => [x.queue, x.ok, x.actual])).to.deep.equal([
      [name, true, 1],
      [other, false, 3],
    ]);
    const all = await report(['check', 'backlog', name, other, '--max', '3']);
    expect(all.ok).to.equal(true);
    expect(all.queues).to.have.length(2);
  });

  it('no queue named: every queue under the prefix; none there passes with nothing to check (workers fails: none live)', async () => {
    const prefix = uniqueQueue('pfx');
    const [a, b] = [uniqueQueue('a'), uniqueQueue('b')].sort();
    const qa = new Queue(a, { connection: server().url, prefix });
    const qb = new Queue(b, { connection: server().url, prefix });
    try {
      await qa.add('x', {});
      for (let i = 0; i < 3; i++) await qb.add('y', {});
      const r = await report(['--prefix', prefix, 'check', 'backlog', '--max', '2']);
      expect(r.ok).to.equal(false);
      expect(r.queues.map((x) => [x.queue, x.ok, x.actual]).sort()).to.deep.equal([
        [a, true, 1],
        [b, false, 3],
      ]);
      const text = await cli(['--prefix', prefix, 'check', 'backlog', '--max', '3']);
      expect(text.code, text.stderr).to.equal(0);
      expect(text.stdout.trim().split('\n').sort()).to.deep.equal([
        `pass  backlog ${a}: 1 job ready to run (max 3)`,
        `pass  backlog ${b}: 3 jobs ready to run (max 3)`,
      ]);
      const empty = await report(['--prefix', uniqueQueue('none'), 'check', 'backlog', '--max', '0']);
      expect(empty).to.deep.equal({ check: 'backlog', ok: true, queues: [] });
      const emptyText = await cli(['--prefix', uniqueQueue('none'), 'check', 'latency', '--max', '1s']);
      expect(emptyText.code, emptyText.stderr).to.equal(0);
      expect(emptyText.stdout).to.match(/^no queues under prefix "none-[0-9a-f]+" at .*: nothing to check\n$/);
      const noWorkers = await cli(['--prefix', uniqueQueue('none'), 'check', 'workers']);
      expect(noWorkers.code, noWorkers.stderr).to.equal(1);
      expect(noWorkers.stdout).to.match(/: no workers either\n$/);
    } finally {
      await Promise.all([qa.obliterate({ force: true }).catch(() => undefined), qb.obliterate({ force: true }).catch(() => undefined)]);
      await Promise.all([qa.close(), qb.close()]);
    }
  });

  it('bad flags and no server: one line on stderr, exit 2', async () => {
    const port = await freePort();
    const cases: [string[], RegExp][] = [
      [['check', 'backlog', name], /required option '--max <n>' not specified/],
      [['check', 'backlog', name, '--max', '-1'], /--max must be a whole number/],
      [['check', 'latency', name, '--max', 'soon'], /--max: "soon" is not a duration/],
      [['check', 'failed', name, '--max', '1', '--since', '2d'], /24h/],
      [['check', 'stuck', name, '--older', 'x'], /--older: "x" is not a duration/],
      [['check', 'workers', name, '--min', '1.5'], /--min must be a whole number/],
      [['check', 'nosuch', name], /unknown command 'nosuch'/],
      [['-u', `redis://127.0.0.1:${port}`, 'check', 'workers', name], /cannot reach/],
    ];
    await inParallel(cases, async ([args, message]) => {
      const r = args[0] === '-u' ? await runCli(args) : await cli(args);
      expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(2);
      expect(r.stderr, args.join(' ')).to.match(message);
      expect(r.stderr.trim().split('\n'), args.join(' ')).to.have.length(1);
    });
  });

  it('--help of each check shows its example and the exit codes', async () => {
    await inParallel(['backlog', 'latency', 'stuck', 'failed', 'workers'], async (c) => {
      const r = await cli(['check', c, '--help']);
      expect(r.code).to.equal(0);
      expect(r.stdout).to.include(`$ glidemq check ${c} `);
      expect(r.stdout).to.include(`Usage: glidemq check ${c} [options] [queues...]`);
      expect(r.stdout).to.match(/Exit code: 0 when the check passes on every queue, 1 when it fails on any/);
    });
  });
});
