import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { isAlive } from '../../src/engine/connecting/dev-server.js';
import { GLIDEMQ_BIN, runCli } from '../helpers/cli.js';
import { freePort, waitFor } from '../helpers/valkey.js';

function pidIn(cwd: string): number | undefined {
  const file = join(cwd, '.glidemq', 'valkey.pid');
  return existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) : undefined;
}

async function configOf(port: number, names: string[]): Promise<Record<string, string>> {
  const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
  try {
    const out: Record<string, string> = {};
    for (const n of names) {
      const [, v] = (await c.call('CONFIG', 'GET', n)) as string[];
      out[n] = v;
    }
    return out;
  } finally {
    c.disconnect();
  }
}

describe('glidemq dev (CLI)', function () {
  this.timeout(60000);
  const dirs: string[] = [];
  const started: number[] = [];
  const tempCwd = () => {
    const d = realpathSync(mkdtempSync(join(tmpdir(), 'glidemq-dev-')));
    dirs.push(d);
    return d;
  };
  after(async () => {
    // Only the servers these tests started, by the pids they reported.
    for (const pid of started) if (isAlive(pid)) process.kill(pid, 'SIGKILL');
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  describe('--detach, status, stop', () => {
    let cwd: string;
    let port: number;
    let pid: number;
    before(async () => {
      cwd = tempCwd();
      port = await freePort();
    });

    it('starts the durable baseline and prints {url, pid, dir} with --json', async () => {
      const r = await runCli(['dev', '--detach', '--port', String(port), '--json'], { cwd });
      expect(r.code, r.stderr).to.equal(0);
      const doc = JSON.parse(r.stdout);
      expect(Object.keys(doc).sort()).to.deep.equal(['dir', 'pid', 'url']);
      expect(doc.url).to.equal(`redis://127.0.0.1:${port}`);
      expect(doc.dir).to.equal(join(cwd, '.glidemq'));
      pid = doc.pid;
      started.push(pid);
      expect(isAlive(pid)).to.equal(true);
      expect(pidIn(cwd)).to.equal(pid);
      for (const f of ['valkey.conf', 'valkey.log']) expect(existsSync(join(cwd, '.glidemq', f)), f).to.equal(true);
      expect(await configOf(port, ['appendonly', 'appendfsync', 'aof-use-rdb-preamble', 'maxmemory-policy', 'bind', 'protected-mode', 'dir'])).to.deep.equal({
        appendonly: 'yes',
        appendfsync: 'everysec',
        'aof-use-rdb-preamble': 'yes',
        'maxmemory-policy': 'noeviction',
        bind: '127.0.0.1',
        'protected-mode': 'yes',
        dir: join(cwd, '.glidemq'),
      });
    });

    it('passes glidemq audit (exit 0)', async () => {
      const r = await runCli(['audit', '-u', `redis://127.0.0.1:${port}`, '--json']);
      expect(r.code, r.stdout).to.equal(0);
      expect(JSON.parse(r.stdout).summary.fail).to.equal(0);
    });

    it('a second --detach says one already runs and exits 0', async () => {
      const r = await runCli(['dev', '--detach', '--port', String(port)], { cwd });
      expect(r.code).to.equal(0);
      expect(r.stdout).to.include('already runs').and.include(`pid ${pid}`);
      const json = await runCli(['dev', '--detach', '--json'], { cwd });
      expect(json.code).to.equal(0);
      expect(JSON.parse(json.stdout).pid).to.equal(pid);
    });

    it('status reports it; stop stops exactly that server', async () => {
      const s = await runCli(['dev', 'status'], { cwd });
      expect(s.code).to.equal(0);
      expect(s.stdout).to.include(`pid ${pid}`);
      const r = await runCli(['dev', 'stop'], { cwd });
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout).to.include(`stopped`).and.include(`pid ${pid}`);
      await waitFor(() => !isAlive(pid), 'the dev server to exit');
      expect((await runCli(['dev', 'status'], { cwd })).code).to.equal(1);
      const again = await runCli(['dev', 'stop'], { cwd });
      expect(again.code).to.equal(0);
      expect(again.stdout).to.include('no dev server is running');
    });

    it('restarts on the same directory with the data it had', async () => {
      const first = JSON.parse((await runCli(['dev', '--detach', '--port', String(port), '--json'], { cwd })).stdout);
      started.push(first.pid);
      const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
      await c.set('kept', 'yes');
      c.disconnect();
      expect((await runCli(['dev', 'stop'], { cwd })).code).to.equal(0);
      const second = JSON.parse((await runCli(['dev', '--detach', '--port', String(port), '--json'], { cwd })).stdout);
      started.push(second.pid);
      const d = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
      expect(await d.get('kept')).to.equal('yes');
      d.disconnect();
      expect((await runCli(['dev', 'stop'], { cwd })).code).to.equal(0);
      await waitFor(() => !isAlive(second.pid), 'the dev server to exit');
    });

    it('never signals a pid file that names another process', async () => {
      writeFileSync(join(cwd, '.glidemq', 'valkey.pid'), `${process.pid}\n`);
      const r = await runCli(['dev', 'stop'], { cwd });
      expect(r.code).to.equal(0);
      expect(r.stdout).to.include('stale pid file').and.include(String(process.pid));
      expect(existsSync(join(cwd, '.glidemq', 'valkey.pid'))).to.equal(false);
    });
  });

  it('a taken port is exit 2 with one line naming it', async () => {
    const cwd = tempCwd();
    const other = tempCwd();
    const port = await freePort();
    const first = JSON.parse((await runCli(['dev', '--detach', '--port', String(port), '--json'], { cwd: other })).stdout);
    started.push(first.pid);
    try {
      const r = await runCli(['dev', '--detach', '--port', String(port)], { cwd });
      expect(r.code).to.equal(2);
      expect(r.stderr.trim().split('\n')).to.have.length(1);
      expect(r.stderr).to.include(`port ${port} is already in use`);
    } finally {
      expect((await runCli(['dev', 'stop'], { cwd: other })).code).to.equal(0);
    }
  });

  it('a bad --port or action is a usage error (exit 2)', async () => {
    const cwd = tempCwd();
    expect((await runCli(['dev', '--port', 'abc'], { cwd })).code).to.equal(2);
    expect((await runCli(['dev', 'restart'], { cwd })).code).to.equal(2);
    expect(existsSync(join(cwd, '.glidemq'))).to.equal(false);
  });

  it('runs in the foreground until SIGINT, then shuts the server down and exits 0', async () => {
    const cwd = tempCwd();
    const port = await freePort();
    const child = spawn(process.execPath, [GLIDEMQ_BIN, 'dev', '--port', String(port)], { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    try {
      await waitFor(() => out.includes('Ctrl-C to stop'), 'the foreground server to start');
      const pid = Number(/pid (\d+)/.exec(out)![1]);
      started.push(pid);
      expect(out).to.include(`redis://127.0.0.1:${port}`);
      const c = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
      expect(await c.ping()).to.equal('PONG');
      c.disconnect();
      child.kill('SIGINT');
      expect(await exited).to.equal(0);
      await waitFor(() => !isAlive(pid), 'the foreground server to exit');
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });
});
