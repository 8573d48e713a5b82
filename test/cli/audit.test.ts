import { expect } from 'chai';
import { Queue } from '../../src/engine/queue/queue.js';
import { runCli } from '../helpers/cli.js';
import { valkeyFixture } from '../helpers/fixtures.js';
import { freePort, useServer } from '../helpers/valkey.js';

const STATUSES = ['pass', 'warn', 'fail', 'unknown'];

describe('glidemq audit (CLI)', function () {
  describe('against the baseline (aof-everysec)', () => {
    const server = useServer({ include: valkeyFixture('aof-everysec') });
    it('prints a line per check per node and a summary line last, exit 0', async () => {
      const r = await runCli(['audit', '-u', server().url]);
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout).to.include(`127.0.0.1:${server().port} (master)`);
      expect(r.stdout).to.match(/^  pass\s+appendonly\s+yes$/m);
      expect(r.stdout).to.match(/^  pass\s+maxmemory-policy\s+noeviction$/m);
      const lines = r.stdout.trimEnd().split('\n');
      expect(lines[lines.length - 1]).to.match(/^1 node: \d+ pass, 1 warn, 0 fail, 0 unknown — meets the durable baseline$/);
      // the warning first, with its advice indented under it; no advice under a passing check
      expect(lines[1]).to.match(/^  warn\s+function-library\s+not loaded$/);
      expect(lines[2]).to.match(/^ {11}\S/);
      expect(lines.filter((l) => /^ {2}pass/.test(l)).length).to.be.greaterThan(5);
      expect(lines.slice(lines.findIndex((l) => /^ {2}pass/.test(l))).filter((l) => /^ {11}\S/.test(l))).to.deep.equal([]);
      expect(r.stdout).to.not.match(/\u001b\[/); // no colour off a TTY
      expect(r.stderr).to.equal('');
    });
    it('--json has exactly the documented shape', async () => {
      const r = await runCli(['audit', '-u', server().url, '--json']);
      expect(r.code).to.equal(0);
      const doc = JSON.parse(r.stdout);
      expect(Object.keys(doc).sort()).to.deep.equal(['nodes', 'summary']);
      expect(Object.keys(doc.summary).sort()).to.deep.equal(['fail', 'pass', 'unknown', 'warn']);
      expect(doc.nodes).to.have.length(1);
      const node = doc.nodes[0];
      expect(Object.keys(node).sort()).to.deep.equal(['address', 'checks', 'role']);
      expect(node.address).to.equal(`127.0.0.1:${server().port}`);
      expect(node.role).to.equal('master');
      for (const c of node.checks) {
        expect(Object.keys(c).sort()).to.deep.equal(['actual', 'expected', 'id', 'message', 'status']);
        expect(STATUSES).to.include(c.status);
      }
      const total = Object.values(doc.summary as Record<string, number>).reduce((a, b) => a + b, 0);
      expect(total).to.equal(node.checks.length);
    });
    it('--strict exits 1 on the warning (library not loaded yet)', async () => {
      const r = await runCli(['audit', '-u', server().url, '--strict']);
      expect(r.code).to.equal(1);
      expect(r.stdout).to.match(/warnings present \(--strict\)/);
    });
    it('--strict exits 0 once a glidemq client has loaded the library (nothing left to warn about)', async () => {
      const q = new Queue('cli-audit', { connection: server().url });
      try {
        await q.waitUntilReady();
      } finally {
        await q.close();
      }
      const r = await runCli(['audit', '-u', server().url, '--strict']);
      expect(r.code, r.stdout).to.equal(0);
      expect(r.stdout).to.match(/^  pass\s+function-library\s/m);
      expect(r.stdout).to.match(/0 warn, 0 fail, 0 unknown — meets the durable baseline/);
    });
    it('reads the URL from $GLIDEMQ_URL, and accepts valkey://', async () => {
      const fromEnv = await runCli(['audit', '--json'], { env: { GLIDEMQ_URL: server().url } });
      expect(fromEnv.code).to.equal(0);
      const valkey = await runCli(['audit', '--json', '-u', `valkey://127.0.0.1:${server().port}`]);
      expect(valkey.code).to.equal(0);
    });
  });

  describe('against a failing config (aof-no)', () => {
    const server = useServer({ include: valkeyFixture('aof-no') });
    it('exit 1 and the failing check with its advice', async () => {
      const r = await runCli(['audit', '-u', server().url]);
      expect(r.code).to.equal(1);
      expect(r.stdout).to.match(/^  fail\s+appendfsync\s+no$/m);
      expect(r.stdout).to.include('set appendfsync everysec');
      expect(r.stdout).to.match(/below the durable baseline/);
    });
  });

  describe('a warning-only config (aof-no-preamble)', () => {
    const server = useServer({ include: valkeyFixture('aof-no-preamble') });
    it('exit 0 plain, 1 with --strict', async () => {
      expect((await runCli(['audit', '-u', server().url])).code).to.equal(0);
      expect((await runCli(['audit', '-u', server().url, '--strict', '--json'])).code).to.equal(1);
    });
  });

  describe('with a password', () => {
    const server = useServer({ include: valkeyFixture('aof-everysec'), password: 'hunter2-secret' });
    it('never prints the password from the URL', async () => {
      const url = `redis://default:hunter2-secret@127.0.0.1:${server().port}`;
      for (const args of [['audit', '-u', url], ['audit', '-u', url, '--json']]) {
        const r = await runCli(args);
        expect(r.code).to.equal(0);
        expect(r.stdout + r.stderr).to.not.include('hunter2-secret');
      }
    });
    it('takes the password from $GLIDEMQ_PASSWORD; a wrong one is exit 2, one line', async () => {
      const ok = await runCli(['audit', '-u', server().url], { env: { GLIDEMQ_PASSWORD: 'hunter2-secret' } });
      expect(ok.code).to.equal(0);
      const bad = await runCli(['audit', '-u', `redis://:nope-wrong@127.0.0.1:${server().port}`]);
      expect(bad.code).to.equal(2);
      expect(bad.stderr.trim().split('\n')).to.have.length(1);
      expect(bad.stderr).to.not.include('nope-wrong');
    });
  });

  it('exit 2 with one line naming the host when nothing answers, no stack trace, password redacted', async () => {
    const port = await freePort();
    const r = await runCli(['audit', '-u', `redis://admin:topsecret@127.0.0.1:${port}`]);
    expect(r.code).to.equal(2);
    expect(r.stdout).to.equal('');
    const lines = r.stderr.trim().split('\n');
    expect(lines).to.have.length(1);
    expect(lines[0]).to.include(`127.0.0.1:${port}`).and.include('admin:***@');
    expect(r.stderr).to.not.include('topsecret');
    expect(r.stderr).to.not.match(/\bat .*\.js:\d+/);
  });

  it('--help shows examples and exit codes', async () => {
    const r = await runCli(['audit', '--help']);
    expect(r.code).to.equal(0);
    expect(r.stdout).to.include('--strict').and.include('Examples:').and.include('Exit codes');
  });
});
