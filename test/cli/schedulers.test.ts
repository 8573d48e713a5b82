import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { GLIDEMQ_BIN, runCli } from '../helpers/cli.js';
import { uniqueQueue } from '../helpers/engine.js';
import { runInPty } from '../helpers/pty.js';
import { useServer } from '../helpers/valkey.js';
import { inParallel } from '../helpers/parallel.js';

describe('glidemq schedulers (CLI)', function () {
  const server = useServer();
  const cli = (...args: string[]) => runCli([...args, '-u', server().url]);

  it('add --cron / --every, then list as a table and as JSON', async () => {
    const q = uniqueQueue('cli-sched');
    const cron = await cli('schedulers', 'add', q, 'digest', '--cron', '0 8 * * MON-FRI', '--tz', 'Europe/Berlin', '--data', '{"kind":"daily"}', '--create');
    expect(cron.code, cron.stderr).to.equal(0);
    expect(cron.stdout).to.match(/^scheduler digest on .*: cron 0 8 \* \* MON-FRI \(Europe\/Berlin\), next run \d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d\d:\d\d \(in /);
    const every = await cli('schedulers', 'add', q, 'heartbeat', '--every', '5m', '--priority', '2', '--job-name', 'ping', '--json');
    expect(every.code, every.stderr).to.equal(0);
    const hb = JSON.parse(every.stdout);
    expect(hb).to.include({ name: 'heartbeat', every: 300_000 });
    expect(hb.template).to.deep.equal({ name: 'ping', data: {}, opts: { priority: 2 } });

    // wide enough for one line per scheduler (output-width.test.ts holds it to 80 columns)
    const table = await runCli(['schedulers', q, '-u', server().url], { env: { COLUMNS: '200' } });
    expect(table.code, table.stderr).to.equal(0);
    expect(table.stdout).to.match(/│ heartbeat\s+│ every 5m\s+│ .*\(in \d/);
    expect(table.stdout).to.match(/│ digest\s+│ cron 0 8 \* \* MON-FRI \(Europe\/Berlin\)\s+│/);
    const list = await cli('schedulers', 'list', q, '--json');
    const doc = JSON.parse(list.stdout) as { name: string; nextRun: number }[];
    // the one due first is listed first, in both forms
    const order = [...doc].sort((x, y) => x.nextRun - y.nextRun).map((x) => x.name);
    expect(doc.map((x) => x.name)).to.deep.equal(order);
    expect(order.slice().sort()).to.deep.equal(['digest', 'heartbeat']);
    expect(table.stdout.indexOf(order[0])).to.be.lessThan(table.stdout.indexOf(order[1]));
    const digest = doc.find((x) => x.name === 'digest') as unknown as { template: { data: unknown } };
    expect(digest).to.include({ pattern: '0 8 * * MON-FRI', tz: 'Europe/Berlin' });
    expect(digest.template.data).to.deep.equal({ kind: 'daily' });
  });

  it('an empty queue lists nothing (exit 0), and --json is []', async () => {
    const q = uniqueQueue('cli-sched-empty');
    const r = await cli('schedulers', q);
    expect(r.code).to.equal(0);
    expect(r.stdout).to.match(/has no schedulers/);
    expect(JSON.parse((await cli('schedulers', q, '--json')).stdout)).to.deep.equal([]);
  });

  it('bad input is a usage error naming the problem (exit 2, one line)', async () => {
    const q = uniqueQueue('cli-sched-bad');
    const cases: [string[], RegExp][] = [
      [['schedulers', 'add', q, 'x'], /exactly one of --cron or --every/],
      [['schedulers', 'add', q, 'x', '--cron', '* * * * *', '--every', '1m'], /exactly one of --cron or --every/],
      [['schedulers', 'add', q, 'x', '--cron', '* * 32 * *'], /day of month field "32"/],
      [['schedulers', 'add', q, 'x', '--cron', '* * * * *', '--tz', 'Moon/Base'], /unknown time zone "Moon\/Base"/],
      [['schedulers', 'add', q, 'x', '--every', '5m', '--tz', 'UTC'], /--tz applies only with --cron/],
      [['schedulers', 'add', q, 'x', '--every', 'often'], /every/],
      [['schedulers', 'add', q, 'x', '--every', '1m', '--data', '{nope'], /--data/],
      [['schedulers', 'remove', q, 'missing', '--yes'], /has no scheduler named "missing"/],
    ];
    await inParallel(cases, async ([args, why]) => {
      const r = await cli(...args);
      expect(r.code, args.join(' ')).to.equal(2);
      // one error line (beside the warning that the queue, never used here, does not exist)
      expect(r.stderr.trim().split('\n').filter((l) => !l.startsWith('warning: queue')), args.join(' ')).to.have.length(1);
      expect(r.stderr, args.join(' ')).to.match(why);
    });
    const missingArg = await cli('schedulers', 'add', q);
    expect(missingArg.code).to.equal(2);
  });

  describe('remove (destructive)', () => {
    let q: string;
    beforeEach(async () => {
      q = uniqueQueue('cli-sched-rm');
      const r = await cli('schedulers', 'add', q, 'hb', '--every', '1m', '--create');
      expect(r.code, r.stderr).to.equal(0);
    });
    async function stillThere(): Promise<boolean> {
      const queue = new Queue(q, { connection: server().url });
      try {
        return (await queue.getScheduler('hb')) !== undefined;
      } finally {
        await queue.close();
      }
    }

    it('refuses without --yes when there is no terminal, and changes nothing', async () => {
      const r = await cli('schedulers', 'remove', q, 'hb');
      expect(r.code).to.equal(2);
      expect(r.stderr).to.match(/refusing to remove scheduler hb .* without --yes/);
      expect(await stillThere()).to.equal(true);
    });

    it('--dry-run shows what would go and changes nothing', async () => {
      const r = await cli('schedulers', 'remove', q, 'hb', '--dry-run');
      expect(r.code).to.equal(0);
      expect(r.stdout).to.match(/would remove scheduler hb .*every 1m/);
      expect(await stillThere()).to.equal(true);
    });

    it('--yes removes it; --json says so', async () => {
      const r = await cli('schedulers', 'remove', q, 'hb', '--yes', '--json');
      expect(r.code, r.stderr).to.equal(0);
      expect(JSON.parse(r.stdout)).to.deep.equal({ queue: q, name: 'hb', removed: true });
      expect(await stillThere()).to.equal(false);
    });

    it('on a terminal it asks; "n" keeps it, "y" removes it', async () => {
      const argv = [process.execPath, GLIDEMQ_BIN, 'schedulers', 'remove', q, 'hb', '-u', server().url];
      const no = await runInPty(argv, '[y/N]', 'n\n', { NO_COLOR: '1' });
      expect(no.output).to.include(`remove scheduler hb (every 1m) from queue ${q}? This cannot be undone. [y/N]`);
      expect(no.code).to.equal(1); // declined: nothing changed (src/cli/confirm.ts)
      expect(no.output).to.include('nothing changed');
      expect(await stillThere()).to.equal(true);
      const yes = await runInPty(argv, '[y/N]', 'y\n', { NO_COLOR: '1' });
      expect(yes.code, yes.output).to.equal(0);
      expect(yes.output).to.include(`removed scheduler hb from ${q}`);
      expect(await stillThere()).to.equal(false);
    });
  });
});
