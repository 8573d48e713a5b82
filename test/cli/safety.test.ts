/**
 * The CLI's safety rules, each on a real server: a database the server does not have is refused
 * (never database 0), output into a closed pipe ends quietly, --fail-fast hands back what it has
 * not started, destructive commands are alike (--dry-run, --yes, a question on a terminal, errors
 * on stderr), a queue nobody used is named and a read leaves no key, a global concurrency limit
 * can be seen and cleared, and a --job-id that exists already says so.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { Queue } from '../../src/engine/queue/queue.js';
import { ConnectionError } from '../../src/engine/shared/errors.js';
import { GLIDEMQ_BIN, runCli, type CliResult } from '../helpers/cli.js';
import { inParallel } from '../helpers/parallel.js';
import { REPO_ROOT } from '../helpers/fixtures.js';
import { uniqueQueue } from '../helpers/engine.js';
import { runInPty } from '../helpers/pty.js';
import { useServer } from '../helpers/valkey.js';

const processor = (file: string) => join(REPO_ROOT, 'fixtures', 'processors', file);

/** Every key of database `db` (the test server is this file's own). */
async function keysOf(client: Redis, db = 0): Promise<string[]> {
  await client.select(db);
  const keys = await client.keys('*');
  await client.select(0);
  return keys.sort();
}

/**
 * Runs glidemq with its stdout a pipe whose reader is gone before the first write (what
 * `glidemq ... | head -1` comes to once head has its line).
 */
function runIntoClosedPipe(args: string[], input = ''): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [GLIDEMQ_BIN, ...args], {
      cwd: REPO_ROOT,
      env: { ...process.env, GLIDEMQ_URL: undefined, NO_COLOR: '1' },
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    child.stdout.destroy(); // the reader closes its end
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`glidemq ${args.join(' ')} did not exit\n${stderr}`));
    }, 20000);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: '', stderr });
    });
    child.stdin.end(input);
  });
}

describe('CLI: safety', function () {
  this.timeout(60000);
  // four databases: 0 to 3
  const server = useServer({ config: ['databases 4'] });
  const cli = (args: string[], input?: string) => runCli(['-u', server().url, ...args], { input });
  let admin: Redis;
  let name: string;
  let q: Queue;
  before(() => {
    admin = server().client();
  });
  after(() => admin.quit());
  beforeEach(() => {
    name = uniqueQueue('safe');
    q = new Queue(name, { connection: server().url });
  });
  afterEach(() => q.close());

  describe('a database the server does not have', () => {
    const COMMANDS = [
      ['stats', 'q'],
      ['enqueue', 'q', '{}'],
      ['obliterate', 'q', '--yes'],
      ['drain', 'q', '--yes'],
      ['remove', 'q', '1', '--yes'],
      ['pause', 'q'],
      ['limit', 'q', '--global-concurrency', '2'],
      ['job', 'q', '1'],
      ['queues'],
      ['metrics', 'q'],
      ['pel', 'q'],
      ['heal', '--all'],
      ['schedulers', 'list', 'q'],
      ['publish', 'b', 'a.b', '{}'],
      ['library', 'status'],
      ['audit'],
      ['worker', processor('echo.mjs'), '-q', 'q', '--exit-when-idle'],
    ];

    it('is refused by every command with exit 2 naming the database, and nothing lands in database 0', async () => {
      await q.add('keep', {}); // database 0 holds a queue an obliterate there would delete
      const before = await keysOf(admin);
      const runs = [4, 99].flatMap((db) => COMMANDS.map((args) => ({ db, args })));
      await inParallel(runs, async ({ db, args }) => {
        const r = await runCli(['-u', `${server().url}/${db}`, ...args]);
        const what = `/${db} ${args.join(' ')}`;
        expect(r.code, `${what}: ${r.stderr}`).to.equal(2);
        expect(r.stderr, what).to.contain(`has no database ${db}`);
        expect(r.stderr, what).to.match(/^glidemq: .*\n$/); // one line
      });
      expect(await keysOf(admin)).to.deep.equal(before);
    });

    it('a database it has is used, not database 0', async () => {
      const other = uniqueQueue('db3');
      const r = await runCli(['-u', `${server().url}/3`, 'enqueue', other, '{}']);
      expect(r.code, r.stderr).to.equal(0);
      expect((await keysOf(admin, 3)).some((k) => k.includes(other))).to.equal(true);
      expect((await keysOf(admin, 0)).some((k) => k.includes(other))).to.equal(false);
    });

    it('the library refuses it too: a Queue fails with the database named, and writes nothing', async () => {
      const before = await keysOf(admin);
      const bad = new Queue('q', { connection: `${server().url}/99` });
      try {
        const err = await bad.add('x', {}).then(() => undefined, (e: unknown) => e);
        expect(err).to.be.instanceOf(ConnectionError);
        expect((err as ConnectionError).code).to.equal('ERR_DATABASE');
        expect((err as Error).message).to.contain('has no database 99');
      } finally {
        await bad.close();
      }
      expect(await keysOf(admin)).to.deep.equal(before);
    });
  });

  describe('output into a pipe whose reader closed', () => {
    it('ends quietly with 141 (as a tool killed by SIGPIPE), no stack trace: audit, metrics, queues, enqueue --ndjson', async () => {
      await q.add('a', {});
      const lines = Array.from({ length: 2000 }, (_, i) => JSON.stringify({ i })).join('\n');
      const runs = [
        ['-u', server().url, 'audit'],
        ['-u', server().url, 'metrics', name, '--table', '--minutes', '1440'],
        ['-u', server().url, 'queues'],
        ['-u', server().url, 'enqueue', name, '--ndjson'],
      ];
      for (const args of runs) {
        const r = await runIntoClosedPipe(args, args.includes('--ndjson') ? lines : '');
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(141);
        expect(r.stderr, args.join(' ')).to.not.match(/EPIPE|Error|at /);
      }
      // what the command did stays done: every job was added before the ids were written
      expect((await q.getJobCounts()).waiting).to.equal(2001);
    });
  });

  describe('worker --fail-fast', () => {
    it('stops at the first job failed for good, hands back the claims it had not started (no attempt, no stall) and says why', async () => {
      for (let i = 0; i < 4; i++) await q.add('j', { i });
      const r = await cli(['worker', processor('always-fail.mjs'), '-q', name, '--fail-fast']);
      expect(r.code, r.stderr).to.equal(1);
      expect(r.stdout.trim().split('\n')).to.have.length(1); // one job ran
      expect(r.stderr).to.match(/stopping \(--fail-fast\): 1 j failed for good: this processor always fails/);
      expect(await q.getJobCounts()).to.include({ failed: 1, waiting: 3, active: 0 });
      for (const id of ['2', '3', '4']) {
        const job = await q.getJob(id);
        expect(job, id).to.include({ state: 'waiting', attemptsMade: 0, stalledCount: 0 });
      }
      // nothing is left claimed for stalled recovery
      const pel = await cli(['pel', name, '--json']);
      expect(pel.code, pel.stderr).to.equal(0);
      expect(JSON.stringify(JSON.parse(pel.stdout))).to.not.match(/"id":"[234]"/);
      // and the next worker runs them
      const next = await cli(['worker', processor('echo.mjs'), '-q', name, '--exit-when-idle']);
      expect(next.code, next.stderr).to.equal(0);
      expect((await q.getJobCounts()).completed).to.equal(3);
    });
  });

  describe('destructive commands', () => {
    it('drain, clean, obliterate, remove and schedulers remove all take --dry-run and --yes', async () => {
      await inParallel([['drain'], ['clean'], ['obliterate'], ['remove'], ['schedulers', 'remove'], ['cancel']], async (args) => {
        const r = await runCli([...args, '--help']);
        expect(r.stdout, args.join(' ')).to.contain('--dry-run');
        expect(r.stdout, args.join(' ')).to.contain('-y, --yes');
      });
    });

    it('remove --dry-run names what it would remove and changes nothing; an unknown id is an error on stderr', async () => {
      await q.add('a', {});
      await q.add('b', {});
      const dry = await cli(['remove', name, '1', '404', '--dry-run']);
      expect(dry.code).to.equal(2);
      expect(dry.stdout).to.equal(`${name}: would remove 1 job (1)\n`);
      expect(dry.stderr).to.equal(`glidemq: not found in queue ${name}: 404 (finished jobs may have been removed by retention)\n`);
      const json = await cli(['remove', name, '1', '--dry-run', '--json']);
      expect(json.code).to.equal(0);
      expect(JSON.parse(json.stdout)).to.deep.equal({ queue: name, removed: ['1'], missing: [], dryRun: true });
      expect((await q.getJobCounts()).waiting).to.equal(2);
      const real = await cli(['remove', name, '1', '404', '--yes']);
      expect(real.code).to.equal(2);
      expect(real.stdout).to.equal(`${name}: removed 1 job (1)\n`);
      expect(real.stderr).to.match(/^glidemq: not found in queue .*: 404/);
      expect(await q.getJob('1')).to.equal(undefined);
    });

    it('remove of an active job without --force removes nothing at all (the other ids neither)', async () => {
      await q.add('a', {});
      await q.add('b', {});
      await q.client.fcall('glidemq_fetch', 1, q.keys.meta, 'c', 1, 30_000, 1); // job 1 is active
      const r = await cli(['remove', name, '2', '1', '--yes']);
      expect(r.code).to.equal(2);
      expect(r.stderr).to.match(/being processed \(1\): nothing removed.*--force/);
      expect(r.stdout).to.equal('');
      expect(await q.getJob('2')).to.not.equal(undefined);
      const dry = await cli(['remove', name, '2', '1', '--force', '--dry-run', '--json']);
      expect(JSON.parse(dry.stdout)).to.deep.equal({ queue: name, removed: ['2', '1'], missing: [], dryRun: true });
    });

    it('on a terminal remove asks; anything but yes changes nothing, says so and exits 1', async () => {
      await q.add('a', {});
      const argv = [process.execPath, GLIDEMQ_BIN, '-u', server().url, 'remove', name, '1'];
      const no = await runInPty(argv, '[y/N]', 'n\n', { NO_COLOR: '1' });
      expect(no.output).to.include(`remove 1 job from ${name}? This cannot be undone. [y/N]`);
      expect(no.output).to.include('nothing changed');
      expect(no.code).to.equal(1);
      expect(await q.getJob('1')).to.not.equal(undefined);
      const yes = await runInPty(argv, '[y/N]', 'y\n', { NO_COLOR: '1' });
      expect(yes.code, yes.output).to.equal(0);
      expect(await q.getJob('1')).to.equal(undefined);
    });
  });

  describe('a queue that never existed', () => {
    const warning = (queue: string) => `warning: queue "${queue}" does not exist under prefix "glide"`;
    const keysNaming = async (queue: string) => (await admin.keys('*')).filter((k) => k.includes(`{${queue}}`));

    it('reads warn on stderr, exit 0 and leave no key behind', async () => {
      const ghost = uniqueQueue('ghost');
      const reads = [
        ['stats', ghost],
        ['stats', ghost, '--json'],
        ['metrics', ghost],
        ['schedulers', 'list', ghost],
        ['limit', ghost],
        ['drain', ghost, '--dry-run'],
        ['remove', ghost, '1', '--dry-run'],
      ];
      for (const args of reads) {
        const r = await cli(args);
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(args[0] === 'remove' ? 2 : 0);
        expect(r.stderr, args.join(' ')).to.contain(warning(ghost));
        expect(await keysNaming(ghost), args.join(' ')).to.deep.equal([]);
      }
      const json = await cli(['stats', ghost, '--json']);
      expect(JSON.parse(json.stdout)).to.include({ waiting: 0, globalConcurrency: null });
    });

    it('pause --create pauses a queue before its first job (test/cli/second-day: without --create it asks); a known queue gets no warning', async () => {
      const ghost = uniqueQueue('ghost');
      const r = await cli(['pause', ghost, '--create']);
      expect(r.code).to.equal(0);
      expect(r.stderr).to.equal('');
      expect(r.stdout).to.equal(`${ghost}: paused\n`);
      const again = await cli(['resume', ghost]);
      expect(again.stderr).to.equal('');
      await q.add('a', {});
      expect((await cli(['stats', name])).stderr).to.equal('');
    });

    it('worker -q with a typo warns at its start', async () => {
      const typo = uniqueQueue('typo');
      const r = await cli(['worker', processor('echo.mjs'), '-q', typo, '--exit-when-idle']);
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stderr).to.contain(warning(typo));
      await q.add('a', {});
      const known = await cli(['worker', processor('echo.mjs'), '-q', name, '--exit-when-idle']);
      expect(known.stderr).to.not.contain('warning');
    });
  });

  describe('global concurrency', () => {
    it('what `worker --global-concurrency` leaves in the queue shows in stats, and `limit` sets and clears it', async () => {
      await q.add('a', {});
      const w = await cli(['worker', processor('echo.mjs'), '-q', name, '--global-concurrency', '3', '--exit-when-idle']);
      expect(w.code, w.stderr).to.equal(0);
      expect(JSON.parse((await cli(['stats', name, '--json'])).stdout).globalConcurrency).to.equal(3);
      // (the line is wrapped to the width: compare with the line breaks as spaces)
      expect((await cli(['stats', name])).stdout.replace(/\s+/g, ' ')).to.contain(`global concurrency 3 (at most 3 active at once across all workers); change or clear it with \`glidemq limit ${name}\``);
      expect((await cli(['limit', name])).stdout).to.equal(`${name}: global concurrency 3 (at most 3 active at once across all workers)\n`);
      const set = await cli(['limit', name, '--global-concurrency', '5', '--json']);
      expect(JSON.parse(set.stdout)).to.deep.equal({ queue: name, globalConcurrency: 5, changed: true });
      expect(await q.getGlobalConcurrency()).to.equal(5);
      const cleared = await cli(['limit', name, '--clear']);
      expect(cleared.stdout).to.equal(`${name}: no global concurrency limit (was 5)\n`);
      expect(await q.getGlobalConcurrency()).to.equal(null);
      expect((await cli(['stats', name])).stdout).to.not.contain('global concurrency');
      const both = await cli(['limit', name, '--clear', '--global-concurrency', '2']);
      expect(both.code).to.equal(2);
      expect(both.stderr).to.contain('not both');
      const zero = await cli(['limit', name, '--global-concurrency', '0']);
      expect(zero.code).to.equal(2);
    });
  });

  describe('enqueue --job-id of a job that exists', () => {
    it('prints the id and says on stderr that nothing was added; --json has created: false', async () => {
      const first = await cli(['enqueue', name, '{"v":1}', '--job-id', 'once']);
      expect(first.stdout).to.equal('once\n');
      expect(first.stderr).to.equal('');
      const second = await cli(['enqueue', name, '{"v":2}', '--job-id', 'once']);
      expect(second.code).to.equal(0);
      expect(second.stdout).to.equal('once\n');
      expect(second.stderr).to.contain(`job once already existed in ${name}: nothing added`);
      expect((await q.getJob('once'))?.data).to.deep.equal({ v: 1 });
      const json = await cli(['enqueue', name, '{}', '--job-id', 'once', '--json']);
      expect(JSON.parse(json.stdout)).to.include({ id: 'once', created: false });
      const bulk = await cli(['enqueue', name, '--ndjson', '--envelope'], '{"opts":{"jobId":"once"}}\n{"opts":{"jobId":"fresh"}}\n');
      expect(bulk.code, bulk.stderr).to.equal(0);
      expect(bulk.stdout).to.equal('once\nfresh\n');
      expect(bulk.stderr).to.contain('1 job already existed');
    });
  });
});
