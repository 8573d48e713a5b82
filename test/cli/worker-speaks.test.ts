/**
 * `glidemq worker` says what it does on stderr: its start (queue, server without the password,
 * concurrency, version), the stop a signal asked for, a connection lost and restored, the queue
 * paused and resumed, what keeps --exit-when-idle waiting, and why it exited; --log-json says the
 * same as JSON records. Against a real server, killed and restarted for the connection lines.
 */
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Broadcast } from '../../src/engine/broadcast/broadcast.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { GLIDEMQ_BIN, runCli } from '../helpers/cli.js';
import { REPO_ROOT } from '../helpers/fixtures.js';
import { uniqueQueue } from '../helpers/engine.js';
import { freePort, useServer, waitFor } from '../helpers/valkey.js';

const processor = (file: string) => join(REPO_ROOT, 'fixtures', 'processors', file);
const VERSION = (JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as { version: string }).version;
const PASSWORD = 'sp3ak-s3cret';

/** A CLI worker left running: its output so far, and its exit. */
class RunningCli {
  stdout = '';
  stderr = '';
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly child: ChildProcess;

  constructor(args: string[]) {
    const env = { ...process.env, GLIDEMQ_URL: undefined, GLIDEMQ_PASSWORD: undefined, NO_COLOR: '1' };
    this.child = spawn(process.execPath, [GLIDEMQ_BIN, ...args], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child.stdout!.on('data', (d) => (this.stdout += d));
    this.child.stderr!.on('data', (d) => (this.stderr += d));
    this.exited = new Promise((resolve) => this.child.once('close', (code, signal) => resolve({ code, signal })));
  }

  async saw(pattern: RegExp | string, what = String(pattern)): Promise<void> {
    const has = () => (typeof pattern === 'string' ? this.stderr.includes(pattern) : pattern.test(this.stderr));
    await waitFor(() => has() || this.child.exitCode !== null, `worker stderr to show ${what}`);
    expect(has(), `${what}\nstderr:\n${this.stderr}`).to.equal(true);
  }

  signal(sig: NodeJS.Signals): void {
    this.child.kill(sig);
  }

  /** Ends a worker a failed test left running (SIGKILL, this process only). */
  kill(): void {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
  }

  /** The stderr lines as JSON records (every line must be one). */
  records(): Record<string, unknown>[] {
    return this.stderr
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  }
}

describe('CLI: a worker that speaks', function () {
  this.timeout(60000);
  // a password (never shown) and persistence (the function library survives the restart)
  const server = useServer({ password: PASSWORD, persistence: 'aof-always' });
  const url = () => `redis://default:${PASSWORD}@127.0.0.1:${server().port}`;
  const shown = () => `redis://default:***@127.0.0.1:${server().port}`;
  let name: string;
  let q: Queue;
  const running: RunningCli[] = [];
  const worker = (...args: string[]) => {
    const w = new RunningCli(['-u', url(), 'worker', ...args]);
    running.push(w);
    return w;
  };
  beforeEach(() => {
    name = uniqueQueue('speak');
    q = new Queue(name, { connection: url() });
  });
  afterEach(async () => {
    for (const w of running.splice(0)) w.kill();
    await q.close();
  });

  it('says it started: queue, server without the password, concurrency, version; and why it exited when idle', async () => {
    await q.add('a', {});
    const r = await runCli(['-u', url(), 'worker', processor('echo.mjs'), '-q', name, '-c', '3', '--exit-when-idle']);
    expect(r.code, r.stderr).to.equal(0);
    // (fitted to 80 columns: a line that goes on is indented by two spaces)
    expect(r.stderr.replace(/\n {2}/g, ' ')).to.contain(`worker started: queue ${name} on ${shown()}, concurrency 3, glidemq ${VERSION}, pid `);
    expect(r.stderr).to.match(new RegExp(`exited: nothing left to do in queue ${name} \\(--exit-when-idle\\); 1 job finished \\(1 completed, 0 failed\\) in `));
    expect(r.stdout + r.stderr).not.to.contain(PASSWORD);
    expect(r.stdout).to.match(/^✓ 1 a \d+ ms\n$/); // stdout keeps the job lines only
  });

  it('SIGTERM with a job running: "stopping: waiting for 1 running job", exits 0 once it finished', async () => {
    await q.add('slow', { ms: 1500 });
    const w = worker(processor('slow.mjs'), '-q', name);
    await w.saw('worker started');
    await waitFor(async () => (await q.getActiveCount()) === 1, 'the job to run');
    w.signal('SIGTERM');
    await w.saw('stopping: waiting for 1 running job (SIGTERM; a second signal stops at once)');
    const { code } = await w.exited;
    expect(code, w.stderr).to.equal(0);
    expect(w.stdout).to.match(/✓ 1 slow/);
    expect(w.stderr).to.match(/exited: on SIGTERM; 1 job finished \(1 completed, 0 failed\)/);
    expect(await q.getJobCounts()).to.include({ active: 0, completed: 1 });
  });

  it('a second signal says it stops now and exits 130', async () => {
    await q.add('h', {});
    const w = worker(processor('hang.mjs'), '-q', name);
    await waitFor(async () => (await q.getActiveCount()) === 1, 'the job to run');
    w.signal('SIGINT');
    await w.saw('stopping: waiting for 1 running job (SIGINT');
    w.signal('SIGINT');
    const { code } = await w.exited;
    expect(code).to.equal(130);
    expect(w.stderr).to.contain('stopping now (second SIGINT): 1 running job left unfinished');
  });

  it('says when the connection to the server is lost and when it is back, and goes on working', async () => {
    const w = worker(processor('echo.mjs'), '-q', name);
    await w.saw('worker started');
    await server().kill();
    await w.saw(`lost the connection to ${shown()}`);
    await server().start();
    await w.saw(new RegExp(`connection to ${shown().replace(/[*.]/g, '\\$&')} restored after \\d`), 'restored');
    await q.add('after', {});
    await waitFor(() => w.stdout.includes('after'), 'the job added after the restart to run');
    w.signal('SIGTERM');
    expect((await w.exited).code, w.stderr).to.equal(0);
    expect(w.stderr).not.to.contain(PASSWORD);
    expect(w.stderr.indexOf('lost the connection')).to.be.lessThan(w.stderr.indexOf('restored after'));
  });

  it('no server yet: says it is still connecting, and a signal ends it with exit 0', async () => {
    const w = new RunningCli(['-u', `redis://default:${PASSWORD}@127.0.0.1:${await freePort()}`, 'worker', processor('echo.mjs'), '-q', name]);
    running.push(w);
    await w.saw(/still connecting to redis:\/\/default:\*\*\*@127\.0\.0\.1:\d+ \(ECONNREFUSED\); retrying/, 'still connecting');
    w.signal('SIGTERM');
    expect((await w.exited).code, w.stderr).to.equal(0);
    expect(w.stderr).to.contain('exited: on SIGTERM; 0 jobs finished');
    expect(w.stderr).not.to.contain('worker started');
    expect(w.stderr).not.to.contain(PASSWORD);
  });

  it('says when the queue is paused and when it is resumed', async () => {
    const w = worker(processor('echo.mjs'), '-q', name);
    await w.saw('worker started');
    await q.pause();
    await q.add('held', {}); // the worker finds the pause when it goes for this job
    await w.saw(`queue ${name} is paused: no job is taken until it is resumed (glidemq resume ${name})`);
    expect(w.stdout).to.equal('');
    await q.resume();
    await w.saw(`queue ${name} resumed: taking jobs again`);
    await waitFor(() => w.stdout.includes('held'), 'the held job to run after the resume');
    w.signal('SIGTERM');
    expect((await w.exited).code, w.stderr).to.equal(0);
  });

  it('--exit-when-idle says which delayed jobs it waits for, and when the first is due', async () => {
    await q.add('now', {});
    await q.add('later', {}, { delay: 3000 }); // due after the worker started, however slow it starts
    const r = await runCli(['-u', url(), 'worker', processor('echo.mjs'), '-q', name, '--exit-when-idle']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stderr).to.match(new RegExp(`waiting: 1 delayed job in queue ${name}, next due in (\\d+ms|\\d(\\.\\d)?s) \\(--exit-when-idle exits once they have run\\)`));
    expect(r.stderr).to.match(/exited: nothing left to do .*; 2 jobs finished \(2 completed, 0 failed\)/);
    expect(r.stdout).to.contain('later');
  });

  it('--log-json: every line is a JSON record {ts, level, event, message, ...}', async () => {
    await q.add('later', {}, { delay: 3000 });
    const r = await runCli(['-u', url(), 'worker', processor('echo.mjs'), '-q', name, '--exit-when-idle', '--log-json', '-c', '2']);
    expect(r.code, r.stderr).to.equal(0);
    const lines = r.stderr.trim().split('\n');
    const records = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    for (const rec of records) {
      expect(rec).to.include.keys('ts', 'level', 'event', 'message');
      expect(Number.isNaN(Date.parse(String(rec.ts)))).to.equal(false);
    }
    expect(records.map((rec) => rec.event)).to.deep.equal(['start', 'waiting', 'exit']);
    expect(records[0]).to.include({ level: 'info', queue: name, server: shown(), concurrency: 2, version: VERSION, pid: records[0].pid });
    expect(records[1]).to.include({ delayed: 1 });
    expect(records[1].nextDueInMs).to.be.a('number');
    expect(records[2]).to.include({ reason: 'idle', code: 0, completed: 1, failed: 0 });
    expect(r.stderr).not.to.contain(PASSWORD);
    expect(r.stdout).to.match(/later/); // the job lines stay on stdout, as text
  });

  it('--log-json: pause, resume, a stop by signal and the exit are records too', async () => {
    const w = worker(processor('echo.mjs'), '-q', name, '--log-json');
    await w.saw('"event":"start"');
    await q.pause();
    await q.add('held', {});
    await w.saw('"event":"queue-paused"');
    await q.resume();
    await w.saw('"event":"queue-resumed"');
    await waitFor(() => w.stdout.includes('held'), 'the held job to run');
    w.signal('SIGTERM');
    expect((await w.exited).code, w.stderr).to.equal(0);
    const records = w.records();
    // (the queue was new when the worker started: it said so first)
    expect(records.map((rec) => rec.event)).to.deep.equal(['queue-unknown', 'start', 'queue-paused', 'queue-resumed', 'stopping', 'exit']);
    expect(records[2]).to.include({ level: 'warn', queue: name });
    expect(records[4]).to.include({ reason: 'signal', signal: 'SIGTERM', running: 0 });
    expect(records[5]).to.include({ reason: 'signal', signal: 'SIGTERM', code: 0, completed: 1 });
  });

  it('--log-json on a queue never used: the warning is a record as well', async () => {
    const r = await runCli(['-u', url(), 'worker', processor('echo.mjs'), '-q', name, '--exit-when-idle', '--log-json']);
    expect(r.code, r.stderr).to.equal(0);
    const events = r.stderr.trim().split('\n').map((l) => (JSON.parse(l) as { event: string }).event);
    expect(events).to.deep.equal(['queue-unknown', 'start', 'exit']);
  });

  it('a broadcast worker speaks the same way', async () => {
    const bname = uniqueQueue('speakb');
    const b = new Broadcast(bname, { connection: url() });
    try {
      await b.publish('orders.created', { n: 1 });
      const r = await runCli(['-u', url(), 'worker', processor('echo.mjs'), '--broadcast', bname, '--subscription', 'audit', '--start-from', 'earliest', '--exit-when-idle']);
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stderr.replace(/\n {2}/g, ' ')).to.contain(`worker started: subscription audit of broadcast ${bname} on ${shown()}, concurrency 1, glidemq ${VERSION}`);
      expect(r.stderr).to.match(/exited: nothing left to do in subscription audit of broadcast .*; 1 message finished \(1 completed, 0 failed\)/);
    } finally {
      await b.close();
    }
  });
});
