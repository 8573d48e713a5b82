import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { exitCodeFor, runAudit, type AuditReport, type Check, type CheckStatus } from '../../src/audit/audit.js';
import { LIBRARY_PACKAGE_VERSION, LIBRARY_VERSION } from '../../src/engine/connecting/library.js';
import { Queue } from '../../src/engine/queue/queue.js';
import { valkeyFixture } from '../helpers/fixtures.js';
import { TestServer, useServer, waitFor, type ServerOptions } from '../helpers/valkey.js';

function checksOf(report: AuditReport, node = 0): Map<string, Check> {
  return new Map(report.nodes[node].checks.map((c) => [c.id, c]));
}

function expectStatuses(report: AuditReport, want: Record<string, CheckStatus>): void {
  const checks = checksOf(report);
  for (const [id, status] of Object.entries(want)) {
    expect(checks.get(id), `check ${id}`).to.not.equal(undefined);
    expect(checks.get(id)!.status, `${id}: ${JSON.stringify(checks.get(id))}`).to.equal(status);
  }
}

const REQUIRED = ['appendonly', 'appendfsync', 'aof-use-rdb-preamble', 'maxmemory-policy', 'persistence-health', 'function-library'];

/** A stand-in for the glidemq library: just the version function the auditor calls. */
function fakeLibrary(version: string, withVersionFunction = true): string {
  const fn = withVersionFunction ? 'glidemq_version' : 'glidemq_other';
  return [
    '#!lua name=glidemq',
    `redis.register_function{function_name='${fn}', flags={'no-writes'}, callback=function() return '{"version":"${version}","package":"0.1.0"}' end}`,
  ].join('\n');
}

function auditFixture(name: string, opts: ServerOptions = {}) {
  const server = useServer({ include: valkeyFixture(name), ...opts });
  return {
    server,
    audit: () => runAudit({ url: server().url, cluster: false }),
  };
}

describe('audit against real servers (fixtures/valkey)', function () {
  describe('none.conf', () => {
    const { audit } = auditFixture('none');
    it('fails appendonly and persistence-mode, exit 1', async () => {
      const report = await audit();
      expect(report.nodes).to.have.length(1);
      expect(report.nodes[0].role).to.equal('master');
      expectStatuses(report, { appendonly: 'fail', 'persistence-mode': 'fail', save: 'warn', 'maxmemory-policy': 'pass' });
      expect(checksOf(report).get('persistence-mode')!.actual).to.equal('none');
      expect(checksOf(report).get('persistence-mode')!.message).to.match(/loses every job/);
      expect(exitCodeFor(report)).to.equal(1);
    });
    it('has every check id the spec requires, each with one-line advice', async () => {
      const report = await audit();
      const ids = report.nodes[0].checks.map((c) => c.id);
      for (const id of REQUIRED) expect(ids).to.include(id);
      for (const c of report.nodes[0].checks) {
        expect(c.message, c.id).to.be.a('string').and.not.equal('');
        expect(c.message, c.id).to.not.include('\n');
      }
    });
  });

  describe('rdb-only.conf', () => {
    const { server, audit } = auditFixture('rdb-only');
    it('fails persistence-mode as rdb-only and names the writes since the last snapshot', async () => {
      const c = server().client();
      try {
        await c.set('a', '1');
        await c.set('b', '2');
      } finally {
        c.disconnect();
      }
      const report = await audit();
      expectStatuses(report, { appendonly: 'fail', 'persistence-mode': 'fail', save: 'warn', 'stop-writes-on-bgsave-error': 'pass' });
      const mode = checksOf(report).get('persistence-mode')!;
      expect(mode.actual).to.equal('rdb-only');
      expect(mode.message).to.match(/since the last snapshot/).and.match(/2 changes/);
      expect(exitCodeFor(report)).to.equal(1);
    });
  });

  describe('aof-everysec.conf (the baseline)', () => {
    const { audit } = auditFixture('aof-everysec');
    it('passes every durability check; only the not-yet-loaded library warns; exit 0, --strict 1', async () => {
      const report = await audit();
      expectStatuses(report, {
        appendonly: 'pass',
        appendfsync: 'pass',
        'aof-use-rdb-preamble': 'pass',
        'persistence-mode': 'pass',
        save: 'pass',
        'maxmemory-policy': 'pass',
        'evicted-keys': 'pass',
        'persistence-health': 'pass',
        'no-appendfsync-on-rewrite': 'pass',
        'auto-aof-rewrite-percentage': 'pass',
        'stop-writes-on-bgsave-error': 'pass',
        'function-library': 'warn',
        replication: 'pass',
        'network-exposure': 'pass',
      });
      expect(checksOf(report).get('function-library')!.message).to.match(/loaded by the first glidemq client/);
      expect(report.summary).to.deep.equal({ pass: report.nodes[0].checks.length - 1, warn: 1, fail: 0, unknown: 0 });
      expect(exitCodeFor(report)).to.equal(0);
      expect(exitCodeFor(report, true)).to.equal(1);
    });
  });

  describe('aof-always.conf', () => {
    const { audit } = auditFixture('aof-always');
    it('passes appendfsync with a note on the write cost', async () => {
      const report = await audit();
      expectStatuses(report, { appendonly: 'pass', appendfsync: 'pass', 'persistence-mode': 'pass' });
      const fsync = checksOf(report).get('appendfsync')!;
      expect(fsync.actual).to.equal('always');
      expect(fsync.message).to.match(/latency|throughput/);
      expect(exitCodeFor(report)).to.equal(0);
    });
  });

  describe('aof-no.conf', () => {
    const { audit } = auditFixture('aof-no');
    it('fails appendfsync, exit 1', async () => {
      const report = await audit();
      expectStatuses(report, { appendonly: 'pass', appendfsync: 'fail' });
      expect(checksOf(report).get('appendfsync')!.message).to.match(/appendfsync everysec/);
      expect(exitCodeFor(report)).to.equal(1);
    });
  });

  describe('aof-no-preamble.conf', () => {
    const { audit } = auditFixture('aof-no-preamble');
    it('warns on aof-use-rdb-preamble: exit 0, --strict 1', async () => {
      const report = await audit();
      expectStatuses(report, { appendonly: 'pass', appendfsync: 'pass', 'aof-use-rdb-preamble': 'warn' });
      expect(report.summary.fail).to.equal(0);
      expect(exitCodeFor(report)).to.equal(0);
      expect(exitCodeFor(report, true)).to.equal(1);
    });
  });

  describe('evicting.conf', () => {
    const { audit } = auditFixture('evicting');
    it('fails maxmemory-policy, exit 1', async () => {
      const report = await audit();
      expectStatuses(report, { appendonly: 'pass', 'maxmemory-policy': 'fail', 'evicted-keys': 'pass' });
      expect(checksOf(report).get('maxmemory-policy')!.actual).to.equal('allkeys-lru');
      expect(exitCodeFor(report)).to.equal(1);
    });
  });

  describe('frequent-save.conf', () => {
    const { audit } = auditFixture('frequent-save');
    it('warns on snapshots every 10s next to AOF', async () => {
      const report = await audit();
      expectStatuses(report, { 'persistence-mode': 'pass', save: 'warn', 'stop-writes-on-bgsave-error': 'pass' });
      expect(checksOf(report).get('persistence-mode')!.actual).to.equal('aof+rdb');
      expect(exitCodeFor(report)).to.equal(0);
    });
  });

  describe('config-renamed.conf (CONFIG renamed away)', () => {
    const { audit } = auditFixture('config-renamed');
    it('falls back to INFO where it can and reports the rest unknown, never pass', async () => {
      const report = await audit();
      expectStatuses(report, {
        appendonly: 'pass',
        'persistence-mode': 'pass',
        'maxmemory-policy': 'pass',
        'persistence-health': 'pass',
        appendfsync: 'unknown',
        'aof-use-rdb-preamble': 'unknown',
        save: 'unknown',
        'no-appendfsync-on-rewrite': 'unknown',
        'auto-aof-rewrite-percentage': 'unknown',
        'stop-writes-on-bgsave-error': 'unknown',
        'network-exposure': 'unknown',
      });
      const checks = checksOf(report);
      expect(checks.get('appendonly')!.actual).to.match(/INFO/);
      expect(checks.get('appendfsync')!.message).to.match(/CONFIG/);
      for (const c of report.nodes[0].checks.filter((x) => x.status === 'unknown')) expect(c.actual).to.equal('unknown');
      expect(report.summary.unknown).to.be.greaterThan(5);
      expect(exitCodeFor(report)).to.equal(0);
    });
  });

  describe('function-library', () => {
    const getServer = useServer({ include: valkeyFixture('aof-everysec') });
    let client: Redis;
    beforeEach(async () => {
      client = getServer().client();
      // SYNC: an async flush of the real library (76 functions) can crash Valkey 8.0 under the next
      // FUNCTION LOAD (test/unit/valkey-workarounds.test.ts)
      await client.call('FUNCTION', 'FLUSH', 'SYNC');
    });
    afterEach(() => client.disconnect());
    const audit = (expectedLibraryVersion?: string) =>
      runAudit({ url: getServer().url, cluster: false }, { expectedLibraryVersion });

    it('reports the loaded version; pass when it matches this build', async () => {
      await client.call('FUNCTION', 'LOAD', fakeLibrary('abc123'));
      const check = checksOf(await audit('abc123')).get('function-library')!;
      expect(check.status).to.equal('pass');
      expect(check.actual).to.include('abc123').and.include('0.1.0');
      const report = await audit();
      expect(checksOf(report).get('function-library')!.status).to.equal('pass');
      expect(exitCodeFor(report, true)).to.equal(0);
    });
    it('warns when the loaded version differs from this build', async () => {
      await client.call('FUNCTION', 'LOAD', fakeLibrary('old'));
      const check = checksOf(await audit('new')).get('function-library')!;
      expect(check.status).to.equal('warn');
      expect(check.actual).to.include('old');
      expect(check.message).to.include('new');
    });
    it("passes with this build's version once a glidemq client has loaded the real library", async () => {
      const q = new Queue('audit-lib', { connection: getServer().url });
      try {
        await q.waitUntilReady();
      } finally {
        await q.close();
      }
      const report = await audit(LIBRARY_VERSION);
      const check = checksOf(report).get('function-library')!;
      expect(check.status, check.message).to.equal('pass');
      expect(check.actual).to.equal(`${LIBRARY_VERSION} (glidemq ${LIBRARY_PACKAGE_VERSION})`);
      expect(report.summary.warn + report.summary.fail + report.summary.unknown).to.equal(0);
      expect(exitCodeFor(report, true)).to.equal(0);
    });
    it('fails when the library has no glidemq_version (clients refuse it)', async () => {
      await client.call('FUNCTION', 'LOAD', fakeLibrary('x', false));
      const check = checksOf(await audit()).get('function-library')!;
      expect(check.status).to.equal('fail');
      expect(check.actual).to.match(/declares no glidemq version/);
    });
  });

  describe('a server with a password', () => {
    const getServer = useServer({ include: valkeyFixture('aof-everysec'), password: 's3cret-pw' });
    it('audits with the password from the URL or the settings, and refuses without', async () => {
      const port = getServer().port;
      const withUrl = await runAudit({ url: `redis://:s3cret-pw@127.0.0.1:${port}`, cluster: false });
      expectStatuses(withUrl, { appendonly: 'pass', 'network-exposure': 'pass' });
      expect(checksOf(withUrl).get('network-exposure')!.actual).to.include('password=set');
      expect(JSON.stringify(withUrl)).to.not.include('s3cret-pw');
      const withSetting = await runAudit({ url: `redis://127.0.0.1:${port}`, cluster: false, password: 's3cret-pw' });
      expect(withSetting.summary.fail).to.equal(0);
      let error: unknown;
      await runAudit({ url: `redis://127.0.0.1:${port}`, cluster: false }).catch((e) => (error = e));
      expect(String(error)).to.match(/NOAUTH|auth/i);
    });
  });

  it('throws a connection error naming the host when nothing answers', async () => {
    const port = await (await import('../helpers/valkey.js')).freePort();
    let error: Error | undefined;
    await runAudit({ url: `redis://user:pw@127.0.0.1:${port}`, cluster: false }).catch((e) => (error = e));
    expect(error?.message).to.include(`127.0.0.1:${port}`).and.not.include(':pw@');
  });
});

describe('audit of a cluster (CLUSTER NODES discovery)', function () {
  this.timeout(60000);
  // No diskless-sync delay: the replica's first full sync would otherwise wait 5 s.
  const CLUSTER = ['cluster-enabled yes', 'cluster-config-file nodes.conf', 'cluster-node-timeout 5000', 'repl-diskless-sync-delay 0'];
  let primary: TestServer;
  let replica: TestServer;
  before(async () => {
    primary = await new TestServer({ include: valkeyFixture('aof-everysec'), config: CLUSTER }).start();
    replica = await new TestServer({ include: valkeyFixture('aof-everysec'), config: CLUSTER }).start();
    const p = primary.client();
    try {
      await p.call('CLUSTER', 'ADDSLOTSRANGE', '0', '16383');
    } finally {
      p.disconnect();
    }
  });
  after(async () => {
    await replica?.stop();
    await primary?.stop();
  });

  it('warns on a primary without a replica, then audits primary and replica once one joins', async () => {
    const lone = await runAudit({ url: primary.url, cluster: true });
    expect(lone.nodes).to.have.length(1);
    expect(checksOf(lone).get('replication')!.status).to.equal('warn');

    const p = primary.client();
    const r = replica.client();
    try {
      const primaryId = String(await p.call('CLUSTER', 'MYID'));
      await r.call('CLUSTER', 'MEET', '127.0.0.1', String(primary.port));
      await waitFor(async () => String(await r.call('CLUSTER', 'NODES')).includes(primaryId), 'replica to learn the primary');
      await waitFor(async () => (await r.call('CLUSTER', 'REPLICATE', primaryId)) === 'OK', 'CLUSTER REPLICATE');
      await waitFor(async () => /slave0:.*state=online/.test(await p.info('replication')), 'replica online');
      await waitFor(async () => (String(await p.call('CLUSTER', 'NODES')).match(/slave/g) ?? []).length === 1, 'primary to see its replica');
    } finally {
      p.disconnect();
      r.disconnect();
    }

    // Auto-detected from INFO cluster even without --cluster; seeded from the replica this time.
    const report = await runAudit({ url: replica.url, cluster: false });
    expect(report.nodes.map((n) => [n.address, n.role])).to.deep.equal([
      [`127.0.0.1:${primary.port}`, 'master'],
      [`127.0.0.1:${replica.port}`, 'replica'],
    ]);
    const primaryRepl = checksOf(report, 0).get('replication')!;
    expect(primaryRepl.status).to.equal('pass');
    expect(primaryRepl.actual).to.include(`1 replica`).and.include(`:${replica.port}`);
    expect(primaryRepl.message).to.match(/asynchronous/);
    expect(checksOf(report, 1).get('replication')!.status).to.equal('pass');
    for (const n of report.nodes) expect(checksOf(report, report.nodes.indexOf(n)).get('appendonly')!.status).to.equal('pass');
    expect(exitCodeFor(report)).to.equal(0);
  });
});
