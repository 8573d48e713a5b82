import { expect } from 'chai';
import { exitCodeFor, summarize, type Check, type NodeFacts } from '../../src/audit/audit.js';
import { runChecks } from '../../src/audit/checks/index.js';
import { parseClusterNodes } from '../../src/audit/discovery.js';
import { parseInfo, replicaLinks } from '../../src/audit/facts.js';

const BASELINE: Record<string, string> = {
  appendonly: 'yes',
  appendfsync: 'everysec',
  'aof-use-rdb-preamble': 'yes',
  save: '',
  'maxmemory-policy': 'noeviction',
  'no-appendfsync-on-rewrite': 'no',
  'auto-aof-rewrite-percentage': '100',
  'stop-writes-on-bgsave-error': 'yes',
  'min-replicas-to-write': '0',
  bind: '127.0.0.1',
  'protected-mode': 'yes',
};

const HEALTHY_INFO: Record<string, string> = {
  role: 'master',
  loading: '0',
  aof_enabled: '1',
  aof_last_write_status: 'ok',
  aof_last_bgrewrite_status: 'ok',
  rdb_last_bgsave_status: 'ok',
  aof_delayed_fsync: '0',
  evicted_keys: '0',
  maxmemory_policy: 'noeviction',
};

type Overrides = Omit<Partial<NodeFacts>, 'config' | 'info'> & {
  /** Merged over the baseline; null = nothing readable. */
  config?: Record<string, string> | null;
  info?: Record<string, string> | null;
};

function facts(over: Overrides = {}): NodeFacts {
  const { config, info, ...rest } = over;
  return {
    address: '10.0.0.1:6379',
    role: 'master',
    inCluster: false,
    config: new Map(config === null ? [] : Object.entries({ ...BASELINE, ...config })),
    info: new Map(info === null ? [] : Object.entries({ ...HEALTHY_INFO, ...info })),
    replicas: [],
    library: { state: 'present', version: 'v1' },
    passwordless: true,
    waitaof: true,
    ...rest,
  };
}

function check(f: NodeFacts, id: string): Check {
  const c = runChecks(f).find((x) => x.id === id);
  if (!c) throw new Error(`no check ${id}`);
  return c;
}

describe('audit checks (synthetic node facts)', () => {
  it('a baseline node passes everything', () => {
    const checks = runChecks(facts());
    expect(checks.filter((c) => c.status !== 'pass')).to.deep.equal([]);
    expect(exitCodeFor({ nodes: [{ address: 'x', role: 'master', checks }], summary: summarize([{ address: 'x', role: 'master', checks }]) }, true)).to.equal(0);
  });

  describe('network-exposure', () => {
    const cases: [string, Record<string, string>, boolean, string][] = [
      ['loopback, no password', { bind: '127.0.0.1 -::1' }, true, 'pass'],
      ['loopback, protected-mode off', { bind: '127.0.0.1', 'protected-mode': 'no' }, true, 'pass'],
      ['all interfaces, no password, protected mode on', { bind: '* -::*' }, true, 'warn'],
      ['all interfaces, no password, protected mode off', { bind: '0.0.0.0', 'protected-mode': 'no' }, true, 'fail'],
      ['a LAN address, no password, protected mode off', { bind: '10.0.0.1', 'protected-mode': 'no' }, true, 'fail'],
      ['empty bind (all), no password, protected mode off', { bind: '', 'protected-mode': 'no' }, true, 'fail'],
      ['all interfaces with a password', { bind: '*', 'protected-mode': 'no' }, false, 'warn'],
      ['a LAN address with a password', { bind: '10.0.0.1', 'protected-mode': 'no' }, false, 'pass'],
    ];
    for (const [name, config, passwordless, want] of cases) {
      it(`${name} → ${want}`, () => {
        const c = check(facts({ config, passwordless }), 'network-exposure');
        expect(c.status, c.message).to.equal(want);
        if (want !== 'pass') expect(c.message).to.match(/bind|password|requirepass/);
      });
    }
    it('unknown when the password state cannot be read', () => {
      expect(check(facts({ passwordless: undefined }), 'network-exposure').status).to.equal('unknown');
    });
  });

  describe('persistence-health', () => {
    it('fails on a failed AOF write, naming the field', () => {
      const c = check(facts({ info: { aof_last_write_status: 'err' } }), 'persistence-health');
      expect(c.status).to.equal('fail');
      expect(c.actual).to.include('aof_last_write_status=err');
    });
    it('fails on a failed rewrite or snapshot', () => {
      expect(check(facts({ info: { aof_last_bgrewrite_status: 'err' } }), 'persistence-health').status).to.equal('fail');
      expect(check(facts({ info: { rdb_last_bgsave_status: 'err' } }), 'persistence-health').status).to.equal('fail');
    });
    it('warns while loading and on delayed fsyncs; the worst finding sets the status', () => {
      expect(check(facts({ info: { loading: '1' } }), 'persistence-health').status).to.equal('warn');
      const delayed = check(facts({ info: { aof_delayed_fsync: '3' } }), 'persistence-health');
      expect(delayed.status).to.equal('warn');
      expect(delayed.message).to.match(/3 fsyncs/);
      const both = check(facts({ info: { aof_delayed_fsync: '3', rdb_last_bgsave_status: 'err' } }), 'persistence-health');
      expect(both.status).to.equal('fail');
      expect(both.actual).to.include('aof_delayed_fsync=3').and.include('rdb_last_bgsave_status=err');
    });
  });

  describe('replication', () => {
    it('standalone primary without replicas passes with the asynchronous caveat', () => {
      const c = check(facts(), 'replication');
      expect(c.status).to.equal('pass');
      expect(c.message).to.match(/asynchronous/);
    });
    it('a cluster primary without a replica warns', () => {
      expect(check(facts({ inCluster: true }), 'replication').status).to.equal('warn');
    });
    it('a lagging or offline replica warns', () => {
      const lagging = facts({ replicas: [{ address: '10.0.0.2:6379', state: 'online', lagSeconds: 30 }] });
      expect(check(lagging, 'replication').status).to.equal('warn');
      const syncing = facts({ replicas: [{ address: '10.0.0.2:6379', state: 'wait_bgsave', lagSeconds: undefined }] });
      expect(check(syncing, 'replication').status).to.equal('warn');
      const fine = facts({ replicas: [{ address: '10.0.0.2:6379', state: 'online', lagSeconds: 0 }] });
      expect(check(fine, 'replication').actual).to.equal('1 replica: 10.0.0.2:6379 online lag 0s');
    });
    it('a replica with its link down warns', () => {
      const c = check(facts({ role: 'replica', info: { role: 'slave', master_host: '10.0.0.1', master_port: '6379', master_link_status: 'down' } }), 'replication');
      expect(c.status).to.equal('warn');
      expect(c.actual).to.include('10.0.0.1:6379');
    });
  });

  describe('settings', () => {
    it('appendfsync no fails; always passes with its cost', () => {
      expect(check(facts({ config: { appendfsync: 'no' } }), 'appendfsync').status).to.equal('fail');
      const always = check(facts({ config: { appendfsync: 'always' } }), 'appendfsync');
      expect(always.status).to.equal('pass');
      expect(always.message).to.match(/latency/);
    });
    it('volatile eviction policies fail too', () => {
      expect(check(facts({ config: { 'maxmemory-policy': 'volatile-lru' } }), 'maxmemory-policy').status).to.equal('fail');
    });
    it('evicted keys warn', () => {
      expect(check(facts({ info: { evicted_keys: '12' } }), 'evicted-keys').status).to.equal('warn');
    });
    it('no-appendfsync-on-rewrite yes and auto rewrite 0 warn', () => {
      expect(check(facts({ config: { 'no-appendfsync-on-rewrite': 'yes' } }), 'no-appendfsync-on-rewrite').status).to.equal('warn');
      expect(check(facts({ config: { 'auto-aof-rewrite-percentage': '0' } }), 'auto-aof-rewrite-percentage').status).to.equal('warn');
    });
    it('stop-writes-on-bgsave-error no warns only when snapshots are scheduled', () => {
      expect(check(facts({ config: { 'stop-writes-on-bgsave-error': 'no' } }), 'stop-writes-on-bgsave-error').status).to.equal('pass');
      expect(check(facts({ config: { 'stop-writes-on-bgsave-error': 'no', save: '900 1' } }), 'stop-writes-on-bgsave-error').status).to.equal('warn');
    });
    it('with CONFIG refused and AOF off, the advice names replicas as the managed-service alternative', () => {
      const c = check(facts({ config: null, info: { aof_enabled: '0' }, configRefused: 'ERR unknown command' }), 'appendonly');
      expect(c.status).to.equal('fail');
      expect(c.message).to.match(/replicas/);
    });
    it('function-library: a different version warns; one from a newer glidemq says to upgrade here', () => {
      const differs = runChecks(facts({ library: { state: 'present', version: 'aaa', packageVersion: '0.1.0' } }), { expectedLibraryVersion: 'bbb', packageVersion: '0.1.0' });
      const d = differs.find((c) => c.id === 'function-library')!;
      expect(d.status).to.equal('warn');
      expect(d.message).to.match(/replace it/);
      const newer = runChecks(facts({ library: { state: 'present', version: 'ccc', packageVersion: '0.3.0' } }), { expectedLibraryVersion: 'bbb', packageVersion: '0.1.0' });
      const n = newer.find((c) => c.id === 'function-library')!;
      expect(n.status).to.equal('warn');
      expect(n.message).to.match(/upgrade/).and.include('0.3.0');
      expect(check(facts({ library: { state: 'missing' } }), 'function-library').message).to.match(/loaded by the first glidemq client/);
    });
    it('nothing unknown is ever a pass', () => {
      const blind = facts({ config: null, info: null, configRefused: 'NOPERM', passwordless: undefined, library: { state: 'unknown', error: 'NOPERM' } });
      const checks = runChecks(blind).filter((c) => c.id !== 'replication');
      for (const c of checks) expect(c.status, c.id).to.not.equal('pass');
    });
  });
});

describe('audit parsing', () => {
  it('parses INFO fields across sections and the replicas of a primary', () => {
    const info = parseInfo('# Replication\r\nrole:master\r\nconnected_slaves:1\r\nslave0:ip=10.0.0.2,port=6380,state=online,offset=42,lag=1\r\n\r\n# Persistence\r\naof_enabled:1\r\n');
    expect(info.get('role')).to.equal('master');
    expect(info.get('aof_enabled')).to.equal('1');
    expect(replicaLinks(info)).to.deep.equal([{ address: '10.0.0.2:6380', state: 'online', lagSeconds: 1 }]);
  });
  it('parses CLUSTER NODES: roles, hostnames, an empty own address, and skips handshakes', () => {
    const text = [
      'a1 10.0.0.1:7000@17000 myself,master - 0 0 1 connected 0-5460',
      'b2 10.0.0.2:7001@17001,node-b slave a1 0 1 1 connected',
      'c3 :7002@17002 master,fail - 0 0 2 disconnected',
      'd4 10.0.0.4:7003@17003 handshake - 0 0 0 connected',
      '',
    ].join('\n');
    const nodes = parseClusterNodes(text, 'seed.local');
    expect(nodes.map((n) => [n.host, n.port, n.role])).to.deep.equal([
      ['10.0.0.1', 7000, 'master'],
      ['10.0.0.2', 7001, 'replica'],
      ['seed.local', 7002, 'master'],
    ]);
    expect(nodes[2].flags).to.include('fail');
  });
});

describe('audit: confirmed writes where WAITAOF acknowledges before the fsync (issue 31)', () => {
  it('says confirm fsync is refused on a Valkey under appendfsync everysec (still a pass: the baseline), and not under always', () => {
    const valkey = { server_name: 'valkey', valkey_version: '8.0.1', redis_version: '7.2.4' };
    const everysec = check(facts({ info: valkey }), 'confirmed-writes');
    expect(everysec.status).to.equal('pass');
    expect(everysec.message).to.match(/acknowledges writes before they are fsynced unless appendfsync is always: confirm fsync is refused/);
    expect(everysec.actual).to.match(/valkey 8\.0\.1, appendfsync everysec/);
    const always = check(facts({ info: valkey, config: { appendfsync: 'always' } }), 'confirmed-writes');
    expect(always.status).to.equal('pass');
    expect(always.message).to.match(/confirm: \{ fsync: true \} works here/);
  });
});
