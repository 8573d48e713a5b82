/**
 * The operator's second day (issue 32): writes that would make a queue nobody used ask first (or
 * take --create); dry runs count what the real run does; confirmations say how many; a wrong id
 * exits 2; a job removed while it runs is told to its worker; an HTTP port is named as such; the
 * bundle's stack traces carry no build path; completion offers queue names from the server.
 */
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { Queue } from '../../src/engine/queue/queue.js';
import { decodeClaim, type ClaimReply } from '../../src/engine/jobs/job.js';
import { GLIDEMQ_BIN, NO_PROFILE, runCli, startCli } from '../helpers/cli.js';
import { runInPty } from '../helpers/pty.js';
import { buildProgram } from '../../src/cli/main.js';
import { completionScript } from '../../src/cli/completion.js';
import { uniqueQueue } from '../helpers/engine.js';
import { REPO_ROOT } from '../helpers/fixtures.js';
import { useServer, waitFor } from '../helpers/valkey.js';

describe("CLI: the operator's second day", function () {
  this.timeout(60000);
  const server = useServer();
  const cli = (args: string[]) => runCli(['-u', server().url, ...args]);
  const inPty = (args: string[], answer: string) =>
    runInPty([process.execPath, GLIDEMQ_BIN, '-u', server().url, ...args], '[y/N]', answer, { NO_COLOR: '1', ...NO_PROFILE, GLIDEMQ_URL: undefined });
  let admin: Redis;
  let name: string;
  let q: Queue;
  before(() => {
    admin = server().client();
  });
  after(() => admin.quit());
  beforeEach(() => {
    name = uniqueQueue('day2');
    q = new Queue(name, { connection: server().url });
  });
  afterEach(() => q.close());
  const keysOf = async (queue: string) => (await admin.keys('*')).filter((k) => k.includes(`{${queue}}`));

  /** `n` jobs finished with `outcome`, made by a worker's calls by hand (one fetch, the finishes pipelined). */
  async function finished(n: number, outcome: 'completed' | 'failed' = 'completed'): Promise<void> {
    await q.addBulk(Array.from({ length: n }, () => ({ name: 'x', data: {} })));
    const replies = (await q.client.fcall('glidemq_fetch', 1, q.keys.meta, 'c', n, 30_000, 1)) as ClaimReply[];
    const p = q.client.pipeline();
    for (const r of replies.slice(1)) {
      const { id, fence } = decodeClaim(r);
      p.fcall('glidemq_finish', 1, q.keys.meta, id, fence, 'c', outcome, outcome === 'failed' ? 'bad' : '1', -1, 0, '', 1, '0', 30_000, 1);
    }
    await p.exec();
    expect(await (outcome === 'completed' ? q.getCompletedCount() : q.getFailedCount())).to.equal(n);
  }

  describe('typos on writes: pause, limit and schedulers add on a queue that never existed', () => {
    const writes = (ghost: string) => [
      ['pause', ghost],
      ['limit', ghost, '--global-concurrency', '3'],
      ['schedulers', 'add', ghost, 'hb', '--every', '1m'],
    ];

    it('without a terminal: refused in one line naming the queue and --create, exit 2, nothing written', async () => {
      const ghost = uniqueQueue('ghost');
      const runs = await Promise.all(writes(ghost).map((args) => cli(args)));
      for (const [i, args] of writes(ghost).entries()) {
        const r = runs[i];
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(2);
        const lines = r.stderr.trim().split('\n');
        expect(lines, args.join(' ')).to.have.length(1);
        expect(lines[0]).to.contain(`queue "${ghost}" does not exist`).and.to.contain('--create');
        expect(await keysOf(ghost), args.join(' ')).to.deep.equal([]);
      }
    });

    it('with --create they make the queue', async () => {
      const runs = await Promise.all(writes(name).map((args) => cli([...args, '--create'])));
      for (const [i, args] of writes(name).entries()) {
        const r = runs[i];
        expect(r.code, `${args.join(' ')}: ${r.stderr}`).to.equal(0);
        expect(r.stderr, args.join(' ')).to.equal('');
      }
      expect(await q.isPaused()).to.equal(true);
      expect(await q.getGlobalConcurrency()).to.equal(3);
      expect(await q.getScheduler('hb')).to.not.equal(undefined);
    });

    it('on a terminal they ask: no writes nothing (exit 1), yes makes the queue', async () => {
      const [ghost, other] = [uniqueQueue('ghost'), uniqueQueue('ghost')];
      const [no, yes] = await Promise.all([inPty(['pause', ghost], 'n\n'), inPty(['pause', other], 'y\n')]);
      expect(no.output).to.contain(`queue "${ghost}" does not exist under prefix "glide"`).and.to.contain('create it? [y/N]');
      expect(no.code, no.output).to.equal(1);
      expect(await keysOf(ghost)).to.deep.equal([]);
      expect(yes.code, yes.output).to.equal(0);
      expect(yes.output).to.contain(`${other}: paused`);
    });
  });

  describe('bugs', () => {
    it('clean --dry-run counts what the real run removes, past one page and up to --limit', async () => {
      await finished(1721);
      const count = async (args: string[]) => JSON.parse((await cli(['clean', name, '--state', 'completed', '--json', ...args])).stdout).removed.length;
      expect(await Promise.all([count(['--dry-run']), count(['--dry-run', '--limit', '1500'])])).to.deep.equal([1721, 1500]);
      expect(await count(['--yes'])).to.equal(1721);
      expect(await q.getCompletedCount()).to.equal(0);
    });

    it('drain --delayed --dry-run does not call delayed jobs waiting', async () => {
      await q.add('w', {});
      await q.add('d', {}, { delay: 3_600_000 });
      expect((await cli(['drain', name, '--delayed', '--dry-run'])).stdout).to.equal(`${name}: would remove 2 waiting or delayed jobs\n`);
    });

    it('confirmations say how many: asked on a terminal, and in the refusal without one', async () => {
      await finished(3);
      await q.add('w', {});
      const [refused, obliterate, asked] = await Promise.all([cli(['clean', name, '--state', 'completed']), cli(['obliterate', name]), inPty(['drain', name], 'n\n')]);
      expect(refused.code).to.equal(2);
      expect(refused.stderr).to.contain(`refusing to remove 3 completed jobs of ${name} without --yes`);
      expect(obliterate.stderr).to.match(new RegExp(`refusing to obliterate queue ${name}: delete 4 jobs \\(\\d+ keys\\) without --yes`));
      expect(asked.output).to.contain(`drain queue ${name}: remove 1 waiting job? This cannot be undone. [y/N]`);
      expect(asked.code).to.equal(1);
      expect(await q.getJobCounts()).to.include({ completed: 3, waiting: 1 });
    });

    it('retry and promote of an id that does not exist exit 2; of a job in another state, 1', async () => {
      await q.add('w', {}); // 1, waiting
      // one in another state (1), one that does not exist (2)
      const [unknown, mixed] = await Promise.all([cli(['retry', name, '404']), cli(['promote', name, '1', '404'])]);
      expect(unknown.code).to.equal(2);
      expect(unknown.stderr).to.match(/job 404 not found in queue/);
      expect(mixed.code).to.equal(2);
      expect(mixed.stderr).to.match(/job 1 is waiting, not delayed/);
    });

    it('remove --force of a running job: the command says so, the worker aborts the run and says the job was removed', async () => {
      await q.add('long', {});
      const worker = startCli(['worker', join(REPO_ROOT, 'fixtures', 'processors', 'until-aborted.mjs'), '-q', name, '--sandbox', 'none', '--lock-duration', '400ms', '-u', server().url]);
      try {
        await waitFor(async () => (await q.getJobState('1')) === 'active', 'the job to run');
        const r = await cli(['remove', name, '1', '--force', '--yes']);
        expect(r.code, r.stderr).to.equal(0);
        expect(r.stdout).to.equal(`${name}: removed 1 job (1)\n1 was running: the worker is told at its next lock renewal and aborts the run\n`);
        await waitFor(() => /job 1 was removed while it ran/.test(worker.stderr()), `the worker to say so: ${worker.stderr()}`);
        expect(worker.stdout()).to.equal(''); // no outcome reported for a job that is gone
      } finally {
        await worker.stop();
      }
    });

    it('an HTTP port is named: host:port is not a Valkey server', async () => {
      const http: Server = createServer((_req, res) => res.end('hello')).listen(0, '127.0.0.1');
      await new Promise((resolve) => http.once('listening', resolve));
      try {
        const port = (http.address() as AddressInfo).port;
        const r = await runCli(['stats', 'q', '-u', `redis://127.0.0.1:${port}`]);
        expect(r.code).to.equal(2);
        expect(r.stderr).to.equal(`glidemq: 127.0.0.1:${port} is not a Valkey server (it answered like an HTTP server): check the host and port of the URL\n`);
        expect(r.stderr).to.not.match(/RESP|Please report/);
      } finally {
        http.close();
      }
    });

    it("the bundle's stack traces name it relative to the package, not where it was built", () => {
      // an installed copy elsewhere: the bundle, its code cache and its launcher
      const dir = mkdtempSync(join(tmpdir(), 'glidemq-installed-'));
      try {
        const cliDir = join(dir, 'dist', 'src', 'cli');
        mkdirSync(cliDir, { recursive: true });
        for (const f of ['bundle.cjs', 'bundle.cjs.cache', 'launch.js']) copyFileSync(join(REPO_ROOT, 'dist', 'src', 'cli', f), join(cliDir, f));
        writeFileSync(join(dir, 'package.json'), '{"type":"module"}');
        writeFileSync(join(dir, 'run.mjs'), "import { launch } from './dist/src/cli/launch.js';\nawait launch(process.argv);\n");
        const r = spawnSync(process.execPath, [join(dir, 'run.mjs'), 'stats', 'bad{name'], { encoding: 'utf8', env: { ...process.env, GLIDEMQ_DEBUG: '1', NO_COLOR: '1' } });
        const frames = r.stderr.split('\n').filter((l) => /^\s+at /.test(l) && l.includes('bundle.cjs'));
        expect(frames, r.stderr).to.not.be.empty;
        for (const f of frames) expect(f).to.match(/[ (]glidemq\/dist\/src\/cli\/bundle\.cjs:\d+:\d+\)?$/).and.not.to.contain(REPO_ROOT);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });

  describe('completion', () => {
    let dir: string;
    let script: string;
    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'glidemq-completion-'));
      // `glidemq` on PATH, as the scripts call it
      writeFileSync(join(dir, 'glidemq'), `#!/bin/sh\nexec '${process.execPath}' '${GLIDEMQ_BIN}' "$@"\n`, { mode: 0o755 });
      script = join(dir, 'glidemq.bash');
      writeFileSync(script, completionScript(await buildProgram(), 'bash'));
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    function bashOffers(words: string[]): string[] {
      const quoted = ['glidemq', ...words].map((w) => `'${w.replace(/'/g, `'\\''`)}'`).join(' ');
      const r = spawnSync('bash', ['--norc', '-c', `source '${script}'; COMP_WORDS=(${quoted}); COMP_CWORD=${words.length}; _glidemq; printf '%s\\n' "\${COMPREPLY[@]}"`], {
        encoding: 'utf8',
        env: { ...process.env, ...NO_PROFILE, GLIDEMQ_URL: undefined, PATH: `${dir}:${process.env.PATH}` },
      });
      expect(r.status, r.stderr).to.equal(0);
      return r.stdout.split('\n').filter(Boolean);
    }

    it('bash completes queue names from the server the line names, and --state values', async () => {
      const other = new Queue(uniqueQueue('day2'), { connection: server().url });
      await Promise.all([q.add('a', {}), other.add('a', {})]);
      await other.close();
      expect(bashOffers(['-u', server().url, 'stats', 'day2-'])).to.include.members([name, other.name]);
      expect(bashOffers(['--url', server().url, 'worker', 'x.js', '-q', name.slice(0, -1)])).to.deep.equal([name]);
      expect(bashOffers(['-u', 'redis://127.0.0.1:1', 'pause', ''])).to.deep.equal([]); // no server: nothing, quietly
      // no call to the server where no queue goes
      expect(bashOffers(['-u', server().url, 'stats', name, ''])).to.deep.equal([]);
      expect(bashOffers(['clean', 'q', '--state', ''])).to.deep.equal(['completed', 'failed']);
    });

    it('zsh and fish ask for queue names the same way', async () => {
      for (const shell of ['zsh', 'fish'] as const) expect(completionScript(await buildProgram(), shell), shell).to.contain(`completion ${shell} --queues`);
    });
  });
});
